#pragma once

// A model's forward pass as a list of ops per phase (context = prefill,
// generation = one decode step) under a parallel configuration and a serving
// engine's communication rules (docs/estimator.md, "Op lists").
//
// Every op describes ONE layer (or one occurrence) and carries `scale`, the
// number of times it runs per forward pass (the layer count for per-layer ops,
// 1 for the embedding and the logits GEMM, pp - 1 for pipeline transfers). The
// phase latency is the sum of op latency x scale. Shapes are per GPU (after
// tensor / expert parallelism); token counts are supplied when the op list is
// evaluated at a (batch, sequence) shape.

#include <cstdint>
#include <string>
#include <vector>

#include "core/params.h"
#include "model/model_config.h"

namespace servecast::model {

enum class Engine { kTrtllm, kVllm, kSglang };
const char* EngineName(Engine e);           // "trtllm", "vllm", "sglang"
Engine ParseEngine(const std::string& name);  // UsageError listing the three

struct ParallelConfig {
  int tp = 1;      // tensor parallel (attention and dense FFN)
  int pp = 1;      // pipeline parallel
  int dp = 1;      // attention data parallel
  int moe_tp = 1;  // tensor parallel inside the experts
  int moe_ep = 1;  // expert parallel
  // Context parallel: a prefill's tokens split over cp GPUs (SGLang's prefill
  // CP; decode steps are not split). 1 everywhere else.
  int cp = 1;
  // GPUs of one worker (one model replica): tp x pp x dp x cp.
  int GpusPerWorker() const { return tp * pp * dp * cp; }
  std::string ToString() const;  // "tp4 pp1 dp1 moe_tp1 moe_ep4" (+ " cp2" when cp > 1)
  std::string Compact() const;   // "tp4pp1dp1etp1ep4" (+ "cp2" when cp > 1): reports and JSON
};

enum class OpKind {
  kGemm,                 // y[m, n] = x[m, k] w[n, k]^T
  kContextAttention,     // causal prefill over the sequence
  kGenerationAttention,  // one new token per request against the KV cache
  kElementwise,          // memory-bound: norm, activation, residual
  kEmbedding,            // token embedding gather
  kCustomAllReduce,      // engine all-reduce over tensor-parallel GPUs
  kNccl,                 // NCCL collective (all_gather, reduce_scatter, all_reduce, alltoall)
  kP2P,                  // pipeline-stage activation transfer
  kMoe,                  // routed experts: permute, grouped GEMMs, combine
  kContextMla,           // MLA prefill (unabsorbed: q, k, v of every head) over the sequence
  kGenerationMla,        // MLA decode (absorbed) against the latent KV cache
  kMlaBmm,               // a per-head BMM of absorbed MLA decode (mla_gen_pre / mla_gen_post)
  kTable,                // any declared table with an estimator read (tables/table_spec.h): `table`, `table_key`
};
const char* OpKindName(OpKind k);

// How a token-major op counts its tokens in a phase.
enum class TokenRule {
  kAllTokens,   // every token of the pass (batch x new tokens)
  kPerRequest,  // one per request (the context logits GEMM: only the last token)
  // Every token of the pass even under context parallelism: ops that run on the
  // tokens gathered from all CP ranks (routed experts, the dispatch collectives,
  // the KV all-gather). Without CP the same as kAllTokens.
  kAllRanks,
};

struct Op {
  std::string name;  // "context_qkv_gemm", "generation_attention", ...
  OpKind kind = OpKind::kGemm;
  double scale = 1;  // occurrences per forward pass
  TokenRule tokens = TokenRule::kAllTokens;
  // Context parallelism (BuildOpList sets it to cp on the context ops that are
  // not kAllRanks): the op runs on the busiest rank's share, ceil(tokens /
  // seq_split) tokens; context attention runs the zigzag split instead
  // (serve/evaluate.cpp). 1: no split.
  int seq_split = 1;

  // kGemm: n, k, quant; low_precision_input: the input is already quantized by the
  // previous op (attention output), so fp8_static subtracts scale_matrix too.
  std::int64_t n = 0, k = 0;
  std::string quant;
  bool low_precision_input = false;

