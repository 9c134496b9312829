// The short causal convolution (short_conv_kernels.h), prefill and decode. Both kernels
// take d_conv as a template parameter, so every load is issued before the first
// multiply (a runtime bound serialized them: one memory latency per tap). A thread
// covers kShortConvVec channels (one 16-byte load per row) of kRun consecutive tokens
// in prefill, loading each of their inputs once plus the K - 1 before (a thread per
// token loaded every input K times, from L2: 1.4 TB/s at 8 x 32768 tokens), or of one
// sequence in decode. The channels' K taps are kShortConvVec * K consecutive bf16 of
// w, read as K 16-byte loads.

#include "backends/cuda/short_conv_kernels.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "backends/cuda/bf16_pack.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dispatch.h"
#include "core/error.h"

namespace servecast::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int V = kShortConvVec;  // channels per thread (one 16-byte load)
constexpr int kRun = 8;           // consecutive tokens per prefill thread (each input loaded once)

__device__ __forceinline__ float Silu(float x) { return x / (1.0f + __expf(-x)); }


template <int K>
__device__ __forceinline__ void LoadTaps(const __nv_bfloat16* __restrict__ w, int c0, float (&taps)[V][K]) {
  uint4 raw[K];
  const uint4* src = reinterpret_cast<const uint4*>(w + static_cast<std::int64_t>(c0) * K);
#pragma unroll
  for (int i = 0; i < K; ++i) raw[i] = src[i];
  const __nv_bfloat16* h = reinterpret_cast<const __nv_bfloat16*>(raw);
#pragma unroll
  for (int e = 0; e < V; ++e)
#pragma unroll
    for (int j = 0; j < K; ++j) taps[e][j] = __bfloat162float(h[e * K + j]);
}

// The accumulators' start: the channels' bias, or 0.
__device__ __forceinline__ void StartAcc(const __nv_bfloat16* __restrict__ bias, int c0, float (&acc)[V]) {
  if (bias == nullptr) {
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] = 0.0f;
  } else {
    Unpack8(*reinterpret_cast<const uint4*>(bias + c0), acc);
  }
}

template <int K>
__global__ void __launch_bounds__(kThreads) short_conv_prefill(const __nv_bfloat16* __restrict__ x,
                                                               const __nv_bfloat16* __restrict__ w,
                                                               const __nv_bfloat16* __restrict__ bias,
                                                               __nv_bfloat16* __restrict__ y,
                                                               __nv_bfloat16* __restrict__ state, std::int64_t batch,
                                                               std::int64_t seq, int C) {
  const int groups = C / V;
  const std::int64_t runs = (seq + kRun - 1) / kRun;  // token runs per sequence
  const std::int64_t total = batch * runs * groups;
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int c0 = static_cast<int>(idx % groups) * V;
    const std::int64_t rest = idx / groups, b = rest / runs, p0 = (rest % runs) * kRun;
    const std::int64_t n = seq - p0 < kRun ? seq - p0 : kRun;
    const __nv_bfloat16* xs = x + b * seq * C + c0;  // this sequence's channels c0..c0+7
    // in[k] = the input at position p0 - (K - 1) + k (0 before the sequence or past the run).
    uint4 in[kRun + K - 1];
#pragma unroll
    for (int k = 0; k < kRun + K - 1; ++k) {
      const std::int64_t pos = p0 - (K - 1) + k;
      in[k] = pos >= 0 && pos < p0 + n ? *reinterpret_cast<const uint4*>(xs + pos * C) : uint4{0, 0, 0, 0};
    }
    float taps[V][K];
    LoadTaps<K>(w, c0, taps);
    float start[V];
    StartAcc(bias, c0, start);
#pragma unroll
    for (int i = 0; i < kRun; ++i) {
      if (i >= n) break;
      float acc[V], xin[V];
#pragma unroll
      for (int e = 0; e < V; ++e) acc[e] = start[e];
#pragma unroll
      for (int j = 0; j < K; ++j) {
        Unpack8(in[i + j], xin);
#pragma unroll
        for (int e = 0; e < V; ++e) acc[e] += taps[e][j] * xin[e];
      }
#pragma unroll
      for (int e = 0; e < V; ++e) acc[e] = Silu(acc[e]);
      *reinterpret_cast<uint4*>(y + (b * seq + p0 + i) * C + c0) = Pack8(acc);
    }
    if constexpr (K > 1) {
      // Slot j of the window holds position seq - (K - 1) + j (zeros before the sequence).
      __nv_bfloat16* win = state + b * (K - 1) * C + c0;
#pragma unroll
      for (int i = 0; i < kRun; ++i) {
        const std::int64_t slot = p0 + i - (seq - (K - 1));
        if (i < n && slot >= 0) *reinterpret_cast<uint4*>(win + slot * C) = in[i + K - 1];
      }
      if (p0 == 0)
        for (std::int64_t j = 0; j < (K - 1) - seq; ++j) *reinterpret_cast<uint4*>(win + j * C) = uint4{0, 0, 0, 0};
    }
  }
}

