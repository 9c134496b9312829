// DeepSeek Sparse Attention's own kernels (dsa_kernels.h).

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "backends/cuda/attention_kernels.h"
#include "backends/cuda/bf16_pack.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dsa_kernels.h"
#include "backends/cuda/mma_ptx.cuh"
#include "backends/cuda/quantize.h"
#include "core/error.h"

namespace servecast::cuda {
namespace {

constexpr int kPage = kPagedKvPageSize;

__device__ __forceinline__ float Bf(const __nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ std::int64_t SlotOf(const std::int32_t* table, std::int64_t pages_per_seq, std::int64_t b,
                                               std::int64_t pos) {
  return static_cast<std::int64_t>(table[b * pages_per_seq + pos / kPage]) * kPage + pos % kPage;
}
__device__ __forceinline__ unsigned char ToE4m3(float x) {
  return static_cast<unsigned char>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

// ---- norms: one warp per row, the row in registers ------------------------------------

constexpr int kNormMaxChunks = 8;  // 8 x 32 lanes x 8 values = 2048 columns

__global__ void __launch_bounds__(256) dsa_norm(const __nv_bfloat16* x, std::int64_t x_stride, __nv_bfloat16* y,
                                                std::int64_t y_stride, std::int64_t rows, int width,
                                                const __nv_bfloat16* w, const __nv_bfloat16* bias, bool layer_norm,
                                                float eps) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const __nv_bfloat16* p = x + row * x_stride;
  __nv_bfloat16* q = y + row * y_stride;
  const int chunks = width / 8;
  float v[kNormMaxChunks][8];
  float sum = 0.f, sq = 0.f;
#pragma unroll
  for (int i = 0; i < kNormMaxChunks; ++i) {
    const int c = lane + 32 * i;
    if (c < chunks) {
      Unpack8(*reinterpret_cast<const uint4*>(p + c * 8), v[i]);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        sum += v[i][j];
        sq += v[i][j] * v[i][j];
      }
    }
  }
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) {
    sum += __shfl_xor_sync(0xffffffffu, sum, off);
    sq += __shfl_xor_sync(0xffffffffu, sq, off);
  }
  const float mean = layer_norm ? sum / width : 0.f;
  const float var = layer_norm ? fmaxf(sq / width - mean * mean, 0.f) : sq / width;
  const float inv = rsqrtf(var + eps);
#pragma unroll
  for (int i = 0; i < kNormMaxChunks; ++i) {
    const int c = lane + 32 * i;
    if (c < chunks) {
      float g[8], b[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      Unpack8(*reinterpret_cast<const uint4*>(w + c * 8), g);
      if (bias) Unpack8(*reinterpret_cast<const uint4*>(bias + c * 8), b);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[i][j] = (v[i][j] - mean) * inv * g[j] + b[j];
      *reinterpret_cast<uint4*>(q + c * 8) = Pack8(v[i]);
    }
  }
}

// ---- rotary: one thread per (token, group, pair); the angle in double -----------------

struct RopeLayout {
  std::int64_t row_stride, group_stride, offset;
};
__global__ void dsa_rope(const __nv_bfloat16* x, RopeLayout xl, __nv_bfloat16* y, RopeLayout yl, std::int64_t tokens,
                         std::int64_t isl, std::int64_t step, int groups, double log2_theta) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= tokens * groups * (kDsaRopeDim / 2)) return;
  const int pair = static_cast<int>(i % (kDsaRopeDim / 2));
  const std::int64_t rg = i / (kDsaRopeDim / 2);
  const std::int64_t r = rg / groups, g = rg % groups;
  const double pos = static_cast<double>(step + r % isl);
  const double angle = pos * exp2(-(2.0 * pair / kDsaRopeDim) * log2_theta);
  double s, c;
  sincos(angle, &s, &c);
  const __nv_bfloat162* p =
      reinterpret_cast<const __nv_bfloat162*>(x + r * xl.row_stride + g * xl.group_stride + xl.offset) + pair;
  __nv_bfloat162* q = reinterpret_cast<__nv_bfloat162*>(y + r * yl.row_stride + g * yl.group_stride + yl.offset) + pair;
  const float2 v = __bfloat1622float2(*p);
  const float cs = static_cast<float>(c), sn = static_cast<float>(s);
  *q = __floats2bfloat162_rn(v.x * cs - v.y * sn, v.y * cs + v.x * sn);
}

