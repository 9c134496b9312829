#include "search/recommend.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"

namespace servecast::search {

std::vector<int> GpuLadder(int cap) {
  std::vector<int> out;
  for (int g : {1, 2, 4, 8})
    if (g <= cap) out.push_back(g);
  for (int g = 16; g <= cap; g += 8) out.push_back(g);
  return out;
}

std::vector<int> EveryGpuCount(int cap) {
  std::vector<int> out;
  for (int g = 1; g <= cap; ++g) out.push_back(g);
  return out;
}

double ClusterRequestRate(const Point& p) { return p.seq_per_s * p.replicas; }
std::int64_t ClusterConcurrency(const Point& p) { return p.concurrency * p.replicas; }

double TargetMargin(const Point& p, const RecommendTarget& t) {
  if (t.request_rate > 0) return ClusterRequestRate(p) / t.request_rate - 1.0;
  if (t.concurrency > 0) return static_cast<double>(ClusterConcurrency(p)) / static_cast<double>(t.concurrency) - 1.0;
  return 0;
}

namespace {

bool Meets(const Point& p, const RecommendTarget& t) {
  if (t.request_rate > 0) return ClusterRequestRate(p) >= t.request_rate;
  return ClusterConcurrency(p) >= t.concurrency;
}

}  // namespace

std::string StoppedNote(const RecommendResult& r) {
  if (r.stopped_at < 1) return {};
  std::string s = "counts past " + std::to_string(r.stopped_at) + " GPUs were not searched: from " +
                  std::to_string(kSearchStableGpus) +
                  " GPUs on the search evaluates the same replicas at every count (workers of at most 16 GPUs, "
                  "disaggregated replicas of at most " +
                  std::to_string(kSearchStableGpus) + ") and only their number grows; ";
  if (r.stopped_by_limits) return s + "none of them meets the limits, so no larger count does";
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "at %d GPUs those meeting the limits would deliver at most %.3f requests/s and %lld "
                "concurrent requests",
                r.bound_gpus, r.bound_request_rate, static_cast<long long>(r.bound_concurrency));
  return s + buf;
}

std::optional<Point> PickForTarget(const SearchResult& r, const RecommendTarget& t) {
  std::optional<Point> best;
  for (const ModeResult& m : r.modes)
    for (const Point& p : m.points)
      if (p.meets_sla && p.replicas > 0 && Meets(p, t) && (!best || RanksAbove(p, *best))) best = p;
  return best;
}

int PickFewest(const std::vector<const RecommendResult*>& walks) {
  int best = -1;
  for (std::size_t i = 0; i < walks.size(); ++i) {
    const RecommendResult* w = walks[i];
    if (!w || !w->found) continue;
    const RecommendResult* b = best < 0 ? nullptr : walks[static_cast<std::size_t>(best)];
    if (!b || w->gpus < b->gpus || (w->gpus == b->gpus && RanksAbove(w->point, b->point))) best = static_cast<int>(i);
  }
  return best;
}

RecommendResult Recommend(const std::function<SearchResult(int gpus)>& search, const RecommendTarget& t,
                          const std::vector<int>& ladder, int stable_gpus) {
  if ((t.request_rate > 0) == (t.concurrency > 0))
    throw UsageError("give exactly one positive target: --target-request-rate or --target-concurrency");
  RecommendResult res;
  for (int gpus : ladder) {
    const SearchResult r = search(gpus);
    RecommendStep step;
    step.gpus = gpus;
    for (const ModeResult& m : r.modes)
      for (const Point& p : m.points) {
        if (!p.meets_sla) continue;
        step.any_meets_sla = true;
        step.best_request_rate = std::max(step.best_request_rate, ClusterRequestRate(p));
        step.best_concurrency = std::max(step.best_concurrency, ClusterConcurrency(p));
      }
    const Point* nearest = nullptr;
    for (const ModeResult& m : r.modes)
      if (!m.best.empty() && !nearest) nearest = &m.points[m.best.front()];
    if (!step.any_meets_sla && nearest) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "nearest: %s %s, TTFT %.1f ms, TPOT %.2f ms", ModeName(nearest->mode),
                    nearest->Parallel().c_str(), nearest->ttft_ms, nearest->tpot_ms);
      step.note = buf;
    } else if (!step.any_meets_sla) {
      // The most frequent skip reason says why nothing qualified.
      std::size_t most = 0;
      for (const ModeResult& m : r.modes)
        for (const auto& [why, n] : m.skipped)
          if (n > most) most = n, step.note = why;
      if (step.note.empty()) step.note = "no deployment meets the latency limits";
    }
    const std::optional<Point> pick = PickForTarget(r, t);
    step.meets_target = pick.has_value();
    res.steps.push_back(step);
    if (pick) {
      res.found = true;
      res.gpus = gpus;
      res.point = *pick;
      res.margin = TargetMargin(*pick, t);
      break;
    }
    if (stable_gpus < 1 || gpus < stable_gpus || gpus == ladder.back()) continue;
    // Every larger count evaluates these same points with more replicas: the most
    // they deliver is at the ladder's last count, in the expressions Meets uses.
    const int last = ladder.back();
    double rate = 0;
    std::int64_t conc = 0;
    bool reachable = false;
    for (const ModeResult& m : r.modes)
      for (const Point& p : m.points) {
        if (!p.meets_sla || p.gpus_per_replica < 1) continue;
        Point at_last = p;
        at_last.replicas = last / p.gpus_per_replica;
        rate = std::max(rate, ClusterRequestRate(at_last));
        conc = std::max(conc, ClusterConcurrency(at_last));
        reachable = reachable || (at_last.replicas > 0 && Meets(at_last, t));
      }
    if (reachable) continue;
    res.stopped_at = gpus;
    res.stopped_by_limits = !step.any_meets_sla;
    res.bound_gpus = last;
    res.bound_request_rate = rate;
    res.bound_concurrency = conc;
    break;
  }
  return res;
}

}  // namespace servecast::search
