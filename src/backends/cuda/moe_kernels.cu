#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <climits>
#include <cmath>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/moe_kernels.h"
#include "backends/cuda/quantize.h"
#include "core/error.h"

namespace servecast::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr unsigned kFullMask = 0xffffffffu;

int CheckedGrid(std::int64_t blocks, const char* what) {
  if (blocks <= 0 || blocks > INT_MAX)
    throw Error(std::string("moe kernels: ") + what + " needs " + std::to_string(blocks) +
                " blocks; expected 1 .. 2^31-1");
  return static_cast<int>(blocks);
}

int CheckedInt(std::int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX)
    throw Error(std::string("moe kernels: ") + what + " = " + std::to_string(v) + " exceeds 32 bits");
  return static_cast<int>(v);
}

// ---- router top-k -----------------------------------------------------------------

constexpr int kRouterWarps = 4;

__global__ void __launch_bounds__(kRouterWarps * 32)
    moe_router_topk(const bf16* __restrict__ logits, int tokens, int experts, int topk, std::int32_t* __restrict__ ids,
                    float* __restrict__ weights) {
  extern __shared__ float router_rows[];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int t = static_cast<int>(blockIdx.x) * kRouterWarps + warp;
  if (t >= tokens) return;  // the whole warp leaves; no block-wide barrier below
  float* row = router_rows + static_cast<std::size_t>(warp) * static_cast<std::size_t>(experts);
  const bf16* src = logits + static_cast<std::size_t>(t) * static_cast<std::size_t>(experts);
  for (int e = lane; e < experts; e += 32) row[e] = __bfloat162float(src[e]);
  __syncwarp();
  float picked_v = 0.0f;
  int picked_i = INT_MAX;
  for (int j = 0; j < topk; ++j) {
    // Lane-local best (ascending scan with a strict >: the lowest index among equals),
    // then a butterfly argmax ordered by (value desc, index asc): every lane ends
    // with the same winner.
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int e = lane; e < experts; e += 32) {
      const float v = row[e];
      if (v > bv) {
        bv = v;
        bi = e;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(kFullMask, bv, o);
      const int oi = __shfl_xor_sync(kFullMask, bi, o);
      if (ov > bv || (ov == bv && oi < bi)) {
        bv = ov;
        bi = oi;
      }
    }
    if (lane == j) {
      picked_v = bv;
      picked_i = bi;
    }
    if (bi != INT_MAX && bi % 32 == lane) row[bi] = -INFINITY;  // taken
    __syncwarp();
  }
  const float max_v = __shfl_sync(kFullMask, picked_v, 0);
  const float ex = lane < topk ? expf(picked_v - max_v) : 0.0f;
  float sum = ex;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(kFullMask, sum, o);
  if (lane < topk) {
    const std::size_t at =
        static_cast<std::size_t>(t) * static_cast<std::size_t>(topk) + static_cast<std::size_t>(lane);
    ids[at] = picked_i;
    weights[at] = ex / sum;
  }
}

// ---- permutation ------------------------------------------------------------------

constexpr int kFlatThreads = 256;

__global__ void __launch_bounds__(kFlatThreads)
    moe_count_local(const std::int32_t* __restrict__ ids, std::int64_t picks, int local, int* __restrict__ counts) {
  const std::int64_t a = static_cast<std::int64_t>(blockIdx.x) * kFlatThreads + threadIdx.x;
  if (a >= picks) return;
  const int e = ids[a];
  if (e >= 0 && e < local) atomicAdd(&counts[e], 1);
}

constexpr int kScanThreads = 1024;

