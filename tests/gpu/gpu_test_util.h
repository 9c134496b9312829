#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "backends/cuda/device.h"

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
