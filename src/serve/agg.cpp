#include "serve/agg.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace servecast::serve {

namespace {

std::int64_t CeilDiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

void Append(PhaseEstimate& into, const PhaseEstimate& part, double weight) {
  for (OpLine l : part.ops) {
    l.latency_ms *= weight;
    l.sol_ms *= weight;
    l.energy_wms *= weight;
    into.ops.push_back(std::move(l));
  }
  into.AddTotals(part, weight);
}

PassShape DecodeShape(const StepInputs& in) {
  PassShape s;
  s.context = false;
  s.batch = in.gen_tokens * (in.nextn + 1);
  s.seq = in.isl + in.osl / 2 + 1;
  return s;
}

}  // namespace

PhaseEstimate MixedStep(const model::OpList& ops, const Database& db, const StepInputs& in) {
  if (in.ctx_tokens < 1 || in.isl < 1) throw UsageError("a mixed step needs ctx_tokens >= 1 and isl >= 1");
  PhaseEstimate step;
  // 1. Every non-attention context op over the step's tokens as one sequence.
  const std::int64_t cached = in.prefix * (in.ctx_tokens / in.isl);
  PassShape shared;
  shared.context = true;
  shared.batch = 1;
  shared.seq = in.ctx_tokens + in.gen_tokens * (in.nextn + 1) - cached;
  shared.prefix = cached;
  Append(step, EvaluatePass(ops.context, db, shared, 1.0, OpFilter::kExceptAttention), 1.0);
  // 2. Context attention of the prefill share.
  PassShape ctx;
  ctx.context = true;
  ctx.batch = CeilDiv(in.ctx_tokens, in.isl);
  ctx.seq = in.isl - in.prefix;
  ctx.prefix = in.prefix;
  Append(step, EvaluatePass(ops.context, db, ctx, 1.0, OpFilter::kContextAttentionOnly),
         1.0 / static_cast<double>(CeilDiv(in.isl, in.ctx_tokens)));
  // 3. Decode attention of the requests decoding in the same step.
  if (in.gen_tokens > 0)
    Append(step, EvaluatePass(ops.generation, db, DecodeShape(in), 1.0, OpFilter::kGenerationAttentionOnly), 1.0);
  step.SetShares();
  return step;
}

PhaseEstimate DecodeStep(const model::OpList& ops, const Database& db, const StepInputs& in) {
  if (in.gen_tokens < 1) throw UsageError("a decode step needs at least one request");
  PhaseEstimate step = EvaluatePass(ops.generation, db, DecodeShape(in));
  step.SetShares();
  return step;
}

AggEstimate RunAgg(const model::ModelConfig& m, const model::ParallelConfig& p, const model::OpList& ops,
                   const Database& db, const EngineProfile& engine, const AggInputs& in) {
  const AggProfile& a = engine.agg;
  const std::int64_t b = in.batch;
  const std::int64_t C = in.ctx_tokens > 0 ? in.ctx_tokens : in.isl;
  if (b < 1) throw UsageError("--batch must be >= 1");
  if (in.osl < 2) throw UsageError("aggregated serving needs --osl >= 2");
  if (in.prefix < 0 || in.prefix >= in.isl) throw UsageError("--prefix must lie in [0, isl)");
  // Its steps mix prefill and decode, which SGLang never splits over CP ranks.
  if (p.cp > 1) throw UsageError("aggregated serving is not modelled with context parallelism (" + p.ToString() + ")");
  const double progress = 1.0 + in.mtp_accepted;
  const double D = 1.0 + static_cast<double>(in.osl - 1) / progress;     // decode iterations
  const double S = std::ceil(static_cast<double>(in.isl * b) / static_cast<double>(C));  // prefill steps
  AggEstimate r;
  std::int64_t g_mix = 0, g_gen = 1;
  if (b > 1) {
    const std::int64_t ctx_requests = CeilDiv(C, in.isl);
    if (a.mix_gen_tokens == AggProfile::MixGenTokens::kVllm || S < D)
      g_mix = std::max<std::int64_t>(1, b - ctx_requests);
    else
      g_mix = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(static_cast<double>(b) / (S / D))));
    g_gen = b;
    r.mixed_steps = S;
    if (S >= D) {
      r.decode_steps = 0;
      r.mixed_steps_in_tpot = S;
    } else {
      r.decode_steps = D - S;
      r.mixed_steps_in_tpot = a.tpot_mix_steps_offset > 0 ? std::max(1.0, S - a.tpot_mix_steps_offset) : S;
    }
  } else {
    r.mixed_steps = 1;
    r.decode_steps = std::max(D - 1.0, 0.0);
    r.mixed_steps_in_tpot = 0;
  }
  r.mix_gen_tokens = g_mix;
  StepInputs si{C, g_mix, in.isl, in.osl, in.prefix, in.nextn};
  r.mixed = MixedStep(ops, db, si);
  // The host's per-request work bounds a step from below (0 unless the profile sets it).
  const double host_floor_ms = a.step_ms_per_request * static_cast<double>(b);
  r.mixed_step_ms = std::max(r.mixed.latency_ms * a.mix_efficiency, host_floor_ms);
  if (r.decode_steps > 0 || r.mixed_steps_in_tpot == 0) {
    si.gen_tokens = g_gen;
    r.decode = DecodeStep(ops, db, si);
    r.decode_step_ms = std::max(r.decode.latency_ms, host_floor_ms);
  }
  const double dispatch = a.dispatch_ms_per_layer * static_cast<double>(m.num_layers);
  const double prefill_chunks = std::ceil(static_cast<double>(in.isl) / static_cast<double>(C));
  const double prefill_step_ms = std::max(r.mixed.latency_ms, host_floor_ms);
  r.ttft_ms = (prefill_step_ms * prefill_chunks + dispatch) * a.QueueFactor(b, S) +
              a.QueueWaitMs(b, in.isl, C, prefill_step_ms);
  const double tpot_steps = r.mixed_steps_in_tpot + r.decode_steps;
  r.tpot_ms = tpot_steps > 0 ? (r.mixed_step_ms * r.mixed_steps_in_tpot + r.decode_step_ms * r.decode_steps) /
                                   tpot_steps / progress
                             : 0;
  r.request_latency_ms = r.ttft_ms + r.tpot_ms * static_cast<double>(in.osl - 1);
  const double total_ms = r.mixed_steps * r.mixed_step_ms + r.decode_steps * r.decode_step_ms;
  double out_tokens_per_s = 1000.0 / total_ms * static_cast<double>(b * (in.osl - 1));
  if (a.littles_law_cap && r.request_latency_ms > 0)
    out_tokens_per_s = std::min(out_tokens_per_s, static_cast<double>(b * (in.osl - 1)) * 1000.0 / r.request_latency_ms);
  out_tokens_per_s *= p.pp * p.dp;
  r.tokens_per_s = out_tokens_per_s;
  r.seq_per_s = out_tokens_per_s / static_cast<double>(in.osl - 1);
  r.gpus = p.GpusPerWorker();
  r.tokens_per_s_gpu = out_tokens_per_s / r.gpus;
  r.tokens_per_s_user = r.tpot_ms > 0 ? 1000.0 / r.tpot_ms : 0;
  r.concurrency = b * p.pp * p.dp;

  MemoryInputs mi;
  mi.batch = b;
  mi.tokens = a.max_num_tokens > 0 ? a.max_num_tokens : C;
  mi.seq_len = in.isl + in.osl;
  mi.nextn = in.nextn;
  r.memory = EstimateMemory(m, p, ops, db.spec(), engine, mi);
  return r;
}

