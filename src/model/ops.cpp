#include "model/ops.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"

namespace servecast::model {

const char* EngineName(Engine e) {
  switch (e) {
    case Engine::kTrtllm: return "trtllm";
    case Engine::kVllm: return "vllm";
    case Engine::kSglang: return "sglang";
  }
  return "?";
}

Engine ParseEngine(const std::string& name) {
  if (name == "trtllm") return Engine::kTrtllm;
  if (name == "vllm") return Engine::kVllm;
  if (name == "sglang") return Engine::kSglang;
  throw UsageError("unknown serving engine '" + name + "' (expected trtllm, vllm or sglang)");
}

std::string ParallelConfig::ToString() const {
  return "tp" + std::to_string(tp) + " pp" + std::to_string(pp) + " dp" + std::to_string(dp) + " moe_tp" +
         std::to_string(moe_tp) + " moe_ep" + std::to_string(moe_ep);
}

const char* OpKindName(OpKind k) {
  switch (k) {
    case OpKind::kGemm: return "gemm";
    case OpKind::kContextAttention: return "context_attention";
    case OpKind::kGenerationAttention: return "generation_attention";
    case OpKind::kElementwise: return "elementwise";
    case OpKind::kEmbedding: return "embedding";
    case OpKind::kCustomAllReduce: return "custom_allreduce";
    case OpKind::kNccl: return "nccl";
    case OpKind::kP2P: return "p2p";
    case OpKind::kMoe: return "moe";
  }
  return "?";
}

namespace {

std::int64_t CeilDiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

std::string Str(std::int64_t v) { return std::to_string(v); }

void Require(bool ok, const std::string& what) {
  if (!ok) throw UsageError(what);
}

// The ops of one phase, named "<phase>_<name>".
class PhaseBuilder {
 public:
  PhaseBuilder(std::string phase, double layers) : phase_(std::move(phase)), layers_(layers) {}

  Op& Add(const std::string& name, OpKind kind, double scale) {
    Op op;
    op.name = phase_ + "_" + name;
    op.kind = kind;
    op.scale = scale;
    ops_.push_back(std::move(op));
    return ops_.back();
  }
  Op& Gemm(const std::string& name, std::int64_t n, std::int64_t k, const std::string& quant, double scale) {
    Op& op = Add(name, OpKind::kGemm, scale);
    op.n = n;
    op.k = k;
    op.quant = quant;
    op.weight_elems = static_cast<double>(n) * static_cast<double>(k);
    return op;
  }
  Op& Elementwise(const std::string& name, std::int64_t dim_in, std::int64_t dim_out, const std::string& measured,
                  std::int64_t width) {
    Op& op = Add(name, OpKind::kElementwise, layers_);
    op.dim_in = dim_in;
    op.dim_out = dim_out;
    op.measured_op = measured;
    op.measured_width = width;
    return op;
  }
  Op& AllReduce(const std::string& name, int gpus, std::int64_t width, const std::string& dtype, double scale) {
    Op& op = Add(name, OpKind::kCustomAllReduce, scale);
    op.collective = "all_reduce";
    op.gpus = gpus;
    op.elems_per_token = width;
    op.comm_dtype = dtype;
    return op;
  }
  Op& Nccl(const std::string& name, const std::string& collective, int gpus, std::int64_t width, double volume,
           const std::string& dtype, double scale) {
    Op& op = Add(name, OpKind::kNccl, scale);
    op.collective = collective;
    op.gpus = gpus;
    op.elems_per_token = width;
    op.volume_factor = volume;
    op.comm_dtype = dtype;
    return op;
  }
  double layers() const { return layers_; }
  std::vector<Op> Take() { return std::move(ops_); }

