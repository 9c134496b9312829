// servecast_paged_decode: decode attention over a paged KV cache, split along
// the KV length (flash-decoding), all query heads of a KV group (up to 8 per CTA)
// reading each page once. See attention_kernels.h for layouts and semantics.
//
// One CTA = 128 threads = one (batch, KV head, head chunk, KV split). A token's
// head vector is read by D/8 consecutive lanes, 8 elements each (16-byte loads for
// bf16, 8-byte for fp8); the CTA walks its pages in tiles of 4 loads per thread
// (TILE tokens), prefetching the next tile's K and V into registers while it
// works on the current one:
//   scores  (each lane: partial dot products, shuffle-reduced over its D/8 lanes)
//   softmax (one warp per head: tile max, rescale factor, p = 2^(s - m))
//   p·V     (each lane accumulates its 8 columns for its tokens)
// At the end the partial accumulators are reduced across the CTA; with one split
// the normalized output is written directly, else (o, log-sum-exp) per split go
// to a float workspace and paged_decode_reduce combines them.

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <set>
#include <type_traits>
#include <vector>

#include <utility>

#include "backends/cuda/attention_kernels.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/mma_ptx.cuh"
#include "backends/cuda/tma.cuh"
#include "backends/cuda/tma.h"
#include "core/error.h"

namespace servecast::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kLoadsPerThread = 4;
constexpr int kMaxSplits = kPagedDecodeMaxSplits;
constexpr float kLog2e = 1.4426950408889634f;
// Shared-memory bytes of the K/V stages of one CTA (the ring of tiles in flight):
// 3 stages of bf16 or 6 of fp8 tiles (each tile 8 KiB of K and 8 KiB of V for bf16,
// half that for fp8), 48 KiB, so 4 CTAs fit on one multiprocessor.
constexpr int kStageBytes = 48 * 1024;

// Asynchronous global -> shared copies (cp.async, sm_80+): 16 bytes through L2
// only, 8 bytes through L1.
template <int kBytes>
__device__ __forceinline__ void CopyAsync(void* smem, const void* gmem) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (kBytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(dst), "l"(gmem));
}
__device__ __forceinline__ void CopyAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int kPending>
__device__ __forceinline__ void CopyAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

struct DecodeArgs {
  const __nv_bfloat16* q;
  const void* k;
  const void* v;
  const std::int32_t* page_table;
  __nv_bfloat16* out;
  float* part_o;    // [batch][num_heads][splits][D]
  float* part_lse;  // [batch][num_heads][splits], log2 domain
  int num_heads, num_kv_heads, group, head_chunks;
  int pages_per_seq, tokens, first_token;
  int pages_per_split, splits;
  float q_scale;  // softmax scale · log2(e) · k_scale
  float v_scale;
};

// 8 elements of one head vector, as loaded.
template <class KvT>
struct Vec8;
template <>
struct Vec8<__nv_bfloat16> {
  using Raw = uint4;
  __device__ static void ToFloat(const Raw& r, float* f) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&r);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float2 t = __bfloat1622float2(h[i]);
      f[2 * i] = t.x;
      f[2 * i + 1] = t.y;
    }
  }
};
template <>
struct Vec8<__nv_fp8_e4m3> {
  using Raw = uint2;
  __device__ static void ToFloat(const Raw& r, float* f) {
    const __nv_fp8x2_storage_t* p = reinterpret_cast<const __nv_fp8x2_storage_t*>(&r);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(p[i], __NV_E4M3);
      float2 t = __half22float2(*reinterpret_cast<__half2*>(&hr));
      f[2 * i] = t.x;
      f[2 * i + 1] = t.y;
    }
  }
};

// Butterfly reduce-scatter of x[0..N) over `Group` consecutive lanes (l = lane
// index within the group): at each level a lane keeps one half of its values
// (the upper half when its bit of the offset is set), adds the partner's copy of
// that half, and moves on with half as many values; once one value is left the
// remaining levels are a plain all-reduce. On return x[0..max(1, N/Group)) hold
// whole sums of the original x[first + k].
template <int Group, int N, int V>
__device__ __forceinline__ void ReduceScatterLevel(float (&x)[V], int l, int& first) {
  if constexpr (Group > 1) {
    constexpr int kOffset = Group / 2;
    if constexpr (N > 1) {
      constexpr int kHalf = N / 2;
      const bool upper = (l & kOffset) != 0;
#pragma unroll
      for (int k = 0; k < kHalf; ++k) {
        const float send = upper ? x[k] : x[k + kHalf];
        const float keep = upper ? x[k + kHalf] : x[k];
        x[k] = keep + __shfl_xor_sync(0xffffffffu, send, kOffset);
      }
      if (upper) first += kHalf;
      ReduceScatterLevel<kOffset, kHalf, V>(x, l, first);
    } else {
      x[0] += __shfl_xor_sync(0xffffffffu, x[0], kOffset);
      ReduceScatterLevel<kOffset, 1, V>(x, l, first);
    }
  }
}
template <int Group, int V>
__device__ __forceinline__ void ReduceScatter(float (&x)[V], int l, int& first) {
  ReduceScatterLevel<Group, V, V>(x, l, first);
}

template <int D, class KvT, int GC>
__global__ void __launch_bounds__(kThreads) paged_decode_attention(DecodeArgs a) {
  constexpr int kLanesPerToken = D / 8;
  constexpr int kTokensPerWave = kThreads / kLanesPerToken;
  constexpr int kTile = kTokensPerWave * kLoadsPerThread;
  static_assert(kPagedKvPageSize % kTile == 0, "a tile must not cross a page");
  constexpr int kTilesPerPage = kPagedKvPageSize / kTile;
  using Raw = typename Vec8<KvT>::Raw;
  constexpr int kTileBytes = kTile * D * static_cast<int>(sizeof(KvT));
  constexpr int kStages = kStageBytes / (2 * kTileBytes);
  static_assert(kStages >= 2, "at least double buffering");
  static_assert(kWarps * GC * D * 4 <= kStageBytes, "the final reduction reuses the stages");

  // Dynamic: [kStages] K tiles, then [kStages] V tiles, each [kTile][D]; reused by
  // the final reduction as float [kWarps][GC][D].
  extern __shared__ __align__(16) unsigned char s_stage[];
  __shared__ float s_p[2][GC][kTile];
  __shared__ float s_factor[2][GC];
  __shared__ float s_max[GC], s_sum[GC];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int l = tid % kLanesPerToken;  // which 8 columns
  const int row = tid / kLanesPerToken;
  const int split = blockIdx.x;
  const int kvh = blockIdx.y / a.head_chunks, chunk = blockIdx.y % a.head_chunks;
  const int b = blockIdx.z;
  const int g0 = chunk * GC;  // first head of the chunk within the group

  // Query heads of this CTA, pre-scaled.
  float qf[GC][8];
#pragma unroll
  for (int g = 0; g < GC; ++g) {
    if (g0 + g < a.group) {
      const int h = kvh * a.group + g0 + g;
      Vec8<__nv_bfloat16>::ToFloat(
          *reinterpret_cast<const uint4*>(a.q + (static_cast<std::size_t>(b) * a.num_heads + h) * D + l * 8), qf[g]);
#pragma unroll
      for (int e = 0; e < 8; ++e) qf[g][e] *= a.q_scale;
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) qf[g][e] = 0.f;
    }
  }
  if (tid < GC) {
    s_max[tid] = -INFINITY;
    s_sum[tid] = 0.f;
  }
  float acc[GC][8];