__global__ void __launch_bounds__(kScanThreads)
    moe_expert_offsets(const int* __restrict__ counts, int local, int align, int* __restrict__ offsets,
                       int* __restrict__ cursor) {
  __shared__ int sums[kScanThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const int per = (local + kScanThreads - 1) / kScanThreads;
  const int begin = tid * per;
  const int end = min(begin + per, local);
  int mine = 0;
  for (int e = begin; e < end; ++e) mine += (counts[e] + align - 1) / align * align;
  sums[tid] = mine;
  __syncthreads();
  for (int o = 1; o < kScanThreads; o <<= 1) {  // inclusive Hillis-Steele scan
    const int v = tid >= o ? sums[tid - o] : 0;
    __syncthreads();
    sums[tid] += v;
    __syncthreads();
  }
  int run = sums[tid] - mine;
  for (int e = begin; e < end; ++e) {
    offsets[e] = run;
    cursor[e] = run;
    run += (counts[e] + align - 1) / align * align;
  }
  if (tid == kScanThreads - 1) offsets[local] = sums[kScanThreads - 1];
}

constexpr int kScatterThreads = 128;

template <class V>
__global__ void __launch_bounds__(kScatterThreads)
    moe_scatter_rows(const std::int32_t* __restrict__ ids, int topk, int local, int* __restrict__ cursor,
                     int* __restrict__ slot_of, int* __restrict__ row_token, std::int64_t capacity,
                     const unsigned char* __restrict__ src, unsigned char* __restrict__ dst, std::int64_t row_bytes) {
  __shared__ int s_slot;
  const std::int64_t a = blockIdx.x;
  const std::int64_t t = a / topk;
  if (threadIdx.x == 0) {
    const int e = ids[a];
    int slot = -1;
    if (e >= 0 && e < local) {
      slot = atomicAdd(&cursor[e], 1);
      if (slot >= capacity)
        slot = -1;
      else
        row_token[slot] = static_cast<int>(t);
    }
    slot_of[a] = slot;
    s_slot = slot;
  }
  __syncthreads();
  const int slot = s_slot;
  if (slot < 0) return;
  const V* from = reinterpret_cast<const V*>(src + t * row_bytes);
  V* to = reinterpret_cast<V*>(dst + static_cast<std::int64_t>(slot) * row_bytes);
  const std::int64_t n = row_bytes / static_cast<std::int64_t>(sizeof(V));
  for (std::int64_t i = threadIdx.x; i < n; i += kScatterThreads) to[i] = from[i];
}

// ---- fp8 1x128 quantization in the segment layout -----------------------------------

constexpr int kQuantWarps = 8;

__device__ __forceinline__ void LoadBf16x4(const bf16* p, float (&f)[4]) {
  const uint2 v = *reinterpret_cast<const uint2*>(p);
  f[0] = __uint_as_float(v.x << 16);
  f[1] = __uint_as_float(v.x & 0xffff0000u);
  f[2] = __uint_as_float(v.y << 16);
  f[3] = __uint_as_float(v.y & 0xffff0000u);
}

template <bool SILU>
__global__ void __launch_bounds__(kQuantWarps * 32)
    moe_quant_fp8_group128(const bf16* __restrict__ in, std::int64_t rows, std::int64_t k,
                           const int* __restrict__ offsets, const int* __restrict__ counts, int local,
                           unsigned char* __restrict__ q, float* __restrict__ scales) {
  const std::int64_t groups = k / 128;
  const std::int64_t u = static_cast<std::int64_t>(blockIdx.x) * kQuantWarps + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (u >= rows * groups) return;  // uniform over the warp
  const std::int64_t r = u / groups, g = u % groups;
  int lo = 0, hi = local - 1;  // the largest e with offsets[e] <= r
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= r)
      lo = mid;
    else
      hi = mid - 1;
  }
  const std::int64_t base = offsets[lo];
  const std::int64_t n = offsets[lo + 1] - base;
  const std::int64_t i = r - base;
  const bool valid = i >= 0 && i < counts[lo];
  const std::int64_t col = g * 128 + lane * 4;
  float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (valid) {
    if (SILU) {
      float up[4];
      LoadBf16x4(in + r * 2 * k + col, v);
      LoadBf16x4(in + r * 2 * k + k + col, up);
#pragma unroll
      for (int c = 0; c < 4; ++c) v[c] = v[c] / (1.0f + __expf(-v[c])) * up[c];
    } else {
      LoadBf16x4(in + r * k + col, v);
    }
  }
  float m = 0.0f;
#pragma unroll
  for (int c = 0; c < 4; ++c) m = fmaxf(m, fabsf(v[c]));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, o));
  const float s = fmaxf(m / kFp8E4m3Max, kFp8MinScale);
  const float inv = 1.0f / s;
  const unsigned lo2 = __nv_cvt_float2_to_fp8x2(make_float2(v[0] * inv, v[1] * inv), __NV_SATFINITE, __NV_E4M3);
  const unsigned hi2 = __nv_cvt_float2_to_fp8x2(make_float2(v[2] * inv, v[3] * inv), __NV_SATFINITE, __NV_E4M3);
  *reinterpret_cast<unsigned*>(q + r * k + col) = (lo2 & 0xffffu) | ((hi2 & 0xffffu) << 16);
  const std::int64_t at = groups * base + g * n + i;
  if (lane == 0 && at >= 0 && at < groups * rows) scales[at] = s;
}

