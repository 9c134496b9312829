#pragma once

// A request-level discrete-event simulation of engine instances (one per
// attention-DP rank) serving a stream of requests (docs/estimator.md,
// "Simulated serving"): continuous batching under the engine's token budget and
// running-request limit, chunked prefill, a KV cache of fixed-size blocks with
// admission and preemption by recompute, and a step time from the step's batch
// composition. Aggregated: one instance runs each request whole. Disaggregated:
// prefill instances run prompts to their first token and hand each request off
// (latency + KV transfer) to a decode instance. The step cost is a function (StepCostFn); TableStepCost composes
// it from the perf tables the way MixedStep / DecodeStep do, memoized over
// bucketed shapes.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/ops.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "serve/memory.h"
#include "model/model_config.h"

namespace servecast::serve {

// One prefill chunk of a step: `tokens` new prompt tokens after `done` already
// in the KV cache (earlier chunks).
struct PrefillChunk {
  std::int64_t tokens = 0, done = 0;
};

// What one engine step computes.
struct StepBatch {
  std::vector<PrefillChunk> prefill;
  std::int64_t decode = 0;     // requests decoding one token each
  std::int64_t decode_kv = 0;  // their KV lengths, summed (tokens before this step's)
  std::int64_t Requests() const { return static_cast<std::int64_t>(prefill.size()) + decode; }
  std::int64_t Tokens() const {
    std::int64_t t = decode;
    for (const auto& c : prefill) t += c.tokens;
    return t;
  }
};

// The GPU time of one step in ms.
using StepCostFn = std::function<double(const StepBatch&)>;

// The step cost from the tables, composed as the closed-form in-flight batching
// composes its steps (serve/agg.h):
//   decode only: the generation op list for `decode` rows at the mean KV length + 1;
//   with prefill: the context op list's non-attention ops over all the step's tokens
//   as one sequence, context attention per chunk (batch 1, `tokens` new after
//   `done`: the table at done + tokens x the chunk's share), and decode attention
//   of the decoding rows at their mean KV length + 1;
// x the profile's mix_efficiency for steps with prefill. Token counts and KV
// lengths are bucketed (exact to 128, then 64 steps per octave, rounded to the
// nearest: at most 0.8% off) and every part is memoized.
class TableStepCost {
 public:
  TableStepCost(const model::OpList& ops, const Database& db, const AggProfile& agg);
  double operator()(const StepBatch& b);
  std::size_t Evaluations() const { return evaluations_; }