#pragma unroll
  for (int g = 0; g < GC; ++g)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[g][e] = 0.f;

  const int first_page = a.first_token / kPagedKvPageSize;
  const int last_page = (a.tokens - 1) / kPagedKvPageSize;
  const int p_begin = first_page + split * a.pages_per_split;
  const int p_end = min(last_page + 1, p_begin + a.pages_per_split);
  const int n_tiles = (p_end - p_begin) * kTilesPerPage;
  const std::int32_t* table = a.page_table + static_cast<std::size_t>(b) * a.pages_per_seq;
  const KvT* k_pool = static_cast<const KvT*>(a.k);
  const KvT* v_pool = static_cast<const KvT*>(a.v);

  auto tile_base = [&](int t) -> std::size_t {
    const int page = p_begin + t / kTilesPerPage;
    const std::size_t pool_page = static_cast<std::size_t>(table[page]);
    return ((pool_page * a.num_kv_heads + kvh) * kPagedKvPageSize + (t % kTilesPerPage) * kTile) * D;
  };
  // Each thread copies, and later reads back, only its own 8-element pieces of a
  // tile (the same offsets in global and shared memory), so the ring needs no
  // barrier: cp.async.wait_group orders a thread's copies before its reads.
  auto issue_tile = [&](int t) {
    if (t < n_tiles) {
      const std::size_t base = tile_base(t);
      unsigned char* k_dst = s_stage + (t % kStages) * kTileBytes;
      unsigned char* v_dst = s_stage + (kStages + t % kStages) * kTileBytes;
#pragma unroll
      for (int i = 0; i < kLoadsPerThread; ++i) {
        const int elem = (i * kTokensPerWave + row) * D + l * 8;
        CopyAsync<sizeof(Raw)>(k_dst + elem * sizeof(KvT), k_pool + base + elem);
        CopyAsync<sizeof(Raw)>(v_dst + elem * sizeof(KvT), v_pool + base + elem);
      }
    }
    CopyAsyncCommit();  // an empty group past the end keeps the wait count uniform
  };
  auto read_piece = [&](int t, bool value, int i) -> Raw {
    const unsigned char* src = s_stage + ((value ? kStages : 0) + t % kStages) * kTileBytes;
    return *reinterpret_cast<const Raw*>(src + ((i * kTokensPerWave + row) * D + l * 8) * sizeof(KvT));
  };

  for (int t = 0; t < kStages - 1; ++t) issue_tile(t);
  __syncthreads();  // s_max / s_sum initialized

  for (int t = 0; t < n_tiles; ++t) {
    const int buf = t & 1;
    issue_tile(t + kStages - 1);
    CopyAsyncWait<kStages - 1>();  // tile t has landed
    const int tile_pos0 = (p_begin + t / kTilesPerPage) * kPagedKvPageSize + (t % kTilesPerPage) * kTile;

    // Scores: partial dot products of this lane's 8 columns for its tokens and
    // heads, summed over the token's lanes by a butterfly reduce-scatter (each
    // lane ends with whole sums for a share of the (token, head) pairs).
    constexpr int kPairs = kLoadsPerThread * GC;
    float x[kPairs];
#pragma unroll
    for (int i = 0; i < kLoadsPerThread; ++i) {
      float kf[8];
      Vec8<KvT>::ToFloat(read_piece(t, false, i), kf);
#pragma unroll
      for (int g = 0; g < GC; ++g) {
        float dot = 0.f;
#pragma unroll
        for (int e = 0; e < 8; ++e) dot = fmaf(qf[g][e], kf[e], dot);
        x[i * GC + g] = dot;
      }
    }
    int first_pair = 0;
    ReduceScatter<kLanesPerToken, kPairs>(x, l, first_pair);
    constexpr int kHeld = kPairs >= kLanesPerToken ? kPairs / kLanesPerToken : 1;
    constexpr int kCopies = kPairs >= kLanesPerToken ? 1 : kLanesPerToken / kPairs;
    if (l % kCopies == 0) {
#pragma unroll
      for (int k = 0; k < kHeld; ++k) {
        const int pair = first_pair + k;
        const int tok = (pair / GC) * kTokensPerWave + row;
        const int pos = tile_pos0 + tok;
        s_p[buf][pair % GC][tok] = pos >= a.first_token && pos < a.tokens ? x[k] : -INFINITY;
      }
    }
    __syncthreads();

    // Online softmax, one warp per head.
    for (int g = warp; g < GC; g += kWarps) {
      float m_tile = -INFINITY;
      for (int j = lane; j < kTile; j += 32) m_tile = fmaxf(m_tile, s_p[buf][g][j]);
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) m_tile = fmaxf(m_tile, __shfl_xor_sync(0xffffffffu, m_tile, off));
      const float m_old = s_max[g];
      const float m_new = fmaxf(m_old, m_tile);
      float sum = 0.f;
      for (int j = lane; j < kTile; j += 32) {
        const float s = s_p[buf][g][j];
        const float p = m_new == -INFINITY ? 0.f : exp2f(s - m_new);
        s_p[buf][g][j] = p;
        sum += p;
      }
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      if (lane == 0) {
        const float factor = m_new == -INFINITY ? 1.f : exp2f(m_old - m_new);
        s_factor[buf][g] = factor;
        s_sum[g] = s_sum[g] * factor + sum;
        s_max[g] = m_new;
      }
    }
    __syncthreads();

    // p·V.
#pragma unroll
    for (int g = 0; g < GC; ++g) {
      const float f = s_factor[buf][g];
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] *= f;
    }
#pragma unroll
    for (int i = 0; i < kLoadsPerThread; ++i) {
      float vf[8];
      Vec8<KvT>::ToFloat(read_piece(t, true, i), vf);
      const int tok = i * kTokensPerWave + row;
#pragma unroll
      for (int g = 0; g < GC; ++g) {
        const float p = s_p[buf][g][tok];
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[g][e] = fmaf(p, vf[e], acc[g][e]);
      }
    }
  }

  // Reduce the accumulators of the lanes that share columns: within the warp by
  // shuffles, across warps through shared memory.
#pragma unroll
  for (int g = 0; g < GC; ++g)
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float x = acc[g][e];
#pragma unroll
      for (int off = kLanesPerToken; off < 32; off <<= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
      acc[g][e] = x;
    }
  CopyAsyncWait<0>();
  __syncthreads();  // every thread is done with the stages
  float(*s_red)[GC][D] = reinterpret_cast<float(*)[GC][D]>(s_stage);
  if (lane < kLanesPerToken) {
#pragma unroll
    for (int g = 0; g < GC; ++g)
#pragma unroll
      for (int e = 0; e < 8; ++e) s_red[warp][g][l * 8 + e] = acc[g][e];
  }
  __syncthreads();
  for (int idx = tid; idx < GC * D; idx += kThreads) {
    const int g = idx / D, d = idx % D;
    if (g0 + g >= a.group) continue;
    float o = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o += s_red[w][g][d];
    const float sum = s_sum[g];
    const int h = kvh * a.group + g0 + g;
    const std::size_t bh = static_cast<std::size_t>(b) * a.num_heads + h;
    if (a.splits == 1) {
      a.out[bh * D + d] = __float2bfloat16(o * a.v_scale / sum);
    } else {
      const std::size_t slot = bh * a.splits + split;
      a.part_o[slot * D + d] = sum > 0.f ? o * a.v_scale / sum : 0.f;
      if (d == 0) a.part_lse[slot] = sum > 0.f ? s_max[g] + log2f(sum) : -INFINITY;
    }
  }
}

// ---- tensor-core variant (head dim 64/128; bf16 KV with groups of 3+ heads, fp8 KV
// with groups of 2+) ---------------------------------------------------------------
//
// Same decomposition and split rule, but one CTA takes up to 16 query heads of a
// KV group (the rows of an m16n8k16 MMA; rows past the group are zero) and
// tiles of 16 tokens per warp (the default: 4 warps, 64 tokens, one page). Per
// tile, warp w owns tokens [16w, 16w + 16):
//   S = Q·Kᵀ for its 16 tokens (2 n-blocks × head_dim/16 k-steps; K fragments are
//       32-bit shared loads, Q fragments stay in registers for the whole split),
//   the tile's row maxima are exchanged through shared memory (all warps then hold
//       the same running max), p = 2^(S·scale − m) stays in registers and becomes
//       the A operand of
//   O_w += P·V for its 16 tokens (one k-step; V fragments by ldmatrix.trans),
// so each warp carries a partial O over its own tokens with a shared max; the
// partials and their row sums are added at the end. K/V tiles arrive through a
// cp.async ring of kStagesC stages (rows padded by 16 bytes: conflict-free
// fragment loads).
//
// fp8 e4m3 KV (KvT = __nv_fp8_e4m3) runs the same loop on fp16 MMAs
// (m16n8k16.f32.f16.f16.f32): the ring holds the fp8 bytes as they are in the pool
// (half the bytes of bf16 per tile through cp.async), and K and V are converted when
// the MMA fragments are loaded from shared memory, 4 values per
// cvt.rn.f16x2.e4m3x2 pair. e4m3 values are fp16 normals, so the conversion is
// exact (bf16 would take several integer operations per pair: e4m3 subnormals are
// not a bit shift away from bf16). Three details keep the fp16 operands exact:
//   - Q (bf16) is scaled per head by a power of two that puts the row's largest
//     |q| in [2^14, 2^15) before it is rounded to fp16 (exact for every element
//     above 2^-28 of the row's largest: bf16's 8 significant bits fit fp16's 11);
//     the score scale divides it out again (scale · k_scale · 2^-e per row).
//   - P carries a factor 2^15 (p = 2^(s − m + 15) ≤ 2^15 < 65504), so the
//     probabilities down to 2^-29 of the row's maximum are fp16 normals (rounded
//     relative 2^-11, finer than bf16's 2^-8); the row sums carry the same factor,
//     which cancels in O / l, and the log-sum-exp written for the reduce subtracts 15.
//   - The k_scale is in the score scale and v_scale multiplies the output, as in
//     the CUDA-core kernel.
// Fragment layouts without a padded row (each tile row is exactly head_dim bytes;
// 16-byte chunks of a row are XOR-swizzled by MmaFp8Swizzle so both loads below are
// free of bank conflicts):
//   - K: within each 64-column chunk of the head dim, MMA k-index κ of k-step i
//     (4 k-steps per chunk) is stored at column 16·tq + 4i + (κ mod 8 < 2 ? 0 : 2) + κ mod 2
//     for κ ∈ {2tq, 2tq+1, 2tq+8, 2tq+9}: the same permutation of the head dim for Q
//     and K (so Q·Kᵀ is unchanged), chosen so a lane's four K values of a k-step are
//     4 consecutive bytes, and four k-steps one 16-byte load.
//   - V: ldmatrix.trans of 16-bit units over fp8 rows gives each lane, per 8×16-byte
//     matrix, tokens {2tq, 2tq+1} × columns {2gq, 2gq+1}; one byte permute splits that
//     into the B fragments of two n-blocks, the even and the odd columns of the
//     16-column chunk. So n-block 2c (2c+1) of O holds columns 16c + 2j (+1), and the
//     final write puts them back in order.
//
// Three knobs set the bytes in flight and the occupancy: warps per CTA (hence the
// tile, 16 tokens per warp), ring depth, and page-table prefetch. kMmaWarps,
// kMmaStages and kMmaTablePrefetch are what the op runs for bf16 (3 stages of 64
// tokens: 102 KiB at head dim 128, 2 CTAs per SM), MmaFp8Stages for fp8 (4 stages of
// 64 tokens at head dim 128: 64 KiB, 3 CTAs per SM; 5 stages, 40 KiB at head dim 64);
// the other combinations are bf16 A/B variants (PagedDecodeTuning::variant,
// bench_decode_variants). MmaConfig describes one on the host (the kernel takes the
// three values as template arguments: nvcc's host stubs cannot name a class-type
// template argument).
using MmaConfig = PagedDecodeMmaConfig;  // backends/cuda_plan/paged_decode_plan.h
// The default: entry 0 of kPagedDecodeVariantConfigs (paged_decode_plan.h).
constexpr MmaConfig kMmaDefault = kPagedDecodeVariantConfigs[0].config;
constexpr int kMmaWarps = kMmaDefault.warps, kMmaStages = kMmaDefault.stages;
// The default (bf16 KV) ring: filled by the tensor memory accelerator with one 3-D box
// per tile and tensor, no L2 promotion. On the H200 (bench_decode_variants, 2026-12-01,
// 8 KV heads, head dim 128, 32 and 64 query heads) it streams 4.42-4.55 TB/s where the
// cp.async ring read 3.72-4.24: the cp.async copies into padded rows requested 1.5x
// the L2 sectors of the bytes read (ncu). 256-byte L2 promotion (2-D or 3-D boxes)
// read 4.11-4.30 TB/s; 128-byte promotion matched none except at 64 x 131072.
constexpr bool kMmaTma = kMmaDefault.tma;
static_assert(kMmaTma && kMmaDefault.tma_promotion == 0, "the default ring: TMA, no L2 promotion");
// ... for splits of at least this many pages; shorter splits run the cp.async ring
// (variant kMmaCpAsyncVariant, the same tiles and occupancy). In the h200-attn7 table
// (TMA for every split) a CTA of one page ran a median 1.12x slower than on the
// cp.async ring (per-CTA setup: barrier init, one thread issuing after the page-table
// read), 2-4 pages 0.99-1.00x, 8 pages 0.97x, 16 and more 0.93-0.94x. (The length is
// kPagedDecodeTmaMinPages, applied by the split rule, paged_decode_plan.cpp.)
constexpr int kMmaCpAsyncVariant = kPagedDecodeCpAsyncVariant;
// Page-table prefetch on by default (bf16 and fp8 KV). Two H200 runs of
// bench_decode_variants disagree on whether it helps: 128 x 8192 measured 3.79 -> 4.15
// TB/s in the first and 4.10 (without) vs 3.89 (with) in the second; run-to-run spread
// (~5%) is as large as the difference (benchmarks/RESULTS.md). Not a proven gain.
constexpr bool kMmaTablePrefetch = kMmaDefault.table_prefetch;
static_assert(kMmaTablePrefetch);
constexpr int kMmaRows = kPagedDecodeMmaRows;
// The shared-memory arithmetic is host code (paged_decode_plan.h, read by the split
// rule); these name it with the kernels' template arguments.
template <int D>
constexpr int MmaFp8Stages() {
  return PagedDecodeFp8Stages(D);
}
// log2 of the factor P carries in the fp8 kernel (see above).
constexpr float kMmaFp8PLog2Bias = 15.f;

