#pragma once

// Shared by the GPU benchmarks: they skip (SkipWithError) where no GPU answers.

#include <cuda_runtime.h>

namespace servecast::bench {

// True when a CUDA device is present (clears the error the query leaves otherwise).
inline bool HaveGpu() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return false;
  }
  return true;
}

}  // namespace servecast::bench
