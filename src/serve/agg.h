#pragma once

// Engine steps and aggregated (in-flight batching) serving (AIC §3.2–3.3;
// docs/estimator.md, "Aggregated serving").

#include <cstdint>

#include "model/model_config.h"
#include "model/ops.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "serve/memory.h"
#include "serve/static.h"

namespace servecast::serve {

struct StepInputs {
  std::int64_t ctx_tokens = 0;  // C: prefill tokens in the step
  std::int64_t gen_tokens = 0;  // G: decoding requests in the step
  std::int64_t isl = 1024, osl = 2, prefix = 0;
  int nextn = 0;
};

// One mixed step: the non-attention context ops over C + G·(nextn+1) tokens as
// one sequence; context attention for ceil(C/isl) requests of isl tokens, divided
// by ceil(isl/C) (a chunk's share); decode attention for G requests at KV length
// isl + osl/2 + 1.
PhaseEstimate MixedStep(const model::OpList& ops, const Database& db, const StepInputs& in);
// One decode-only step: every generation op for G·(nextn+1) rows at KV length isl + osl/2 + 1.
PhaseEstimate DecodeStep(const model::OpList& ops, const Database& db, const StepInputs& in);

struct AggInputs {
  std::int64_t batch = 1;       // concurrent requests per worker (per attention-DP rank)
  std::int64_t ctx_tokens = 0;  // prefill token budget per step (0: isl; the default: AggProfile::CtxTokens)
  std::int64_t isl = 1024, osl = 128, prefix = 0;
  int nextn = 0;
  double mtp_accepted = 0;
};

struct AggEstimate {
  double ttft_ms = 0, tpot_ms = 0, request_latency_ms = 0;
  double mixed_step_ms = 0, decode_step_ms = 0;
  double mixed_steps = 0, decode_steps = 0, mixed_steps_in_tpot = 0;
  std::int64_t mix_gen_tokens = 0;
  double tokens_per_s = 0, tokens_per_s_gpu = 0, tokens_per_s_user = 0, seq_per_s = 0;
  std::int64_t concurrency = 0;
  int gpus = 1;
  PhaseEstimate mixed, decode;  // the two step kinds, per op
  MemoryBreakdown memory;
};

AggEstimate RunAgg(const model::ModelConfig& m, const model::ParallelConfig& p, const model::OpList& ops,
                   const Database& db, const EngineProfile& engine, const AggInputs& in);

struct DisaggInputs {
  std::int64_t isl = 1024, osl = 128, prefix = 0;
  int nextn = 0;
  double mtp_accepted = 0;
  std::int64_t prefill_batch = 1, decode_batch = 1;
  int prefill_workers = 1, decode_workers = 1;
  int stride = 32;
};

struct DisaggEstimate {
  double ttft_ms = 0, tpot_ms = 0, request_latency_ms = 0;
  double prefill_seq_per_s = 0, decode_seq_per_s = 0;  // per worker
  double seq_per_s = 0, tokens_per_s = 0, tokens_per_s_gpu = 0, tokens_per_s_user = 0;
  std::int64_t concurrency = 0;
  int gpus = 0;
  StaticEstimate prefill, decode;  // the workers' static estimates (corrections applied)
};

// Prefill worker: static context pass x prefill correction; decode worker:
// static decode x decode correction; throughput = min(degraded prefill rate x
// workers, degraded decode rate x workers); TTFT x the queueing correction.
DisaggEstimate RunDisagg(const model::ModelConfig& m, const model::ParallelConfig& prefill_par,
                         const model::OpList& prefill_ops, const model::ParallelConfig& decode_par,
                         const model::OpList& decode_ops, const Database& db, const EngineProfile& engine,
                         const DisaggInputs& in);

}  // namespace servecast::serve