template <int D, bool kFp8 = false, bool kTma = false>
constexpr int MmaRowBytes() {
  return PagedDecodeMmaRowBytes(D, kFp8, kTma);
}
template <int D, int kWarpsC = kMmaWarps, bool kFp8 = false, bool kTma = false>
constexpr int MmaStageBytes() {
  return PagedDecodeMmaStageBytes(D, kWarpsC, kFp8, kTma);
}
template <int D, int kWarpsC = kMmaWarps, int kStagesC = kMmaStages, bool kFp8 = false, bool kTma = false>
constexpr int MmaSmemBytes() {
  return PagedDecodeMmaSmemBytes(D, kWarpsC, kStagesC, kFp8, kTma);
}
template <int D, int kWarpsC, int kStagesC, bool kFp8 = false, bool kTma = false>
constexpr int MmaCtasPerSm() {
  return PagedDecodeMmaCtasPerSm(D, kWarpsC, kStagesC, kFp8, kTma);
}
static_assert(MmaCtasPerSm<128, kMmaWarps, kMmaStages, false, kMmaTma>() == 2 &&
                  MmaCtasPerSm<64, kMmaWarps, kMmaStages, false, kMmaTma>() == 4,
              "the default's split rule (2 CTAs per SM at head dim 128, else 4) is its shared-memory occupancy");
static_assert(MmaCtasPerSm<128, kMmaWarps, MmaFp8Stages<128>(), true>() == 3 &&
                  MmaCtasPerSm<64, kMmaWarps, MmaFp8Stages<64>(), true>() == 5,
              "the fp8 kernel's split rule: 3 CTAs per SM at head dim 128, 5 at 64 (shared memory; its registers, "
              "checked with -Xptxas -v, allow as many)");

__device__ __forceinline__ void Mma16816F16(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void LdMatrixX4Trans(unsigned (&r)[4], const void* smem_row) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ unsigned PackBf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}
__device__ __forceinline__ unsigned PackHalf(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}

// Four e4m3 values (bytes 0..3 of w) as two fp16 pairs: lo = bytes 0, 1; hi = bytes 2, 3
// (the lower byte in the lower half). Exact.
__device__ __forceinline__ void Fp8x4ToHalf2x2(unsigned w, unsigned& lo, unsigned& hi) {
  const __half2_raw l = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w & 0xffffu), __NV_E4M3);
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> 16), __NV_E4M3);
  lo = static_cast<unsigned>(l.x) | (static_cast<unsigned>(l.y) << 16);
  hi = static_cast<unsigned>(h.x) | (static_cast<unsigned>(h.y) << 16);
}

// The fp8 tile's 16-byte chunk swizzle: logical chunk c of tile row r is stored at
// chunk c ^ MmaFp8Swizzle<D>(r). Head dim 128 (8 chunks, one row per 128 bytes):
// rows r and r ^ 1 land in opposite halves (the K loads: a quarter-warp reads 4
// chunks of two adjacent rows) and rows 0..7 at 8 different chunks (ldmatrix: 8 rows
// of one column chunk). Head dim 64 (4 chunks, two rows per 128 bytes): rows 0..7 of
// one chunk at 8 different bank groups; the K loads are conflict-free as laid out.
template <int D>
__device__ __forceinline__ int MmaFp8Swizzle(int r) {
  if constexpr (D == 128)
    return ((r >> 1) & 3) | ((r & 1) << 2);
  else
    return (r >> 1) & 3;
}

// The arguments of the tensor-core kernel: DecodeArgs, and for kTma the K and V pools
// as 3-D tensors for the tensor memory accelerator ([rows][head_dim / 64][64], one
// row per (pool page, KV head, token); a box is one tile of rows, 128-byte swizzled). Passed as a __grid_constant__ parameter, so the kernel can hand
// the maps' addresses to cp.async.bulk.tensor.
struct MmaArgs {
  DecodeArgs a;
  CUtensorMap k_map, v_map;
};

// 16-byte chunk c of row r of a 128-byte-swizzled box (rows of 128 bytes from a
// 1,024-byte-aligned base), as CU_TENSOR_MAP_SWIZZLE_128B lays it out.
__device__ __forceinline__ int Swizzle128(int c, int r) {
  return c ^ (r & 7);
}

// The pool page of a split's i-th page (i counted from the split's first page).
// Without prefetch: a global load when the tile is issued (the cp.async addresses
// wait for it). With prefetch: each lane holds one entry of the current chunk of 32
// pages and one of the next, loaded a whole chunk ahead, and the entry is taken by
// a shuffle. Get must be called by whole warps (every thread of the CTA issues every
// tile) with i rising by at most one per call.
template <bool kPrefetch>
struct MmaPageTable;
template <>
struct MmaPageTable<false> {
  const std::int32_t* row;
  int p_begin;
  __device__ MmaPageTable(const std::int32_t* seq_row, int first, int /*n_pages*/, int /*lane*/)
      : row(seq_row), p_begin(first) {}
  __device__ int Get(int i) { return row[p_begin + i]; }
};
template <>
struct MmaPageTable<true> {
  const std::int32_t* row;
  int n_pages, lane, chunk = 0, cur = 0, next = 0;
  __device__ MmaPageTable(const std::int32_t* seq_row, int first, int n, int l)
      : row(seq_row + first), n_pages(n), lane(l) {
    cur = Load(0);
    next = Load(1);
  }
  __device__ int Load(int c) const {
    const int i = c * 32 + lane;
    return i < n_pages ? row[i] : 0;
  }
  __device__ int Get(int i) {
    const int c = i >> 5;
    if (c != chunk) {
      cur = next;
      next = Load(c + 1);
      chunk = c;
    }
    return __shfl_sync(0xffffffffu, cur, i & 31);
  }
};