DisaggEstimate RunDisagg(const model::ModelConfig& m, const model::ParallelConfig& prefill_par,
                         const model::OpList& prefill_ops, const model::ParallelConfig& decode_par,
                         const model::OpList& decode_ops, const Database& db, const EngineProfile& engine,
                         const DisaggInputs& in) {
  const DisaggProfile& d = engine.disagg;
  if (in.prefill_workers < 1 || in.decode_workers < 1) throw UsageError("disagg needs at least one worker of each kind");
  if (in.osl < 2) throw UsageError("disaggregated serving needs --osl >= 2");
  if (decode_par.cp > 1)
    throw UsageError("decode workers run no context parallelism (" + decode_par.ToString() + "): only prefill is split");
  Workload wp;
  wp.batch = in.prefill_batch;
  wp.isl = in.isl;
  wp.osl = in.osl;
  wp.prefix = in.prefix;
  wp.stride = in.stride;
  StaticOptions op;
  op.phases = StaticOptions::Phases::kContextOnly;
  op.context_correction = d.prefill_latency_correction;
  DisaggEstimate r;
  r.prefill = RunStatic(m, prefill_par, prefill_ops, db, engine, wp, op);
  Workload wd = wp;
  wd.batch = in.decode_batch;
  wd.nextn = in.nextn;
  wd.mtp_accepted = in.mtp_accepted;
  StaticOptions od;
  od.phases = StaticOptions::Phases::kGenerationOnly;
  od.generation_correction = d.decode_latency_correction;
  r.decode = RunStatic(m, decode_par, decode_ops, db, engine, wd, od);
  r.prefill_seq_per_s = r.prefill.seq_per_s;
  r.decode_seq_per_s = r.decode.seq_per_s;
  r.seq_per_s = std::min(d.prefill_rate_degradation * r.prefill_seq_per_s * in.prefill_workers,
                         d.decode_rate_degradation * r.decode_seq_per_s * in.decode_workers);
  r.tokens_per_s = r.seq_per_s * static_cast<double>(in.osl);
  r.gpus = prefill_par.GpusPerWorker() * in.prefill_workers + decode_par.GpusPerWorker() * in.decode_workers;
  r.tokens_per_s_gpu = r.tokens_per_s / r.gpus;
  r.ttft_ms = d.ttft_correction * r.prefill.ttft_ms;
  r.tpot_ms = r.decode.tpot_ms;
  r.request_latency_ms = r.ttft_ms + r.tpot_ms * static_cast<double>(in.osl - 1);
  r.tokens_per_s_user = r.tpot_ms > 0 ? 1000.0 / r.tpot_ms : 0;
  r.concurrency = in.decode_batch * decode_par.dp * in.decode_workers;
  return r;
}

}  // namespace servecast::serve
