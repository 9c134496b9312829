#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/quantize.h"
#include "backends/cuda/quantize_device.cuh"

namespace servecast::cuda {
namespace {

constexpr int kThreads = 256;

using namespace fp8dev;  // Unpack8, AbsMax8, Quantize8, QuantizeOne, ScaleFromAmax, WarpMax

// Max over the block; the result is valid in every thread.
__device__ __forceinline__ float BlockMax(float v) {
  __shared__ float warp_max[32];
  v = WarpMax(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_max[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = lane < warps ? warp_max[lane] : 0.0f;
  v = WarpMax(v);
  __syncthreads();  // warp_max may be reused by a later call
  return v;
}

__global__ void __launch_bounds__(kThreads)
    quant_fp8_tensor_amax(const __nv_bfloat16* __restrict__ x, std::size_t n, unsigned* __restrict__ state,
                          float* __restrict__ scale) {
  const std::size_t tid = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t n8 = n / 8;
  const uint4* x8 = reinterpret_cast<const uint4*>(x);
  float m = 0.0f;
  std::size_t i = tid;
  // Four independent 16-byte loads in flight per thread.
  for (; i + 3 * stride < n8; i += 4 * stride) {
    const uint4 a = __ldg(x8 + i), b = __ldg(x8 + i + stride), c = __ldg(x8 + i + 2 * stride),
                d = __ldg(x8 + i + 3 * stride);
    m = fmaxf(m, fmaxf(fmaxf(AbsMax8(a), AbsMax8(b)), fmaxf(AbsMax8(c), AbsMax8(d))));
  }
  for (; i < n8; i += stride) m = fmaxf(m, AbsMax8(__ldg(x8 + i)));
  for (std::size_t t = n8 * 8 + tid; t < n; t += stride) m = fmaxf(m, fabsf(__bfloat162float(x[t])));
  m = BlockMax(m);
  if (threadIdx.x == 0) {
    // amax >= 0, so its float bits order like unsigned integers.
    atomicMax(&state[0], __float_as_uint(m));
    __threadfence();
    const unsigned done = atomicAdd(&state[1], 1u);
    if (done == gridDim.x - 1) {  // the last block: every block's max is in
      __threadfence();
      const float amax = __uint_as_float(atomicExch(&state[0], 0u));
      atomicExch(&state[1], 0u);
      *scale = ScaleFromAmax(amax);
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    quant_fp8_tensor_apply(const __nv_bfloat16* __restrict__ x, std::size_t n, const float* __restrict__ scale,
                           unsigned char* __restrict__ q) {
  const float inv = 1.0f / *scale;
  const std::size_t tid = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t n8 = n / 8;
  const uint4* x8 = reinterpret_cast<const uint4*>(x);
  uint2* q8 = reinterpret_cast<uint2*>(q);
  // Walks the tensor from its end: right after quant_fp8_tensor_amax, which finished
  // at the end, the first vectors read here are still in L2.
  std::size_t i = tid;
  for (; i + 3 * stride < n8; i += 4 * stride) {
    const std::size_t j0 = n8 - 1 - i, j1 = j0 - stride, j2 = j1 - stride, j3 = j2 - stride;
    const uint4 a = __ldg(x8 + j0), b = __ldg(x8 + j1), c = __ldg(x8 + j2), d = __ldg(x8 + j3);
    q8[j0] = Quantize8(a, inv);
    q8[j1] = Quantize8(b, inv);
    q8[j2] = Quantize8(c, inv);
    q8[j3] = Quantize8(d, inv);
  }
  for (; i < n8; i += stride) q8[n8 - 1 - i] = Quantize8(__ldg(x8 + (n8 - 1 - i)), inv);
  for (std::size_t t = n8 * 8 + tid; t < n; t += stride) q[t] = QuantizeOne(__bfloat162float(x[t]), inv);
}

// A half-warp per (row, 128-column group): 16 lanes x 8 values, one 16-byte load each.
// Units are numbered group-major (u = g * rows + i), so a block's 16 units are 16
// consecutive rows of one group and their scales land in 64 contiguous bytes.
__global__ void __launch_bounds__(kThreads)
    quant_fp8_group128(const __nv_bfloat16* __restrict__ x, std::int64_t rows, std::int64_t k,
                       unsigned char* __restrict__ q, float* __restrict__ scales) {
  const std::int64_t groups = k / 128;
  const std::int64_t units = rows * groups;
  const std::int64_t u = blockIdx.x * static_cast<std::int64_t>(kThreads / 16) + threadIdx.x / 16;
  const int hl = threadIdx.x % 16;
  const bool valid = u < units;
  const std::int64_t g = valid ? u / rows : 0, i = valid ? u % rows : 0;
  const std::int64_t off = i * k + g * 128 + hl * 8;
  uint4 v = make_uint4(0, 0, 0, 0);
  if (valid) v = __ldg(reinterpret_cast<const uint4*>(x + off));
  float m = AbsMax8(v);
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  const float s = ScaleFromAmax(m);
  if (valid) {
    *reinterpret_cast<uint2*>(q + off) = Quantize8(v, 1.0f / s);
    if (hl == 0) scales[g * rows + i] = s;
  }
}

// One block per 128x128 tile: 2048 16-byte vectors, 8 per thread, held in registers
// between the amax and the quantization pass.
__global__ void __launch_bounds__(kThreads)
    quant_fp8_block128x128(const __nv_bfloat16* __restrict__ w, std::int64_t rows, std::int64_t k,
                           std::int64_t scale_ld, unsigned char* __restrict__ q, float* __restrict__ scales) {
  const std::int64_t rb = blockIdx.x, kb = blockIdx.y;
  constexpr int kPer = 128 * 16 / kThreads;
  uint4 v[kPer];
  float m = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int idx = threadIdx.x + j * kThreads;
    const std::int64_t r = rb * 128 + idx / 16;
    v[j] = make_uint4(0, 0, 0, 0);
    if (r < rows) v[j] = __ldg(reinterpret_cast<const uint4*>(w + r * k + kb * 128 + (idx % 16) * 8));
    m = fmaxf(m, AbsMax8(v[j]));
  }
  m = BlockMax(m);
  const float s = ScaleFromAmax(m);
  const float inv = 1.0f / s;
  if (threadIdx.x == 0) scales[rb * scale_ld + kb] = s;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int idx = threadIdx.x + j * kThreads;
    const std::int64_t r = rb * 128 + idx / 16;
    if (r < rows) *reinterpret_cast<uint2*>(q + r * k + kb * 128 + (idx % 16) * 8) = Quantize8(v[j], inv);
  }
}

__global__ void amax_bf16_reference(const unsigned short* __restrict__ x, std::size_t n, unsigned* __restrict__ out) {
  float m = 0.0f;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    m = fmaxf(m, fabsf(__uint_as_float(static_cast<unsigned>(x[i]) << 16)));
  atomicMax(out, __float_as_uint(m));
}

__global__ void count_non_finite_bf16(const unsigned short* __restrict__ x, std::size_t n,
                                      unsigned long long* __restrict__ count) {
  unsigned long long c = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    c += (x[i] & 0x7f80u) == 0x7f80u;
  if (c) atomicAdd(count, c);
}

__global__ void count_nan_e4m3(const unsigned char* __restrict__ q, std::size_t n,
                               unsigned long long* __restrict__ count) {
  unsigned long long c = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    c += (q[i] & 0x7fu) == 0x7fu;
  if (c) atomicAdd(count, c);
}

__global__ void scale_bf16_by_block_pattern(__nv_bfloat16* __restrict__ x, std::int64_t rows, std::int64_t cols,
                                            std::int64_t row_block, int salt) {
  const std::int64_t n = rows * cols;
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = t / cols, c = t % cols;
    const int e = static_cast<int>(((i / row_block) * 5 + (c / 128) * 3 + salt) % 7) - 3;
    x[t] = __float2bfloat16(ldexpf(__bfloat162float(x[t]), e));
  }
}

unsigned GridFor(std::size_t work_items, int per_sm) {
  const int sms = Context().prop.multiProcessorCount;
  std::size_t blocks = (work_items + kThreads - 1) / kThreads;
  blocks = std::min<std::size_t>(blocks, static_cast<std::size_t>(sms) * per_sm);
  return static_cast<unsigned>(std::max<std::size_t>(blocks, 1));
}

}  // namespace

void QuantFp8TensorAmax(const void* x_bf16, std::size_t n, unsigned* state, float* scale, cudaStream_t stream) {
  quant_fp8_tensor_amax<<<GridFor((n + 7) / 8, 8), kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(x_bf16), n,
                                                                          state, scale);
  SC_CUDA_CHECK_LAUNCH();
}

void QuantFp8TensorApply(const void* x_bf16, std::size_t n, const float* scale, void* q_e4m3, cudaStream_t stream) {
  quant_fp8_tensor_apply<<<GridFor((n + 7) / 8, 16), kThreads, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(x_bf16), n, scale, static_cast<unsigned char*>(q_e4m3));
  SC_CUDA_CHECK_LAUNCH();
}

void QuantFp8Group128(const void* x_bf16, std::int64_t rows_padded, std::int64_t k, void* q_e4m3, float* scales,
                      cudaStream_t stream) {
  if (k % 128 != 0 || rows_padded % 4 != 0 || rows_padded <= 0)
    throw Error("QuantFp8Group128: needs k % 128 == 0 and rows_padded % 4 == 0; got k=" + std::to_string(k) +
                " rows_padded=" + std::to_string(rows_padded));
  const std::int64_t units = rows_padded * (k / 128);
  const std::int64_t blocks = (units + kThreads / 16 - 1) / (kThreads / 16);
  quant_fp8_group128<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(x_bf16), rows_padded, k, static_cast<unsigned char*>(q_e4m3), scales);
  SC_CUDA_CHECK_LAUNCH();
}