// kTma: the ring filled by the tensor memory accelerator, one 3-D box per tile and
// tensor (rows of head_dim, each 128-byte line swizzled in place); else a cp.async
// ring of padded rows.
//
// kLean (the fp8 kernel's default since 2026-12-01; bf16 keeps the loop it was measured
// with; cp.async ring only): the warps of a CTA run independently until the final
// reduction. Each warp copies its own 16 tokens of every tile into the ring (so a
// __syncwarp, not a CTA barrier, makes a stage visible and frees it), keeps its own
// running row maxima (no per-tile exchange through shared memory and no second
// barrier), and the final reduction rescales each warp's partial O and sums by
// 2^(m_w − M) with M the maximum over the warps. Also: a tile wholly inside the visible
// range skips the per-score mask, and a warp whose maxima did not move skips the rescale
// (the factor would be exactly 1). The fp8 kernel has to issue its loop at twice the
// tokens per second of the bf16 one; ncu showed it waiting at the two barriers per tile.
template <int D, class KvT, int kWarpsC, int kStagesC, bool kTablePrefetch, bool kTma = false, bool kLean = false>
__global__ void __launch_bounds__(kWarpsC * 32) paged_decode_attention_mma(const __grid_constant__ MmaArgs args) {
  const DecodeArgs& a = args.a;
  constexpr bool kFp8 = std::is_same_v<KvT, __nv_fp8_e4m3>;
  static_assert(kFp8 || std::is_same_v<KvT, __nv_bfloat16>, "bf16 or fp8 e4m3 KV");
  static_assert(!(kTma && kFp8), "the TMA ring is for bf16 KV");
  static_assert(!kLean || (kFp8 && !kTma), "the lean loop is the fp8 kernel's, its warps fill their own rows by cp.async");
  constexpr int kThreadsC = kWarpsC * 32;
  constexpr int kTile = 16 * kWarpsC;
  constexpr int kRowBytes = MmaRowBytes<D, kFp8, kTma>();
  constexpr int kHalves = D / 64;  // kTma: 64-column (128-byte) halves of a row
  constexpr int kTileBytes = kTile * kRowBytes;
  constexpr int kKSteps = D / 16;
  constexpr int kNBlocks = D / 8;
  constexpr int kPiecesPerRow = D * static_cast<int>(sizeof(KvT)) / 16;  // 16-byte pieces
  constexpr int kPiecesPerThread = kTile * kPiecesPerRow / kThreadsC;
  static_assert(kTile * kPiecesPerRow % kThreadsC == 0, "whole pieces per thread");
  constexpr int kWarpPiecesPerLane = 16 * kPiecesPerRow / 32;  // kLean: a warp copies its own 16 rows
  static_assert(!kLean || 16 * kPiecesPerRow % 32 == 0, "whole pieces per lane");
  static_assert(kPagedKvPageSize % kTile == 0, "a tile must not cross a page");
  constexpr int kTilesPerPage = kPagedKvPageSize / kTile;
  static_assert(kStagesC >= 2, "at least double buffering");
  static_assert(kWarpsC * kMmaRows * D * 4 <= kStagesC * MmaStageBytes<D, kWarpsC, kFp8, kTma>(),
                "the final reduction reuses the stages");
  static_assert(!kTma || (kTile * 128 % 1024 == 0 && D % 64 == 0), "whole swizzle patterns per box");
  // kTma: byte offset, from a K or V tile's base, of 16-byte chunk c (0..7) of half h of
  // tile row r (the tile starts on a 1,024-byte boundary). At head dim 128 the swizzle
  // phase repeats every 4 rows, so the fragment loads see 2-way bank conflicts; a
  // conflict-free layout (the halves as separate regions) was measured only with
  // 256-byte L2 promotion (benchmarks/RESULTS.md), so whether it gains is open.
  auto tma_chunk = [](int r, int h, int c) {
    const int line = r * kHalves + h;  // 128-byte lines
    return line * 128 + Swizzle128(c, line) * 16;
  };
  static_assert(!kFp8 || D == 64 || D == 128, "the fp8 fragment layouts assume 64-column chunks, 4 or 8 per row");

  extern __shared__ __align__(16) unsigned char s_dynamic[];
  __shared__ float s_tile_max[2][kWarpsC][kMmaRows];
  __shared__ float s_row_sum[kWarpsC][kMmaRows];
  __shared__ __align__(8) unsigned long long s_full[kTma ? kStagesC : 1];  // kTma: stage s has landed
  // The ring (kTma: from the first 1,024-byte boundary).
  // The fp8 ring from the first 128-byte boundary: its XOR swizzle is conflict-free only
  // relative to whole 128-byte bank lines, and dynamic shared memory starts right after
  // the static arrays (832 bytes here: rows would start 64 bytes into a line, which cost
  // the fp8 kernel ~15% at the large shapes on an H200). bf16 keeps its padded rows as
  // they were measured.
  unsigned char* const s_stage = kTma   ? s_dynamic + ((1024u - (SmemAddr(s_dynamic) & 1023u)) & 1023u)
                                 : kFp8 ? s_dynamic + ((128u - (SmemAddr(s_dynamic) & 127u)) & 127u)
                                        : s_dynamic;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gq = lane >> 2, tq = lane & 3;  // MMA fragment coordinates
  const int split = blockIdx.x;
  const int kvh = blockIdx.y / a.head_chunks, chunk = blockIdx.y % a.head_chunks;
  const int b = blockIdx.z;
  const int g0 = chunk * kMmaRows;
  const int rows = min(kMmaRows, a.group - g0);

  // Q fragments (A operand, rows = heads) for all k-steps: bf16 KV, unscaled bf16;
  // fp8 KV, fp16 scaled per row by 2^e (rows gq and gq + 8; the score scale of each
  // row divides 2^e out again), in the fp8 kernel's permuted head-dim order.
  unsigned qa[kKSteps][4];
  float q_scale_lo = a.q_scale, q_scale_hi = a.q_scale;
  if constexpr (kFp8) {
    const __nv_bfloat16* q = a.q + (static_cast<std::size_t>(b) * a.num_heads + kvh * a.group + g0) * D;
    constexpr int kChunks64 = D / 64;
    // Lane tq holds columns [64c + 16tq, 64c + 16tq + 16) of rows gq (r = 0) and gq + 8.
    unsigned raw[2][kChunks64][8];
    unsigned max_bits[2] = {0u, 0u};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const bool ok = gq + 8 * r < rows;
      const uint4* row = reinterpret_cast<const uint4*>(q + static_cast<std::size_t>(gq + 8 * r) * D);
#pragma unroll
      for (int c = 0; c < kChunks64; ++c)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint4 v = ok ? row[(64 * c + 16 * tq) / 8 + h] : make_uint4(0u, 0u, 0u, 0u);
          raw[r][c][4 * h] = v.x;
          raw[r][c][4 * h + 1] = v.y;
          raw[r][c][4 * h + 2] = v.z;
          raw[r][c][4 * h + 3] = v.w;
        }
      // |q| orders as the bf16 bits without the sign.
#pragma unroll
      for (int c = 0; c < kChunks64; ++c)
#pragma unroll
        for (int w = 0; w < 8; ++w)
          max_bits[r] = max(max_bits[r], max(raw[r][c][w] & 0x7fffu, (raw[r][c][w] >> 16) & 0x7fffu));
#pragma unroll
      for (int off = 1; off < 4; off <<= 1)
        max_bits[r] = max(max_bits[r], __shfl_xor_sync(0xffffffffu, max_bits[r], off));
    }
    float up[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // The largest |q| is in [2^(E-127), 2^(E-126)) for its exponent field E; 2^e with
      // e = 141 − E moves it to [2^14, 2^15) (e clamped to ±126: 2^±e stay normal floats).
      const int e = max(-126, min(126, 141 - static_cast<int>((max_bits[r] >> 7) & 0xffu)));
      up[r] = __int_as_float((127 + e) << 23);
      const float down = __int_as_float((127 - e) << 23);
      (r == 0 ? q_scale_lo : q_scale_hi) = a.q_scale * down;
    }
    auto to_half = [&](int r, unsigned bf16x2) {
      const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bf16x2));
      return PackHalf(f.x * up[r], f.y * up[r]);
    };
    // k-step 4c + i, κ ∈ {2tq, 2tq+1} → columns 64c + 16tq + 4i + {0, 1} (word 2i of the
    // lane's 16 columns); κ ∈ {2tq+8, 2tq+9} → 64c + 16tq + 4i + {2, 3} (word 2i + 1).
#pragma unroll
    for (int c = 0; c < kChunks64; ++c)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        qa[4 * c + i][0] = to_half(0, raw[0][c][2 * i]);
        qa[4 * c + i][1] = to_half(1, raw[1][c][2 * i]);
        qa[4 * c + i][2] = to_half(0, raw[0][c][2 * i + 1]);
        qa[4 * c + i][3] = to_half(1, raw[1][c][2 * i + 1]);
      }
  } else {
    const __nv_bfloat16* q = a.q + (static_cast<std::size_t>(b) * a.num_heads + kvh * a.group + g0) * D;
    const unsigned* row_lo = reinterpret_cast<const unsigned*>(q + static_cast<std::size_t>(gq) * D);
    const unsigned* row_hi = reinterpret_cast<const unsigned*>(q + static_cast<std::size_t>(gq + 8) * D);
    const bool lo_ok = gq < rows, hi_ok = gq + 8 < rows;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      const int c0 = (kk * 16 + 2 * tq) / 2, c1 = (kk * 16 + 8 + 2 * tq) / 2;
      qa[kk][0] = lo_ok ? row_lo[c0] : 0u;
      qa[kk][1] = hi_ok ? row_hi[c0] : 0u;
      qa[kk][2] = lo_ok ? row_lo[c1] : 0u;
      qa[kk][3] = hi_ok ? row_hi[c1] : 0u;
    }
  }

  float o[kNBlocks][4];
