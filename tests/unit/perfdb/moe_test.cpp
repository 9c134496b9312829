#include "perfdb/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "system/system_spec.h"

namespace servecast::perfdb {
namespace {

std::shared_ptr<const Sol> H200() {
  return std::make_shared<const Sol>(systems::LoadSystemByName(SERVECAST_SOURCE_DIR "/systems", "h200_sxm"));
}

const char* kHeader =
    "moe_dtype,num_tokens,hidden_size,inter_size,topk,num_experts,moe_tp_size,moe_ep_size,distribution,"
    "kernel_source,latency\n";

Table Synthetic() {
  return Table::ParseCsv(std::string(kHeader) +
                             // balanced curve over tokens {2, 4, 16}
                             "bfloat16,4,1024,512,2,8,1,1,balanced,cutlass,0.4\n"
                             "bfloat16,2,1024,512,2,8,1,1,balanced,cutlass,0.25\n"
                             "bfloat16,16,1024,512,2,8,1,1,balanced,cutlass,1.0\n"
                             "bfloat16,16,1024,512,2,8,1,1,balanced,cutlass,9.0\n"  // repeat: first wins
                             // a power-law curve of the same shape
                             "bfloat16,2,1024,512,2,8,1,1,power_law_1.2,cutlass,0.3\n"
                             "bfloat16,4,1024,512,2,8,1,1,power_law_1.2,cutlass,0.5\n"
                             // a singleton (ep 2), non-gated
                             "bfloat16,8,1024,512,2,8,1,2,balanced,moe_torch_flow_nongated,0.5\n",
                         "moe.csv");
}

MoeQuery Q(std::int64_t tokens, std::string distribution = "balanced", std::int64_t ep = 1) {
  MoeQuery q;
  q.num_tokens = tokens;
  q.hidden_size = 1024;
  q.inter_size = 512;
  q.topk = 2;
  q.num_experts = 8;
  q.moe_ep_size = ep;
  q.moe_dtype = "bfloat16";
  q.distribution = std::move(distribution);
  return q;
}

TEST(MoeTest, ExactHitIsSiliconAndLerpIsRaw) {
  const auto sol = H200();
  const MoeTable t(Synthetic(), sol);
  ASSERT_EQ(t.slices().size(), 3u);
  Estimate e = t.Query(Q(4));
  EXPECT_EQ(e.latency_ms, 0.4);
  EXPECT_EQ(e.source, EstimateSource::kSilicon);
  EXPECT_DOUBLE_EQ(e.sol_fraction, t.SolMs(Q(4)) / 0.4);
  EXPECT_EQ(t.Query(Q(16)).latency_ms, 1.0);  // first of the repeated rows

  e = t.Query(Q(10));  // 0.4 + (1.0 - 0.4) * (10 - 4) / (16 - 4)
  EXPECT_DOUBLE_EQ(e.latency_ms, 0.7);
  EXPECT_EQ(e.source, EstimateSource::kInterpolated);
  e = t.Query(Q(3));  // midway between 0.25 and 0.4
  EXPECT_DOUBLE_EQ(e.latency_ms, 0.325);
}

TEST(MoeTest, BeyondTheSweepHoldsTheBoundaryUtilWithTheMoeSol) {
  const auto sol = H200();
  const MoeTable t(Synthetic(), sol);
  auto moe_sol = [&](double tokens) { return sol->MoeMs("bfloat16", tokens, 1024, 512, 2, 8, 1, 1, true); };
  Estimate e = t.Query(Q(64));
  EXPECT_EQ(e.source, EstimateSource::kExtrapolated);
  EXPECT_DOUBLE_EQ(e.latency_ms, 1.0 * moe_sol(64) / moe_sol(16));
  EXPECT_DOUBLE_EQ(e.sol_fraction, moe_sol(16) / 1.0);  // the anchor's util
  e = t.Query(Q(1));
  EXPECT_DOUBLE_EQ(e.latency_ms, 0.25 * moe_sol(1) / moe_sol(2));
}

TEST(MoeTest, DistributionFallsBackToBalanced) {
  const MoeTable t(Synthetic(), H200());
  // power_law_1.2 has its own slice.
  EXPECT_EQ(t.Query(Q(4, "power_law_1.2")).latency_ms, 0.5);
  EXPECT_EQ(t.ResolveKey(Q(4, "power_law_1.2")).distribution, "power_law_1.2");
  // power_law_1.01 has none: the balanced slice answers; "uniform" names it too.
  EXPECT_EQ(t.ResolveKey(Q(4, "power_law_1.01")).distribution, "balanced");
  EXPECT_EQ(t.Query(Q(4, "power_law_1.01")).latency_ms, 0.4);
  EXPECT_EQ(t.Query(Q(4, "uniform")).latency_ms, 0.4);
}

TEST(MoeTest, SingletonBelowItsPointIsAMissAboveIsAHold) {
  const auto sol = H200();
  const MoeTable t(Synthetic(), sol);
  EXPECT_EQ(t.Query(Q(8, "balanced", 2)).latency_ms, 0.5);
  try {
    t.Query(Q(4, "balanced", 2));
    FAIL() << "expected a miss";
  } catch (const InterpolationMissError& e) {
    EXPECT_EQ(e.reason(), "singleton curve queried below its point");
    EXPECT_NE(std::string(e.what()).find("ep=2"), std::string::npos) << e.what();
  }
  // Non-gated slice: SOL with two projections.
  auto moe_sol = [&](double tokens) { return sol->MoeMs("bfloat16", tokens, 1024, 512, 2, 8, 1, 2, false); };
  EXPECT_TRUE(!t.slices().at(t.ResolveKey(Q(8, "balanced", 2))).gated);
  EXPECT_DOUBLE_EQ(t.SolMs(Q(32, "balanced", 2)), moe_sol(32));
  EXPECT_DOUBLE_EQ(t.Query(Q(32, "balanced", 2)).latency_ms, 0.5 * moe_sol(32) / moe_sol(8));
}

TEST(MoeTest, UnknownShapeIsATypedMissNamingWhatExists) {
  const MoeTable t(Synthetic(), H200());
  MoeQuery q = Q(4, "balanced", 4);
  try {
    t.Query(q);
    FAIL() << "expected a miss";
  } catch (const InterpolationMissError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("ep=4"), std::string::npos) << m;
    EXPECT_NE(m.find("ep=2"), std::string::npos) << m;  // a slice of the same shape that exists
  }
  q = Q(4);
  q.hidden_size = 2048;
  EXPECT_THROW(t.Query(q), MissingDataError);
  q = Q(4);
  q.moe_dtype = "fp8";
  EXPECT_THROW(t.Query(q), InterpolationMissError);
}

// ------------------------------------------------------------ AIC's H200 data

const MoeTable& RealMoe() {
  static const MoeTable* t = [] {
    auto db = PerfDatabase::Open({SERVECAST_SHARED_DIR "/reference/aic-parquet"}, "h200_sxm", "trtllm", "1.3.0rc20");
    return new MoeTable(MoeTable::FromLoaded(db.Table("moe_perf"), H200()));
  }();
  return *t;
}

MoeQuery RealQ(std::int64_t tokens, std::string distribution = "balanced") {
  MoeQuery q;
  q.num_tokens = tokens;
  q.hidden_size = 4096;
  q.inter_size = 2048;
  q.topk = 8;
  q.num_experts = 256;
  q.moe_dtype = "fp8";
  q.distribution = std::move(distribution);
  return q;
}

TEST(MoeTest, RealH200RowsExactAndBetweenNeighbours) {
  const MoeTable& t = RealMoe();
  EXPECT_EQ(t.slices().size(), 4686u);
  Estimate e = t.Query(RealQ(1));
  EXPECT_DOUBLE_EQ(e.latency_ms, 0.07715733349323273);
  EXPECT_EQ(e.source, EstimateSource::kSilicon);
  EXPECT_DOUBLE_EQ(t.Query(RealQ(1, "power_law_1.2")).latency_ms, 0.07623040080070495);
  e = t.Query(RealQ(3));
  EXPECT_EQ(e.source, EstimateSource::kInterpolated);
  EXPECT_DOUBLE_EQ(e.latency_ms, (0.12324800093968709 + 0.21597866217295328) / 2);
  e = t.Query(RealQ(100));
  EXPECT_GT(e.latency_ms, 1.5285813013712566);
  EXPECT_LT(e.latency_ms, 1.5387199719746907);
  e = t.Query(RealQ(32768));
  EXPECT_EQ(e.source, EstimateSource::kExtrapolated);
  EXPECT_GT(e.sol_fraction, 0);
}

// Leave-one-out over interior points of every curve (deterministic sample).
TEST(MoeTest, RealH200LeaveOneOut) {
  const MoeTable& t = RealMoe();
  std::size_t interior = 0;
  for (const auto& [k, s] : t.slices()) interior += s.points.size() > 2 ? s.points.size() - 2 : 0;
  const std::size_t stride = std::max<std::size_t>(1, (interior + 1999) / 2000);
  std::vector<double> err;
  std::size_t n = 0;
  for (const auto& [k, s] : t.slices()) {
    for (std::size_t i = 1; i + 1 < s.points.size(); ++i) {
      if (n++ % stride != 0) continue;
      std::vector<GridPoint> rest = s.points;
      rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
      const AxisCurve c("loo", "num_tokens", std::move(rest), s.sol);
      const double truth = s.points[i].latency_ms;
      err.push_back(std::abs(c.Query(s.points[i].coords[0]).latency_ms - truth) / truth);
    }
  }
  ASSERT_FALSE(err.empty());
  std::sort(err.begin(), err.end());
  const double median = err[err.size() / 2], p90 = err[err.size() * 9 / 10];
  std::printf("moe_perf LOO (interior, %zu of %zu points): median %.2f%%, p90 %.2f%%\n", err.size(), interior,
              100 * median, 100 * p90);
  EXPECT_LT(median, 0.10);
}

}  // namespace
}  // namespace servecast::perfdb
