#include <cuda_bf16.h>


#include "backends/cuda/cuda_check.h"
#include "backends/cuda/fill.h"

namespace servecast::cuda {
namespace {

// splitmix64 of (seed, index): a counter-based generator, so every element is
// independent of the launch shape.
__device__ __forceinline__ float UniformAt(std::uint64_t seed, std::size_t i, float scale) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (static_cast<std::uint64_t>(i) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  // 24 random bits -> [0, 1), then [-scale, scale); exclude exact zero.
  float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
  float v = (2.0f * u - 1.0f) * scale;
  return v == 0.0f ? scale * 0x1p-20f : v;
}

__global__ void fill_uniform_bf16(__nv_bfloat16* dst, std::size_t n, std::uint64_t seed, float scale) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dst[i] = __float2bfloat16(UniformAt(seed, i, scale));
}

__global__ void fill_uniform_f32(float* dst, std::size_t n, std::uint64_t seed, float scale) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dst[i] = UniformAt(seed, i, scale);
}

unsigned Blocks(std::size_t n) {
  std::size_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 65536 ? (b == 0 ? 1 : b) : 65536);
}

}  // namespace

void FillUniformBf16(void* dst, std::size_t n, std::uint64_t seed, float scale, cudaStream_t stream) {
  fill_uniform_bf16<<<Blocks(n), 256, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), n, seed, scale);
  SC_CUDA_CHECK_LAUNCH();
}

void FillUniformF32(float* dst, std::size_t n, std::uint64_t seed, float scale, cudaStream_t stream) {
  fill_uniform_f32<<<Blocks(n), 256, 0, stream>>>(dst, n, seed, scale);
  SC_CUDA_CHECK_LAUNCH();
}

void FillPoison(void* dst, std::size_t bytes, cudaStream_t stream) { SC_CUDA_CHECK(cudaMemsetAsync(dst, 0xFF, bytes, stream)); }

}  // namespace servecast::cuda