#pragma unroll
  for (int n = 0; n < kNBlocks; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m_lo = -INFINITY, m_hi = -INFINITY;  // running max of rows gq and gq + 8 (same in all warps; kLean: this warp's)
  float l_lo = 0.f, l_hi = 0.f;              // this lane's share of the running sums

  const int first_page = a.first_token / kPagedKvPageSize;
  const int last_page = (a.tokens - 1) / kPagedKvPageSize;
  const int p_begin = first_page + split * a.pages_per_split;
  const int p_end = min(last_page + 1, p_begin + a.pages_per_split);
  const int n_tiles = (p_end - p_begin) * kTilesPerPage;
  MmaPageTable<kTablePrefetch> table(a.page_table + static_cast<std::size_t>(b) * a.pages_per_seq, p_begin,
                                     p_end - p_begin, lane);
  const KvT* k_pool = static_cast<const KvT*>(a.k);
  const KvT* v_pool = static_cast<const KvT*>(a.v);

  if constexpr (kTma) {
    if (tid == 0) {
      for (int st = 0; st < kStagesC; ++st) MbarInit(&s_full[st], 1);
      FenceMbarrierInit();
    }
    __syncthreads();
  }
  auto issue_tile = [&](int t) {
    if constexpr (kTma) {
      if (t < n_tiles) {
        const int pool_page = table.Get(t / kTilesPerPage);  // every warp: its page-table lanes stay in step
        if (tid == 0) {
          unsigned long long* bar = &s_full[t % kStagesC];
          unsigned char* k_dst = s_stage + (t % kStagesC) * MmaStageBytes<D, kWarpsC, kFp8, true>();
          unsigned char* v_dst = k_dst + kTileBytes;
          const int row = (pool_page * a.num_kv_heads + kvh) * kPagedKvPageSize + (t % kTilesPerPage) * kTile;
          // The generic-proxy reads of this stage (tile t - kStagesC, ordered before by
          // the loop's __syncthreads) come before the async-proxy writes.
          FenceProxyAsyncShared();
          MbarArriveExpectTx(bar, 2 * kTileBytes);
          TmaLoad3d(k_dst, &args.k_map, row, bar);
          TmaLoad3d(v_dst, &args.v_map, row, bar);
        }
      }
      return;
    }
    if (t < n_tiles) {
      const std::size_t pool_page = static_cast<std::size_t>(table.Get(t / kTilesPerPage));
      const std::size_t base =
          ((pool_page * a.num_kv_heads + kvh) * kPagedKvPageSize + (t % kTilesPerPage) * kTile) * D;
      unsigned char* k_dst = s_stage + (t % kStagesC) * MmaStageBytes<D, kWarpsC, kFp8>();
      unsigned char* v_dst = k_dst + kTileBytes;
      // kLean: lane `lane` of warp `warp` copies pieces of the warp's own 16 rows.
#pragma unroll
      for (int i = 0; i < (kLean ? kWarpPiecesPerLane : kPiecesPerThread); ++i) {
        const int piece = kLean ? i * 32 + lane : i * kThreadsC + tid;
        if constexpr (kFp8) {
          const int tok = (kLean ? warp * 16 : 0) + piece / kPiecesPerRow, c = piece % kPiecesPerRow;
          const std::size_t src = base + static_cast<std::size_t>(tok) * D + c * 16;
          const int dst = tok * kRowBytes + (c ^ MmaFp8Swizzle<D>(tok)) * 16;
          CopyAsync<16>(k_dst + dst, k_pool + src);
          CopyAsync<16>(v_dst + dst, v_pool + src);
        } else {
          const int tok = piece / kPiecesPerRow, col = (piece % kPiecesPerRow) * 8;
          const std::size_t src = base + static_cast<std::size_t>(tok) * D + col;
          CopyAsync<16>(k_dst + tok * kRowBytes + col * 2, k_pool + src);
          CopyAsync<16>(v_dst + tok * kRowBytes + col * 2, v_pool + src);
        }
      }
    }
    CopyAsyncCommit();
  };

  for (int t = 0; t < kStagesC - 1; ++t) issue_tile(t);

  for (int t = 0; t < n_tiles; ++t) {
    if constexpr (kTma)
      MbarWait(&s_full[t % kStagesC], static_cast<unsigned>(t / kStagesC) & 1u);
    else
      CopyAsyncWait<kStagesC - 2>();
    // Tile t visible to all; everyone is done with tile t - 1's stage (kLean: the warp's
    // own rows of both).
    if constexpr (kLean)
      __syncwarp();
    else
      __syncthreads();
    issue_tile(t + kStagesC - 1);
    const unsigned char* k_tile = s_stage + (t % kStagesC) * MmaStageBytes<D, kWarpsC, kFp8, kTma>();
    const unsigned char* v_tile = k_tile + kTileBytes;
    const int tile_pos0 = (p_begin + t / kTilesPerPage) * kPagedKvPageSize + (t % kTilesPerPage) * kTile;

    // S for this warp's 16 tokens: two n-blocks of 8.
    float sc[2][4];
#pragma unroll
    for (int nb = 0; nb < 2; ++nb) {
      sc[nb][0] = sc[nb][1] = sc[nb][2] = sc[nb][3] = 0.f;
      if constexpr (kFp8) {
        // Token row r = 16·warp + 8·nb + gq (r mod 8 = gq): one 16-byte load per 64
        // columns, four k-steps of 4 bytes each.
        const int r = warp * 16 + nb * 8 + gq;
        const unsigned char* k_row = k_tile + r * kRowBytes;
#pragma unroll
        for (int c = 0; c < D / 64; ++c) {
          const uint4 kv = *reinterpret_cast<const uint4*>(k_row + ((4 * c + tq) ^ MmaFp8Swizzle<D>(r)) * 16);
          const unsigned words[4] = {kv.x, kv.y, kv.z, kv.w};
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            unsigned b0, b1;
            Fp8x4ToHalf2x2(words[i], b0, b1);
            Mma16816F16(sc[nb], qa[4 * c + i], b0, b1);
          }
        }
      } else {
        const int r = warp * 16 + nb * 8 + gq;
        const unsigned char* k_row = k_tile + r * kRowBytes;
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {  // columns 16kk + 2tq (+1) and 16kk + 8 + 2tq (+1)
          unsigned b0, b1;
          if constexpr (kTma) {  // half kk / 4, chunks 2(kk mod 4) and + 1
            b0 = *reinterpret_cast<const unsigned*>(k_tile + tma_chunk(r, kk >> 2, 2 * (kk & 3)) + tq * 4);
            b1 = *reinterpret_cast<const unsigned*>(k_tile + tma_chunk(r, kk >> 2, 2 * (kk & 3) + 1) + tq * 4);
          } else {
            b0 = *reinterpret_cast<const unsigned*>(k_row + (kk * 16 + 2 * tq) * 2);
            b1 = *reinterpret_cast<const unsigned*>(k_row + (kk * 16 + 8 + 2 * tq) * 2);
          }
          Mma16816(sc[nb], qa[kk], b0, b1);
        }
      }
    }
    // Scale (log2 domain), mask, and this warp's row maxima.
    float mx_lo = -INFINITY, mx_hi = -INFINITY;
    const bool whole_tile = kLean && tile_pos0 >= a.first_token && tile_pos0 + kTile <= a.tokens;
    if (whole_tile) {
#pragma unroll
      for (int nb = 0; nb < 2; ++nb)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          sc[nb][j] *= q_scale_lo;
          sc[nb][2 + j] *= q_scale_hi;
          mx_lo = fmaxf(mx_lo, sc[nb][j]);
          mx_hi = fmaxf(mx_hi, sc[nb][2 + j]);
        }
    } else {
#pragma unroll
    for (int nb = 0; nb < 2; ++nb)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int pos = tile_pos0 + warp * 16 + nb * 8 + 2 * tq + j;
        const bool valid = pos >= a.first_token && pos < a.tokens;
        if constexpr (kFp8) {
          sc[nb][j] = valid ? sc[nb][j] * q_scale_lo : -INFINITY;
          sc[nb][2 + j] = valid ? sc[nb][2 + j] * q_scale_hi : -INFINITY;
        } else {
          sc[nb][j] = valid ? sc[nb][j] * a.q_scale : -INFINITY;
          sc[nb][2 + j] = valid ? sc[nb][2 + j] * a.q_scale : -INFINITY;
        }
        mx_lo = fmaxf(mx_lo, sc[nb][j]);
        mx_hi = fmaxf(mx_hi, sc[nb][2 + j]);
      }
    }
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
      mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, off));
      mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, off));
    }
    if constexpr (!kLean) {  // the CTA's maxima (kLean: each warp keeps its own)
      if (tq == 0) {
        s_tile_max[t & 1][warp][gq] = mx_lo;
        s_tile_max[t & 1][warp][gq + 8] = mx_hi;
      }
      __syncthreads();
#pragma unroll
      for (int w = 0; w < kWarpsC; ++w) {
        mx_lo = fmaxf(mx_lo, s_tile_max[t & 1][w][gq]);
        mx_hi = fmaxf(mx_hi, s_tile_max[t & 1][w][gq + 8]);
      }
    }
    const float new_lo = fmaxf(m_lo, mx_lo), new_hi = fmaxf(m_hi, mx_hi);
    // kLean: the rescale only when a maximum of this warp's rows moved (warp-uniform).
    const bool moved = !kLean || __any_sync(0xffffffffu, new_lo != m_lo || new_hi != m_hi);
    float f_lo = 1.f, f_hi = 1.f;
    if (moved) {
      f_lo = new_lo == -INFINITY ? 1.f : exp2f(m_lo - new_lo);
      f_hi = new_hi == -INFINITY ? 1.f : exp2f(m_hi - new_hi);
    }
    m_lo = new_lo;
    m_hi = new_hi;
    float p[2][4];
    float sum_lo = 0.f, sum_hi = 0.f;
    if constexpr (kFp8) {
      // p · 2^15 (fp16 normals down to 2^-29 of the row's maximum).
      const float base_lo = new_lo - kMmaFp8PLog2Bias, base_hi = new_hi - kMmaFp8PLog2Bias;
#pragma unroll
      for (int nb = 0; nb < 2; ++nb)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          p[nb][j] = new_lo == -INFINITY ? 0.f : exp2f(sc[nb][j] - base_lo);
          p[nb][2 + j] = new_hi == -INFINITY ? 0.f : exp2f(sc[nb][2 + j] - base_hi);
          sum_lo += p[nb][j];
          sum_hi += p[nb][2 + j];
        }
    } else {
#pragma unroll
      for (int nb = 0; nb < 2; ++nb)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          p[nb][j] = new_lo == -INFINITY ? 0.f : exp2f(sc[nb][j] - new_lo);
          p[nb][2 + j] = new_hi == -INFINITY ? 0.f : exp2f(sc[nb][2 + j] - new_hi);
          sum_lo += p[nb][j];
          sum_hi += p[nb][2 + j];
        }
    }
    l_lo = l_lo * f_lo + sum_lo;
    l_hi = l_hi * f_hi + sum_hi;
    if (moved) {
#pragma unroll
      for (int n = 0; n < kNBlocks; ++n) {
        o[n][0] *= f_lo;
        o[n][1] *= f_lo;
        o[n][2] *= f_hi;
        o[n][3] *= f_hi;
      }
    }
    // P (16 heads x 16 tokens) as the A operand: the C layout of two n-blocks.
    // O += P·V over this warp's 16 tokens.
    const int v_tok = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    if constexpr (kFp8) {
      unsigned pa[4];
      pa[0] = PackHalf(p[0][0], p[0][1]);
      pa[1] = PackHalf(p[0][2], p[0][3]);
      pa[2] = PackHalf(p[1][0], p[1][1]);
      pa[3] = PackHalf(p[1][2], p[1][3]);
      // One ldmatrix.x4.trans per 32 columns: matrices (tokens 0-7, chunk 2cc),
      // (8-15, 2cc), (0-7, 2cc + 1), (8-15, 2cc + 1); lane gets tokens {2tq, 2tq+1}
      // (+8) × columns {2gq, 2gq+1} of the chunk, bytes [t0 c0, t0 c1, t1 c0, t1 c1].
      const unsigned char* v_row = v_tile + v_tok * kRowBytes;
      const int v_swz = MmaFp8Swizzle<D>(v_tok);
#pragma unroll
      for (int cc = 0; cc < D / 32; ++cc) {
        unsigned vr[4];
        LdMatrixX4Trans(vr, v_row + ((2 * cc + (lane >> 4)) ^ v_swz) * 16);
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // chunk 2cc + h: n-blocks 4cc + 2h (even columns), + 1 (odd)
          unsigned even0, odd0, even1, odd1;
          Fp8x4ToHalf2x2(__byte_perm(vr[2 * h], 0u, 0x3120), even0, odd0);
          Fp8x4ToHalf2x2(__byte_perm(vr[2 * h + 1], 0u, 0x3120), even1, odd1);
          Mma16816F16(o[4 * cc + 2 * h], pa, even0, even1);
          Mma16816F16(o[4 * cc + 2 * h + 1], pa, odd0, odd1);
        }
      }
    } else {
      unsigned pa[4];
      pa[0] = PackBf16(p[0][0], p[0][1]);
      pa[1] = PackBf16(p[0][2], p[0][3]);
      pa[2] = PackBf16(p[1][0], p[1][1]);
      pa[3] = PackBf16(p[1][2], p[1][3]);
      // V fragments two n-blocks per ldmatrix.
      const int v_col = (lane >> 4) * 8;
#pragma unroll
      for (int n = 0; n < kNBlocks; n += 2) {
        unsigned vb[4];
        if constexpr (kTma)  // columns 8n + v_col: half n / 8, chunk (n mod 8) + v_col / 8
          LdMatrixX4Trans(vb, v_tile + tma_chunk(v_tok, n >> 3, (n & 7) + (v_col >> 3)));
        else
          LdMatrixX4Trans(vb, v_tile + v_tok * kRowBytes + (n * 8 + v_col) * 2);
        Mma16816(o[n], pa, vb[0], vb[1]);
        Mma16816(o[n + 1], pa, vb[2], vb[3]);
      }
    }
  }

  // Row sums: over the lanes of a row, then over the warps; partial O through the stages.
