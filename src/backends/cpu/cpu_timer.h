#pragma once

// The CPU timing harness: wall-clock (steady_clock) samples of R back-to-back calls.

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "collect/timing.h"

namespace servecast::cpu {

// Keeps the compiler from proving a value unused (and the work behind it dead).
template <class T>
inline void DoNotOptimize(const T& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

// A compiler barrier: memory written before it counts as observed.
inline void ClobberMemory() {
  asm volatile("" : : : "memory");
}

// Times `fn`:
// 1. warm-up: cfg.warmup_runs calls (at least one; stops early once a warm-up has
//    used cfg.budget_s, since one call of a slow op warms the caches enough);
// 2. calls per sample R: the smallest count whose sample lasts >= cfg.min_sample_s
//    (estimated from the warm-up and confirmed by a calibration sample);
// 3. samples until >= cfg.min_samples and RelativeStdDev < cfg.target_rsd, or until
//    cfg.budget_s has been spent (then it stops once it has cfg.min_samples, or at
//    once when one sample alone exceeds the budget), at most cfg.max_samples.
// Per-call latency = sample / R (ms). method "cpu", l2 "warm" (inputs stay
// resident between calls); CPU clock of the current core before and after
// (/proc/cpuinfo "cpu MHz", 0 when unavailable), throttled = after < 0.9·before.
collect::TimingStats TimeCpu(const std::function<void()>& fn, const collect::TimingConfig& cfg);

// TimeCpu for ranks that must time in lockstep (a collective deadlocks when one
// rank stops calling it): every decision (end the warm-up, calls per sample, end
// the calibration, stop sampling) passes through `agree`, which every rank calls
// at the same points and which returns one rank's value to all (a broadcast). With
// the identity it is TimeCpu. Each rank still measures its own samples.
collect::TimingStats TimeCpuAgreed(const std::function<void()>& fn, const collect::TimingConfig& cfg,
                                   const std::function<std::int64_t(std::int64_t)>& agree);

// The stop rule of step 3 after each sample: `per_call_ms` holds the samples so
// far, `spent_s` their total time, `longest_sample_s` the longest one.
bool StopSampling(const std::vector<double>& per_call_ms, double spent_s, double longest_sample_s,
                  const collect::TimingConfig& cfg);

// "cpu MHz" of `cpu` in /proc/cpuinfo-formatted text; 0 when absent.
double CpuMhzFromCpuinfo(std::string_view cpuinfo, int cpu);
// "cpu MHz" of the core this thread runs on now; 0 when unavailable.
double CurrentCpuMhz();

}  // namespace servecast::cpu
