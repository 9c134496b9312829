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

bool Better(const Point& a, const Point& b) {
  if (a.tokens_per_s_gpu_cluster != b.tokens_per_s_gpu_cluster)
    return a.tokens_per_s_gpu_cluster > b.tokens_per_s_gpu_cluster;
  return a.tokens_per_s_user > b.tokens_per_s_user;
}

}  // namespace

std::optional<Point> PickForTarget(const SearchResult& r, const RecommendTarget& t) {
  std::optional<Point> best;
  for (const ModeResult& m : r.modes)
    for (const Point& p : m.points)
      if (p.meets_sla && p.replicas > 0 && Meets(p, t) && (!best || Better(p, *best))) best = p;
  return best;
}

RecommendResult Recommend(const std::function<SearchResult(int gpus)>& search, const RecommendTarget& t,
                          const std::vector<int>& ladder) {
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
  }
  return res;
}

}  // namespace servecast::search