// ---- cache write: one CTA of 128 threads per new token -------------------------------

__global__ void __launch_bounds__(128) dsa_cache_write(const __nv_bfloat16* latent, std::int64_t latent_stride,
                                                       const __nv_bfloat16* index_k, const std::int32_t* table,
                                                       std::int64_t pages_per_seq, std::int64_t isl,
                                                       std::int64_t step, bool kv_fp8, float inv_kv_scale,
                                                       unsigned char* pool, unsigned char* index_pool,
                                                       float* index_scale) {
  const std::int64_t r = blockIdx.x;
  const std::int64_t slot = SlotOf(table, pages_per_seq, r / isl, step + r % isl);
  const int t = threadIdx.x;
  const __nv_bfloat16* src = latent + r * latent_stride;
  constexpr int kChunks = 576 / 8;
  if (t < kChunks) {
    const uint4 v = *reinterpret_cast<const uint4*>(src + t * 8);
    if (!kv_fp8) {
      *reinterpret_cast<uint4*>(pool + (slot * 576 + t * 8) * 2) = v;
    } else {
      float f[8];
      Unpack8(v, f);
      unsigned lo = 0, hi = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) lo |= static_cast<unsigned>(ToE4m3(f[i] * inv_kv_scale)) << (8 * i);
#pragma unroll
      for (int i = 0; i < 4; ++i) hi |= static_cast<unsigned>(ToE4m3(f[4 + i] * inv_kv_scale)) << (8 * i);
      *reinterpret_cast<uint2*>(pool + slot * 576 + t * 8) = make_uint2(lo, hi);
    }
  }
  // The index key: amax over its 128 values, then e4m3 with that scale.
  __shared__ float warp_max[4];
  const float v = Bf(index_k[r * kDsaIndexDim + t]);
  float m = fabsf(v);
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if (t % 32 == 0) warp_max[t / 32] = m;
  __syncthreads();
  const float amax = fmaxf(fmaxf(warp_max[0], warp_max[1]), fmaxf(warp_max[2], warp_max[3]));
  const float scale = fmaxf(amax / kFp8E4m3Max, kFp8MinScale);
  index_pool[slot * kDsaIndexDim + t] = ToE4m3(v / scale);
  if (t == 0) index_scale[slot] = scale;
}

// ---- indexer scores: bf16 mma.sync over 64-key tiles ---------------------------------

__device__ __forceinline__ unsigned Fp8x2ToBf16x2(unsigned w) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w & 0xffffu), __NV_E4M3);
  const float2 f = __half22float2(__half2(h));
  __nv_bfloat162 v = __floats2bfloat162_rn(f.x, f.y);
  return *reinterpret_cast<unsigned*>(&v);
}

constexpr int kKeyTile = 64;                  // keys per tile (one page)
constexpr int kMaxChunkTiles = 16;            // tiles per CTA at most (1,024 keys)
constexpr int kIRow = kDsaIndexDim + 8;       // bf16 per shared row (272 B: conflict-free ldmatrix)
static_assert(kKeyTile == kPage, "a key tile is one page");