#pragma unroll
  for (int off = 1; off < 4; off <<= 1) {
    l_lo += __shfl_xor_sync(0xffffffffu, l_lo, off);
    l_hi += __shfl_xor_sync(0xffffffffu, l_hi, off);
  }
  if constexpr (!kTma) CopyAsyncWait<0>();  // kTma: every tile issued was waited for
  __syncthreads();
  float(*s_red)[kMmaRows][D] = reinterpret_cast<float(*)[kMmaRows][D]>(s_stage);
  if (tq == 0) {
    s_row_sum[warp][gq] = l_lo;
    s_row_sum[warp][gq + 8] = l_hi;
  }
  if constexpr (kFp8) {
    // n-block 2c holds columns 16c + 2j, 2c + 1 columns 16c + 2j + 1 (j = 2tq, 2tq + 1):
    // columns 16c + 4tq + {0, 1, 2, 3} are o[2c][0], o[2c+1][0], o[2c][1], o[2c+1][1].
#pragma unroll
    for (int c = 0; c < D / 16; ++c) {
      *reinterpret_cast<float4*>(&s_red[warp][gq][16 * c + 4 * tq]) =
          make_float4(o[2 * c][0], o[2 * c + 1][0], o[2 * c][1], o[2 * c + 1][1]);
      *reinterpret_cast<float4*>(&s_red[warp][gq + 8][16 * c + 4 * tq]) =
          make_float4(o[2 * c][2], o[2 * c + 1][2], o[2 * c][3], o[2 * c + 1][3]);
    }
  } else {
#pragma unroll
    for (int n = 0; n < kNBlocks; ++n) {
      s_red[warp][gq][n * 8 + 2 * tq] = o[n][0];
      s_red[warp][gq][n * 8 + 2 * tq + 1] = o[n][1];
      s_red[warp][gq + 8][n * 8 + 2 * tq] = o[n][2];
      s_red[warp][gq + 8][n * 8 + 2 * tq + 1] = o[n][3];
    }
  }
  // Row maxima: the CTA's (all warps hold the same), or kLean each warp's.
  constexpr int kMaxSlots = kLean ? kWarpsC : 1;
  __shared__ float s_row_max[kMaxSlots][kMmaRows];
  if ((kLean || warp == 0) && tq == 0) {
    s_row_max[kLean ? warp : 0][gq] = m_lo;
    s_row_max[kLean ? warp : 0][gq + 8] = m_hi;
  }
  __syncthreads();
  // kLean: warp w's partials carry 2^(−m_w); per row, the weights 2^(m_w − M) that bring
  // them to the CTA's maximum M (0 for a warp that saw no visible token: its O and sum
  // are 0), the maximum and the weighted sum, once per row rather than per element.
  __shared__ float s_wgt[kMaxSlots][kMmaRows];
  __shared__ float s_row_total[kLean ? kMmaRows : 1];
  if constexpr (kLean) {
    if (tid < kMmaRows) {
      float row_max = s_row_max[0][tid];
#pragma unroll
      for (int w = 1; w < kWarpsC; ++w) row_max = fmaxf(row_max, s_row_max[w][tid]);
      float total = 0.f;
#pragma unroll
      for (int w = 0; w < kWarpsC; ++w) {
        const float m_w = s_row_max[w][tid];
        const float wgt = m_w == -INFINITY ? 0.f : exp2f(m_w - row_max);
        s_wgt[w][tid] = wgt;
        total += s_row_sum[w][tid] * wgt;
      }
      s_row_total[tid] = total;
      s_row_max[0][tid] = row_max;  // read below only after the barrier
    }
    __syncthreads();
  }
  for (int idx = tid; idx < rows * D; idx += kThreadsC) {
    const int r = idx / D, d = idx % D;
    float acc = 0.f, sum = 0.f;
    const float row_max = s_row_max[0][r];
    if constexpr (kLean) {
#pragma unroll
      for (int w = 0; w < kWarpsC; ++w) acc += s_red[w][r][d] * s_wgt[w][r];
      sum = s_row_total[r];
    } else {
#pragma unroll
      for (int w = 0; w < kWarpsC; ++w) {
        acc += s_red[w][r][d];
        sum += s_row_sum[w][r];
      }
    }
    const int h = kvh * a.group + g0 + r;
    const std::size_t bh = static_cast<std::size_t>(b) * a.num_heads + h;
    if (a.splits == 1) {
      a.out[bh * D + d] = __float2bfloat16(acc * a.v_scale / sum);
    } else {
      const std::size_t slot = bh * a.splits + split;
      a.part_o[slot * D + d] = sum > 0.f ? acc * a.v_scale / sum : 0.f;
      // The fp8 kernel's sums carry 2^15 (P's factor): log2 of the true sum is 15 less.
      if constexpr (kFp8) {
        if (d == 0) a.part_lse[slot] = sum > 0.f ? row_max + (log2f(sum) - kMmaFp8PLog2Bias) : -INFINITY;
      } else {
        if (d == 0) a.part_lse[slot] = sum > 0.f ? row_max + log2f(sum) : -INFINITY;
      }
    }
  }
}

