#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/device.h"
#include "collect/op.h"

// Skips the test cleanly where no CUDA GPU is present (CI); otherwise makes sure
// the worker-style device context exists on GPU 0.
#define SC_REQUIRE_GPU()                                                              \
  do {                                                                                \
    int sc_n_ = 0;                                                                    \
    if (cudaGetDeviceCount(&sc_n_) != cudaSuccess || sc_n_ == 0) {                    \
      cudaGetLastError();                                                             \
      GTEST_SKIP() << "no CUDA GPU on this machine; this test runs on the GPU machine"; \
    }                                                                                 \
    ::servecast::cuda::InitDevice(0);                                                 \
  } while (0)

namespace servecast::cuda::testing {

// The detected runtime, once per test binary (rows name it).
inline const collect::RuntimeInfo& Runtime() {
  static const collect::RuntimeInfo rt = CudaBackend().DetectRuntime();
  return rt;
}

// A short timing budget: the tests check correctness and row shape, not speed.
inline collect::RunContext QuickContext() {
  collect::RunContext ctx;
  ctx.runtime = &Runtime();
  ctx.timing.warmup_runs = 1;
  ctx.timing.min_samples = 5;
  ctx.timing.budget_s = 0.05;
  return ctx;
}

}  // namespace servecast::cuda::testing