 private:
  std::string phase_;
  double layers_;
  std::vector<Op> ops_;
};

// Attention layers grouped by window: (window, number of layers), in first-seen order.
std::vector<std::pair<std::int64_t, std::int64_t>> WindowGroups(const ModelConfig& m) {
  std::vector<std::pair<std::int64_t, std::int64_t>> groups;
  if (m.layer_windows.empty()) return {{0, m.num_layers}};
  for (std::int64_t w : m.layer_windows) {
    auto it = std::find_if(groups.begin(), groups.end(), [w](const auto& g) { return g.first == w; });
    if (it == groups.end())
      groups.emplace_back(w, 1);
    else
      ++it->second;
  }
  return groups;
}

// Embedding, norms, attention block: the part dense and MoE layers share.
// `phase_scale` converts a layer count into the phase's occurrences (1 for
// context, (L + nextn) / L for generation).
void AddAttentionBlock(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, bool context,
                       double phase_scale) {
  const std::int64_t H = m.hidden_size, d = m.head_dim;
  const std::int64_t heads = m.num_heads / p.tp;
  const std::int64_t kv_heads = CeilDiv(m.num_kv_heads, p.tp);
  Op& emb = b.Add("embedding", OpKind::kEmbedding, phase_scale);
  emb.dim_in = H;
  emb.measured_op = "embedding";
  emb.measured_width = H;
  emb.weight_elems = static_cast<double>(CeilDiv(m.vocab_size, p.tp)) * static_cast<double>(H);
  b.Elementwise("add_norm_1", 2 * H, 2 * H, "rmsnorm_residual", H);
  b.Gemm("qkv_gemm", heads * d + 2 * d * kv_heads, H, m.quant.gemm, b.layers());
  for (const auto& [window, count] : WindowGroups(m)) {
    std::string name = "attention";
    if (WindowGroups(m).size() > 1) name += window > 0 ? "_window" + Str(window) : "_full";
    Op& a = b.Add(name, context ? OpKind::kContextAttention : OpKind::kGenerationAttention,
                  static_cast<double>(count) * phase_scale);
    a.heads = heads;
    a.kv_heads = kv_heads;
    a.head_dim = d;
    a.window = window;
    a.kv_quant = m.quant.kv;
    a.fmha_quant = m.quant.fmha;
    a.qk_norm = m.qk_norm;
  }
  Op& proj = b.Gemm("proj_gemm", H, heads * d, m.quant.gemm, b.layers());
  proj.low_precision_input = true;
}

void AddLogits(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, bool context, double phase_scale) {
  Op& logits = b.Gemm("logits_gemm", CeilDiv(m.vocab_size, p.tp), m.hidden_size, "bfloat16", phase_scale);
  if (context) logits.tokens = TokenRule::kPerRequest;
}

void AddTail(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, double phase_scale) {
  if (p.tp > 1) b.AllReduce("embedding_ar", p.tp, m.hidden_size, m.quant.comm, phase_scale);
  if (p.pp > 1) {
    Op& p2p = b.Add("p2p", OpKind::kP2P, (p.pp - 1) * phase_scale);
    p2p.elems_per_token = m.hidden_size;
  }
}

std::vector<Op> DensePhase(const ModelConfig& m, const ParallelConfig& p, bool context, double phase_scale) {
  const double layers = static_cast<double>(m.num_layers) * phase_scale;
  PhaseBuilder b(context ? "context" : "generation", layers);
  const std::int64_t H = m.hidden_size, I = m.intermediate_size / p.tp;
  AddAttentionBlock(b, m, p, context, phase_scale);
  if (p.tp > 1) b.AllReduce("ar_1", p.tp, H, m.quant.comm, layers);
  b.Elementwise("add_norm_2", 2 * H, 2 * H, "rmsnorm_residual", H);
  b.Gemm("gate_ffn1_gemm", 2 * I, H, m.quant.gemm, layers);
  b.Elementwise("act_gate", 2 * I, I, "silu_and_mul", I);
  b.Gemm("ffn2_gemm", H, I, m.quant.gemm, layers);
  if (p.tp > 1) b.AllReduce("ar_2", p.tp, H, m.quant.comm, layers);
  AddLogits(b, m, p, context, phase_scale);
  AddTail(b, m, p, phase_scale);
  return b.Take();
}

// The communication around the experts, per engine (AIC §2.4 dispatch rules).
// `pre` = before the experts (it also carries the attention output's reduction),
// otherwise after them.
void AddDispatch(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, const OpListOptions& o, bool pre) {
  const int gpus = p.moe_tp * p.moe_ep;
  const int attn_tp = gpus / p.dp;
  const std::int64_t H = m.hidden_size;
  const std::string& dt = m.quant.comm;
  const double L = b.layers();
  const std::string name = pre ? "moe_pre_dispatch" : "moe_post_dispatch";
  switch (o.engine) {
    case Engine::kTrtllm:
      if (o.sm_version == 100) {
        if (p.dp > 1)
          b.Nccl(name, pre ? "all_gather" : "reduce_scatter", gpus, H, p.dp, dt, L);
        else if (attn_tp > 1)
          b.AllReduce(name, gpus, H, dt, L);
      } else if (attn_tp > 1) {
        b.AllReduce(name, gpus, H, dt, L);
      } else if (p.dp > 1) {
        b.Nccl(name, pre ? "all_gather" : "reduce_scatter", gpus, H, p.dp, dt, L);
      }
      break;
    case Engine::kVllm:
      if (attn_tp > 1) b.AllReduce(name + (p.dp > 1 ? "_ar" : ""), gpus, H, dt, L);
      if (p.dp > 1) b.Nccl(name + (attn_tp > 1 ? "_nccl" : ""), pre ? "all_gather" : "reduce_scatter", gpus, H, p.dp, dt, L);
      break;
    case Engine::kSglang:
      if (p.tp > 1 && p.dp > 1) {
        if (pre) {
          b.Nccl(name + "_rs", "reduce_scatter", attn_tp, H, 1, dt, L);
          b.Nccl(name + "_ag", "all_gather", gpus, H, p.dp, dt, L);
        } else {
          b.Nccl(name + "_rs", "reduce_scatter", gpus, H, p.dp, dt, L);
          b.Nccl(name + "_ag", "all_gather", attn_tp, H, 1, dt, L);
        }
      } else if (attn_tp > 1) {
        b.AllReduce(name, gpus, H, dt, L);
      } else if (p.dp > 1) {
        b.Nccl(name, pre ? "all_gather" : "reduce_scatter", gpus, H, p.dp, dt, L);
      }
      break;
  }
}

std::vector<Op> MoePhase(const ModelConfig& m, const ParallelConfig& p, const OpListOptions& o, bool context,
                         double phase_scale) {
  const double layers = static_cast<double>(m.num_layers) * phase_scale;
  PhaseBuilder b(context ? "context" : "generation", layers);
  const std::int64_t H = m.hidden_size;
  AddAttentionBlock(b, m, p, context, phase_scale);
  b.Elementwise("add_norm_2", 2 * H, 2 * H, "rmsnorm_residual", H);
  b.Gemm("router_gemm", m.num_experts, H, "bfloat16", layers);
  const std::int64_t shared = m.shared_expert_intermediate_size > 0
                                  ? m.shared_expert_intermediate_size
                                  : m.num_shared_experts * m.moe_intermediate_size;
  if (shared > 0) {
    const std::int64_t S = shared / p.tp;
    b.Gemm("shared_gate_ffn1_gemm", 2 * S, H, m.quant.gemm, layers);
    b.Elementwise("shared_act_gate", 2 * S, S, "silu_and_mul", S);
    b.Gemm("shared_ffn2_gemm", H, S, m.quant.gemm, layers);
  }
  AddDispatch(b, m, p, o, true);
  Op& moe = b.Add("moe", OpKind::kMoe, layers);
  moe.hidden = H;
  moe.inter = m.moe_intermediate_size;
  moe.topk = m.experts_per_token;
  moe.experts = m.num_experts;
  moe.moe_tp = p.moe_tp;
  moe.moe_ep = p.moe_ep;
  moe.token_multiplier = p.dp;
  moe.quant = m.quant.moe;
  moe.distribution = o.moe_distribution.empty() ? "power_law_1.2" : o.moe_distribution;
  // Gated experts: gate, up and down projections (3 matrices H x I_moe each).
  const double per_rank = std::floor(static_cast<double>(H) * static_cast<double>(m.moe_intermediate_size) *
                                     static_cast<double>(m.num_experts) * 3.0 / p.moe_ep);
  moe.weight_elems = std::floor(per_rank / p.moe_tp);
  AddDispatch(b, m, p, o, false);
  if (!context) AddLogits(b, m, p, context, phase_scale);
  AddTail(b, m, p, phase_scale);
  return b.Take();
}

}  // namespace

void ValidateParallel(const ModelConfig& m, const ParallelConfig& p, Engine e) {
  if (m.family == Family::kDeepSeek)
    throw UsageError(m.name + " (" + m.architecture +
                     "): DeepSeek-V3/R1 (MLA attention) is parsed but not yet supported by the estimator");
  Require(p.tp >= 1 && p.pp >= 1 && p.dp >= 1 && p.moe_tp >= 1 && p.moe_ep >= 1,
          "parallel sizes must be >= 1 (got " + p.ToString() + ")");
  Require(m.num_heads % p.tp == 0, "tp " + Str(p.tp) + " does not divide the " + Str(m.num_heads) +
                                       " attention heads of " + m.name);
  Require(p.pp <= m.num_layers, "pp " + Str(p.pp) + " exceeds the " + Str(m.num_layers) + " layers of " + m.name);
  if (m.family == Family::kDense) {
    Require(p.dp == 1, "attention data parallelism (dp " + Str(p.dp) + ") applies to MoE models; " + m.name +
                           " is dense (run more replicas instead)");
    Require(m.intermediate_size % p.tp == 0,
            "tp " + Str(p.tp) + " does not divide the FFN width " + Str(m.intermediate_size) + " of " + m.name);
    return;
  }
  Require(p.tp * p.dp == p.moe_tp * p.moe_ep, "MoE needs tp x dp = moe_tp x moe_ep (got " + p.ToString() + ")");
  Require(m.num_experts >= p.moe_ep, "moe_ep " + Str(p.moe_ep) + " exceeds the " + Str(m.num_experts) +
                                         " experts of " + m.name);
  Require(m.num_experts % p.moe_ep == 0,
          "moe_ep " + Str(p.moe_ep) + " does not divide the " + Str(m.num_experts) + " experts of " + m.name);
  Require(m.moe_intermediate_size % p.moe_tp == 0, "moe_tp " + Str(p.moe_tp) + " does not divide the expert width " +
                                                       Str(m.moe_intermediate_size) + " of " + m.name);
  if (m.quant.moe == "fp8_block")
    Require((m.moe_intermediate_size / p.moe_tp) % 128 == 0,
            "fp8_block experts need the per-GPU expert width (" + Str(m.moe_intermediate_size) + " / moe_tp " +
                Str(p.moe_tp) + ") to be a multiple of 128");
  if (e == Engine::kTrtllm)
    Require(p.dp == 1 || p.tp == 1, "trtllm: attention dp > 1 needs tp 1 (got " + p.ToString() + ")");
  if (e == Engine::kVllm)
    Require(p.moe_tp == 1 || p.moe_ep == 1, "vllm: moe_tp and moe_ep cannot both exceed 1 (got " + p.ToString() + ")");
}

OpList BuildOpList(const ModelConfig& m, const ParallelConfig& p, const OpListOptions& o) {
  ValidateParallel(m, p, o.engine);
  Require(o.nextn >= 0, "nextn must be >= 0");
  OpList list;
  const double gen_scale =
      static_cast<double>(m.num_layers + o.nextn) / static_cast<double>(m.num_layers);
  if (m.family == Family::kDense) {
    list.context = DensePhase(m, p, true, 1.0);
    list.generation = DensePhase(m, p, false, gen_scale);
  } else {
    list.context = MoePhase(m, p, o, true, 1.0);
    list.generation = MoePhase(m, p, o, false, gen_scale);
    list.notes.push_back("MoE expert load: " + (o.moe_distribution.empty() ? std::string("power_law_1.2") : o.moe_distribution) + " routing");
  }
  const auto groups = WindowGroups(m);
  if (groups.size() > 1) {
    std::string note = "attention layers by window:";
    for (const auto& [w, n] : groups) note += " " + Str(n) + (w > 0 ? " x window " + Str(w) : " x full");
    list.notes.push_back(note);
  }
  if (o.nextn > 0) list.notes.push_back("MTP: decode ops scaled by (L + " + Str(o.nextn) + ") / L");
  return list;
}

double KvElemsPerToken(const ModelConfig& m, const ParallelConfig& p) {
  return static_cast<double>(CeilDiv(m.num_kv_heads, p.tp)) * static_cast<double>(m.head_dim) *
         static_cast<double>(m.num_layers) * 2.0;
}

}  // namespace servecast::model
