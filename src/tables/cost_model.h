#pragma once

// The cost model of the ops behind the perf tables, written once (docs/perfdb.md,
// "Cost model"): FLOPs, bytes moved and the peak rate the math runs at, as
// functions of an op's key given as typed values. Two readers, two bounds:
//
//   roofline (AIC §1.5): perfdb's SOL times, the util-empirical modes (util =
//     SOL / latency), the load-time SOL clamps and serve's FLOP figures
//     (math_ms). Keyed by quantization mode (GemmQuant, MoeQuant, FmhaQuant).
//   floor: the "no row beats physics" gate of `servecast check` (TableSpec::cost),
//     keyed by the table's dtype columns; it must never exceed what the
//     hardware can do, so it counts what the kernels really move.
//
// Where the two agree they share one function (GEMM FLOPs, elementwise, the
// quantization profiles, dtype sizes); where they differ each is written here,
// side by side, and the difference is named at the function.

#include <cstdint>
#include <string>
#include <string_view>

namespace servecast::tables {

// What the op behind one row costs. `compute_dtype` names the peak FLOP/s to use
// (a key of the system spec's peak table: float32, bfloat16, fp8, ...).
struct OpCost {
  double flops = 0;
  double bytes = 0;  // minimum bytes moved to/from device memory
  std::string compute_dtype;
};

// Bytes per element of a dtype name (float32 4, bfloat16/float16/half 2,
// fp8/fp8_block/int8 1, nvfp4 0.5625); throws Error for an unknown dtype.
double DtypeBytes(std::string_view dtype);

// How a quantization mode moves bytes and which peak rate its math runs at
// (AIC's quant mappings): bytes per weight/activation element, and the system
// spec's peak_flops_per_s key.
struct QuantMode {
  double mem_bytes = 2;
  std::string flops_key = "bfloat16";
};
// GEMM and MoE modes: bfloat16, fp8, fp8_static, fp8_block, fp8_ootb, int8_wo,
// int4_wo, sq, nvfp4, nvfp4_wo, w4a16_nvfp4, w4afp8, w4a16_mxfp4. Unknown -> Error.
QuantMode GemmQuant(std::string_view mode);
QuantMode MoeQuant(std::string_view mode);
// Attention math: bfloat16 or fp8 (fp8_block) FMHA.
QuantMode FmhaQuant(std::string_view mode);
// KV-cache bytes per element: bfloat16 2, int8 1, fp8 1.
double KvCacheBytes(std::string_view kv_dtype);
// Collective element bytes: half/bfloat16/float16 2, int8 1, fp8 1.
double CommBytes(std::string_view dtype);
// The peak-rate key of decode attention: fp8 only with an fp8 KV cache on SM >= 89.
const char* DecodeFlopsKey(std::string_view kv_dtype, int sm_version);

// ---------------------------------------------------------------- GEMM (gemm_perf)

// 2mnk, both bounds.
inline double GemmFlops(double m, double n, double k) {
  return 2 * m * n * k;
}
// Roofline: bytes mem_bytes(quant) x (mn + mk + nk) (the output counted at the
// quant's size, as AIC), rate GemmQuant(quant).flops_key.
OpCost GemmRoofline(std::string_view quant, double m, double n, double k);
// Floor of a gemm_perf row: (mk + kn) x DtypeBytes(gemm_dtype) + mn x (4 for
// float32, else 2: fp8 GEMMs write bf16); rate the gemm_dtype itself.
OpCost GemmFloor(const std::string& gemm_dtype, double m, double n, double k);

// ---------------------------------------------------------------- attention

// Roofline of prefill: `b` requests each adding `s` tokens after `prefix` cached
// ones, n query heads, n_kv KV heads (0: MHA), head dim h, window w (0: full).
// FLOPs 4bnh x ((s+p)^2 - p^2) / 2 causal (w < s+p: 4bnh x s x w); bytes q and out at
// 2 B plus the KV cache of every position; rate FmhaQuant(fmha_quant).flops_key.
OpCost ContextAttentionRoofline(double b, double s, double prefix, double n, double n_kv, double h, double w,
                                std::string_view fmha_quant, std::string_view kv_dtype);
// Roofline of decode with `s` = cached + new tokens: attends to s - 1 keys (at
// most the window); rate DecodeFlopsKey(kv_dtype, sm_version).
OpCost GenerationAttentionRoofline(double b, double s, double n, double n_kv, double h, double w,
                                   std::string_view kv_dtype, int sm_version);
// Floors of an attention row (isl new tokens for prefill, isl + step keys for
// decode; q and out at DtypeBytes(attn_dtype); rate attn_dtype).
OpCost ContextAttentionFloor(double b, double isl, double n, double n_kv, double h, double w,
                             const std::string& attn_dtype, const std::string& kv_cache_dtype);
OpCost GenerationAttentionFloor(double b, double isl, double step, double n, double n_kv, double h, double w,
                                const std::string& attn_dtype, const std::string& kv_cache_dtype);

// ---------------------------------------------------------------- MLA (context_mla_perf, generation_mla_perf, mla_bmm_perf)

// DeepSeek geometry of the MLA tables (every shipped model shares it: q/k heads of
// nope 128 + rope 64, values 128; a latent KV of 512 + rope 64 per token).
inline constexpr double kMlaQkHeadDim = 192, kMlaVHeadDim = 128, kMlaNopeDim = 128;
inline constexpr double kMlaLatentDim = 512, kMlaRopeDim = 64;
// Rooflines (AIC §1.5, in the DeepSeek geometry above), for perfdb's SOL times,
// the util-empirical modes and serve's FLOP figures:
//   prefill (b requests adding s tokens after `prefix` cached ones, n local heads):
//     FLOPs b n (192 + 128) ((s+p)^2 - p^2), the causal pairs of q.k over 192 and
//     p.v over 128; bytes b n 320 (kv bytes x (s+p) + 2 s); rate FmhaQuant(fmha).
//   absorbed decode (s = cached + new tokens, n local heads):
//     FLOPs 2 b n (576 + 512) s; bytes b (2 n (576 + 512) + (s-1) 576 kv bytes);
//     rate DecodeFlopsKey(kv dtype, sm), as decode attention.
//   the decode BMMs (t tokens, n local heads, either of the two):
//     FLOPs 2 t n 128 x 512; bytes n (640 t + 128 x 512) x GemmQuant(bmm) bytes.
OpCost ContextMlaRoofline(double b, double s, double prefix, double n, std::string_view fmha_quant,
                          std::string_view kv_dtype);
OpCost GenerationMlaRoofline(double b, double s, double n, std::string_view kv_dtype, int sm_version);
OpCost MlaBmmRoofline(std::string_view bmm_quant, double t, double n);
// Floor of a context_mla_perf row: b requests of isl new tokens, n local heads:
// FLOPs 2bn(192 + 128) x causal pairs; bytes q, k, v read and out written at 2 B
// (the unabsorbed prefill's inputs) plus the latent cache write (576 per token at
// the KV dtype); rate mla_dtype.
OpCost ContextMlaFloor(double b, double isl, double n, const std::string& mla_dtype, const std::string& kv_cache_dtype);
// Floor of a generation_mla_perf row (absorbed decode): isl + step cached tokens,
// FLOPs 2bn(576 + 512) per key; bytes the latent cache (576 per key at the KV
// dtype) plus q (576) and out (512) at 2 B per head; rate fp8 with an fp8 cache,
// else mla_dtype (the faster peak keeps the floor a lower bound).
OpCost GenerationMlaFloor(double b, double isl, double step, double n, const std::string& mla_dtype,
                          const std::string& kv_cache_dtype);
// Floor of an mla_bmm_perf row: per head a [t x 128] x [128 x 512] (mla_gen_pre) or
// [t x 512] x [512 x 128] (mla_gen_post) product: FLOPs 2tn x 128 x 512; bytes the
// weights and the input at DtypeBytes(bmm_dtype), the output at 2 B; rate bmm_dtype.
// Error for another op name.
OpCost MlaBmmFloor(const std::string& op_name, const std::string& bmm_dtype, double t, double n);

// ---------------------------------------------------------------- MoE (moe_perf)

// Roofline of `tokens` tokens through experts of (hidden, inter) on rank 0 of
// ep x tp (gated: three projections, else two); rate MoeQuant(quant).flops_key.
OpCost MoeRoofline(std::string_view quant, double tokens, double hidden, double inter, double topk, double experts,
                   double tp, double ep, bool gated);
// Floor of a moe_perf row: the balanced share of assignments through gate+up
// and down (gated: three projections; else up and down, two), at least
// ceil(share / tokens) local experts' weights read, plus the activations in and
// out at 2 B; rate moe_dtype (fp8_block: fp8).
OpCost MoeFloor(const std::string& moe_dtype, double tokens, double hidden, double inter, double topk, double experts,
                double tp, double ep, bool gated = true);

// ---------------------------------------------------------------- recurrent layers (gdn_perf, mamba2_perf)
// Shapes are per GPU (heads after tensor parallelism). A recurrent layer keeps a
// state per sequence, constant in its length: Gated DeltaNet hv x dk x dv, Mamba2
// nh x p x N, both float32 (the engines' default, mamba_ssm_dtype), plus the
// short convolution's last (c - 1) inputs of each channel at 2 B.
//
// Gated DeltaNet (Qwen3.5, Qwen3-Next): hk key heads and hv value heads of dims
// dk, dv; the short convolution runs over q, k and v: C = 2 hk dk + hv dv
// channels, kernel c. Roofline of the whole layer core (convolution + delta-rule
// scan, the table's parts summed), `b` sequences of `s` tokens (T = b s); the
// phase is "context" (chunked scan) or "generation" (one recurrent step, s = 1):
//   FLOPs 2 c T C (convolution) + 6 T hv dk dv (per token and value head: k.S,
//         the rank-1 update and q.S, each 2 dk dv; the chunked form does more);
//   bytes context: the convolution reads and writes T C at 2 B, the scan reads
//         its T C inputs and writes T hv dv outputs at 2 B and the b final states;
//         generation: the same activations plus each sequence's state read and
//         written (2 x 4 B x hv dk dv) and its convolution window (2 x 2 B x C (c-1));
//   rate bfloat16 (tensor-core chunks; the decode step's CUDA-core math is slower,
//         so the faster peak keeps a lower bound). Error for another phase.
OpCost GdnRoofline(const std::string& phase, double b, double s, double c, double hk, double dk, double hv, double dv);
// Floor of one gdn_perf row: a row is ONE kernel of the layer (AIC's kernel_source:
// the convolution or the scan), so the floor is what each of them must at least
// do: read the T C channels at 2 B, and the convolution's 2 c T C FLOPs (the
// scan's are more); rate bfloat16.
OpCost GdnFloor(const std::string& phase, double b, double s, double c, double hk, double dk, double hv, double dv);
// Mamba2 (Nemotron-H): nh heads of dim p (d_inner = nh p), g groups of B and C
// with state size N; the convolution runs over C = nh p + 2 g N channels. Roofline
// of the layer core (convolution + SSD scan):
//   FLOPs 2 c T C + 4 T nh p N (per token and head: the state update B x and the
//         output C.S, each 2 p N);
//   bytes as Gated DeltaNet with the scan's inputs x, B, C (T C at 2 B) and dt
//         (T nh at 4 B), outputs T nh p at 2 B, state nh p N at 4 B per sequence;
//   rate bfloat16. Error for another phase.
OpCost Mamba2Roofline(const std::string& phase, double b, double s, double c, double nh, double p, double g,
                      double n_state);
// Floor of one mamba2_perf row (one kernel of the layer, as GdnFloor): the T C
// channels read at 2 B and the convolution's FLOPs.
OpCost Mamba2Floor(const std::string& phase, double b, double s, double c, double nh, double p, double g,
                   double n_state);

// ---------------------------------------------------------------- DSA modules (dsa_*_module_perf)
// DeepSeek Sparse Attention: MLA plus a lightning indexer that scores every
// cached token with its own fp8 keys and keeps the top `topk` per query; the
// attention then runs over those only. AIC's module tables time one layer's
// attention module (projections, indexer, top-k, sparse MLA, output projection)
// keyed by the model's architecture, so the geometry comes from it.
struct DsaGeometry {
  double hidden = 0, q_lora = 0, kv_lora = 0, nope = 0, rope = 0, v = 0;
  double index_heads = 0, index_dim = 0, topk = 0;
};
// DeepseekV32ForCausalLM (DeepSeek-V3.2: H 7168, q_lora 1536, nope 128, v 128,
// 64 index heads) and GlmMoeDsaForCausalLM (GLM-5: H 6144, q_lora 2048, nope 192,
// v 256, 32 index heads); both kv_lora 512, rope 64, index dim 128, top-k 2048
// (their config.json). Error for another architecture.
const DsaGeometry& DsaGeometryOf(std::string_view architecture);
// The module of one layer for `b` requests, n local heads, weights at
// GemmQuant(gemm_type) bytes, the latent cache at DtypeBytes(kv_cache_dtype):
//   context (isl new tokens after `step` cached ones, causal):
//     FLOPs 2 T W (W: the weights of q_a, kv_a, q_b, kv_b, o, and the indexer's
//           wq_b, wk and weights_proj; T = b isl) + 2 n_i d_i x pairs (indexer
//           scores over every earlier key) + 2 n (nope + rope + v) x sparse pairs
//           (each query's min(keys, topk) keys, unabsorbed q.k and p.v);
//     bytes W at the weight bytes + T H x 2 B in and out + the new tokens' latent
//           (kv_lora + rope) and index keys (d_i at 1 B) written;
//   generation (one token; step = keys cached):
//     FLOPs 2 b W + 2 b n_i d_i step (scores) + 2 b n (2 kv_lora + rope)
//           min(step, topk) (absorbed attention);
//     bytes W + b step d_i (the index keys read, fp8) + b min(step, topk)
//           (kv_lora + rope) x kv bytes (the selected latents read);
//   rate GemmQuant(gemm_type).flops_key (the projections dominate; fp8 for fp8_block).
// Without the indexer (`indexer` false: AIC's *_skip_indexer rows, a prefill short
// enough that every key is kept) its weights, scores and key reads drop out.
OpCost DsaModuleCost(const std::string& phase, std::string_view architecture, const std::string& gemm_type,
                     const std::string& kv_cache_dtype, double n, double b, double isl, double step, bool indexer);

// ---------------------------------------------------------------- elementwise (elementwise_perf)

// One call of `op` at (tokens, width) in `dtype`, both bounds: rmsnorm 4TW
// FLOPs, (2TW + W) elements; rmsnorm_residual 5TW, 4TW + W; silu_and_mul 5TW, 3TW;
// residual_add TW, 3TW; rotary_embedding 3TW, 2TW; embedding 0, 2TW. Unknown op -> Error.
OpCost ElementwiseCost(std::string_view op, const std::string& dtype, double tokens, double width);

// ---------------------------------------------------------------- quantization (computescale_perf, scale_matrix_perf)

// Roofline bytes of (de)quantizing an m x k bf16 activation: its 2mk bytes read.
// (The gate bounds no compute_scale row: it is a difference of two timings.)
inline double QuantizeRooflineBytes(double m, double k) {
  return 2 * m * k;
}

// ---------------------------------------------------------------- collectives (nccl_perf, custom_allreduce_perf)

// Floor: the bytes each GPU must send (nccl-tests' bus bytes: all_reduce
// 2(n-1)/n S, all_gather, reduce_scatter, alltoall (n-1)/n S, send_recv S) of a
// message of `bytes`; 0 on one GPU.
double CommBusBytes(std::string_view op, double bytes, double n);
// Roofline (ms) of a collective of `size` elements of `dtype` over `gpus` GPUs
// joined by `link_bw_bytes_per_s`: the same bus bytes over the link (written in
// AIC's order of operations); 0 on one GPU.
double CollectiveRooflineMs(std::string_view op, double size, int gpus, std::string_view dtype,
                            double link_bw_bytes_per_s);
// Roofline (ms) of the custom all-reduce: 2 x 2 B x size x (tp-1)/tp over the
// link whatever the dtype (AIC; the dtype is only validated); 0 on one GPU.
double CustomAllReduceRooflineMs(double size, int tp, std::string_view dtype, double link_bw_bytes_per_s);

}  // namespace servecast::tables
