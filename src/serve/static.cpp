#include "serve/static.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace servecast::serve {

namespace {

// Sources from most to least exact; a phase line keeps the least exact one seen.
int SourceRank(const std::string& s) {
  static const std::map<std::string, int> rank = {{"silicon", 0},   {"interpolated", 1}, {"mixed", 2},
                                                  {"estimated", 3}, {"extrapolated", 4}, {"empirical", 5},
                                                  {"sol", 6},         {"roofline", 7}};
  auto it = rank.find(s);
  return it == rank.end() ? 8 : it->second;
}

void Accumulate(PhaseEstimate& into, const PhaseEstimate& pass, double weight) {
  if (into.ops.empty()) {
    into.ops = pass.ops;
    for (OpLine& l : into.ops) {
      l.latency_ms *= weight;
      l.sol_ms *= weight;
      l.energy_wms *= weight;
    }
  } else {
    for (std::size_t i = 0; i < into.ops.size(); ++i) {
      into.ops[i].latency_ms += pass.ops[i].latency_ms * weight;
      into.ops[i].sol_ms += pass.ops[i].sol_ms * weight;
      into.ops[i].energy_wms += pass.ops[i].energy_wms * weight;
      if (SourceRank(pass.ops[i].source) > SourceRank(into.ops[i].source)) into.ops[i].source = pass.ops[i].source;
    }
  }
  into.AddTotals(pass, weight);
}

}  // namespace

void ValidateWorkload(const Workload& w) {
  if (w.batch < 1) throw UsageError("--batch must be >= 1 (got " + std::to_string(w.batch) + ")");
  if (w.isl < 1) throw UsageError("--isl must be >= 1 (got " + std::to_string(w.isl) + ")");
  if (w.osl < 1) throw UsageError("--osl must be >= 1 (got " + std::to_string(w.osl) + ")");
  if (w.prefix < 0 || w.prefix >= w.isl)
    throw UsageError("--prefix must lie in [0, isl) (got " + std::to_string(w.prefix) + " with isl " +
                     std::to_string(w.isl) + ")");
  if (w.stride < 1) throw UsageError("--stride must be >= 1");
  if (w.nextn < 0) throw UsageError("--nextn must be >= 0");
  if (w.mtp_accepted < 0 || w.mtp_accepted > w.nextn)
    throw UsageError("--mtp-accepted must lie in [0, nextn]");
}

PhaseEstimate EvaluatePass(const std::vector<model::Op>& ops, const Database& db, const PassShape& shape,
                           double correction, OpFilter filter) {
  PhaseEstimate p;
  p.ops.reserve(ops.size());
  // An overlap region (ops with overlap 1 or 2, contiguous) adds max(group 1,
  // group 2) of latency and of SOL; energy adds up (both streams draw power).
  double region_lat[3] = {0, 0, 0}, region_sol[3] = {0, 0, 0};
  std::size_t region_first = 0;
  bool in_region = false;
  auto close_region = [&] {
    if (!in_region) return;
    p.latency_ms += std::max(region_lat[1], region_lat[2]);
    p.sol_ms += std::max(region_sol[1], region_sol[2]);
    const int hidden = region_lat[1] >= region_lat[2] ? 2 : 1;
    for (std::size_t i = region_first; i < p.ops.size(); ++i)
      p.ops[i].detail += hidden == p.ops[i].overlap ? " [overlapped: hidden behind the other stream]"
                                                    : " [overlapped: the longer stream]";
    region_lat[1] = region_lat[2] = region_sol[1] = region_sol[2] = 0;
    in_region = false;
  };
  for (const model::Op& op : ops) {
    const bool ctx_attn = op.kind == model::OpKind::kContextAttention || op.kind == model::OpKind::kContextMla;
    const bool gen_attn = op.kind == model::OpKind::kGenerationAttention || op.kind == model::OpKind::kGenerationMla;
    if ((filter == OpFilter::kExceptAttention && (ctx_attn || gen_attn)) ||
        (filter == OpFilter::kContextAttentionOnly && !ctx_attn) ||
        (filter == OpFilter::kGenerationAttentionOnly && !gen_attn))
      continue;
    const OpCost c = EvaluateOp(op, db, shape);
    OpLine l;
    l.name = op.name;
    l.kind = op.kind;
    l.overlap = op.overlap;
    l.latency_ms = c.latency_ms * op.scale * correction;
    l.sol_ms = c.sol_ms * op.scale;
    l.energy_wms = c.energy_wms * op.scale;
    l.source = c.source;
    l.detail = c.detail;
    if (op.overlap == 0) {
      close_region();
      p.latency_ms += l.latency_ms;
      p.sol_ms += l.sol_ms;
    } else {
      if (!in_region) region_first = p.ops.size();
      in_region = true;
      region_lat[op.overlap == 1 ? 1 : 2] += l.latency_ms;
      region_sol[op.overlap == 1 ? 1 : 2] += l.sol_ms;
    }
    p.energy_wms += l.energy_wms;
    p.math_ms += c.math_ms * op.scale;
    p.ops.push_back(std::move(l));
  }
  close_region();
  return p;
}

