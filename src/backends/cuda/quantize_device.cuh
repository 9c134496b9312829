#pragma once

// Device helpers of the fp8 (e4m3) quantization kernels (quantize.cu,
// kv_cache_append.cu; the benchmark-only benchmarks/quant_fp8_fused.cu): eight bf16
// values travel as one 16-byte vector; e4m3 conversion saturates and rounds to
// nearest even.

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "backends/cuda/quantize.h"

namespace servecast::cuda::fp8dev {

// Eight bf16 values packed in 16 bytes -> floats (element 0 in the low half of word 0).
__device__ __forceinline__ void Unpack8(const uint4& v, float (&f)[8]) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

__device__ __forceinline__ float AbsMax8(const uint4& v) {
  float f[8];
  Unpack8(v, f);
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(f[i]));
  return m;
}

// Eight bf16 values times `inv` -> eight e4m3 bytes.
__device__ __forceinline__ uint2 Quantize8(const uint4& v, float inv) {
  float f[8];
  Unpack8(v, f);
  unsigned short p[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    p[i] = __nv_cvt_float2_to_fp8x2(make_float2(f[2 * i] * inv, f[2 * i + 1] * inv), __NV_SATFINITE, __NV_E4M3);
  return make_uint2(static_cast<unsigned>(p[0]) | (static_cast<unsigned>(p[1]) << 16),
                    static_cast<unsigned>(p[2]) | (static_cast<unsigned>(p[3]) << 16));
}

__device__ __forceinline__ unsigned char QuantizeOne(float x, float inv) {
  return static_cast<unsigned char>(__nv_cvt_float2_to_fp8x2(make_float2(x * inv, 0.0f), __NV_SATFINITE, __NV_E4M3) &
                                    0xffu);
}

__device__ __forceinline__ float ScaleFromAmax(float amax) {
  return fmaxf(amax / kFp8E4m3Max, kFp8MinScale);
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

}  // namespace servecast::cuda::fp8dev
