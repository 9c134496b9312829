#pragma once

// The static estimate (AIC §3.1; docs/estimator.md, "Static estimate"): one batch
// of `batch` requests prefilled together, then decoded together to `osl` tokens.

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/ops.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "serve/evaluate.h"
#include "serve/memory.h"

namespace servecast::serve {

struct Workload {
  std::int64_t batch = 1;   // requests per attention-DP rank
  std::int64_t isl = 1024;  // input tokens per request (prefix included)
  std::int64_t osl = 128;   // output tokens per request
  std::int64_t prefix = 0;  // cached prefix tokens (not recomputed)
  int nextn = 0;            // MTP draft tokens per step
  double mtp_accepted = 0;  // mean accepted draft tokens per step (progress = 1 + this)
  int stride = 32;          // decode quadrature stride (1 = every step)
};

// One op's share of a phase.
struct OpLine {
  std::string name;
  model::OpKind kind = model::OpKind::kGemm;
  double latency_ms = 0;  // over the phase: latency x occurrences (x decode steps)
  double sol_ms = 0;      // the same sum of rooflines
  double energy_wms = 0;  // the same sum of energies (W*ms; 0 for ops without power data)
  double share = 0;       // latency_ms / phase latency
  std::string source;     // of the first evaluation (context) or the least exact over steps
  std::string detail;     // of the first evaluation
  int overlap = 0;        // the op's overlap group (model::Op::overlap): 0 adds to the phase
};

struct PhaseEstimate {
  double latency_ms = 0;
  double sol_ms = 0;
  double math_ms = 0;     // FLOPs / peak, summed
  double energy_wms = 0;  // sum of the ops' energies (W*ms)
  std::vector<OpLine> ops;
  // Mean power over the phase: energy / latency (W); 0 for an empty phase.
  double PowerW() const { return latency_ms > 0 ? energy_wms / latency_ms : 0.0; }
  // Adds `part`'s totals x weight (its op lines are the caller's to merge).
  void AddTotals(const PhaseEstimate& part, double weight) {
    latency_ms += part.latency_ms * weight;
    sol_ms += part.sol_ms * weight;
    math_ms += part.math_ms * weight;
    energy_wms += part.energy_wms * weight;
  }
  // Sets each op line's share of latency_ms (0 for a phase that takes no time).
  void SetShares() {
    for (OpLine& l : ops) l.share = latency_ms > 0 ? l.latency_ms / latency_ms : 0;
  }
};

struct StaticEstimate {
  PhaseEstimate context;     // one prefill pass
  PhaseEstimate generation;  // the whole decode phase (osl - 1 steps)
  std::int64_t decode_steps_evaluated = 0;
  double ttft_ms = 0, tpot_ms = 0, request_latency_ms = 0;
  double seq_per_s = 0, tokens_per_s = 0, tokens_per_s_gpu = 0, tokens_per_s_user = 0;
  std::int64_t concurrency = 0;
  int gpus = 1;
  // Bounds next to the answer: prefill math at peak rate; one decode step
  // streaming every weight of a GPU once at peak memory bandwidth.
  double ttft_compute_bound_ms = 0;
  double tpot_weight_bound_ms = 0;
  MemoryBreakdown memory;
};

// Validates the workload (UsageError naming the field).
void ValidateWorkload(const Workload& w);

// Which ops of a list a pass evaluates.
enum class OpFilter { kAll, kExceptAttention, kContextAttentionOnly, kGenerationAttentionOnly };

// One pass of `ops` at `shape` (x `correction` on every op's latency; energy is
// the tables' power x the uncorrected latency).
PhaseEstimate EvaluatePass(const std::vector<model::Op>& ops, const Database& db, const PassShape& shape,
                           double correction = 1.0, OpFilter filter = OpFilter::kAll);

// Which phases a static estimate covers, and the latency corrections applied to
// every op of each (disaggregated workers: prefill x 1.1, decode x 1.08).
struct StaticOptions {
  enum class Phases { kBoth, kContextOnly, kGenerationOnly } phases = Phases::kBoth;
  double context_correction = 1.0;
  double generation_correction = 1.0;
};

// kBoth: tokens/s counts osl tokens per request; kContextOnly: 1 (the request
// leaves prefill), request latency = TTFT; kGenerationOnly: osl - 1, TTFT = 0.
StaticEstimate RunStatic(const model::ModelConfig& m, const model::ParallelConfig& p, const model::OpList& ops,
                         const Database& db, const EngineProfile& engine, const Workload& w,
                         const StaticOptions& options = {});

}  // namespace servecast::serve