 private:
  double Part(int kind, std::int64_t a, std::int64_t b);
  const model::OpList& ops_;
  const Database& db_;
  double mix_efficiency_ = 1;
  std::unordered_map<std::uint64_t, double> memo_;
  std::size_t evaluations_ = 0;
};

// Bucketed value used by TableStepCost (exposed for tests).
std::int64_t ShapeBucket(std::int64_t x);

struct SimWorkload {
  enum class Arrival { kClosedLoop, kPoisson } arrival = Arrival::kClosedLoop;
  std::int64_t concurrency = 1;  // closed loop: clients, each with one request in flight
  double rate_per_s = 0;         // Poisson: mean arrivals per second
  std::int64_t requests = 10;    // measured requests
  std::int64_t warmup = 2;       // requests issued before them, excluded from the statistics
  std::int64_t isl = 1024, osl = 128;
  double range_ratio = 0.8;  // lengths uniform in [ceil(ratio x L), L] (1: fixed)
  std::uint64_t seed = 1;
};

struct SimStats {
  double mean = 0, median = 0, p90 = 0;
};

struct SimResult {
  std::int64_t measured = 0;  // requests in the statistics
  SimStats ttft_ms, tpot_ms, e2e_ms;
  double tokens_per_s = 0;       // output tokens / s of this instance, over the measured span
  double tokens_per_s_user = 0;  // 1000 / mean TPOT
  double seq_per_s = 0;
  double duration_ms = 0;         // simulated time, first measured arrival to last measured finish
  std::int64_t steps = 0;         // engine steps simulated (all requests)
  std::int64_t kv_blocks = 0;     // KV-cache capacity of the instance
  std::int64_t kv_block_tokens = 0;
  double kv_peak_fraction = 0;    // most blocks in use at once / capacity
  bool kv_saturated = false;      // an admission waited for KV blocks, or a request was preempted
  std::int64_t preemptions = 0;   // requests preempted (recomputed later)
  std::int64_t max_running = 0;   // most requests running at once
  double mean_running = 0;        // time-weighted mean of the running requests
  bool running_limit_hit = false; // a request waited because max_num_seqs were running
  bool admitted_all = true;       // closed loop: the engine ran every client's request at once at some point
  std::vector<std::string> notes;
};

// Runs the simulation. `engine.sim` gives the scheduler; `kv_tokens` the KV
// capacity in tokens (0: unlimited); `host_ms_per_request` the host floor of a
// step (AggProfile::step_ms_per_request). UsageError for a workload that is not
// runnable (concurrency or requests < 1, osl < 2, a prompt no KV cache holds).
SimResult Simulate(const SimProfile& engine, const SimWorkload& w, std::int64_t kv_tokens, double host_ms_per_request,
                   const StepCostFn& cost);

// One aggregated deployment simulated: an instance per attention-DP rank (x pp
// for throughput, as the closed form counts), each serving `w` (its share of the
// clients), the KV capacity from the memory model (the engine's KV budget /
// bytes per token, activations sized by the step budget), the step cost from
// the tables (TableStepCost) and the host floor of the agg profile.
// ConfigError when the profile has no `sim:` section.
struct SimDeployment {
  SimResult sim;
  std::int64_t kv_tokens = 0;  // per instance
  double tokens_per_s = 0, tokens_per_s_gpu = 0, seq_per_s = 0;
  int gpus = 1;
  std::int64_t concurrency = 0;  // clients over all instances
  MemoryBreakdown memory;
  std::size_t cost_evaluations = 0;  // distinct step shapes evaluated on the tables
};
SimDeployment SimulateAgg(const model::ModelConfig& m, const model::ParallelConfig& p, const model::OpList& ops,
                          const Database& db, const EngineProfile& engine, const SimWorkload& w);

// ---------------------------------------------------------------- disaggregated

// Prefill and decode instances coupled by hand-offs (SimulateDisaggInstances):
// clients send to the least-loaded prefill instance (fewest requests routed there
// and not yet retired; Poisson arrivals, all routed up front, go round-robin); a
// prefill instance runs a prompt to its first token; the request reaches the
// least-loaded decode instance `handoff_ms + transfer_ms_per_token x isl` later,
// which is also when the client sees its first token (TTFT); the decode instance
// admits it with its prompt's KV and runs it to its last token; a closed-loop
// client then sends its next request.
struct DisaggSimSetup {
  SimProfile prefill_engine, decode_engine;  // each side's scheduler (max_num_seqs: its running limit)
  int prefill_instances = 1, decode_instances = 1;
  std::int64_t prefill_kv_tokens = 0, decode_kv_tokens = 0;  // per instance (0: unlimited)
  double prefill_host_ms_per_request = 0, decode_host_ms_per_request = 0;
  StepCostFn prefill_cost, decode_cost;
  double transfer_ms_per_token = 0;  // KV transfer of one prompt token
  double handoff_ms = 0;             // the rest of the hand-off (engine profile sim.disagg_handoff_ms)
};

struct DisaggSimResult {
  // The requests' statistics over the whole deployment; the instance counters
  // (steps, KV, preemptions, running) of the decode side (max or sum over its
  // instances); admitted_all: no decode admission waited for its limit or blocks.
  SimResult sim;
  double prefill_utilization = 0;  // busy time / simulated time, mean over prefill instances
  std::int64_t prefill_max_queue = 0, prefill_max_running = 0, prefill_steps = 0;
  bool prefill_kv_saturated = false;
};
DisaggSimResult SimulateDisaggInstances(const DisaggSimSetup& s, const SimWorkload& w);

struct DisaggSimInputs {
  int prefill_workers = 1, decode_workers = 1;
  std::int64_t prefill_batch = 0;  // a prefill rank's running limit (0: the engine's sim.max_num_seqs)
  std::int64_t decode_batch = 0;   // a decode rank's running limit (0: the engine's)
};

// One disaggregated deployment simulated: instances = workers x dp x pp per side,
// KV capacities from the memory model, step costs from the tables, the KV
// transfer at the per-GPU NVLink bandwidth when all workers fit one node, else the
// network's; `w.concurrency` clients over the whole deployment.
struct SimDisaggDeployment {
  DisaggSimResult result;
  std::int64_t prefill_kv_tokens = 0, decode_kv_tokens = 0;  // per instance
  MemoryBreakdown prefill_memory, decode_memory;
  double transfer_ms = 0;  // KV transfer of a prompt of isl tokens
  bool intra_node = false;
  double tokens_per_s = 0, tokens_per_s_gpu = 0, seq_per_s = 0;
  int gpus = 0;
  std::int64_t concurrency = 0;
  std::size_t cost_evaluations = 0;
};
SimDisaggDeployment SimulateDisagg(const model::ModelConfig& m, const model::ParallelConfig& prefill_par,
                                   const model::OpList& prefill_ops, const model::ParallelConfig& decode_par,
                                   const model::OpList& decode_ops, const Database& db, const EngineProfile& engine,
                                   const DisaggSimInputs& in, const SimWorkload& w);

}  // namespace servecast::serve
