#include "backends/cuda/comm_kernels.h"

#include <cuda_bf16.h>

#include "backends/cuda/cuda_check.h"

namespace servecast::cuda {
namespace {

__global__ void FillPatternKernel(void* dst, std::size_t n, int elem_bytes, int rank) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    int v = static_cast<int>((i * 7 + static_cast<std::uint64_t>(rank) * 3) % 9) - 4;
    if (elem_bytes == 2) static_cast<__nv_bfloat16*>(dst)[i] = __int2bfloat16_rn(v);
    else static_cast<std::int8_t*>(dst)[i] = static_cast<std::int8_t>(v);
  }
}

}  // namespace

void FillCommPattern(void* dst, std::size_t n, int elem_bytes, int rank, cudaStream_t stream) {
  if (n == 0) return;
  if (elem_bytes != 1 && elem_bytes != 2) throw Error("FillCommPattern: element size must be 1 or 2 bytes");
  std::size_t blocks = (n + 255) / 256;
  if (blocks > 4096) blocks = 4096;
  FillPatternKernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(dst, n, elem_bytes, rank);
  SC_CUDA_CHECK_LAUNCH();
}

}  // namespace servecast::cuda
