#include "collect/timing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"

namespace servecast::collect {
namespace {

TEST(TimingTest, ComputeStatsQuantilesInterpolateBetweenOrderStatistics) {
  // 1..10 shuffled: median between 5 and 6; p10 at position 0.9, p90 at 8.1.
  std::vector<double> ms = {7, 3, 10, 1, 5, 9, 2, 8, 6, 4};
  TimingStats s;
  ComputeStats(ms, s);
  EXPECT_DOUBLE_EQ(s.median_ms, 5.5);
  EXPECT_DOUBLE_EQ(s.p10_ms, 1.9);
  EXPECT_DOUBLE_EQ(s.p90_ms, 9.1);
  EXPECT_EQ(s.samples, 10);
  // Sample standard deviation of 1..10 is sqrt(55/6); mean 5.5.
  EXPECT_NEAR(s.rsd, std::sqrt(55.0 / 6.0) / 5.5, 1e-12);
}

TEST(TimingTest, ComputeStatsOddCountMedianIsTheMiddleValue) {
  TimingStats s;
  ComputeStats({0.3, 0.1, 0.2, 100.0, 0.25}, s);
  EXPECT_DOUBLE_EQ(s.median_ms, 0.25);  // robust to the outlier
  EXPECT_DOUBLE_EQ(s.p10_ms, 0.1 + (0.2 - 0.1) * 0.4);
  EXPECT_DOUBLE_EQ(s.p90_ms, 0.3 + (100.0 - 0.3) * 0.6);
  EXPECT_EQ(s.samples, 5);
}

TEST(TimingTest, ComputeStatsOfOneSample) {
  TimingStats s;
  ComputeStats({2.5}, s);
  EXPECT_DOUBLE_EQ(s.median_ms, 2.5);
  EXPECT_DOUBLE_EQ(s.p10_ms, 2.5);
  EXPECT_DOUBLE_EQ(s.p90_ms, 2.5);
  EXPECT_DOUBLE_EQ(s.rsd, 0);
  EXPECT_EQ(s.samples, 1);
}

TEST(TimingTest, ComputeStatsLeavesOtherFieldsAlone) {
  TimingStats s;
  s.method = "graph";
  s.calls_per_sample = 8;
  s.power_w = 300;
  ComputeStats({1, 1, 1}, s);
  EXPECT_EQ(s.method, "graph");
  EXPECT_EQ(s.calls_per_sample, 8);
  EXPECT_DOUBLE_EQ(s.power_w, 300);
  EXPECT_DOUBLE_EQ(s.rsd, 0);
}

TEST(TimingTest, ComputeStatsOfNothingThrows) {
  TimingStats s;
  EXPECT_THROW(ComputeStats({}, s), Error);
}

TEST(TimingTest, RelativeStdDev) {
  // Mean 5, sum of squared deviations 32, sample variance 32/7.
  EXPECT_NEAR(RelativeStdDev({2, 4, 4, 4, 5, 5, 7, 9}), std::sqrt(32.0 / 7.0) / 5.0, 1e-12);
  EXPECT_DOUBLE_EQ(RelativeStdDev({3, 3, 3}), 0);
  EXPECT_DOUBLE_EQ(RelativeStdDev({}), 0);
  EXPECT_DOUBLE_EQ(RelativeStdDev({42}), 0);
  EXPECT_DOUBLE_EQ(RelativeStdDev({-1, 1}), 0);  // zero mean
  // Scale-free: multiplying every value leaves it unchanged.
  EXPECT_NEAR(RelativeStdDev({1, 2, 3}), RelativeStdDev({1000, 2000, 3000}), 1e-12);
}

TEST(TimingTest, DefaultTimingConfigMatchesTheContract) {
  TimingConfig c;
  EXPECT_GE(c.min_samples, 10);
  EXPECT_DOUBLE_EQ(c.target_rsd, 0.01);
}

}  // namespace
}  // namespace servecast::collect
