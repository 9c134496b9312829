#include "backends/cpu/cpu_timer.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace servecast::cpu {
namespace {

using Clock = std::chrono::steady_clock;

// Seconds taken by `calls` back-to-back calls of fn.
double TimeCalls(const std::function<void()>& fn, std::int64_t calls) {
  auto start = Clock::now();
  for (std::int64_t i = 0; i < calls; ++i) {
    fn();
    ClobberMemory();
  }
  auto stop = Clock::now();
  return std::chrono::duration<double>(stop - start).count();
}

constexpr std::int64_t kMaxCallsPerSample = std::int64_t{1} << 24;

// Calls per sample so that a sample of calls taking `seconds_per_call` lasts at
// least min_sample_s (with 10% headroom).
std::int64_t CallsFor(double seconds_per_call, double min_sample_s) {
  if (min_sample_s <= 0) return 1;
  double per_call = std::max(seconds_per_call, 1e-9);
  double calls = std::ceil(1.1 * min_sample_s / per_call);
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(std::min(calls, 1e18)), 1, kMaxCallsPerSample);
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

double CpuMhzFromCpuinfo(std::string_view cpuinfo, int cpu) {
  int current = -1;
  while (!cpuinfo.empty()) {
    std::size_t eol = cpuinfo.find('\n');
    std::string_view line = cpuinfo.substr(0, eol);
    cpuinfo = eol == std::string_view::npos ? std::string_view() : cpuinfo.substr(eol + 1);
    std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = Trim(line.substr(0, colon));
    std::string value(Trim(line.substr(colon + 1)));
    if (key == "processor") {
      current = std::atoi(value.c_str());
    } else if (key == "cpu MHz" && current == cpu) {
      char* end = nullptr;
      double mhz = std::strtod(value.c_str(), &end);
      return (end != value.c_str() && std::isfinite(mhz) && mhz > 0) ? mhz : 0;
    }
  }
  return 0;
}

double CurrentCpuMhz() {
  int cpu = sched_getcpu();
  if (cpu < 0) return 0;
  std::ifstream in("/proc/cpuinfo");
  if (!in) return 0;
  std::stringstream text;
  text << in.rdbuf();
  return CpuMhzFromCpuinfo(text.str(), cpu);
}

bool StopSampling(const std::vector<double>& per_call_ms, double spent_s, double longest_sample_s,
                  const collect::TimingConfig& cfg) {
  const int min_samples = std::max(1, cfg.min_samples);
  const int max_samples = std::max(min_samples, cfg.max_samples);
  const int n = static_cast<int>(per_call_ms.size());
  if (n >= max_samples) return true;
  if (n >= min_samples && collect::RelativeStdDev(per_call_ms) < cfg.target_rsd) return true;
  return spent_s >= cfg.budget_s && (n >= min_samples || longest_sample_s > cfg.budget_s);
}

collect::TimingStats TimeCpu(const std::function<void()>& fn, const collect::TimingConfig& cfg) {
  return TimeCpuAgreed(fn, cfg, [](std::int64_t v) { return v; });
}

collect::TimingStats TimeCpuAgreed(const std::function<void()>& fn, const collect::TimingConfig& cfg,
                                   const std::function<std::int64_t(std::int64_t)>& agree) {
  collect::TimingStats stats;
  stats.method = "cpu";
  stats.l2 = "warm";
  stats.clock_mhz_before = CurrentCpuMhz();

  // Warm-up; the fastest warm-up call estimates the cost of one call.
  double warmup_s = 0;
  double fastest_call = 0;
  for (int i = 0; i < std::max(1, cfg.warmup_runs); ++i) {
    double t = TimeCalls(fn, 1);
    fastest_call = i == 0 ? t : std::min(fastest_call, t);
    warmup_s += t;
    if (agree(warmup_s >= cfg.budget_s)) break;
  }

  // Calibrate R: a short call is repeated until a sample lasts min_sample_s. The
  // calibration samples are not kept (the first ones may still be cold).
  std::int64_t calls = agree(CallsFor(fastest_call, cfg.min_sample_s));
  while (calls > 1 && calls < kMaxCallsPerSample) {
    double t = TimeCalls(fn, calls);
    if (agree(t >= cfg.min_sample_s)) break;
    std::int64_t more = CallsFor(t / static_cast<double>(calls), cfg.min_sample_s);
    calls = agree(std::max(more, calls + 1));
  }
  // Samples; the budget counts their time only.
  double spent = 0;
  std::vector<double> ms;
  double longest_sample = 0;
  do {
    double t = TimeCalls(fn, calls);
    spent += t;
    longest_sample = std::max(longest_sample, t);
    ms.push_back(t * 1e3 / static_cast<double>(calls));
  } while (!agree(StopSampling(ms, spent, longest_sample, cfg)));

  collect::ComputeStats(std::move(ms), stats);
  stats.calls_per_sample = static_cast<int>(calls);
  stats.clock_mhz_after = CurrentCpuMhz();
  stats.throttled = stats.clock_mhz_before > 0 && stats.clock_mhz_after < 0.9 * stats.clock_mhz_before;
  return stats;
}

}  // namespace servecast::cpu
