// Benchmark-only (quant_fp8_fused.h): dynamic per-tensor fp8 quantization in one kernel.
//
// The two-kernel path reads the bf16 tensor twice (amax, then quantize). Here a
// persistent, cooperatively launched grid (every CTA resident) reads its contiguous
// share of the tensor once, keeps the first part of it on chip (registers, then
// shared memory) while it reduces the amax, meets the other CTAs at a grid barrier
// where the last one to arrive turns the global amax into the scale, then quantizes
// what it kept and re-reads only the rest, newest first (the most recently read
// vectors are the ones still in L2). Same scale and same bytes as the two-kernel path.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/quantize.h"
#include "quant_fp8_fused.h"
#include "backends/cuda/quantize_device.cuh"
#include "core/error.h"

namespace servecast::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kRegVecs = 8;    // 16-byte vectors (8 bf16) per thread kept in registers
constexpr int kSmemVecs = 12;  // and in shared memory: 512 x 12 x 16 B = 96 KiB per CTA
constexpr int kCtasPerSm = 2;

using namespace fp8dev;  // AbsMax8, Quantize8, QuantizeOne, ScaleFromAmax, WarpMax

// state[0]: amax bits (float >= 0 orders like unsigned), state[1]: CTAs arrived,
// state[2]: barrier generation (bumped once per call by the last CTA to arrive).
__global__ void __launch_bounds__(kThreads, kCtasPerSm)
    quant_fp8_tensor_fused(const __nv_bfloat16* __restrict__ x, std::size_t n, unsigned* state, float* scale,
                           unsigned char* __restrict__ q) {
  extern __shared__ uint4 kept[];  // [kSmemVecs][kThreads]
  __shared__ float warp_max[kThreads / 32];
  __shared__ unsigned generation;
  __shared__ float inv_shared;
  const int tid = threadIdx.x;
  if (tid == 0) generation = *reinterpret_cast<volatile unsigned*>(&state[2]);  // before this CTA arrives

  const std::size_t n8 = n / 8;
  const std::size_t per_cta = (n8 + gridDim.x - 1) / gridDim.x;
  const std::size_t begin = std::min(n8, per_cta * blockIdx.x);
  const std::size_t end = std::min(n8, begin + per_cta);
  const std::size_t count = end - begin;  // vectors of this CTA
  const std::size_t per_thread = (count + kThreads - 1) / kThreads;
  const uint4* x8 = reinterpret_cast<const uint4*>(x) + begin;
  uint2* q8 = reinterpret_cast<uint2*>(q) + begin;
  // Vector j of this thread: x8[j * kThreads + tid] (coalesced across the CTA).
  auto at = [&](std::size_t j) { return j * kThreads + static_cast<std::size_t>(tid); };

  // 1. Read once, amax; keep j < kRegVecs in registers, then kSmemVecs in shared memory.
  float m = 0.0f;
  uint4 reg[kRegVecs];
#pragma unroll
  for (int j = 0; j < kRegVecs; ++j) {
    reg[j] = make_uint4(0, 0, 0, 0);
    if (at(j) < count) reg[j] = __ldg(x8 + at(j));
    m = fmaxf(m, AbsMax8(reg[j]));
  }
#pragma unroll 4
  for (int j = 0; j < kSmemVecs; ++j) {
    const std::size_t i = at(kRegVecs + j);
    if (i < count) {
      const uint4 v = __ldg(x8 + i);
      kept[j * kThreads + tid] = v;
      m = fmaxf(m, AbsMax8(v));
    }
  }
  const std::size_t first_reread = kRegVecs + kSmemVecs;
  for (std::size_t j = first_reread; j < per_thread; j += 4) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const std::size_t i = at(j + u);
      v[u] = (j + u < per_thread && i < count) ? __ldg(x8 + i) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) m = fmaxf(m, AbsMax8(v[u]));
  }
  // The n % 8 tail, by the first CTA.
  const std::size_t tail0 = n8 * 8;
  if (blockIdx.x == 0 && tail0 + tid < n) m = fmaxf(m, fabsf(__bfloat162float(x[tail0 + tid])));

  // 2. Block max, then the grid barrier; the last CTA to arrive publishes the scale.
  m = WarpMax(m);
  if (tid % 32 == 0) warp_max[tid / 32] = m;
  __syncthreads();
  if (tid < 32) {
    float b = tid < kThreads / 32 ? warp_max[tid] : 0.0f;
    b = WarpMax(b);
    if (tid == 0) {
      atomicMax(&state[0], __float_as_uint(b));
      __threadfence();
      const unsigned arrived = atomicAdd(&state[1], 1u);
      if (arrived == gridDim.x - 1) {
        __threadfence();
        const float amax = __uint_as_float(atomicExch(&state[0], 0u));
        atomicExch(&state[1], 0u);
        const float s = ScaleFromAmax(amax);
        *reinterpret_cast<volatile float*>(scale) = s;
        __threadfence();
        atomicAdd(&state[2], 1u);  // release
      } else {
        while (*reinterpret_cast<volatile unsigned*>(&state[2]) == generation) __nanosleep(64);
        __threadfence();
      }
      inv_shared = 1.0f / *reinterpret_cast<volatile float*>(scale);
    }
  }
  __syncthreads();
  const float inv = inv_shared;

  // 3. Quantize what was kept, then re-read the rest newest first.