// ---- combine ----------------------------------------------------------------------

template <int N>
struct alignas(2 * N) Bf16Pack {
  bf16 e[N];
};

constexpr int kCombineThreads = 256;

template <int VEC>
__global__ void __launch_bounds__(kCombineThreads)
    moe_combine(const bf16* __restrict__ expert_out, const int* __restrict__ slot_of, const float* __restrict__ weights,
                int topk, int hidden, bf16* __restrict__ out) {
  __shared__ int s_slot[kMoeMaxTopk];
  __shared__ float s_w[kMoeMaxTopk];
  const std::int64_t t = blockIdx.x;
  if (static_cast<int>(threadIdx.x) < topk) {
    s_slot[threadIdx.x] = slot_of[t * topk + threadIdx.x];
    s_w[threadIdx.x] = weights[t * topk + threadIdx.x];
  }
  __syncthreads();
  for (int c = static_cast<int>(threadIdx.x) * VEC; c < hidden; c += kCombineThreads * VEC) {
    float acc[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc[e] = 0.0f;
    for (int j = 0; j < topk; ++j) {
      const int s = s_slot[j];
      if (s < 0) continue;
      const Bf16Pack<VEC> v =
          *reinterpret_cast<const Bf16Pack<VEC>*>(expert_out + static_cast<std::int64_t>(s) * hidden + c);
      const float w = s_w[j];
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[e] += w * __bfloat162float(v.e[e]);
    }
    Bf16Pack<VEC> o;
#pragma unroll
    for (int e = 0; e < VEC; ++e) o.e[e] = __float2bfloat16_rn(acc[e]);
    *reinterpret_cast<Bf16Pack<VEC>*>(out + t * hidden + c) = o;
  }
}

}  // namespace

void LaunchMoeRouterTopk(const void* logits_bf16, std::int64_t tokens, std::int64_t experts, int topk,
                         std::int32_t* ids, float* weights, cudaStream_t stream) {
  if (experts < 1 || experts > kMoeMaxExperts || topk < 1 || topk > kMoeMaxTopk || topk > experts)
    throw Error("moe router: experts " + std::to_string(experts) + ", topk " + std::to_string(topk) +
                " out of range (1 <= topk <= min(experts, " + std::to_string(kMoeMaxTopk) +
                "), experts <= " + std::to_string(kMoeMaxExperts) + ")");
  const int t = CheckedInt(tokens, "num_tokens");
  const int blocks = CheckedGrid((tokens + kRouterWarps - 1) / kRouterWarps, "moe_router_topk");
  const std::size_t smem = static_cast<std::size_t>(kRouterWarps) * static_cast<std::size_t>(experts) * sizeof(float);
  moe_router_topk<<<blocks, kRouterWarps * 32, smem, stream>>>(static_cast<const bf16*>(logits_bf16), t,
                                                               static_cast<int>(experts), topk, ids, weights);
  SC_CUDA_CHECK_LAUNCH();
}

void LaunchMoeCountLocal(const std::int32_t* ids, std::int64_t picks, std::int64_t local_experts, int* counts,
                         cudaStream_t stream) {
  const int local = CheckedInt(local_experts, "local experts");
  SC_CUDA_CHECK(cudaMemsetAsync(counts, 0, static_cast<std::size_t>(local) * sizeof(int), stream));
  const int blocks = CheckedGrid((picks + kFlatThreads - 1) / kFlatThreads, "moe_count_local");
  moe_count_local<<<blocks, kFlatThreads, 0, stream>>>(ids, picks, local, counts);
  SC_CUDA_CHECK_LAUNCH();
}

void LaunchMoeOffsets(const int* counts, std::int64_t local_experts, int align, int* offsets, int* cursor,
                      cudaStream_t stream) {
  if (local_experts < 1 || local_experts > kMoeMaxExperts || align < 1)
    throw Error("moe offsets: local experts " + std::to_string(local_experts) + " or align " + std::to_string(align) +
                " out of range");
  moe_expert_offsets<<<1, kScanThreads, 0, stream>>>(counts, static_cast<int>(local_experts), align, offsets, cursor);
  SC_CUDA_CHECK_LAUNCH();
}