  // kContextAttention / kGenerationAttention (per GPU); kContextMla /
  // kGenerationMla / kMlaBmm use heads (local), kv_quant, fmha_quant (context)
  // and, for kMlaBmm, quant (the BMM dtype) and measured_op (mla_gen_pre | mla_gen_post).
  std::int64_t heads = 0, kv_heads = 0, head_dim = 0, window = 0;
  std::string kv_quant, fmha_quant;
  bool qk_norm = false;

  // kElementwise: bytes moved per token = 2 x (dim_in + dim_out) (bf16); the
  // measured elementwise_perf op that implements it ("rmsnorm_residual",
  // "silu_and_mul") and its width. kEmbedding: width = hidden size.
  std::int64_t dim_in = 0, dim_out = 0;
  std::string measured_op;
  std::int64_t measured_width = 0;

  // Communication: collective name (kNccl), GPUs in the group, elements per token
  // (message = tokens x elems_per_token x volume_factor), dtype.
  std::string collective;
  int gpus = 1;
  std::int64_t elems_per_token = 0;
  double volume_factor = 1;  // e.g. attention-DP ranks whose tokens are gathered
  std::string comm_dtype;

  // kMoe (per GPU slice key: hidden, inter, topk, experts, moe_tp, moe_ep)
  std::int64_t hidden = 0, inter = 0, topk = 0, experts = 0;
  int moe_tp = 1, moe_ep = 1;
  int token_multiplier = 1;  // attention-DP ranks feeding the expert pool
  std::string distribution;

  // kTable: the declared table it reads and its key's fixed columns (its slice
  // keys, and any axis the pass does not give); each axis the read binds to the
  // pass (tokens, batch or seq) reads that quantity x table_axis_scale.
  std::string table;
  Params table_key;
  double table_axis_scale = 1;

  // Ops that run concurrently with others (two CUDA streams): a contiguous run of
  // ops with overlap 1 or 2 is one region whose latency is max(sum of group 1,
  // sum of group 2); 0 runs alone (the default).
  int overlap = 0;

  // Weight elements of ONE occurrence on one GPU (x scale for the pass); their
  // bytes follow the op's quant (GEMM / MoE modes; the embedding is bf16).
  double weight_elems = 0;
};

struct OpList {
  std::vector<Op> context;
  std::vector<Op> generation;
  std::vector<std::string> notes;  // modelling choices worth showing (e.g. "gpt-oss: 18 windowed + 18 full layers")
};

struct OpListOptions {
  Engine engine = Engine::kTrtllm;
  int nextn = 0;  // MTP draft tokens: decode ops scale x (L + nextn) / L
  std::string moe_distribution;  // "" = the family default (power_law_1.2; DeepSeek power_law_1.01)
  // GPUs per node of the system (no op list reads it yet: AIC's TRT-LLM
  // all-to-all on 72-GPU NVLink domains is not modelled).
  int gpus_per_node = 8;
};

// UsageError "<model> (<architecture>): <why>" when the model's family does not
// cover it yet (ModelFamily::Unsupported).
void RequireSupported(const ModelConfig& m);

// Checks the parallel config against the model and engine: the common rules
// (sizes >= 1, tp divides the heads, pp <= layers), then the family's (dense: dp
// 1 and tp divides the FFN; MoE: tp x dp = moe_tp x moe_ep, experts >= moe_ep,
// engine rules) -> UsageError naming the rule. An unsupported family ->
// UsageError "not yet supported".
void ValidateParallel(const ModelConfig& m, const ParallelConfig& p, Engine e);

// Builds both phases' ops through the model's family. Calls ValidateParallel first.
OpList BuildOpList(const ModelConfig& m, const ParallelConfig& p, const OpListOptions& o);

// KV-cache elements per token on one GPU over all layers (the family's rule;
// grouped-query attention: ceil(n_kv / tp) x d x L x 2, not divided by pp).
double KvElemsPerToken(const ModelConfig& m, const ParallelConfig& p);

}  // namespace servecast::model
