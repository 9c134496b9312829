#include "backends/cpu/cpu_timer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

namespace servecast::cpu {
namespace {

// Busy work for about `seconds` (a sleep would measure the scheduler, not a CPU).
void Spin(double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
  }
}

collect::TimingConfig Config() {
  collect::TimingConfig cfg;
  cfg.warmup_runs = 2;
  cfg.min_samples = 5;
  cfg.max_samples = 200;
  cfg.target_rsd = 0.05;
  cfg.budget_s = 0.05;
  cfg.min_sample_s = 1e-4;
  return cfg;
}

TEST(TimeCpuTest, StatisticsAreOrderedAndLabelled) {
  collect::TimingStats s = TimeCpu([] { Spin(200e-6); }, Config());
  EXPECT_GE(s.samples, 5);
  EXPECT_LE(s.p10_ms, s.median_ms);
  EXPECT_LE(s.median_ms, s.p90_ms);
  EXPECT_GE(s.median_ms, 0.2);  // the spin cannot finish early
  EXPECT_LT(s.median_ms, 20.0);
  EXPECT_GE(s.rsd, 0);
  EXPECT_EQ(s.method, "cpu");
  EXPECT_EQ(s.l2, "warm");
  EXPECT_EQ(s.calls_per_sample, 1);  // 200 µs already exceeds min_sample_s
  EXPECT_GE(s.clock_mhz_before, 0);
  EXPECT_GE(s.clock_mhz_after, 0);
  EXPECT_EQ(s.throttled, s.clock_mhz_before > 0 && s.clock_mhz_after < 0.9 * s.clock_mhz_before);
}

TEST(TimeCpuTest, RepeatsShortCallsWithinASample) {
  volatile double sink = 0;
  long calls = 0;
  collect::TimingConfig cfg = Config();
  cfg.min_sample_s = 200e-6;
  collect::TimingStats s = TimeCpu(
      [&] {
        ++calls;
        for (int i = 0; i < 50; ++i) sink = sink + std::sqrt(static_cast<double>(i));
      },
      cfg);
  EXPECT_GT(s.calls_per_sample, 1);
  // A sample of R calls lasts at least min_sample_s (per-call median · R).
  EXPECT_GE(s.median_ms * s.calls_per_sample, 0.5 * cfg.min_sample_s * 1e3);
  EXPECT_GE(calls, static_cast<long>(s.samples) * s.calls_per_sample);
  EXPECT_LE(s.p10_ms, s.median_ms);
  EXPECT_LE(s.median_ms, s.p90_ms);
}

TEST(TimeCpuTest, OneSampleOverBudgetStopsAtOnce) {
  int calls = 0;
  collect::TimingConfig cfg = Config();
  cfg.warmup_runs = 3;
  cfg.budget_s = 0.005;
  collect::TimingStats s = TimeCpu(
      [&] {
        ++calls;
        Spin(0.02);
      },
      cfg);
  EXPECT_EQ(s.samples, 1);
  EXPECT_EQ(calls, 2);  // one warm-up (it alone used the budget) and one sample
  EXPECT_GE(s.median_ms, 20.0);
}

// The stop rule on its own, with made-up times (the machine's timing noise must
// not decide a test).
TEST(StopSamplingTest, FollowsTheRule) {
  collect::TimingConfig cfg;
  cfg.min_samples = 4;
  cfg.max_samples = 6;
  cfg.target_rsd = 0.01;
  cfg.budget_s = 1.0;
  const std::vector<double> steady = {2.0, 2.0, 2.0, 2.0};
  const std::vector<double> noisy = {1.0, 3.0, 1.0, 3.0};
  // Enough samples with a small spread: done.
  EXPECT_TRUE(StopSampling(steady, 0.1, 0.01, cfg));
  // Too few samples, whatever the spread: go on.
  EXPECT_FALSE(StopSampling({2.0, 2.0, 2.0}, 0.1, 0.01, cfg));
  // Noisy within the budget: go on.
  EXPECT_FALSE(StopSampling(noisy, 0.5, 0.2, cfg));
  // Noisy after the budget with min_samples: done.
  EXPECT_TRUE(StopSampling(noisy, 1.0, 0.3, cfg));
  // Budget spent but fewer than min_samples, each sample under the budget: go on.
  EXPECT_FALSE(StopSampling({1.0, 3.0}, 1.2, 0.6, cfg));
  // ... unless one sample alone exceeded the budget.
  EXPECT_TRUE(StopSampling({1.0, 3.0}, 1.6, 1.2, cfg));
  EXPECT_TRUE(StopSampling({3.0}, 1.2, 1.2, cfg));
  // max_samples caps everything.
  EXPECT_TRUE(StopSampling({1.0, 3.0, 1.0, 3.0, 1.0, 3.0}, 0.1, 0.01, cfg));
}

TEST(TimeCpuTest, CapsAtMaxSamples) {
  collect::TimingConfig cfg = Config();
  cfg.min_samples = 2;
  cfg.max_samples = 7;
  cfg.target_rsd = 0;
  cfg.budget_s = 100;
  collect::TimingStats s = TimeCpu([] { Spin(50e-6); }, cfg);
  EXPECT_EQ(s.samples, 7);
}

TEST(TimeCpuTest, StopsEarlyWhenSpreadIsSmall) {
  collect::TimingConfig cfg = Config();
  cfg.min_samples = 3;
  cfg.target_rsd = 10.0;  // any spread passes
  cfg.budget_s = 100;
  collect::TimingStats s = TimeCpu([] { Spin(50e-6); }, cfg);
  EXPECT_EQ(s.samples, 3);
}

TEST(CpuMhzTest, ReadsTheLineOfTheGivenCore) {
  const char* cpuinfo =
      "processor\t: 0\nmodel name\t: X\ncpu MHz\t\t: 2200.500\n\n"
      "processor\t: 1\nmodel name\t: X\ncpu MHz\t\t: 3100.250\n\n";
  EXPECT_DOUBLE_EQ(CpuMhzFromCpuinfo(cpuinfo, 0), 2200.5);
  EXPECT_DOUBLE_EQ(CpuMhzFromCpuinfo(cpuinfo, 1), 3100.25);
  EXPECT_EQ(CpuMhzFromCpuinfo(cpuinfo, 2), 0);
  EXPECT_EQ(CpuMhzFromCpuinfo("processor\t: 0\nBogoMIPS\t: 50.00\n", 0), 0);
  EXPECT_GE(CurrentCpuMhz(), 0);
}

}  // namespace
}  // namespace servecast::cpu
