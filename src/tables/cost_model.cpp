#include "tables/cost_model.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "core/error.h"

namespace servecast::tables {
namespace {

bool In(std::string_view x, std::initializer_list<std::string_view> set) {
  for (auto s : set)
    if (x == s) return true;
  return false;
}

// Keys that can attend: causal prefill of `s` queries over a window `w` (0 = full)
// sums min(i + 1, w) over positions i.
double CausalPairs(double s, double w) {
  if (w <= 0 || w >= s) return s * (s + 1) / 2;
  return w * (w + 1) / 2 + (s - w) * w;
}

}  // namespace

double DtypeBytes(std::string_view dtype) {
  if (dtype == "float32") return 4;
  if (dtype == "bfloat16" || dtype == "float16" || dtype == "half") return 2;
  if (dtype == "fp8" || dtype == "fp8_block" || dtype == "int8") return 1;
  if (dtype == "nvfp4") return 0.5625;  // 4 bits plus one 8-bit scale per 16 values
  throw Error("unknown dtype '" + std::string(dtype) +
              "'; expected one of float32, bfloat16, float16, half, fp8, fp8_block, int8, nvfp4");
}

QuantMode GemmQuant(std::string_view mode) {
  if (mode == "bfloat16" || mode == "float16") return {2, "bfloat16"};
  if (In(mode, {"fp8", "fp8_static", "fp8_block", "fp8_ootb"})) return {1, "fp8"};
  if (mode == "int8_wo") return {1, "bfloat16"};
  if (mode == "int4_wo") return {0.5, "bfloat16"};
  if (mode == "sq") return {1, "int8"};
  if (mode == "nvfp4") return {9.0 / 16.0, "nvfp4"};
  if (In(mode, {"nvfp4_wo", "w4a16_nvfp4"})) return {9.0 / 16.0, "bfloat16"};
  throw Error("unknown GEMM quantization '" + std::string(mode) +
              "'; expected bfloat16, fp8, fp8_static, fp8_block, fp8_ootb, int8_wo, int4_wo, sq, nvfp4, nvfp4_wo");
}

QuantMode MoeQuant(std::string_view mode) {
  if (mode == "bfloat16" || mode == "float16") return {2, "bfloat16"};
  if (In(mode, {"fp8", "fp8_block"})) return {1, "fp8"};
  if (mode == "int4_wo") return {0.5, "bfloat16"};
  if (In(mode, {"w4afp8", "w4a8_mxfp4_mxfp8", "w4a8_mxfp4_mxfp8_trtllm"})) return {0.5, "fp8"};
  if (mode == "nvfp4") return {9.0 / 16.0, "nvfp4"};
  if (In(mode, {"nvfp4_wo", "w4a16_nvfp4"})) return {9.0 / 16.0, "bfloat16"};
  if (In(mode, {"w4a16_mxfp4", "w4a16_mxfp4_cutlass"})) return {0.5, "bfloat16"};
  throw Error("unknown MoE quantization '" + std::string(mode) + "'");
}

QuantMode FmhaQuant(std::string_view mode) {
  if (mode == "bfloat16" || mode == "float16") return {2, "bfloat16"};
  if (mode == "fp8" || mode == "fp8_block") return {1, "fp8"};
  throw Error("unknown attention quantization '" + std::string(mode) + "'; expected bfloat16, fp8 or fp8_block");
}

double KvCacheBytes(std::string_view kv) {
  if (kv == "bfloat16" || kv == "float16") return 2;
  if (kv == "int8" || kv == "fp8") return 1;
  throw Error("unknown KV-cache dtype '" + std::string(kv) + "'; expected bfloat16, int8 or fp8");
}

double CommBytes(std::string_view dtype) {
  if (In(dtype, {"half", "bfloat16", "float16"})) return 2;
  if (dtype == "int8" || dtype == "fp8") return 1;
  throw Error("unknown collective dtype '" + std::string(dtype) + "'; expected half, bfloat16, int8 or fp8");
}

const char* DecodeFlopsKey(std::string_view kv_dtype, int sm_version) {
  return kv_dtype == "fp8" && sm_version >= 89 ? "fp8" : "bfloat16";
}

// ---------------------------------------------------------------- GEMM

OpCost GemmRoofline(std::string_view quant, double m, double n, double k) {
  QuantMode q = GemmQuant(quant);
  return OpCost{GemmFlops(m, n, k), q.mem_bytes * (m * n + m * k + n * k), std::move(q.flops_key)};
}

OpCost GemmFloor(const std::string& dt, double m, double n, double k) {
  double in_bytes = DtypeBytes(dt);
  double out_bytes = (dt == "float32") ? 4 : 2;  // fp8 GEMMs write bf16
  return OpCost{GemmFlops(m, n, k), (m * k + k * n) * in_bytes + m * n * out_bytes, dt};
}

// ---------------------------------------------------------------- attention

OpCost ContextAttentionRoofline(double b, double s, double prefix, double n, double n_kv, double h, double w,
                                std::string_view fmha_quant, std::string_view kv_dtype) {
  if (n_kv == 0) n_kv = n;  // the MHA sentinel
  QuantMode q = FmhaQuant(fmha_quant);
  double full = s + prefix;
  double flops = (w > 0 && full > w) ? 2 * b * (full - prefix) * w * n * h * 2
                                     : 2 * b * (full * full - prefix * prefix) * n * h * 2 / 2;
  double bytes = 2 * b * 2 * n * (full - prefix) * h + KvCacheBytes(kv_dtype) * b * 2 * n_kv * full * h;
  return OpCost{flops, bytes, std::move(q.flops_key)};
}

OpCost GenerationAttentionRoofline(double b, double s, double n, double n_kv, double h, double w,
                                   std::string_view kv_dtype, int sm_version) {
  if (n_kv == 0) n_kv = n;
  double kv_len = std::max(0.0, s - 1);
  if (w > 0) kv_len = std::min(kv_len, w);
  double kv_bytes = KvCacheBytes(kv_dtype);
  double flops = 2 * b * n * h * 2 * kv_len;
  double bytes = b * (2 * n * h + 2 * n_kv * kv_len * h * kv_bytes + 2 * n * h);
  return OpCost{flops, bytes, DecodeFlopsKey(kv_dtype, sm_version)};
}

OpCost ContextAttentionFloor(double b, double s, double n, double kv, double h, double w, const std::string& adt,
                             const std::string& kv_dtype) {
  if (kv == 0) kv = n;  // AIC's tables may write 0 for MHA
  double q_bytes = DtypeBytes(adt), kv_bytes = DtypeBytes(kv_dtype);
  double flops = 4 * b * n * h * CausalPairs(s, w);
  double bytes = b * s * h * (2 * n * q_bytes + 2 * kv * kv_bytes);
  return OpCost{flops, bytes, adt};
}

OpCost GenerationAttentionFloor(double b, double isl, double step, double n, double kv, double h, double w,
                                const std::string& adt, const std::string& kv_dtype) {
  if (kv == 0) kv = n;
  double keys = isl + step;
  if (w > 0) keys = std::min(keys, w);
  double kv_bytes = DtypeBytes(kv_dtype);
  double flops = 4 * b * n * h * keys;
  double bytes = b * keys * 2 * kv * h * kv_bytes + 2 * b * n * h * DtypeBytes(adt);
  return OpCost{flops, bytes, adt};
}

// ---------------------------------------------------------------- MLA

OpCost ContextMlaRoofline(double b, double s, double prefix, double n, std::string_view fmha_quant,
                          std::string_view kv_dtype) {
  QuantMode q = FmhaQuant(fmha_quant);
  const double full = s + prefix, dims = kMlaQkHeadDim + kMlaVHeadDim;
  const double flops = b * n * dims * (full * full - prefix * prefix);
  const double bytes = b * n * (KvCacheBytes(kv_dtype) * full * dims + 2 * s * dims);
  return OpCost{flops, bytes, std::move(q.flops_key)};
}

OpCost GenerationMlaRoofline(double b, double s, double n, std::string_view kv_dtype, int sm_version) {
  const double qk = kMlaLatentDim + kMlaRopeDim, width = qk + kMlaLatentDim;
  const double flops = 2 * b * n * width * s;
  const double bytes = b * (2 * n * width + std::max(0.0, s - 1) * qk * KvCacheBytes(kv_dtype));
  return OpCost{flops, bytes, DecodeFlopsKey(kv_dtype, sm_version)};
}

OpCost MlaBmmRoofline(std::string_view bmm_quant, double t, double n) {
  QuantMode q = GemmQuant(bmm_quant);
  const double flops = 2 * t * n * kMlaNopeDim * kMlaLatentDim;
  const double bytes = n * ((kMlaNopeDim + kMlaLatentDim) * t + kMlaNopeDim * kMlaLatentDim) * q.mem_bytes;
  return OpCost{flops, bytes, std::move(q.flops_key)};
}

OpCost ContextMlaFloor(double b, double s, double n, const std::string& mla_dtype, const std::string& kv_dtype) {
  double flops = 2 * b * n * (kMlaQkHeadDim + kMlaVHeadDim) * CausalPairs(s, 0);
  double activations = b * s * n * (2 * kMlaQkHeadDim + 2 * kMlaVHeadDim) * 2;
  double cache = b * s * (kMlaLatentDim + kMlaRopeDim) * DtypeBytes(kv_dtype);
  DtypeBytes(mla_dtype);  // validates the dtype
  return OpCost{flops, activations + cache, mla_dtype};
}

OpCost GenerationMlaFloor(double b, double isl, double step, double n, const std::string& mla_dtype,
                          const std::string& kv_dtype) {
  double keys = isl + step, latent = kMlaLatentDim + kMlaRopeDim;
  double flops = 2 * b * n * (latent + kMlaLatentDim) * keys;
  double bytes = b * keys * latent * DtypeBytes(kv_dtype) + b * n * (latent + kMlaLatentDim) * 2;
  DtypeBytes(mla_dtype);
  return OpCost{flops, bytes, DtypeBytes(kv_dtype) == 1 ? "fp8" : mla_dtype};
}

OpCost MlaBmmFloor(const std::string& op_name, const std::string& dt, double t, double n) {
  double in_dim = 0, out_dim = 0;
  if (op_name == "mla_gen_pre") {
    in_dim = kMlaNopeDim, out_dim = kMlaLatentDim;
  } else if (op_name == "mla_gen_post") {
    in_dim = kMlaLatentDim, out_dim = kMlaVHeadDim;
  } else {
    throw Error("unknown mla_bmm op '" + op_name + "'; expected mla_gen_pre or mla_gen_post");
  }
  double e = DtypeBytes(dt);
  double flops = 2 * t * n * in_dim * out_dim;
  double bytes = n * (in_dim * out_dim * e + t * in_dim * e + t * out_dim * 2);
  return OpCost{flops, bytes, dt};
}

// ---------------------------------------------------------------- MoE

OpCost MoeRoofline(std::string_view quant, double tokens, double hidden, double inter, double topk, double experts,
                   double tp, double ep, bool gated) {
  QuantMode q = MoeQuant(quant);
  double g = gated ? 3 : 2;
  double tot = tokens * topk;
  double flops = tot * hidden * inter * g * 2 / ep / tp;
  double per_ep = std::floor(tot / ep);
  double bytes = q.mem_bytes * (per_ep * hidden * 2 + per_ep * inter * g / tp +
                                hidden * inter * g / tp * std::min(std::floor(experts / ep), per_ep));
  return OpCost{flops, bytes, std::move(q.flops_key)};
}

OpCost MoeFloor(const std::string& dt, double t, double h, double inter_size, double topk, double e, double tp,
                double ep, bool gated) {
  double inter = inter_size / tp;
  double share = t * topk / ep;
  double experts_touched = std::min(e / ep, std::ceil(share / t));
  const double proj = gated ? 3 : 2;  // gate, up, down; or up, down
  double flops = 2 * share * h * proj * inter;
  // The expert weights at the dtype's storage width (weight-only 4-bit types: half a
  // byte, the codes alone, so the floor stays a lower bound), tensor-core rate of the
  // type the experts compute in (bf16 for the weight-only types).
  double weight_bytes = 4;
  std::string rate = dt;
  if (dt != "float32") {
    const QuantMode q = MoeQuant(dt);
    weight_bytes = q.mem_bytes;
    rate = q.flops_key;
  }
  double bytes = experts_touched * proj * h * inter * weight_bytes + 2 * t * h * 2;
  return OpCost{flops, bytes, rate};
}

// ---------------------------------------------------------------- elementwise

OpCost ElementwiseCost(std::string_view op, const std::string& dtype, double tokens, double width) {
  const double e = DtypeBytes(dtype);
  const double th = tokens * width;
  if (op == "rmsnorm") return OpCost{4 * th, (2 * th + width) * e, dtype};
  if (op == "rmsnorm_residual") return OpCost{5 * th, (4 * th + width) * e, dtype};
  if (op == "silu_and_mul") return OpCost{5 * th, 3 * th * e, dtype};
  if (op == "residual_add") return OpCost{th, 3 * th * e, dtype};
  if (op == "rotary_embedding") return OpCost{3 * th, 2 * th * e, dtype};
  if (op == "embedding") return OpCost{0, 2 * th * e, dtype};
  throw Error("elementwise_perf: no cost model for op_name '" + std::string(op) +
              "' (known: rmsnorm, rmsnorm_residual, silu_and_mul, residual_add, rotary_embedding, embedding)");
}

// ---------------------------------------------------------------- collectives

double CommBusBytes(std::string_view op, double bytes, double n) {
  if (n <= 1) return 0;
  if (op == "all_reduce") return 2 * (n - 1) / n * bytes;
  if (op == "all_gather" || op == "reduce_scatter" || op == "alltoall") return (n - 1) / n * bytes;
  if (op == "send_recv") return bytes;
  throw Error("comm tables: no cost model for op_name '" + std::string(op) + "'");
}

double CollectiveRooflineMs(std::string_view op, double size, int gpus, std::string_view dtype, double bw) {
  if (gpus <= 1) return 0;
  double t = 1e3 * CommBytes(dtype) * size * (gpus - 1) / gpus / bw;
  if (op == "all_reduce") return 2 * t;
  if (op == "all_gather" || op == "reduce_scatter" || op == "alltoall") return t;
  // Point-to-point: each rank sends the whole message to its neighbour.
  if (op == "send_recv") return t * gpus / (gpus - 1);
  throw Error("unknown collective '" + std::string(op) +
              "'; expected all_reduce, all_gather, reduce_scatter, alltoall or send_recv");
}

double CustomAllReduceRooflineMs(double size, int tp, std::string_view dtype, double bw) {
  if (tp <= 1) return 0;
  (void)CommBytes(dtype);
  return 1e3 * 2 * size * 2 / tp * (tp - 1) / bw;
}

// ---------------------------------------------------------------- recurrent layers

namespace {

enum class RecurrentPhase { kContext, kGeneration };

RecurrentPhase PhaseOf(const std::string& phase) {
  if (phase == "context") return RecurrentPhase::kContext;
  if (phase == "generation") return RecurrentPhase::kGeneration;
  throw Error("unknown phase '" + phase + "' (expected context or generation)");
}

// A recurrent layer core: convolution over `channels`, then the scan with its
// inputs (T x scan_in B), outputs (T x out elements at 2 B), per-token-and-head
// math and a float32 state of `state` elements per sequence.
OpCost RecurrentRoofline(RecurrentPhase ph, double b, double s, double c, double channels, double scan_in_bytes,
                         double out, double scan_flops_per_token, double state) {
  const double t = b * s;
  double flops = 2 * c * t * channels + scan_flops_per_token * t;
  double bytes = 2 * 2 * t * channels + t * scan_in_bytes + 2 * t * out;
  if (ph == RecurrentPhase::kContext)
    bytes += b * state * 4;  // the final state written
  else
    bytes += b * (2 * 4 * state + 2 * 2 * channels * (c - 1));  // state and conv window read and written
  return OpCost{flops, bytes, "bfloat16"};
}

}  // namespace

OpCost GdnRoofline(const std::string& phase, double b, double s, double c, double hk, double dk, double hv, double dv) {
  const double channels = 2 * hk * dk + hv * dv;
  return RecurrentRoofline(PhaseOf(phase), b, s, c, channels, 2 * channels, hv * dv, 6 * hv * dk * dv, hv * dk * dv);
}

OpCost GdnFloor(const std::string& phase, double b, double s, double c, double hk, double dk, double hv, double dv) {
  PhaseOf(phase);
  const double t = b * s, channels = 2 * hk * dk + hv * dv;
  return OpCost{2 * c * t * channels, 2 * t * channels, "bfloat16"};
}

OpCost Mamba2Roofline(const std::string& phase, double b, double s, double c, double nh, double p, double g,
                      double n_state) {
  const double channels = nh * p + 2 * g * n_state;
  return RecurrentRoofline(PhaseOf(phase), b, s, c, channels, 2 * channels + 4 * nh, nh * p, 4 * nh * p * n_state,
                           nh * p * n_state);
}

OpCost Mamba2Floor(const std::string& phase, double b, double s, double c, double nh, double p, double g,
                   double n_state) {
  PhaseOf(phase);
  const double t = b * s, channels = nh * p + 2 * g * n_state;
  return OpCost{2 * c * t * channels, 2 * t * channels, "bfloat16"};
}

// ---------------------------------------------------------------- DSA modules

const DsaGeometry& DsaGeometryOf(std::string_view architecture) {
  static const DsaGeometry kDeepSeekV32{7168, 1536, 512, 128, 64, 128, 64, 128, 2048};
  static const DsaGeometry kGlm5{6144, 2048, 512, 192, 64, 256, 32, 128, 2048};
  if (architecture == "DeepseekV32ForCausalLM") return kDeepSeekV32;
  if (architecture == "GlmMoeDsaForCausalLM") return kGlm5;
  throw Error("no DSA geometry for architecture '" + std::string(architecture) +
              "' (known: DeepseekV32ForCausalLM, GlmMoeDsaForCausalLM)");
}

OpCost DsaModuleCost(const std::string& phase, std::string_view architecture, const std::string& gemm_type,
                     const std::string& kv_cache_dtype, double n, double b, double isl, double step, bool indexer) {
  const DsaGeometry& g = DsaGeometryOf(architecture);
  const double ix = indexer ? 1.0 : 0.0;
  const QuantMode wq = GemmQuant(gemm_type);
  const double kv = DtypeBytes(kv_cache_dtype);
  const double latent = g.kv_lora + g.rope;
  const double weights = g.hidden * g.q_lora + g.hidden * latent + g.q_lora * n * (g.nope + g.rope) +
                         g.kv_lora * n * (g.nope + g.v) + n * g.v * g.hidden +
                         ix * (g.q_lora * g.index_heads * g.index_dim + g.hidden * g.index_dim +
                               g.hidden * g.index_heads);
  const double index_math = ix * 2 * g.index_heads * g.index_dim;
  if (PhaseOf(phase) == RecurrentPhase::kContext) {
    const double t = b * isl;
    // Query i (0-based) of a request sees step + i + 1 keys; the sparse
    // attention min(that, topk) of them.
    const double all = b * (isl * step + isl * (isl + 1) / 2);
    const double dense_end = std::clamp(g.topk - step, 0.0, isl);  // queries with <= topk keys
    const double sparse = !indexer ? all : b * (dense_end * step + dense_end * (dense_end + 1) / 2 + (isl - dense_end) * g.topk);
    const double flops = 2 * t * weights + index_math * all + 2 * n * (g.nope + g.rope + g.v) * sparse;
    const double bytes = weights * wq.mem_bytes + 2 * 2 * t * g.hidden + t * (latent * kv + ix * g.index_dim);
    return OpCost{flops, bytes, wq.flops_key};
  }
  const double selected = indexer ? std::min(step, g.topk) : step;
  const double flops = 2 * b * weights + index_math * b * step + 2 * b * n * (2 * g.kv_lora + g.rope) * selected;
  const double bytes = weights * wq.mem_bytes + ix * b * step * g.index_dim + b * selected * latent * kv;
  return OpCost{flops, bytes, wq.flops_key};
}

}  // namespace servecast::tables
