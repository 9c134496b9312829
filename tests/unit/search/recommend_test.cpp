#include "search/recommend.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"

namespace servecast::search {
namespace {

TEST(RecommendLadder, PowersOfTwoThenMultiplesOfEight) {
  EXPECT_EQ(GpuLadder(1), (std::vector<int>{1}));
  EXPECT_EQ(GpuLadder(6), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(GpuLadder(32), (std::vector<int>{1, 2, 4, 8, 16, 24, 32}));
  EXPECT_EQ(GpuLadder(39), (std::vector<int>{1, 2, 4, 8, 16, 24, 32}));
  const auto big = GpuLadder(512);
  EXPECT_EQ(big.size(), 4u + 63u);  // 1 2 4 8, then 16 .. 512 by 8
  EXPECT_EQ(big.back(), 512);
  EXPECT_TRUE(GpuLadder(0).empty());
}

// A fake search: every GPU count yields one agg point of a 2-GPU replica serving
// 1.5 requests/s and 40 concurrent requests, meeting the limits from 2 GPUs on.
SearchResult FakeSearch(int gpus, std::vector<int>* calls) {
  calls->push_back(gpus);
  SearchResult r;
  ModeResult m;
  m.mode = Mode::kAgg;
  if (gpus >= 2) {
    Point p;
    p.gpus_per_replica = 2;
    p.replicas = gpus / 2;
    p.seq_per_s = 1.5;
    p.concurrency = 40;
    p.tokens_per_s_gpu_cluster = 100;
    p.meets_sla = true;
    m.points.push_back(p);
    Point slow = p;  // more throughput but misses the limits: never picked
    slow.meets_sla = false;
    slow.seq_per_s = 100;
    m.points.push_back(slow);
  } else {
    m.skipped["out of memory"] = 3;
  }
  r.modes.push_back(m);
  return r;
}

TEST(Recommend, StopsAtTheFirstCountMeetingTheRate) {
  std::vector<int> calls;
  RecommendTarget t;
  t.request_rate = 10;  // 1.5 x replicas >= 10 -> 7 replicas -> 14 GPUs -> 16 on the ladder
  const RecommendResult r = Recommend([&](int g) { return FakeSearch(g, &calls); }, t, GpuLadder(512));
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.gpus, 16);
  EXPECT_EQ(calls, (std::vector<int>{1, 2, 4, 8, 16}));
  EXPECT_EQ(r.point.replicas, 8);
  EXPECT_NEAR(ClusterRequestRate(r.point), 12.0, 1e-12);
  EXPECT_NEAR(r.margin, 0.2, 1e-12);
  ASSERT_EQ(r.steps.size(), 5u);
  EXPECT_FALSE(r.steps[0].any_meets_sla);
  EXPECT_EQ(r.steps[0].note, "out of memory");
  EXPECT_TRUE(r.steps[1].any_meets_sla);
  EXPECT_FALSE(r.steps[1].meets_target);
  EXPECT_NEAR(r.steps[3].best_request_rate, 6.0, 1e-12);  // 8 GPUs: 4 replicas, the slow point ignored
  EXPECT_TRUE(r.steps[4].meets_target);
}

TEST(Recommend, ConcurrencyTarget) {
  std::vector<int> calls;
  RecommendTarget t;
  t.concurrency = 80;  // 40 x replicas >= 80 -> 2 replicas -> 4 GPUs
  const RecommendResult r = Recommend([&](int g) { return FakeSearch(g, &calls); }, t, GpuLadder(64));
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.gpus, 4);
  EXPECT_EQ(ClusterConcurrency(r.point), 80);
  EXPECT_NEAR(r.margin, 0.0, 1e-12);
}

TEST(Recommend, NothingUpToTheCap) {
  std::vector<int> calls;
  RecommendTarget t;
  t.request_rate = 1000;
  const RecommendResult r = Recommend([&](int g) { return FakeSearch(g, &calls); }, t, GpuLadder(32));
  EXPECT_FALSE(r.found);
  EXPECT_EQ(r.steps.size(), GpuLadder(32).size());
  EXPECT_EQ(calls.back(), 32);
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

}  // namespace
}  // namespace servecast::search
