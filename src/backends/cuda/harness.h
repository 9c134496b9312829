#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>

#include "collect/timing.h"

namespace servecast::cuda {

// Enqueues one call of the op on `stream`. `iteration` counts calls from 0 so an
// op can rotate through copies of its weights / KV (copy = iteration % copies).
// Must not synchronize, allocate or copy to the host (it is captured in a graph).
using LaunchFn = std::function<void(cudaStream_t stream, int iteration)>;

struct TimeOptions {
  int copies = 1;                  // distinct input sets the launch rotates through
  double rotated_bytes = 0;        // bytes of all copies together (for the l2 label)
  bool allow_eager_fallback = true;  // if graph capture fails, time eager launches (recorded)
  // Multi-process ops (collectives): every decision that shapes the launches
  // (calls per replay, graph or eager, when to stop sampling) must be the same on
  // every rank, or the ranks' collectives stop matching and hang. `agree_min`
  // returns the minimum of a value over all ranks; empty for single-GPU ops.
  std::function<long long(long long)> agree_min;
  // Shortest sample (s); 0: cfg.min_sample_s. Collectives take longer samples: the
  // ranks start each replay a few µs apart, which must not add to a µs-scale call.
  double min_sample_s = 0;
};

// The timing harness of the CUDA backend:
//  1. warm-up: cfg.warmup_runs eager calls, synchronized;
//  2. R calls per replay, so one replay lasts >= cfg.min_sample_s (one call's
//     time measured with events after the warm-up), R a multiple of `copies`;
//  3. capture the R calls in a CUDA graph (eager fallback if capture fails and
//     allowed: method "eager");
//  4. replay: each sample is one replay bracketed by events; sample until
//     >= cfg.min_samples and rsd < cfg.target_rsd, or cfg.budget_s spent, at most
//     cfg.max_samples; per-call latency = sample / R;
//  5. SM clock (NVML) before and after, throttled when after < 0.9 x before or
//     NVML reports a thermal/power slowdown; mean power and the enforced limit
//     when `measure_power`.
// l2 is "cold" when rotated_bytes >= 2 x L2, else "warm".
// Throws CudaError on any failed call.
collect::TimingStats TimeOnDevice(const LaunchFn& launch, const collect::TimingConfig& cfg, const TimeOptions& opt,
                                  bool measure_power);

// How many copies of `bytes_per_copy` make the rotation cover >= 2 x L2, at most
// `max_copies`, and no more than `memory_fraction` of free device memory (>= 1).
int CopiesForColdL2(double bytes_per_copy, int max_copies = 8, double memory_fraction = 0.4);

}  // namespace servecast::cuda
