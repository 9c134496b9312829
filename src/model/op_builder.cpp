#include "model/op_builder.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "tables/cost_model.h"

namespace servecast::model {

void Require(bool ok, const std::string& what) {
  if (!ok) throw UsageError(what);
}

void ValidateDenseParallel(const ModelConfig& m, const ParallelConfig& p) {
  Require(p.dp == 1, "attention data parallelism (dp " + std::to_string(p.dp) + ") applies to MoE models; " + m.name +
                         " is dense (run more replicas instead)");
  Require(m.intermediate_size % p.tp == 0, "tp " + std::to_string(p.tp) + " does not divide the FFN width " +
                                               std::to_string(m.intermediate_size) + " of " + m.name);
}

Op& PhaseBuilder::Add(const std::string& name, OpKind kind, double scale) {
  Op op;
  op.name = phase_ + "_" + name;
  op.kind = kind;
  op.scale = scale;
  ops_.push_back(std::move(op));
  return ops_.back();
}

Op& PhaseBuilder::Gemm(const std::string& name, std::int64_t n, std::int64_t k, const std::string& quant,
                       double scale) {
  Op& op = Add(name, OpKind::kGemm, scale);
  op.n = n;
  op.k = k;
  op.quant = quant;
  op.weight_elems = static_cast<double>(n) * static_cast<double>(k);
  return op;
}

Op& PhaseBuilder::Elementwise(const std::string& name, std::int64_t dim_in, std::int64_t dim_out,
                              const std::string& measured, std::int64_t width) {
  Op& op = Add(name, OpKind::kElementwise, layers_);
  op.dim_in = dim_in;
  op.dim_out = dim_out;
  op.measured_op = measured;
  op.measured_width = width;
  return op;
}

Op& PhaseBuilder::AllReduce(const std::string& name, int gpus, std::int64_t width, const std::string& dtype,
                            double scale) {
  Op& op = Add(name, OpKind::kCustomAllReduce, scale);
  op.collective = "all_reduce";
  op.gpus = gpus;
  op.elems_per_token = width;
  op.comm_dtype = dtype;
  return op;
}

Op& PhaseBuilder::Nccl(const std::string& name, const std::string& collective, int gpus, std::int64_t width,
                       double volume, const std::string& dtype, double scale) {
  Op& op = Add(name, OpKind::kNccl, scale);
  op.collective = collective;
  op.gpus = gpus;
  op.elems_per_token = width;
  op.volume_factor = volume;
  op.comm_dtype = dtype;
  return op;
}

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

void AddEmbedding(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, double phase_scale) {
  const std::int64_t H = m.hidden_size;
  Op& emb = b.Add("embedding", OpKind::kEmbedding, phase_scale);
  emb.dim_in = H;
  emb.measured_op = "embedding";
  emb.measured_width = H;
  emb.weight_elems = static_cast<double>(CeilDiv(m.vocab_size, p.tp)) * static_cast<double>(H);
  b.Elementwise("add_norm_1", 2 * H, 2 * H, "rmsnorm_residual", H);
}

Op& AddRoutedExperts(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, const std::string& distribution,
                     double layers) {
  const std::int64_t H = m.hidden_size;
  Op& moe = b.Add("moe", OpKind::kMoe, layers);
  moe.hidden = H;
  moe.inter = m.moe_intermediate_size;
  moe.topk = m.experts_per_token;
  moe.experts = m.num_experts;
  moe.moe_tp = p.moe_tp;
  moe.moe_ep = p.moe_ep;
  moe.token_multiplier = p.dp;
  moe.tokens = TokenRule::kAllRanks;  // the experts see the tokens gathered from every CP rank
  moe.quant = m.quant.moe;
  moe.distribution = distribution;
  const double per_rank = std::floor(static_cast<double>(H) * static_cast<double>(m.moe_intermediate_size) *
                                     static_cast<double>(m.num_experts) * 3.0 / p.moe_ep);
  moe.weight_elems = std::floor(per_rank / p.moe_tp);
  return moe;
}

Op& AddAttentionOp(PhaseBuilder& b, const ModelConfig& m, const std::string& name, bool context, double layers,
                   std::int64_t heads, std::int64_t kv_heads) {
  Op& a = b.Add(name, context ? OpKind::kContextAttention : OpKind::kGenerationAttention, layers);
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.head_dim = m.head_dim;
  a.kv_quant = m.quant.kv;
  a.fmha_quant = m.quant.fmha;
  a.qk_norm = m.qk_norm;
  return a;
}

void AddGatedFfn(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, const std::string& prefix) {
  const double layers = b.layers();
  const std::int64_t H = m.hidden_size, I = m.intermediate_size / p.tp;
  if (p.tp > 1) b.AllReduce(prefix + "ar_1", p.tp, H, m.quant.comm, layers);
  b.Elementwise(prefix + "add_norm_2", 2 * H, 2 * H, "rmsnorm_residual", H);
  b.Gemm(prefix + "gate_ffn1_gemm", 2 * I, H, m.quant.gemm, layers);
  b.Elementwise(prefix + "act_gate", 2 * I, I, "silu_and_mul", I);
  b.Gemm(prefix + "ffn2_gemm", H, I, m.quant.gemm, layers);
  if (p.tp > 1) b.AllReduce(prefix + "ar_2", p.tp, H, m.quant.comm, layers);
}

void AddAttentionBlock(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, bool context,
                       double phase_scale) {
  const std::int64_t H = m.hidden_size, d = m.head_dim;
  const std::int64_t heads = m.num_heads / p.tp;
  const std::int64_t kv_heads = CeilDiv(m.num_kv_heads, p.tp);
  AddEmbedding(b, m, p, phase_scale);
  b.Gemm("qkv_gemm", heads * d + 2 * d * kv_heads, H, m.quant.gemm, b.layers());
  const auto groups = WindowGroups(m);
  for (const auto& [window, count] : groups) {
    std::string name = "attention";
    if (groups.size() > 1) name += window > 0 ? "_window" + std::to_string(window) : "_full";
    AddAttentionOp(b, m, name, context, static_cast<double>(count) * phase_scale, heads, kv_heads).window = window;
  }
  if (context && p.cp > 1) {
    // Every rank's K and V of the whole prefill (per token: kv_heads x d, twice,
    // at the KV dtype), gathered as elements of the collective's dtype.
    Op& gather = b.Nccl("cp_kv_all_gather", "all_gather", p.cp, 2 * d * kv_heads,
                        tables::KvCacheBytes(m.quant.kv) / tables::CommBytes(m.quant.comm), m.quant.comm, b.layers());
    gather.tokens = TokenRule::kAllRanks;
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

void AddMoeDispatch(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, const OpListOptions& o, bool pre) {
  const int gpus = p.moe_tp * p.moe_ep;
  const int attn_tp = gpus / p.dp;
  const std::int64_t H = m.hidden_size;
  const std::string& dt = m.quant.comm;
  const double L = b.layers();
  const std::string name = pre ? "moe_pre_dispatch" : "moe_post_dispatch";
  switch (o.engine) {
    case Engine::kTrtllm:
      // One rule for every SM: TRT-LLM's attention dp needs tp 1
      // (ValidateExpertParallel), so attn_tp > 1 and dp > 1 never hold together and
      // the order AIC keys on sm == 100 (dp first on Blackwell, all-reduce first
      // elsewhere, which routed sm 103 as Hopper) selects the same collective.
      if (attn_tp > 1)
        b.AllReduce(name, gpus, H, dt, L);
      else if (p.dp > 1)
        b.Nccl(name, pre ? "all_gather" : "reduce_scatter", gpus, H, p.dp, dt, L);
      break;
    case Engine::kVllm:
      if (attn_tp > 1) b.AllReduce(name + (p.dp > 1 ? "_ar" : ""), gpus, H, dt, L);
      if (p.dp > 1)
        b.Nccl(name + (attn_tp > 1 ? "_nccl" : ""), pre ? "all_gather" : "reduce_scatter", gpus, H, p.dp, dt, L);
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
      } else if (p.cp > 1) {
        if (b.context())
          b.Nccl(name, pre ? "all_gather" : "reduce_scatter", gpus, H, 1, dt, L).tokens = TokenRule::kAllRanks;
        else if (!pre)
          b.AllReduce(name, gpus, H, dt, L);
      } else if (attn_tp > 1) {
        b.AllReduce(name, gpus, H, dt, L);
      } else if (p.dp > 1) {
        b.Nccl(name, pre ? "all_gather" : "reduce_scatter", gpus, H, p.dp, dt, L);
      }
      break;
  }
}

}  // namespace servecast::model
