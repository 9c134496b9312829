#include "serve/memory.h"

#include <algorithm>
#include <cmath>

#include "model/family.h"
#include "perfdb/sol.h"

namespace servecast::serve {

double OpWeightBytes(const model::Op& op) {
  if (op.weight_elems <= 0) return 0;
  double per_elem = 2;  // embedding, bf16
  // GEMMs, the MLA BMMs and a declared-table op with a quant (a module holding
  // projections: DSA) hold weights of that quant.
  if (op.kind == model::OpKind::kGemm || op.kind == model::OpKind::kMlaBmm ||
      (op.kind == model::OpKind::kTable && !op.quant.empty()))
    per_elem = perfdb::GemmQuant(op.quant).mem_bytes;
  if (op.kind == model::OpKind::kMoe) per_elem = perfdb::MoeQuant(op.quant).mem_bytes;
  return op.weight_elems * per_elem;
}

double WeightBytes(const std::vector<model::Op>& ops) {
  double bytes = 0;
  for (const model::Op& op : ops) bytes += OpWeightBytes(op) * op.scale;
  return bytes;
}

MemoryBreakdown EstimateMemory(const model::ModelConfig& m, const model::ParallelConfig& p, const model::OpList& ops,
                               const systems::SystemSpec& spec, const EngineProfile& engine, const MemoryInputs& in) {
  MemoryBreakdown r;
  const MemoryProfile& mp = engine.memory;
  r.weights = WeightBytes(ops.context) / p.pp;
  const double h = static_cast<double>(m.num_heads * m.head_dim);
  const model::ModelFamily& family = model::FamilyOf(m);
  double act = 2.0 * static_cast<double>(in.tokens) * h * mp.ActivationCoefficient(family.ActivationKey(), p.tp);
  act += family.WorkspaceBytes(m, p, static_cast<double>(in.tokens));
  act = std::max(act, mp.activation_floor_bytes);
  if (in.nextn > 0) act *= in.nextn + 1;
  r.activations = act * mp.activation_factor;
  r.kv_bytes_per_token =
      model::KvElemsPerToken(m, p) * perfdb::KvCacheBytes(m.quant.kv) + family.SideCacheBytesPerToken(m, p);
  r.state_bytes_per_sequence = family.StateBytesPerSequence(m, p);
  const double per_request = static_cast<double>(in.seq_len) * r.kv_bytes_per_token + r.state_bytes_per_sequence;
  r.kv_cache = static_cast<double>(in.batch) * per_request;
  // NCCL buffers: the largest listed group size <= min(tp, 8).
  const int group = std::min(p.tp, 8);
  for (const auto& [gpus, bytes] : spec.reserves.nccl_bytes_by_gpus)
    if (gpus <= group) r.nccl = bytes;
  r.other = spec.reserves.other_bytes * mp.other_bytes_factor;
  r.total = r.weights + r.activations + r.kv_cache + r.nccl + r.other;
  r.capacity = spec.gpu.mem_capacity_bytes;
  r.oom = r.total >= r.capacity;
  const double non_kv = r.weights + r.activations + r.nccl + r.other;
  const KvBudget& b = mp.kv_budget;
  const double keep = (1 - b.reserved) * (1 - b.tolerance);
  r.kv_budget = b.rule == KvBudgetRule::kOfFree ? (r.capacity - non_kv) * b.fraction * keep
                                                : r.capacity * b.fraction * keep - non_kv;
  r.kv_budget = std::max(r.kv_budget, 0.0);
  r.kv_oom = r.kv_cache > r.kv_budget;
  r.max_batch = per_request > 0 ? static_cast<std::int64_t>(std::floor(r.kv_budget / per_request)) : 0;
  return r;
}

}  // namespace servecast::serve