// One CTA of D threads per (batch, head): out = Σ_s 2^(lse_s − M) o_s / Σ_s 2^(lse_s − M).
// The split weights are computed once into shared memory; the weighted sum over
// the splits is unrolled so its loads are in flight together.
template <int D>
__global__ void __launch_bounds__(D)
    paged_decode_reduce(const float* part_o, const float* part_lse, int splits, __nv_bfloat16* out) {
  __shared__ float s_w[kMaxSplits];
  __shared__ float s_total;
  const std::size_t bh = blockIdx.x;
  const int d = threadIdx.x;
  for (int s = d; s < splits; s += D) s_w[s] = part_lse[bh * splits + s];
  __syncthreads();
  if (d < 32) {
    float m = -INFINITY;
    for (int s = d; s < splits; s += 32) m = fmaxf(m, s_w[s]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float total = 0.f;
    for (int s = d; s < splits; s += 32) {
      const float w = m == -INFINITY ? 0.f : exp2f(s_w[s] - m);
      s_w[s] = w;
      total += w;
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) total += __shfl_xor_sync(0xffffffffu, total, off);
    if (d == 0) s_total = total;
  }
  __syncthreads();
  const float* o = part_o + bh * splits * D + d;
  float acc[8] = {};
  int s = 0;
  for (; s + 8 <= splits; s += 8) {
#pragma unroll
    for (int u = 0; u < 8; ++u) acc[u] = fmaf(s_w[s + u], o[static_cast<std::size_t>(s + u) * D], acc[u]);
  }
  for (; s < splits; ++s) acc[0] = fmaf(s_w[s], o[static_cast<std::size_t>(s) * D], acc[0]);
  float sum = 0.f;
#pragma unroll
  for (int u = 0; u < 8; ++u) sum += acc[u];
  out[bh * D + d] = __float2bfloat16(sum / s_total);
}

// Raises the kernel's dynamic shared-memory limit (once per instantiation; a
// host-side attribute, legal during stream capture); with max_carveout also asks
// for the largest shared-memory carveout (the A/B variants that aim at more CTAs
// per multiprocessor than the default).
template <class Args>
void PrepareDecodeKernel(void (*kernel)(Args), int smem_bytes, bool max_carveout = false) {
  static thread_local std::set<const void*> raised;
  if (raised.insert(reinterpret_cast<const void*>(kernel)).second) {
    SC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
    if (max_carveout)
      SC_CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  }
}

// Prepares the kernel and launches it.
void LaunchDecodeKernel(void (*kernel)(DecodeArgs), dim3 grid, const DecodeArgs& a, cudaStream_t stream,
                        int smem_bytes = kStageBytes) {
  PrepareDecodeKernel(kernel, smem_bytes);
  kernel<<<grid, kThreads, smem_bytes, stream>>>(a);
}

// A K or V pool as the tensor memory accelerator's 3-D tensor: rows of head_dim
// bf16 (one per pool page, KV head and token; the pool holds batch · pages_per_seq
// pages, as the op and the benchmarks allocate it) as [rows][head_dim / 64][64]; a box
// is `box_rows` whole rows, 128-byte swizzle.
CUtensorMap PoolTensorMap(const void* pool, const PagedDecodeShape& s, int box_rows, int promotion) {
  const cuuint64_t rows =
      static_cast<cuuint64_t>(s.batch * s.pages_per_seq() * s.num_kv_heads * kPagedKvPageSize);
  if (rows > static_cast<cuuint64_t>(INT32_MAX))  // the kernel's box coordinates are signed 32-bit
    throw Error("paged decode: a pool of " + std::to_string(rows) +
                " rows is beyond the TMA ring's 32-bit row coordinates");
  const cuuint64_t halves = static_cast<cuuint64_t>(s.head_dim / 64);
  const cuuint64_t dims3[3] = {64, halves, rows};
  const cuuint64_t strides3[2] = {128, static_cast<cuuint64_t>(s.head_dim) * 2};
  const cuuint32_t box3[3] = {64, static_cast<cuuint32_t>(halves), static_cast<cuuint32_t>(box_rows)};
  return TensorMapBf16Swizzle128("paged decode", pool, 3, dims3, strides3, box3, promotion);
}

// ---- the tensor-core kernel's A/B variants -------------------------------------------
//
// Each names a config (tile, ring depth, page-table prefetch) and a split target:
// the split rule aims at split_waves × the config's CTAs per SM (by shared memory).
// Variant 0 is the default, which the op runs (PagedDecodeTuning::variant); its
// kernel, launch and split rule are the ones from before the variants existed.
struct MmaVariant {
  const char* name;
  const char* what;
  MmaConfig config;
  int split_waves;
  void (*kernel64)(MmaArgs);
  void (*kernel128)(MmaArgs);
  int smem64, smem128;                // dynamic shared memory (the K/V ring)
  int ctas_per_sm64, ctas_per_sm128;  // by shared memory (MmaCtasPerSm)
};

// Entry I of kPagedDecodeVariantConfigs (paged_decode_plan.h, which the split rule
// reads) with its kernels, instantiated from its configuration.
template <std::size_t I>
MmaVariant MakeMmaVariant() {
  constexpr PagedDecodeVariantConfig v = kPagedDecodeVariantConfigs[I];
  constexpr int kW = v.config.warps, kS = v.config.stages;
  constexpr bool kP = v.config.table_prefetch, kT = v.config.tma;
  return {v.name,
          v.what,
          v.config,
          v.split_waves,
          paged_decode_attention_mma<64, __nv_bfloat16, kW, kS, kP, kT>,
          paged_decode_attention_mma<128, __nv_bfloat16, kW, kS, kP, kT>,
          MmaSmemBytes<64, kW, kS, false, kT>(),
          MmaSmemBytes<128, kW, kS, false, kT>(),
          MmaCtasPerSm<64, kW, kS, false, kT>(),
          MmaCtasPerSm<128, kW, kS, false, kT>()};
}

template <std::size_t... I>
std::vector<MmaVariant> MakeMmaVariants(std::index_sequence<I...>) {
  return {MakeMmaVariant<I>()...};
}

const std::vector<MmaVariant>& MmaVariants() {
  static const std::vector<MmaVariant> variants =
      MakeMmaVariants(std::make_index_sequence<static_cast<std::size_t>(kPagedDecodeVariantCount)>());
  static const bool indexed = std::string(variants[kMmaCpAsyncVariant].name) == "cp_async";
  if (!indexed) throw Error("paged decode: kMmaCpAsyncVariant does not name the cp_async variant");
  return variants;
}

const MmaVariant& VariantAt(int variant) {
  const std::vector<MmaVariant>& v = MmaVariants();
  if (variant < 0 || variant >= static_cast<int>(v.size()))
    throw Error("paged decode: variant " + std::to_string(variant) + " does not exist (0.." +
                std::to_string(v.size() - 1) + ")");
  return v[static_cast<std::size_t>(variant)];
}

// Prepares a tensor-core kernel and launches it.
void LaunchMmaKernel(void (*kernel)(MmaArgs), dim3 grid, int threads, const MmaArgs& args, int smem_bytes,
                     bool max_carveout, cudaStream_t stream) {
  PrepareDecodeKernel(kernel, smem_bytes, max_carveout);
  kernel<<<grid, threads, smem_bytes, stream>>>(args);
  SC_CUDA_CHECK_LAUNCH();
}

template <int D, class KvT>
void LaunchTyped(const PagedDecodeShape& s, const DecodeArgs& a, const PagedDecodePlan& plan, cudaStream_t stream) {
  const std::int64_t batch = s.batch;
  const dim3 grid(static_cast<unsigned>(plan.splits), static_cast<unsigned>(a.num_kv_heads * plan.head_chunks),
                  static_cast<unsigned>(batch));
  if constexpr (D <= 128) {
    if (plan.tensor_cores) {
      MmaArgs args{};
      args.a = a;
      if constexpr (std::is_same_v<KvT, __nv_fp8_e4m3>) {
        LaunchMmaKernel(plan.fp8_lean
                            ? paged_decode_attention_mma<D, KvT, kMmaWarps, MmaFp8Stages<D>(), kMmaTablePrefetch, false, true>
                            : paged_decode_attention_mma<D, KvT, kMmaWarps, MmaFp8Stages<D>(), kMmaTablePrefetch>,
                        grid, kMmaWarps * 32, args, MmaSmemBytes<D, kMmaWarps, MmaFp8Stages<D>(), true>(), false, stream);
      } else {  // bf16: the plan's variant (0, the default: TMA, or the cp.async ring for short splits)
        const MmaVariant& v = VariantAt(plan.variant == 0 && !plan.tma ? kMmaCpAsyncVariant : plan.variant);
        if (v.config.tma) {
          args.k_map = PoolTensorMap(a.k, s, 16 * v.config.warps, v.config.tma_promotion);
          args.v_map = PoolTensorMap(a.v, s, 16 * v.config.warps, v.config.tma_promotion);
        }
        LaunchMmaKernel(D == 64 ? v.kernel64 : v.kernel128, grid, v.config.warps * 32, args,
                        D == 64 ? v.smem64 : v.smem128, true, stream);
      }
      if (plan.splits > 1) {
        paged_decode_reduce<D>
            <<<static_cast<unsigned>(batch * a.num_heads), D, 0, stream>>>(a.part_o, a.part_lse, plan.splits, a.out);
        SC_CUDA_CHECK_LAUNCH();
      }
      return;
    }
  }
  switch (plan.heads_per_cta) {
    case 1:
      LaunchDecodeKernel(paged_decode_attention<D, KvT, 1>, grid, a, stream);
      break;
    case 2:
      LaunchDecodeKernel(paged_decode_attention<D, KvT, 2>, grid, a, stream);
      break;
    case 4:
      LaunchDecodeKernel(paged_decode_attention<D, KvT, 4>, grid, a, stream);
      break;
    case 8:
      LaunchDecodeKernel(paged_decode_attention<D, KvT, 8>, grid, a, stream);
      break;
    default:
      throw Error("paged decode: no instantiation for " + std::to_string(plan.heads_per_cta) + " heads per CTA");
  }
  SC_CUDA_CHECK_LAUNCH();
  if (plan.splits > 1) {
    paged_decode_reduce<D>
        <<<static_cast<unsigned>(batch * a.num_heads), D, 0, stream>>>(a.part_o, a.part_lse, plan.splits, a.out);
    SC_CUDA_CHECK_LAUNCH();
  }
}

template <int D>
void LaunchHeadDim(const PagedDecodeShape& s, const DecodeArgs& a, const PagedDecodePlan& plan, KvDtype kv,
                   cudaStream_t stream) {
  if (kv == KvDtype::kBf16)
    LaunchTyped<D, __nv_bfloat16>(s, a, plan, stream);
  else
    LaunchTyped<D, __nv_fp8_e4m3>(s, a, plan, stream);
}

__device__ __forceinline__ float HashUniform(std::uint64_t seed, std::size_t i, float scale) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (static_cast<std::uint64_t>(i) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
  return (2.0f * u - 1.0f) * scale;
}

__global__ void fill_uniform_fp8_e4m3(__nv_fp8_e4m3* dst, std::size_t n, std::uint64_t seed, float scale) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    float v = HashUniform(seed, i, scale);
    __nv_fp8_e4m3 f(v);
    if (static_cast<float>(f) == 0.0f) f = __nv_fp8_e4m3(v < 0 ? -0.015625f : 0.015625f);
    dst[i] = f;
  }
}

}  // namespace

