#pragma once

// `servecast recommend` (docs/commands.md): the fewest GPUs whose best
// deployment meets the latency limits and serves a target load, either a
// request rate (requests/s over the cluster) or a number of concurrent requests.
// GPU counts are tried in ladder order and the first that meets the target wins.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "search/search.h"

namespace servecast::search {

struct RecommendTarget {
  double request_rate = 0;      // > 0: requests/s over the cluster
  std::int64_t concurrency = 0;  // > 0: concurrent requests over the cluster
};

// GPU counts tried: 1, 2, 4, 8, then every multiple of 8 up to `cap` (a cap that
// is not on the ladder ends it). cap < 1 -> empty.
std::vector<int> GpuLadder(int cap);
// Every count 1, 2, 3, ..., cap (recommend --every-gpu-count): the answer can be
// a count off the ladder (6, 12), at up to cap searches.
std::vector<int> EveryGpuCount(int cap);

// What one deployment delivers over the whole cluster: the replica's figure
// times the replicas.
double ClusterRequestRate(const Point& p);
std::int64_t ClusterConcurrency(const Point& p);

// How far a point exceeds the target: delivered / target - 1 (0.25 = 25% headroom).
double TargetMargin(const Point& p, const RecommendTarget& t);

// One GPU count of the ladder.
struct RecommendStep {
  int gpus = 0;
  bool any_meets_sla = false;  // some point of the search met the latency limits
  bool meets_target = false;
  double best_request_rate = 0;        // the best of the points meeting the limits (cluster)
  std::int64_t best_concurrency = 0;   // the same for concurrency
  std::string note;                    // why nothing was found (skip reasons), when nothing was
};

struct RecommendResult {
  bool found = false;
  int gpus = 0;           // the fewest GPUs meeting the target
  Point point;            // the deployment chosen at that count
  double margin = 0;      // TargetMargin of `point`
  std::vector<RecommendStep> steps;  // every count tried, in order
  // > 0: the walk ended at this count, before the ladder's last, because no larger
  // count of the ladder can meet the target (Recommend's `stable_gpus`); the counts
  // after it were not searched. `stopped_by_limits`: no deployment meets the latency
  // limits there (so none does at any larger count); otherwise the limits are met but
  // even the ladder's last count, `bound_gpus`, would deliver only
  // `bound_request_rate` requests/s and `bound_concurrency` concurrent requests.
  int stopped_at = 0;
  bool stopped_by_limits = false;
  int bound_gpus = 0;
  double bound_request_rate = 0;
  std::int64_t bound_concurrency = 0;
};

// Why a walk stopped before its ladder's end (RecommendResult::stopped_at), in one
// sentence; empty when it did not.
std::string StoppedNote(const RecommendResult& r);

// Among the points of `r` meeting the latency limits (every mode), the one that
// meets the target with the highest tokens/s per GPU of the cluster (ties: the
// higher tokens/s/user). nullopt when none meets it.
std::optional<Point> PickForTarget(const SearchResult& r, const RecommendTarget& t);

// Walks `ladder`, running `search(gpus)` per count, and stops at the first count
// whose pick meets the target. With `stable_gpus` > 0 (kSearchStableGpus: from that
// count on, `search` returns the same per-replica points and only their replicas,
// floor(gpus / gpus_per_replica), grow), it also stops at the first count >=
// stable_gpus that cannot lead to a find: none of its points meets the latency
// limits, or its points meeting them, replicated over the ladder's last count, still
// fall short of the target (delivered rate and concurrency only grow with the
// replicas, so no count in between meets it either). A walk that finds a count is
// the same with and without `stable_gpus`. UsageError when the target is not
// exactly one of rate or concurrency, or not positive.
RecommendResult Recommend(const std::function<SearchResult(int gpus)>& search, const RecommendTarget& t,
                          const std::vector<int>& ladder, int stable_gpus = 0);

// Of several engines' walks of one target question (nullptr: that engine was not
// walked), the index of the one that found the fewest GPUs, ties broken by its
// deployment (RanksAbove, then the earlier in the list); -1 when none found a
// count. `recommend --backend auto`.
int PickFewest(const std::vector<const RecommendResult*>& walks);

}  // namespace servecast::search