template <int HEADS>
__global__ void __launch_bounds__(HEADS * 2) dsa_indexer_logits(const __nv_bfloat16* q, const __nv_bfloat16* w,
                                                                float w_scale, const unsigned char* index_pool,
                                                                const float* index_scale, const std::int32_t* table,
                                                                std::int64_t pages_per_seq, std::int64_t isl,
                                                                std::int64_t step, float* logits, std::int64_t ld,
                                                                int chunk_tiles) {
  constexpr int kThreads = HEADS * 2, kWarps = HEADS / 16;
  __shared__ __align__(16) __nv_bfloat16 qs[HEADS * kIRow];
  __shared__ __align__(16) __nv_bfloat16 ks[kKeyTile * kIRow];
  __shared__ float wsh[HEADS];
  __shared__ float ksc[kKeyTile];
  __shared__ float part[kWarps][kKeyTile];
  const std::int64_t r = blockIdx.y;
  const std::int64_t b = r / isl, n = step + r % isl + 1;  // keys this token sees
  const std::int64_t k_begin = static_cast<std::int64_t>(blockIdx.x) * chunk_tiles * kKeyTile;
  if (k_begin >= n) return;
  const std::int64_t k_end = min(n, k_begin + static_cast<std::int64_t>(chunk_tiles) * kKeyTile);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  for (int c = tid; c < HEADS * (kDsaIndexDim / 8); c += kThreads) {
    const int h = c / (kDsaIndexDim / 8), k = c % (kDsaIndexDim / 8);
    *reinterpret_cast<uint4*>(qs + h * kIRow + k * 8) =
        *reinterpret_cast<const uint4*>(q + (r * HEADS + h) * kDsaIndexDim + k * 8);
  }
  for (int h = tid; h < HEADS; h += kThreads) wsh[h] = Bf(w[r * HEADS + h]) * w_scale;
  __syncthreads();
  unsigned qf[kDsaIndexDim / 16][4];
#pragma unroll
  for (int k = 0; k < kDsaIndexDim / 16; ++k)
    LdMatrixX4(qf[k], qs + (warp * 16 + (lane & 15)) * kIRow + k * 16 + (lane >> 4) * 8);
  const float w0 = wsh[warp * 16 + lane / 4], w1 = wsh[warp * 16 + lane / 4 + 8];

  for (std::int64_t s0 = k_begin; s0 < k_end; s0 += kKeyTile) {
    const std::int64_t page = table[b * pages_per_seq + s0 / kPage];
    const unsigned char* src = index_pool + page * kPage * kDsaIndexDim;
    for (int c = tid; c < kKeyTile * (kDsaIndexDim / 16); c += kThreads) {
      const int row = c / (kDsaIndexDim / 16), k = c % (kDsaIndexDim / 16);
      uint4 o = make_uint4(0, 0, 0, 0);
      if (s0 + row < k_end) {
        const uint4 v = *reinterpret_cast<const uint4*>(src + row * kDsaIndexDim + k * 16);
        uint4 lo, hi;
        lo.x = Fp8x2ToBf16x2(v.x), lo.y = Fp8x2ToBf16x2(v.x >> 16), lo.z = Fp8x2ToBf16x2(v.y),
        lo.w = Fp8x2ToBf16x2(v.y >> 16);
        hi.x = Fp8x2ToBf16x2(v.z), hi.y = Fp8x2ToBf16x2(v.z >> 16), hi.z = Fp8x2ToBf16x2(v.w),
        hi.w = Fp8x2ToBf16x2(v.w >> 16);
        *reinterpret_cast<uint4*>(ks + row * kIRow + k * 16) = lo;
        *reinterpret_cast<uint4*>(ks + row * kIRow + k * 16 + 8) = hi;
      } else {
        *reinterpret_cast<uint4*>(ks + row * kIRow + k * 16) = o;
        *reinterpret_cast<uint4*>(ks + row * kIRow + k * 16 + 8) = o;
      }
    }
    for (int row = tid; row < kKeyTile; row += kThreads)
      ksc[row] = s0 + row < k_end ? index_scale[page * kPage + row] : 0.f;
    __syncthreads();
    float acc[kKeyTile / 8][4];
#pragma unroll
    for (int j = 0; j < kKeyTile / 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
#pragma unroll
    for (int k = 0; k < kDsaIndexDim / 16; ++k) {
#pragma unroll
      for (int j = 0; j < kKeyTile / 8; j += 2) {
        unsigned bf[4];
        LdMatrixX4(bf, ks + (j * 8 + (lane & 7) + ((lane >> 4) & 1) * 8) * kIRow + k * 16 + ((lane >> 3) & 1) * 8);
        Mma16816(acc[j], qf[k], bf[0], bf[1]);
        Mma16816(acc[j + 1], qf[k], bf[2], bf[3]);
      }
    }
    // relu, the head weights, and the sum over this warp's 16 heads.
#pragma unroll
    for (int j = 0; j < kKeyTile / 8; ++j) {
      float v0 = w0 * fmaxf(acc[j][0], 0.f) + w1 * fmaxf(acc[j][2], 0.f);
      float v1 = w0 * fmaxf(acc[j][1], 0.f) + w1 * fmaxf(acc[j][3], 0.f);
#pragma unroll
      for (int off = 4; off <= 16; off *= 2) {
        v0 += __shfl_xor_sync(0xffffffffu, v0, off);
        v1 += __shfl_xor_sync(0xffffffffu, v1, off);
      }
      if (lane < 4) {
        part[warp][j * 8 + 2 * lane] = v0;
        part[warp][j * 8 + 2 * lane + 1] = v1;
      }
    }
    __syncthreads();
    for (int col = tid; col < kKeyTile; col += kThreads) {
      if (s0 + col < k_end) {
        float sum = 0.f;
#pragma unroll
        for (int wi = 0; wi < kWarps; ++wi) sum += part[wi][col];
        logits[r * ld + s0 + col] = sum * ksc[col];
      }
    }
    __syncthreads();  // ks, ksc and part are rewritten by the next tile
  }
}

// ---- top-k: 8-bit radix select, one CTA per token ------------------------------------

constexpr int kTopkThreads = 512;

__device__ __forceinline__ unsigned Ordered(float f) {
  const unsigned u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__global__ void __launch_bounds__(kTopkThreads) dsa_topk(const float* logits, std::int64_t ld, int k,
                                                         const std::int32_t* table, std::int64_t pages_per_seq,
                                                         std::int64_t isl, std::int64_t step, std::int32_t* slots,
                                                         std::int32_t* lens) {
  const std::int64_t r = blockIdx.x;
  const std::int64_t b = r / isl, n = step + r % isl + 1;
  const int tid = threadIdx.x;
  std::int32_t* out = slots + r * k;
  if (n <= k) {
    for (std::int64_t j = tid; j < n; j += kTopkThreads)
      out[j] = static_cast<std::int32_t>(SlotOf(table, pages_per_seq, b, j));
    if (tid == 0) lens[r] = static_cast<std::int32_t>(n);
    return;
  }
  const float* row = logits + r * ld;
  __shared__ int hist[256];
  __shared__ unsigned s_prefix;
  __shared__ int s_left, s_above, s_ties;
  unsigned prefix = 0, mask = 0;
  int left = k;  // how many of the keys matching the prefix are still to take
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = tid; i < 256; i += kTopkThreads) hist[i] = 0;
    __syncthreads();
    for (std::int64_t i = tid; i < n; i += kTopkThreads) {
      const unsigned u = Ordered(row[i]);
      if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & 255u], 1);
    }
    __syncthreads();
    if (tid < 32) {
      // Lane l: bins 255 - 8l .. 248 - 8l (from the top), their counts summed.
      int c = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) c += hist[255 - 8 * tid - j];
      int incl = c;