int PagedDecodeFp8CtasPerSm(std::int64_t head_dim, bool lean) {
  if (head_dim != 64 && head_dim != 128)
    throw Error("paged decode: the tensor-core kernel has head dims 64 and 128, not " + std::to_string(head_dim));
  // The instantiation LaunchTyped runs (lean or not).
  void (*kernel)(MmaArgs) =
      head_dim == 64
          ? (lean
                 ? paged_decode_attention_mma<64, __nv_fp8_e4m3, kMmaWarps, MmaFp8Stages<64>(), kMmaTablePrefetch, false, true>
                 : paged_decode_attention_mma<64, __nv_fp8_e4m3, kMmaWarps, MmaFp8Stages<64>(), kMmaTablePrefetch>)
          : (lean
                 ? paged_decode_attention_mma<128, __nv_fp8_e4m3, kMmaWarps, MmaFp8Stages<128>(), kMmaTablePrefetch, false, true>
                 : paged_decode_attention_mma<128, __nv_fp8_e4m3, kMmaWarps, MmaFp8Stages<128>(), kMmaTablePrefetch>);
  const int smem = head_dim == 64 ? MmaSmemBytes<64, kMmaWarps, MmaFp8Stages<64>(), true>()
                                  : MmaSmemBytes<128, kMmaWarps, MmaFp8Stages<128>(), true>();
  PrepareDecodeKernel(kernel, smem);
  int blocks = 0;
  SC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kMmaWarps * 32, smem));
  return blocks;
}

std::vector<PagedDecodeVariant> PagedDecodeVariants() {
  std::vector<PagedDecodeVariant> out;
  for (const MmaVariant& v : MmaVariants()) {
    const int tile = 16 * v.config.warps;
    // K + V bytes of the tiles in flight while one is consumed (stages − 1), head dim 128.
    const int in_flight_kib = (v.config.stages - 1) * tile * 128 * 2 * 2 / 1024;
    std::string d =
        std::string(v.what) + ": tile " + std::to_string(tile) + " tokens (" + std::to_string(v.config.warps) +
        (v.config.warps == 1 ? " warp), " : " warps), ") + std::to_string(v.config.stages) + " stages, " +
        (v.config.table_prefetch ? "page table prefetched" : "page table read per tile") +
        "; head dim 128: " + std::to_string(v.smem128 / 1024) + " KiB of stages, " + std::to_string(v.ctas_per_sm128) +
        " CTAs/SM, " + std::to_string(in_flight_kib) + " KiB K+V in flight per CTA (" +
        std::to_string(in_flight_kib * v.ctas_per_sm128) + " per SM); head dim 64: " + std::to_string(v.ctas_per_sm64) +
        " CTAs/SM; split target " + std::to_string(v.split_waves) + "x CTAs/SM";
    out.push_back({v.name, d});
  }
  return out;
}

int PagedDecodeVariantCtasPerSm(int variant, std::int64_t head_dim) {
  const MmaVariant& v = VariantAt(variant);
  if (head_dim != 64 && head_dim != 128)
    throw Error("paged decode: the tensor-core kernel has head dims 64 and 128, not " + std::to_string(head_dim));
  void (*kernel)(MmaArgs) = head_dim == 64 ? v.kernel64 : v.kernel128;
  const int smem = head_dim == 64 ? v.smem64 : v.smem128;
  PrepareDecodeKernel(kernel, smem, true);  // as LaunchTyped prepares every bf16 tensor-core kernel
  int blocks = 0;
  SC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, v.config.warps * 32, smem));
  return blocks;
}

namespace {
// Whether the current device runs the TMA ring (compute capability 9.0 or newer); false
// without a device (host-only plans then name the cp.async ring).
bool TmaRingAvailable() {
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return major >= 9;
}
}  // namespace

PagedDecodePlan PlanPagedDecode(const PagedDecodeShape& s, int multiprocessors, KvDtype kv_dtype,
                                const PagedDecodeTuning& tuning) {
  return PlanPagedDecodeOn(s, multiprocessors, kv_dtype, TmaRingAvailable(), tuning);
}

void LaunchPagedDecode(const PagedDecodeShape& s, const PagedDecodePlan& plan, KvDtype kv_dtype, const void* q,
                       const void* k_pool, const void* v_pool, const std::int32_t* page_table, float k_scale,
                       float v_scale, void* out, void* workspace, cudaStream_t stream) {
  if (!PagedDecodeSupportsHeadDim(s.head_dim))
    throw Error("paged decode: head_dim " + std::to_string(s.head_dim) + " has no instantiation (64, 128, 256)");
  if (plan.splits > 1 && !workspace) throw Error("paged decode: split KV needs a workspace");
  DecodeArgs a{};
  a.q = static_cast<const __nv_bfloat16*>(q);
  a.k = k_pool;
  a.v = v_pool;
  a.page_table = page_table;
  a.out = static_cast<__nv_bfloat16*>(out);
  if (plan.splits > 1) {
    a.part_o = static_cast<float*>(workspace);
    a.part_lse = a.part_o + static_cast<std::size_t>(s.batch * s.num_heads) * plan.splits * s.head_dim;
  }
  a.num_heads = static_cast<int>(s.num_heads);
  a.num_kv_heads = static_cast<int>(s.num_kv_heads);
  a.group = static_cast<int>(s.group());
  a.head_chunks = plan.head_chunks;
  a.pages_per_seq = static_cast<int>(s.pages_per_seq());
  a.tokens = static_cast<int>(s.tokens);
  a.first_token = s.window > 0 ? static_cast<int>(std::max<std::int64_t>(0, s.tokens - s.window)) : 0;
  a.pages_per_split = static_cast<int>(plan.pages_per_split);
  a.splits = plan.splits;
  a.q_scale = kLog2e / std::sqrt(static_cast<float>(s.head_dim)) * k_scale;
  a.v_scale = v_scale;
  switch (s.head_dim) {
    case 64:
      LaunchHeadDim<64>(s, a, plan, kv_dtype, stream);
      break;
    case 128:
      LaunchHeadDim<128>(s, a, plan, kv_dtype, stream);
      break;
    default:
      LaunchHeadDim<256>(s, a, plan, kv_dtype, stream);
      break;
  }
}

void FillUniformFp8E4m3(void* dst, std::size_t n, std::uint64_t seed, float scale, cudaStream_t stream) {
  std::size_t blocks = std::min<std::size_t>((n + 255) / 256, 65536);
  fill_uniform_fp8_e4m3<<<static_cast<unsigned>(std::max<std::size_t>(blocks, 1)), 256, 0, stream>>>(
      static_cast<__nv_fp8_e4m3*>(dst), n, seed, scale);
  SC_CUDA_CHECK_LAUNCH();
}

}  // namespace servecast::cuda
