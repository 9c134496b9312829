#pragma once

// A serving engine's constants, read from engines/<engine>.yaml (docs/estimator.md,
// "Engine profiles"): one data file per engine, so calibration changes data, not code.

#include <cstdint>
#include <map>
#include <string>

#include "model/model_config.h"
#include "model/ops.h"

namespace servecast::serve {

enum class KvBudgetRule {
  kOfFree,   // (capacity - non-KV) x fraction x (1 - reserved) x (1 - tolerance)
  kOfTotal,  // capacity x fraction x (1 - reserved) x (1 - tolerance) - non-KV
};

struct KvBudget {
  KvBudgetRule rule = KvBudgetRule::kOfFree;
  double fraction = 0.9;
  double reserved = 0;
  double tolerance = 0;
};

struct MemoryProfile {
  // Activation coefficient per model family key (ModelFamily::ActivationKey:
  // "dense", "moe") and tp bucket (1, 2, 4, 8).
  std::map<std::string, std::map<int, double>> activation_coefficients;
  double activation_floor_bytes = 0;
  double activation_factor = 1;
  double other_bytes_factor = 1;
  KvBudget kv_budget;

  // coefficient[key][largest bucket <= min(tp, 8)]; ConfigError when the key is absent.
  double ActivationCoefficient(const std::string& family_key, int tp) const;
};

// In-flight batching constants (AIC §3.3).
struct AggProfile {
  enum class MixGenTokens { kBase, kVllm } mix_gen_tokens = MixGenTokens::kBase;
  double mix_efficiency = 1;
  int tpot_mix_steps_offset = 0;  // mixed steps counted in TPOT: max(1, n - offset) (0: n)
  // linear, log2_batch: TTFT = (own prefill + dispatch) x QueueFactor (AIC's).
  // prefill_queue: TTFT = own prefill + dispatch + QueueWaitMs: the prefill work
  // of queue_share x (b - 1) other requests ahead of the arriving one.
  enum class QueueRule { kLinear, kLog2Batch, kPrefillQueue } queue_rule = QueueRule::kLinear;
  double queue_base = 2, queue_pivot = 3, queue_slope = 0.05, queue_max = 4;
  double queue_share = 0;  // prefill_queue: share of the other requests queued ahead
  double dispatch_ms_per_layer = 0;
  // Host scheduling floor: an in-flight batching step takes at least this many ms
  // per request in it (the engine's per-request work between steps, which its
  // overlap scheduling hides behind GPU steps that are longer). 0: none.
  double step_ms_per_request = 0;
  bool littles_law_cap = false;
  std::int64_t max_num_tokens = 0;      // tokens sizing agg activations; 0 = the prefill budget
  std::int64_t default_ctx_tokens = 0;  // the engine's prefill budget per step when none is given; 0 = isl

  // The TTFT queueing factor at batch b with S prefill steps (1 for prefill_queue).
  double QueueFactor(std::int64_t batch, double prefill_steps) const;
  // prefill_queue: the wait before a request's prefill, in ms, at batch b when a
  // step of `step_ms` prefills `ctx_tokens` of prompts of `isl` tokens:
  // queue_share x (b - 1) x isl / ctx_tokens x step_ms. 0 for the other rules.
  double QueueWaitMs(std::int64_t batch, std::int64_t isl, std::int64_t ctx_tokens, double step_ms) const;
  // The prefill budget per step when none is given: isl when default_ctx_tokens
  // is 0; else the budget in whole prompts (at most `batch` of them, at least
  // one) when a prompt fits, and the budget itself (chunked prefill) when not.
  std::int64_t CtxTokens(std::int64_t isl, std::int64_t batch) const;
};

// Disaggregated serving constants (AIC §3.4).
struct DisaggProfile {
  double prefill_latency_correction = 1.1;
  double decode_latency_correction = 1.08;
  double ttft_correction = 1.8;
  double prefill_rate_degradation = 0.9;
  double decode_rate_degradation = 0.92;
};

// The scheduler of one engine instance as the simulation models it
// (serve/simulate.h; the `sim:` section of engines/<engine>.yaml, each value the
// engine's default from its source code).
struct SimProfile {
  bool present = false;               // the profile has a `sim:` section
  std::int64_t max_num_tokens = 8192;  // token budget of one step (prefill chunk tokens + decode tokens)
  std::int64_t max_num_seqs = 0;       // most requests running at once (0: no limit but the KV cache)
  bool chunked_prefill = true;         // a prompt may be split over steps
  bool mixed_batches = true;           // prefill chunks share a step with decoding requests (else: prefill-only
                                       // steps, run first whenever a request waits)
  std::int64_t kv_block_tokens = 16;   // tokens per KV-cache block
  // on_demand: blocks for the tokens computed so far, preempting the newest
  // running request (recomputed later) when a step needs more than are free;
  // reserve_full: a request is admitted only with blocks for isl + osl, never preempted.
  enum class Admission { kOnDemand, kReserveFull } admission = Admission::kOnDemand;
  // Disaggregated serving: the time from a prompt's last prefill step to its
  // request reaching a decode instance, beyond the KV transfer itself (routing,
  // the transfer's setup and completion notice, the decode side's admission poll).
  double disagg_handoff_ms = 0;
};

struct EngineProfile {
  model::Engine engine = model::Engine::kTrtllm;
  std::string source_file;
  MemoryProfile memory;
  AggProfile agg;
  DisaggProfile disagg;
  SimProfile sim;
};

// Reads and validates one profile (unknown keys, missing values and bad numbers ->
// ConfigError with file, line and key).
EngineProfile LoadEngineProfile(const std::string& path);
// The profile of `engine` in a calibration: "" or "servecast" = engines_dir/<engine>.yaml
// (servecast's defaults); any other name = engines_dir/<calibration>/<engine>.yaml
// ("aic": AIConfigurator's constants, kept for parity). Unknown -> UsageError
// listing the calibrations present.
EngineProfile LoadEngineProfileByName(const std::string& engines_dir, model::Engine engine,
                                      const std::string& calibration = "");

}  // namespace servecast::serve