#pragma unroll
      for (int off = 1; off < 32; off *= 2) {
        const int o = __shfl_up_sync(0xffffffffu, incl, off);
        if (tid >= off) incl += o;
      }
      const int excl = incl - c;
      if (excl < left && left <= incl) {
        int acc = excl;
        for (int j = 0; j < 8; ++j) {
          const int bin = 255 - 8 * tid - j;
          if (acc + hist[bin] >= left) {
            s_prefix = prefix | (static_cast<unsigned>(bin) << shift);
            s_left = left - acc;
            break;
          }
          acc += hist[bin];
        }
      }
    }
    __syncthreads();
    prefix = s_prefix;
    left = s_left;
    mask |= 255u << shift;
    __syncthreads();
  }
  // prefix is the k-th largest key; take every larger key and `left` of the equal ones.
  if (tid == 0) s_above = 0, s_ties = 0;
  __syncthreads();
  const int above_total = k - left;
  for (std::int64_t i = tid; i < n; i += kTopkThreads) {
    const unsigned u = Ordered(row[i]);
    if (u > prefix) {
      const int j = atomicAdd(&s_above, 1);
      out[j] = static_cast<std::int32_t>(SlotOf(table, pages_per_seq, b, i));
    } else if (u == prefix) {
      const int j = atomicAdd(&s_ties, 1);
      if (j < left) out[above_total + j] = static_cast<std::int32_t>(SlotOf(table, pages_per_seq, b, i));
    }
  }
  if (tid == 0) lens[r] = k;
}

unsigned Blocks(std::int64_t n, int per) {
  const std::int64_t b = (n + per - 1) / per;
  if (b <= 0 || b > std::numeric_limits<int>::max()) throw Error("dsa: launch of " + std::to_string(n) + " items");
  return static_cast<unsigned>(b);
}

}  // namespace