#pragma unroll
  for (int j = 0; j < kRegVecs; ++j)
    if (at(j) < count) q8[at(j)] = Quantize8(reg[j], inv);
#pragma unroll 4
  for (int j = 0; j < kSmemVecs; ++j) {
    const std::size_t i = at(kRegVecs + j);
    if (i < count) q8[i] = Quantize8(kept[j * kThreads + tid], inv);
  }
  for (std::size_t left = per_thread > first_reread ? per_thread - first_reread : 0; left > 0;) {
    const std::size_t take = left >= 4 ? 4 : left;
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const std::size_t j = first_reread + left - 1 - static_cast<std::size_t>(u);
      const std::size_t i = at(j);
      v[u] = (static_cast<std::size_t>(u) < take && i < count) ? __ldg(x8 + i) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const std::size_t j = first_reread + left - 1 - static_cast<std::size_t>(u);
      const std::size_t i = at(j);
      if (static_cast<std::size_t>(u) < take && i < count) q8[i] = Quantize8(v[u], inv);
    }
    left -= take;
  }
  if (blockIdx.x == 0 && tail0 + tid < n) q[tail0 + tid] = QuantizeOne(__bfloat162float(x[tail0 + tid]), inv);
}

constexpr std::size_t kSmemBytes = sizeof(uint4) * kSmemVecs * kThreads;

int FusedGrid() {
  static const int grid = [] {
    SC_CUDA_CHECK(cudaFuncSetAttribute(quant_fp8_tensor_fused, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(kSmemBytes)));
    int per_sm = 0;
    SC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, quant_fp8_tensor_fused, kThreads, kSmemBytes));
    if (per_sm < 1) throw Error("quant_fp8_tensor_fused: no CTA fits on a multiprocessor");
    return std::min(per_sm, kCtasPerSm) * Context().prop.multiProcessorCount;
  }();
  return grid;
}

}  // namespace

int QuantFp8TensorFusedGrid() {
  return FusedGrid();
}

void QuantFp8TensorFused(const void* x_bf16, std::size_t n, unsigned* state, float* scale, void* q_e4m3,
                         cudaStream_t stream) {
  // Fewer CTAs for a small tensor: at least one vector per thread each.
  const std::size_t vecs = n / 8;
  const int grid = static_cast<int>(
      std::max<std::size_t>(1, std::min<std::size_t>(static_cast<std::size_t>(FusedGrid()), (vecs + kThreads - 1) / kThreads)));
  const auto* x = static_cast<const __nv_bfloat16*>(x_bf16);
  auto* q = static_cast<unsigned char*>(q_e4m3);
  void* args[] = {const_cast<__nv_bfloat16**>(&x), &n, &state, &scale, &q};
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(grid));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmemBytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeCooperative;  // every CTA resident: the grid barrier cannot deadlock
  attr.val.cooperative = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  SC_CUDA_CHECK(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(quant_fp8_tensor_fused), args));
}

}  // namespace servecast::cuda
