#pragma once

// The deployment search behind `servecast default` (AIC §4; docs/search.md):
// enumerate parallel configurations, sweep batch sizes (and prefill budgets) for
// aggregated serving, sweep prefill and decode workers and match their rates for
// disaggregated serving, filter by the latency limits, take the Pareto frontier
// of throughput per GPU against speed per user, and pick the best deployments.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/model_config.h"
#include "model/ops.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "serve/session.h"

namespace servecast::search {

// The GPU count from which RunSearch's per-replica deployments no longer change:
// a worker takes at most 16 GPUs (EnumerateParallel) and a disaggregated replica at
// most 128 (its replica sizes), so at 128 GPUs and more every count evaluates the
// same replicas and only their number, floor(total / replica GPUs), grows.
inline constexpr int kSearchStableGpus = 128;

struct SearchInputs {
  model::Engine engine = model::Engine::kTrtllm;
  int total_gpus = 8;
  std::int64_t isl = 4000, osl = 1000, prefix = 0;
  double ttft_ms = 2000;             // limit on time to first token
  double tpot_ms = 30;               // limit on time per output token
  double request_latency_ms = 0;     // > 0: limit on request latency instead of TPOT
  int top_n = 5;
  bool agg = true, disagg = true;    // modes to search (disagg needs >= 2 GPUs)
  std::string moe_distribution;
  int nextn = 0;
  double mtp_accepted = 0;
  // More MTP settings searched in the same pool (families with the MTP knob):
  // (draft tokens, mean accepted per step) each, e.g. from --mtp-accept-rates.
  std::vector<std::pair<int, double>> mtp_variants;
  // The limits must hold: points over the TPOT (or request-latency) limit are
  // dropped before the frontier and the pick (counted as skips), so the frontier,
  // the tables and the choice hold only points within the limits, and a mode with
  // none has no best (no nearest shown). Off: TPOT is judged at pick time.
  bool strict_sla = false;
  // Simulate each mode's frontier and best points (serve/simulate.h) after the
  // closed form has screened and ranked them: the points gain `sim`; the ranking
  // and the choice stay the closed form's.
  bool simulate = false;
};

// A point simulated request by request (SearchInputs::simulate): closed-loop
// clients at the point's concurrency (agg: its batch per worker; disagg: the decode
// batch x decode ranks), 1,000 measured requests after 2 x c warm-up, lengths in
// [0.8 L, L]; means per request.
struct PointSim {
  bool simulated = false;
  std::string failure;  // why not (MTP, prefix hits, a decode system of its own, a simulation error)
  double ttft_ms = 0, tpot_ms = 0, request_latency_ms = 0;
  double tokens_per_s_gpu = 0;  // per GPU of the cluster, as Point::tokens_per_s_gpu_cluster
  double tokens_per_s_user = 0;
  bool kv_saturated = false, admitted_all = true;
  double prefill_utilization = -1;  // disagg: busy fraction of the prefill instances
  bool meets_sla = false;           // the simulated means within the limits
};

enum class Mode { kAgg, kDisagg };
const char* ModeName(Mode m);

// One evaluated deployment (one replica's configuration, replicated over the GPUs).
struct Point {
  Mode mode = Mode::kAgg;
  // agg: `par`, `batch` (concurrency per worker), `ctx_tokens`.
  // disagg: prefill `par` x `prefill_workers` at `prefill_batch`; decode `decode_par`
  // x `decode_workers` at `batch`.
  model::ParallelConfig par, decode_par;
  std::int64_t batch = 0, ctx_tokens = 0, prefill_batch = 0;
  int prefill_workers = 0, decode_workers = 0;
  int gpus_per_replica = 0;  // GPUs of one replica (agg: one worker)
  double ttft_ms = 0, tpot_ms = 0, request_latency_ms = 0;
  double tokens_per_s_gpu = 0;          // per GPU of the replica
  double tokens_per_s_gpu_cluster = 0;  // per GPU of the cluster, idle leftover GPUs counted
  double tokens_per_s_user = 0;
  double seq_per_s = 0;                 // per replica
  std::int64_t concurrency = 0;         // per replica
  int replicas = 0;                     // floor(total GPUs / GPUs per replica)
  double memory_gib = 0;                // per GPU (disagg: the larger side)
  bool meets_sla = false;
  int nextn = 0;                        // MTP draft tokens per decode step (0: none)
  double mtp_accepted = 0;              // with nextn: mean accepted draft tokens per step
  std::optional<PointSim> sim;          // SearchInputs::simulate, frontier and best points only
  std::string Parallel() const;         // "tp4pp1dp1etp1ep4" / "p:tp1...cp2 d:tp4..." (+ " mtp1" with MTP)
};

struct ModeResult {
  Mode mode = Mode::kAgg;
  std::vector<Point> points;          // every feasible point (TTFT within the limit, fits memory)
  std::vector<std::size_t> frontier;  // indices into points, by tokens/s/user ascending
  std::vector<std::size_t> best;      // top-N, best first (one per parallel config)
  bool best_meets_sla = false;        // false: nothing met the limits; best = nearest
  std::size_t parallel_configs = 0;   // enumerated (after model and engine rules)
  std::size_t evaluated = 0;          // engine estimates run
  std::map<std::string, std::size_t> skipped;  // reason -> count (missing data, OOM, rule)
  // Of the configurations skipped as out of memory, the one that needs the least
  // memory per GPU (what it needs, of what a GPU has): says how far the model is
  // from fitting when nothing does. Absent when none ran out of memory.
  struct OutOfMemory {
    std::string parallel;     // "tp8 pp1 dp1 moe_tp1 moe_ep8" (prefill / decode worker: prefixed)
    double needed_gib = 0;    // per GPU, at the smallest batch tried
    double weights_gib = 0;   // of which weights
    double capacity_gib = 0;  // one GPU's memory
  };
  std::optional<OutOfMemory> closest_oom;
};

struct SearchResult {
  std::vector<ModeResult> modes;
  int chosen = -1;           // index into modes of the better mode's best point; -1 none
  double chosen_ratio = 0;   // best of chosen / best of the other (0 when only one)
  double seconds = 0;
};

// The chosen deployment: the chosen mode's best point; nullptr when none.
const Point* ChosenPoint(const SearchResult& r);
// The chosen deployment when it meets the limits (the chosen mode's best_meets_sla);
// nullptr otherwise.
const Point* MeetingPoint(const SearchResult& r);
// The order every pick between deployments uses: more tokens/s per GPU of the
// cluster, then more tokens/s/user. True when `a` ranks above `b`.
bool RanksAbove(const Point& a, const Point& b);
// Of several engines' searches of one deployment question (nullptr: that engine was
// not searched), the index of the one whose chosen deployment meets the limits with
// the highest tokens/s per GPU of the cluster (ties: tokens/s/user, then the earlier
// in the list: RanksAbove); -1 when none meets them. `--backend auto` of default and generate.
int PickMeeting(const std::vector<const SearchResult*>& results);

// Parallel configurations of one worker per AIC's enumeration rules for `total_gpus`
// and the family's search knobs (dense: tp in {1,2,4,8}; MoE: tp, dp, moe_tp, moe_ep in {1,2,4,8,16} with
// tp x dp = moe_tp x moe_ep and the engine's rules), each validated against the
// model. Agg workers and disagg prefill / decode workers draw from the same list
// (AIC's SGLang MoE lists take every size 1..16; servecast keeps powers of two).
std::vector<model::ParallelConfig> EnumerateParallel(const model::ModelConfig& m, model::Engine e, int total_gpus,
                                                     std::map<std::string, std::size_t>* rejected = nullptr);

// The context-parallel configurations of a prefill worker (cp in {2, 4, 8} <=
// total_gpus, tp 1, dp 1, pp 1; MoE: moe_tp x moe_ep = cp), each validated: empty
// unless the engine is sglang and the model's architecture and family have
// SGLang's prefill CP (model/family.h). Disagg prefill workers only: decode
// steps are never split, and agg steps mix the two.
std::vector<model::ParallelConfig> EnumerateContextParallel(const model::ModelConfig& m, model::Engine e,
                                                            int total_gpus,
                                                            std::map<std::string, std::size_t>* rejected = nullptr);

// The agg batch list (44 values <= 512) and the disagg decode batch list (96 values).
std::vector<std::int64_t> AggBatches();
std::vector<std::int64_t> DecodeBatches();
// Prefill budgets per agg step for `isl`.
std::vector<std::int64_t> CtxTokenBudgets(std::int64_t isl);

// Indices of the non-dominated points on (tokens/s/user up, tokens/s/gpu_cluster up),
// sorted by tokens/s/user.
std::vector<std::size_t> ParetoFrontier(const std::vector<Point>& points);

// Decode workers on another system than the prefill workers (--decode-system):
// its model (quantization as that system runs it) and its data. With one, only
// disaggregated serving is searched; replica GPUs count both systems' GPUs.
struct DecodeSide {
  const model::ModelConfig* model = nullptr;
  const serve::Database* db = nullptr;
};

SearchResult RunSearch(const model::ModelConfig& m, const serve::Database& db, const serve::EngineProfile& engine,
                       const SearchInputs& in, const DecodeSide* decode = nullptr);

// Where the chosen point's op costs came from beyond measured or interpolated rows:
// one line per (source, table), e.g. "extrapolated: context_ar_1, generation_ar_1
// (custom_allreduce_perf: all_reduce of ... over 4 GPUs (borrowed from 2 GPUs))",
// from one prefill pass (one request of isl tokens) and one decode step (the
// point's batch at isl + osl / 2 tokens) of each of its parallel configs. Empty
// when every op came from measured or interpolated rows.
std::vector<std::string> DataNotes(const Point& p, const model::ModelConfig& m, const serve::Database& db,
                                   const SearchInputs& in);

// Every table any configuration of the search may read.
std::set<serve::TableNeed> SearchNeeds(const serve::Deployment& d, const SearchInputs& in);

}  // namespace servecast::search