void LaunchDsaNorm(const void* x, std::int64_t x_stride, void* y, std::int64_t y_stride, std::int64_t rows, int width,
                   const void* w, const void* bias, bool layer_norm, float eps, cudaStream_t stream) {
  if (width % 8 != 0 || width > kNormMaxChunks * 32 * 8 || x_stride % 8 != 0 || y_stride % 8 != 0)
    throw Error("dsa norm: width " + std::to_string(width) + " (a multiple of 8 up to 2048, strides multiples of 8)");
  if (rows <= 0) return;
  dsa_norm<<<Blocks(rows, 8), 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(x), x_stride,
                                                 static_cast<__nv_bfloat16*>(y), y_stride, rows, width,
                                                 static_cast<const __nv_bfloat16*>(w),
                                                 static_cast<const __nv_bfloat16*>(bias), layer_norm, eps);
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchDsaRope(const void* x, const DsaRopeLayout& xl, void* y, const DsaRopeLayout& yl, const DsaTokens& t,
                   int groups, float theta, cudaStream_t stream) {
  const std::int64_t n = t.tokens() * groups * (kDsaRopeDim / 2);
  if (n <= 0) return;
  dsa_rope<<<Blocks(n, 256), 256, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(x), RopeLayout{xl.row_stride, xl.group_stride, xl.offset},
      static_cast<__nv_bfloat16*>(y), RopeLayout{yl.row_stride, yl.group_stride, yl.offset}, t.tokens(), t.isl, t.step,
      groups, std::log2(static_cast<double>(theta)));
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchDsaCacheWrite(const DsaTokens& t, const void* latent, std::int64_t latent_stride, const void* index_k,
                         const std::int32_t* page_table, bool kv_fp8, float kv_scale, void* pool, void* index_pool,
                         float* index_scale, cudaStream_t stream) {
  dsa_cache_write<<<Blocks(t.tokens(), 1), 128, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(latent), latent_stride, static_cast<const __nv_bfloat16*>(index_k), page_table,
      t.pages_per_seq, t.isl, t.step, kv_fp8, 1.0f / kv_scale, static_cast<unsigned char*>(pool),
      static_cast<unsigned char*>(index_pool), index_scale);
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchDsaIndexerLogits(const DsaTokens& t, int heads, const void* q, const void* w, float w_scale,
                            const void* index_pool, const float* index_scale, const std::int32_t* page_table,
                            float* logits, std::int64_t ld, int chunk_tiles, cudaStream_t stream) {
  if (t.tokens() > 65535) throw Error("dsa indexer: more than 65535 tokens in one call");
  if (chunk_tiles < 1 || chunk_tiles > kMaxChunkTiles)
    throw Error("dsa indexer: chunk of " + std::to_string(chunk_tiles) + " pages (have 1.." +
                std::to_string(kMaxChunkTiles) + ")");
  const std::int64_t max_keys = t.step + t.isl;
  const dim3 grid(Blocks(max_keys, chunk_tiles * kKeyTile), static_cast<unsigned>(t.tokens()));
  const auto* qb = static_cast<const __nv_bfloat16*>(q);
  const auto* wb = static_cast<const __nv_bfloat16*>(w);
  const auto* ip = static_cast<const unsigned char*>(index_pool);
  if (heads == 64)
    dsa_indexer_logits<64><<<grid, 128, 0, stream>>>(qb, wb, w_scale, ip, index_scale, page_table, t.pages_per_seq,
                                                      t.isl, t.step, logits, ld, chunk_tiles);
  else if (heads == 32)
    dsa_indexer_logits<32><<<grid, 64, 0, stream>>>(qb, wb, w_scale, ip, index_scale, page_table, t.pages_per_seq,
                                                     t.isl, t.step, logits, ld, chunk_tiles);
  else
    throw Error("dsa indexer: " + std::to_string(heads) + " index heads (have 32, 64)");
  SC_CUDA_CHECK(cudaGetLastError());
}

int DsaIndexerChunkTiles(const DsaTokens& t, int multiprocessors) {
  const std::int64_t max_keys = t.step + t.isl, want = 4 * static_cast<std::int64_t>(std::max(multiprocessors, 1));
  int chunk = kMaxChunkTiles;
  while (chunk > 1 && t.tokens() * static_cast<std::int64_t>(Blocks(max_keys, chunk * kKeyTile)) < want) chunk /= 2;
  return chunk;
}

void LaunchDsaTopk(const DsaTokens& t, const float* logits, std::int64_t ld, int k, const std::int32_t* page_table,
                   std::int32_t* slots, std::int32_t* lens, cudaStream_t stream) {
  dsa_topk<<<Blocks(t.tokens(), 1), kTopkThreads, 0, stream>>>(logits, ld, k, page_table, t.pages_per_seq, t.isl,
                                                               t.step, slots, lens);
  SC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace servecast::cuda
