#pragma once

#include <string>
#include <vector>

namespace servecast::collect {

// How long and how precisely to time one case. The stop rule: sample until at
// least `min_samples` and the relative spread is under `target_rsd`, or until
// `budget_s` of timed work has been spent (then keep what was collected, with at
// least `min_samples` unless a single sample exceeds the budget).
struct TimingConfig {
  int warmup_runs = 3;
  int min_samples = 10;
  int max_samples = 1000;
  double target_rsd = 0.01;
  double budget_s = 0.5;
  // A sample shorter than this repeats the op inside the sample (R calls) so that
  // timer resolution and call overhead do not dominate.
  double min_sample_s = 50e-6;
};

// Statistics over per-call latencies (ms).
struct TimingStats {
  double median_ms = 0;
  double p10_ms = 0;
  double p90_ms = 0;
  double rsd = 0;  // standard deviation / mean
  int samples = 0;
  int calls_per_sample = 1;
  std::string method;  // "graph", "eager" (CUDA) or "cpu"
  std::string l2;      // "cold" or "warm"
  double clock_mhz_before = 0;
  double clock_mhz_after = 0;
  bool throttled = false;
  double power_w = -1;  // < 0: not measured
  double power_limit_w = -1;
};

// Fills median/p10/p90/rsd/samples from per-call latencies in ms (linear
// interpolation between order statistics). Throws Error when `ms` is empty.
void ComputeStats(std::vector<double> ms, TimingStats& out);
// Relative standard deviation of the values (0 for fewer than two).
double RelativeStdDev(const std::vector<double>& v);

}  // namespace servecast::collect
