#include "search/recommend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/model_config.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "system/system_spec.h"

namespace servecast::search {
namespace {

const std::string kSrc = SERVECAST_SOURCE_DIR;

TEST(RecommendLadder, PowersOfTwoThenMultiplesOfEight) {
  EXPECT_EQ(GpuLadder(1), (std::vector<int>{1}));
  EXPECT_EQ(GpuLadder(6), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(GpuLadder(32), (std::vector<int>{1, 2, 4, 8, 16, 24, 32}));
  EXPECT_EQ(GpuLadder(39), (std::vector<int>{1, 2, 4, 8, 16, 24, 32}));
  const auto big = GpuLadder(512);
  EXPECT_EQ(big.size(), 4u + 63u);  // 1 2 4 8, then 16 .. 512 by 8
  EXPECT_EQ(big.back(), 512);
  EXPECT_TRUE(GpuLadder(0).empty());
  EXPECT_EQ(EveryGpuCount(6), (std::vector<int>{1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(EveryGpuCount(0).empty());
}

// The real search behind Recommend: RunSearch in SOL mode (rooflines, no perf data
// needed) on the H200 spec, trtllm, isl 1024 / osl 256, TTFT 1000 ms, TPOT 30 ms.
struct SolSearch {
  explicit SolSearch(const std::string& model_id)
      : spec(systems::LoadSystemByName(kSrc + "/systems", "h200_sxm")),
        model(model::LoadModel(model_id, kSrc + "/models")),
        engine(serve::LoadEngineProfileByName(kSrc + "/engines", model::Engine::kTrtllm)) {
    serve::DatabaseOptions o;
    o.mode = perfdb::DatabaseMode::kSol;
    db = serve::Database::Open(spec, o, {});
    in.isl = 1024;
    in.osl = 256;
    in.ttft_ms = 1000;
    in.tpot_ms = 30;
  }
  SearchResult operator()(int gpus) {
    calls.push_back(gpus);
    SearchInputs q = in;
    q.total_gpus = gpus;
    return RunSearch(model, *db, engine, q);
  }
  systems::SystemSpec spec;
  model::ModelConfig model;
  serve::EngineProfile engine;
  std::unique_ptr<serve::Database> db;
  SearchInputs in;
  std::vector<int> calls;
};

// The first ladder count whose search can serve the target, found by searching
// every count independently of Recommend's walk.
int FirstCountServing(SolSearch& s, const RecommendTarget& t, const std::vector<int>& ladder) {
  for (int g : ladder)
    if (PickForTarget(s(g), t)) return g;
  return 0;
}

TEST(Recommend, StopsAtTheFirstCountMeetingTheRate) {
  SolSearch oracle("meta-llama/Meta-Llama-3.1-8B");
  // Three times what one GPU can serve: needs more than one GPU.
  const auto one = PickForTarget(oracle(1), RecommendTarget{1e-9, 0});
  ASSERT_TRUE(one.has_value());
  RecommendTarget t;
  t.request_rate = 3 * ClusterRequestRate(*one);
  const auto ladder = GpuLadder(64);
  const int expected = FirstCountServing(oracle, t, ladder);
  ASSERT_GT(expected, 1);

  SolSearch s("meta-llama/Meta-Llama-3.1-8B");
  const RecommendResult r = Recommend(std::ref(s), t, ladder);
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.gpus, expected);
  // The walk stops there: the counts searched are the ladder up to the answer.
  const std::vector<int> prefix(ladder.begin(), std::find(ladder.begin(), ladder.end(), expected) + 1);
  EXPECT_EQ(s.calls, prefix);
  ASSERT_EQ(r.steps.size(), prefix.size());
  for (std::size_t i = 0; i + 1 < r.steps.size(); ++i) EXPECT_FALSE(r.steps[i].meets_target) << r.steps[i].gpus;
  EXPECT_TRUE(r.steps.back().meets_target);
  EXPECT_TRUE(r.point.meets_sla);
  EXPECT_GE(ClusterRequestRate(r.point), t.request_rate);
  EXPECT_NEAR(r.margin, ClusterRequestRate(r.point) / t.request_rate - 1, 1e-12);
  EXPECT_GE(r.margin, 0);
}

// With stable_gpus (kSearchStableGpus) the walk stops at 128 GPUs when even the
// ladder's last count cannot serve the target, and the bound it states is what the
// full search at that last count finds; a target found past 128 GPUs is found the
// same way with and without it.
TEST(Recommend, StopsPastTheStableCountWhenNoLargerCountCanServe) {
  SolSearch oracle("meta-llama/Meta-Llama-3.1-8B");
  const auto ladder = GpuLadder(512);
  double rate_at_512 = 0;
  for (const ModeResult& m : oracle(512).modes)
    for (const Point& p : m.points)
      if (p.meets_sla) rate_at_512 = std::max(rate_at_512, ClusterRequestRate(p));
  ASSERT_GT(rate_at_512, 0);

  SolSearch s("meta-llama/Meta-Llama-3.1-8B");
  const RecommendResult r = Recommend(std::ref(s), RecommendTarget{2 * rate_at_512, 0}, ladder, kSearchStableGpus);
  EXPECT_FALSE(r.found);
  ASSERT_FALSE(s.calls.empty());
  EXPECT_EQ(s.calls.back(), kSearchStableGpus);
  EXPECT_EQ(r.stopped_at, kSearchStableGpus);
  EXPECT_FALSE(r.stopped_by_limits);
  EXPECT_EQ(r.bound_gpus, 512);
  EXPECT_EQ(r.bound_request_rate, rate_at_512);
  EXPECT_NE(StoppedNote(r).find("at 512 GPUs"), std::string::npos) << StoppedNote(r);

  // Reachable only past 128 GPUs: the same answer and steps as the full walk.
  const RecommendTarget far{0.9 * rate_at_512, 0};
  SolSearch a("meta-llama/Meta-Llama-3.1-8B"), b("meta-llama/Meta-Llama-3.1-8B");
  const RecommendResult with = Recommend(std::ref(a), far, ladder, kSearchStableGpus);
  const RecommendResult without = Recommend(std::ref(b), far, ladder);
  ASSERT_TRUE(without.found);
  EXPECT_GT(without.gpus, kSearchStableGpus);
  EXPECT_TRUE(with.found);
  EXPECT_EQ(with.gpus, without.gpus);
  EXPECT_EQ(a.calls, b.calls);
  EXPECT_EQ(with.stopped_at, 0);
  EXPECT_EQ(with.margin, without.margin);
}

TEST(Recommend, ConcurrencyTarget) {
  SolSearch oracle("meta-llama/Meta-Llama-3.1-8B");
  // One more request than any deployment on one GPU holds within the limits.
  std::int64_t most = 0;
  for (const ModeResult& m : oracle(1).modes)
    for (const Point& p : m.points)
      if (p.meets_sla) most = std::max(most, ClusterConcurrency(p));
  ASSERT_GT(most, 0);
  RecommendTarget t;
  t.concurrency = most + 1;
  const auto ladder = GpuLadder(64);
  const int expected = FirstCountServing(oracle, t, ladder);
  ASSERT_GT(expected, 1);
  SolSearch s("meta-llama/Meta-Llama-3.1-8B");
  const RecommendResult r = Recommend(std::ref(s), t, ladder);
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.gpus, expected);
  EXPECT_GE(ClusterConcurrency(r.point), t.concurrency);
  EXPECT_NEAR(r.margin, static_cast<double>(ClusterConcurrency(r.point)) / t.concurrency - 1, 1e-12);
}

TEST(Recommend, CountsTooSmallForTheModelSayWhy) {
  // Llama-3.1-405B in bf16 (about 810 GB of weights) fits no worker of 1, 2 or 4
  // H200s; 8 GPUs (tp 8) hold it.
  SolSearch s("meta-llama/Meta-Llama-3.1-405B");
  RecommendTarget t;
  t.request_rate = 1e-6;
  const RecommendResult r = Recommend(std::ref(s), t, GpuLadder(8));
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.gpus, 8);
  ASSERT_EQ(r.steps.size(), 4u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_FALSE(r.steps[i].any_meets_sla) << r.steps[i].gpus;
    EXPECT_NE(r.steps[i].note.find("memory"), std::string::npos) << r.steps[i].note;
  }
}

TEST(Recommend, NothingUpToTheCap) {
  SolSearch s("meta-llama/Meta-Llama-3.1-8B");
  RecommendTarget t;
  t.request_rate = 1e9;
  const RecommendResult r = Recommend(std::ref(s), t, GpuLadder(16));
  EXPECT_FALSE(r.found);
  EXPECT_EQ(r.steps.size(), GpuLadder(16).size());
  EXPECT_EQ(s.calls, GpuLadder(16));
  for (const auto& step : r.steps) EXPECT_FALSE(step.meets_target);
}

TEST(Recommend, TargetMustBeExactlyOne) {
  auto never = [](int) -> SearchResult { ADD_FAILURE() << "searched"; return {}; };
  EXPECT_THROW(Recommend(never, RecommendTarget{}, {1}), UsageError);
  RecommendTarget both;
  both.request_rate = 1;
  both.concurrency = 1;
  EXPECT_THROW(Recommend(never, both, {1}), UsageError);
}

TEST(Recommend, PickPrefersThroughputPerGpuAmongPointsMeetingTheTarget) {
  SearchResult r;
  ModeResult agg, dis;
  agg.mode = Mode::kAgg;
  dis.mode = Mode::kDisagg;
  Point a;
  a.replicas = 2;
  a.seq_per_s = 3;
  a.tokens_per_s_gpu_cluster = 50;
  a.meets_sla = true;
  Point d = a;
  d.mode = Mode::kDisagg;
  d.tokens_per_s_gpu_cluster = 80;
  Point under = a;  // best per GPU but 2 x 1 < 5 requests/s
  under.seq_per_s = 1;
  under.tokens_per_s_gpu_cluster = 200;
  agg.points = {a, under};
  dis.points = {d};
  r.modes = {agg, dis};
  RecommendTarget t;
  t.request_rate = 5;
  const auto pick = PickForTarget(r, t);
  ASSERT_TRUE(pick.has_value());
  EXPECT_EQ(pick->mode, Mode::kDisagg);
  t.request_rate = 7;
  EXPECT_FALSE(PickForTarget(r, t).has_value());
}

// recommend --backend auto: the fewest GPUs, then RanksAbove (tokens/s per GPU of the
// cluster, then tokens/s/user), then the earlier engine; walks not found or absent are left out.
TEST(PickFewest, FewestGpusThenTheBetterDeployment) {
  auto walk = [](bool found, int gpus, double tps_gpu, double tps_user) {
    RecommendResult r;
    r.found = found;
    r.gpus = gpus;
    r.point.tokens_per_s_gpu_cluster = tps_gpu;
    r.point.tokens_per_s_user = tps_user;
    return r;
  };
  const RecommendResult a = walk(true, 8, 900, 30), b = walk(true, 4, 100, 10), c = walk(true, 4, 200, 5),
                        d = walk(true, 4, 200, 6), none = walk(false, 1, 1e9, 1e9);
  EXPECT_EQ(PickFewest({&a, &b}), 1);              // fewer GPUs beat more tokens/s per GPU
  EXPECT_EQ(PickFewest({&b, &c}), 1);              // same count: more tokens/s per GPU
  EXPECT_EQ(PickFewest({&c, &d}), 1);              // same again: more tokens/s/user
  EXPECT_EQ(PickFewest({&d, &d}), 0);              // a full tie: the earlier
  EXPECT_EQ(PickFewest({&none, nullptr, &a}), 2);  // not found, not walked: left out
  EXPECT_EQ(PickFewest({&none, nullptr}), -1);
}

}  // namespace
}  // namespace servecast::search