void LaunchMoeScatterRows(const std::int32_t* ids, std::int64_t tokens, int topk, std::int64_t local_experts,
                          int* cursor, int* slot_of, int* row_token, std::int64_t capacity, const void* src, void* dst,
                          std::int64_t row_bytes, cudaStream_t stream) {
  const int local = CheckedInt(local_experts, "local experts");
  const int blocks = CheckedGrid(tokens * topk, "moe_scatter_rows");
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  if (row_bytes % 16 == 0)
    moe_scatter_rows<uint4><<<blocks, kScatterThreads, 0, stream>>>(ids, topk, local, cursor, slot_of, row_token,
                                                                    capacity, s, d, row_bytes);
  else if (row_bytes % 4 == 0)
    moe_scatter_rows<unsigned><<<blocks, kScatterThreads, 0, stream>>>(ids, topk, local, cursor, slot_of, row_token,
                                                                       capacity, s, d, row_bytes);
  else
    moe_scatter_rows<unsigned char><<<blocks, kScatterThreads, 0, stream>>>(ids, topk, local, cursor, slot_of,
                                                                            row_token, capacity, s, d, row_bytes);
  SC_CUDA_CHECK_LAUNCH();
}

void LaunchMoeQuantGroup128(const void* in_bf16, bool silu_mul, std::int64_t rows, std::int64_t k, const int* offsets,
                            const int* counts, std::int64_t local_experts, void* q_e4m3, float* scales,
                            cudaStream_t stream) {
  if (k <= 0 || k % 128 != 0)
    throw Error("moe fp8 1x128 quantizer: k = " + std::to_string(k) + " is not a multiple of 128");
  const int local = CheckedInt(local_experts, "local experts");
  const int blocks = CheckedGrid((rows * (k / 128) + kQuantWarps - 1) / kQuantWarps, "moe_quant_fp8_group128");
  const auto* in = static_cast<const bf16*>(in_bf16);
  auto* q = static_cast<unsigned char*>(q_e4m3);
  if (silu_mul)
    moe_quant_fp8_group128<true>
        <<<blocks, kQuantWarps * 32, 0, stream>>>(in, rows, k, offsets, counts, local, q, scales);
  else
    moe_quant_fp8_group128<false>
        <<<blocks, kQuantWarps * 32, 0, stream>>>(in, rows, k, offsets, counts, local, q, scales);
  SC_CUDA_CHECK_LAUNCH();
}

void LaunchMoeCombine(const void* expert_out_bf16, const int* slot_of, const float* weights, std::int64_t tokens,
                      int topk, std::int64_t hidden, void* out_bf16, cudaStream_t stream) {
  if (topk < 1 || topk > kMoeMaxTopk) throw Error("moe combine: topk " + std::to_string(topk) + " out of range");
  const int h = CheckedInt(hidden, "hidden_size");
  const int blocks = CheckedGrid(tokens, "moe_combine");
  const auto* eo = static_cast<const bf16*>(expert_out_bf16);
  auto* out = static_cast<bf16*>(out_bf16);
  if (h % 8 == 0)
    moe_combine<8><<<blocks, kCombineThreads, 0, stream>>>(eo, slot_of, weights, topk, h, out);
  else
    moe_combine<1><<<blocks, kCombineThreads, 0, stream>>>(eo, slot_of, weights, topk, h, out);
  SC_CUDA_CHECK_LAUNCH();
}

namespace {

__global__ void moe_gather_rows(const char* __restrict__ base, const std::int64_t* __restrict__ offsets,
                                std::int64_t row_bytes, char* __restrict__ dst) {
  const char* src = base + offsets[blockIdx.x];
  char* out = dst + static_cast<std::int64_t>(blockIdx.x) * row_bytes;
  for (std::int64_t i = threadIdx.x; i < row_bytes; i += blockDim.x) out[i] = src[i];
}

}  // namespace

void LaunchGatherRows(const void* base, const std::int64_t* offsets, std::int64_t count, std::int64_t row_bytes,
                      void* dst, cudaStream_t stream) {
  if (count == 0) return;
  const int blocks = CheckedGrid(count, "moe_gather_rows");
  moe_gather_rows<<<blocks, 256, 0, stream>>>(static_cast<const char*>(base), offsets, row_bytes,
                                              static_cast<char*>(dst));
  SC_CUDA_CHECK_LAUNCH();
}

}  // namespace servecast::cuda