void QuantFp8Block128x128(const void* w_bf16, std::int64_t rows, std::int64_t k, std::int64_t scale_ld, void* q_e4m3,
                          float* scales, cudaStream_t stream) {
  if (k % 128 != 0 || scale_ld < k / 128)
    throw Error("QuantFp8Block128x128: needs k % 128 == 0 and scale_ld >= k / 128; got k=" + std::to_string(k) +
                " scale_ld=" + std::to_string(scale_ld));
  dim3 grid(static_cast<unsigned>((rows + 127) / 128), static_cast<unsigned>(k / 128));
  quant_fp8_block128x128<<<grid, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(w_bf16), rows, k, scale_ld,
                                                        static_cast<unsigned char*>(q_e4m3), scales);
  SC_CUDA_CHECK_LAUNCH();
}

void AmaxBf16Reference(const void* x_bf16, std::size_t n, float* amax, cudaStream_t stream) {
  SC_CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  amax_bf16_reference<<<GridFor(n, 8), kThreads, 0, stream>>>(static_cast<const unsigned short*>(x_bf16), n,
                                                              reinterpret_cast<unsigned*>(amax));
  SC_CUDA_CHECK_LAUNCH();
}

void CountNonFiniteBf16(const void* x_bf16, std::size_t n, unsigned long long* count, cudaStream_t stream) {
  SC_CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof(unsigned long long), stream));
  count_non_finite_bf16<<<GridFor(n, 8), kThreads, 0, stream>>>(static_cast<const unsigned short*>(x_bf16), n, count);
  SC_CUDA_CHECK_LAUNCH();
}

void CountNanE4m3(const void* q, std::size_t n, unsigned long long* count, cudaStream_t stream) {
  SC_CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof(unsigned long long), stream));
  count_nan_e4m3<<<GridFor(n, 8), kThreads, 0, stream>>>(static_cast<const unsigned char*>(q), n, count);
  SC_CUDA_CHECK_LAUNCH();
}

void ScaleBf16ByBlockPattern(void* x_bf16, std::int64_t rows, std::int64_t cols, std::int64_t row_block, int salt,
                             cudaStream_t stream) {
  scale_bf16_by_block_pattern<<<GridFor(static_cast<std::size_t>(rows * cols), 16), kThreads, 0, stream>>>(
      static_cast<__nv_bfloat16*>(x_bf16), rows, cols, std::max<std::int64_t>(row_block, 1), salt);
  SC_CUDA_CHECK_LAUNCH();
}

double E4m3Ulp(double v) {
  const double a = std::fabs(v);
  if (a < std::ldexp(1.0, -6)) return std::ldexp(1.0, -9);
  return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(a))) - 3);
}

}  // namespace servecast::cuda