template <int K>
__global__ void __launch_bounds__(kThreads) short_conv_decode(const __nv_bfloat16* __restrict__ x,
                                                              const __nv_bfloat16* __restrict__ w,
                                                              const __nv_bfloat16* __restrict__ bias,
                                                              __nv_bfloat16* __restrict__ y,
                                                              __nv_bfloat16* __restrict__ state, std::int64_t batch,
                                                              int C) {
  const int groups = C / V;
  const std::int64_t total = batch * groups;
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t b = idx / groups;
    const int c0 = static_cast<int>(idx % groups) * V;
    __nv_bfloat16* win = state + b * (K - 1) * C + c0;
    uint4 in[K];  // the window, oldest first, then this token's input
#pragma unroll
    for (int j = 0; j < K - 1; ++j) in[j] = *reinterpret_cast<const uint4*>(win + j * C);
    in[K - 1] = *reinterpret_cast<const uint4*>(x + b * C + c0);
    float taps[V][K];
    LoadTaps<K>(w, c0, taps);
    float acc[V];
    StartAcc(bias, c0, acc);
    float v[V];
#pragma unroll
    for (int j = 0; j < K; ++j) {
      Unpack8(in[j], v);
#pragma unroll
      for (int e = 0; e < V; ++e) acc[e] += taps[e][j] * v[e];
    }
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] = Silu(acc[e]);
    *reinterpret_cast<uint4*>(y + b * C + c0) = Pack8(acc);
#pragma unroll
    for (int j = 0; j < K - 1; ++j) *reinterpret_cast<uint4*>(win + j * C) = in[j + 1];
  }
}

int FlatBlocks(std::int64_t items) {
  return static_cast<int>(std::clamp<std::int64_t>((items + kThreads - 1) / kThreads, 1, 65535LL * 16));
}

void CheckShape(const ShortConvShape& s, const char* what) {
  if (s.batch < 1 || s.seq < 1 || s.channels < V || s.channels % V != 0 || s.channels > (1LL << 30) || s.conv < 1 ||
      s.conv > kShortConvMax)
    throw Error(std::string(what) + ": bad shape (batch " + std::to_string(s.batch) + ", seq " +
                std::to_string(s.seq) + ", channels " + std::to_string(s.channels) + ", d_conv " +
                std::to_string(s.conv) + "); expected channels a positive multiple of " + std::to_string(V) +
                " and 1 <= d_conv <= " + std::to_string(kShortConvMax));
}

// Calls f(std::integral_constant<int, k>) for 1 <= k <= kShortConvMax.
template <class F>
void WithConvWidth(std::int64_t k, F&& f) {
  if (!DispatchConstant<1, kShortConvMax>(k, f))
    throw Error("short conv: d_conv " + std::to_string(k) + " outside 1.." + std::to_string(kShortConvMax));
}

}  // namespace

void LaunchShortConvPrefill(const ShortConvShape& s, const void* x, const void* w, const void* bias, void* y,
                            void* window, cudaStream_t stream) {
  CheckShape(s, "LaunchShortConvPrefill");
  const int C = static_cast<int>(s.channels);
  WithConvWidth(s.conv, [&](auto kc) {
    const std::int64_t runs = (s.seq + kRun - 1) / kRun;
    short_conv_prefill<decltype(kc)::value><<<FlatBlocks(s.batch * runs * (C / V)), kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(w),
        static_cast<const __nv_bfloat16*>(bias), static_cast<__nv_bfloat16*>(y),
        static_cast<__nv_bfloat16*>(window), s.batch, s.seq, C);
  });
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchShortConvDecode(const ShortConvShape& s, const void* x, const void* w, const void* bias, void* y,
                           void* window, cudaStream_t stream) {
  CheckShape(s, "LaunchShortConvDecode");
  const int C = static_cast<int>(s.channels);
  WithConvWidth(s.conv, [&](auto kc) {
    short_conv_decode<decltype(kc)::value><<<FlatBlocks(s.batch * (C / V)), kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(w),
        static_cast<const __nv_bfloat16*>(bias), static_cast<__nv_bfloat16*>(y),
        static_cast<__nv_bfloat16*>(window), s.batch, C);
  });
  SC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace servecast::cuda