StaticEstimate RunStatic(const model::ModelConfig& m, const model::ParallelConfig& p, const model::OpList& ops,
                         const Database& db, const EngineProfile& engine, const Workload& w,
                         const StaticOptions& options) {
  ValidateWorkload(w);
  using Phases = StaticOptions::Phases;
  const bool with_context = options.phases != Phases::kGenerationOnly;
  const bool with_generation = options.phases != Phases::kContextOnly;
  StaticEstimate r;
  if (with_context) {
    PassShape ctx;
    ctx.context = true;
    ctx.batch = w.batch;
    ctx.seq = w.isl - w.prefix;
    ctx.prefix = w.prefix;
    r.context = EvaluatePass(ops.context, db, ctx, options.context_correction);
    r.context.SetShares();
  }

  // Decode: a left Riemann sum over steps i = 0, stride, ... < osl - 1, each at KV
  // length isl + i + 1 and weighted by the steps it stands for.
  const std::int64_t steps = with_generation ? w.osl - 1 : 0;
  for (std::int64_t i = 0; i < steps; i += w.stride) {
    PassShape gen;
    gen.context = false;
    gen.batch = w.batch * (w.nextn + 1);
    gen.seq = w.isl + i + 1;
    const double weight = static_cast<double>(std::min<std::int64_t>(w.stride, steps - i));
    Accumulate(r.generation, EvaluatePass(ops.generation, db, gen, options.generation_correction), weight);
    ++r.decode_steps_evaluated;
  }
  r.generation.SetShares();

  const double progress = 1.0 + w.mtp_accepted;
  r.ttft_ms = r.context.latency_ms;
  r.tpot_ms = steps > 0 ? r.generation.latency_ms / static_cast<double>(steps) / progress : 0;
  r.request_latency_ms = r.ttft_ms + r.tpot_ms * static_cast<double>(steps);
  r.gpus = p.GpusPerWorker();
  r.concurrency = w.batch * p.dp;
  r.seq_per_s = r.request_latency_ms > 0
                    ? static_cast<double>(w.batch * p.dp) / r.request_latency_ms * 1000.0 * p.pp
                    : 0;
  const double tokens_per_request = options.phases == Phases::kBoth          ? static_cast<double>(w.osl)
                                    : options.phases == Phases::kContextOnly ? 1.0
                                                                             : static_cast<double>(steps);
  r.tokens_per_s = r.seq_per_s * tokens_per_request;
  r.tokens_per_s_gpu = r.tokens_per_s / r.gpus;
  r.tokens_per_s_user = r.tpot_ms > 0 ? 1000.0 / r.tpot_ms : 0;

  r.ttft_compute_bound_ms = r.context.math_ms;
  // Weights one decode step reads: every dense weight, and of the experts only
  // those the step's tokens can reach (min(E, tokens x topk) of E). The embedding
  // table is not streamed (a step gathers one row per token).
  double step_bytes = 0;
  for (const model::Op& op : ops.generation) {
    if (op.kind == model::OpKind::kEmbedding) continue;
    double bytes = OpWeightBytes(op) * op.scale;
    if (op.kind == model::OpKind::kMoe && op.experts > 0) {
      const double routed = static_cast<double>(w.batch * (w.nextn + 1) * op.token_multiplier * op.topk);
      bytes *= std::min(1.0, routed / static_cast<double>(op.experts));
    }
    step_bytes += bytes;
  }
  r.tpot_weight_bound_ms = 1e3 * step_bytes / db.spec().gpu.mem_bw_bytes_per_s / progress;

  MemoryInputs mi;
  mi.batch = w.batch;
  mi.tokens = (w.isl - w.prefix) * w.batch;
  mi.seq_len = w.isl + w.osl;
  mi.nextn = w.nextn;
  r.memory = EstimateMemory(m, p, ops, db.spec(), engine, mi);
  return r;
}

}  // namespace servecast::serve
