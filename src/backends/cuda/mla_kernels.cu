// MLA decode and prefill cache write (mla_kernels.h).
//
// Decode kernel (mla_decode): one CTA per (head block, KV split, sequence), 8 warps,
// two CTAs per SM for 16 heads, one for 32 and 64. The query rows of the head block
// are loaded once (into registers for 32 heads, kept in shared memory otherwise); the
// latent cache streams through a cp.async ring of 32-token tiles, 2 to 6 deep (fp8
// tiles are converted to bf16 in shared memory, exactly: e4m3 fits bf16). Per tile:
//   scores  S = Q · Cᵀ    (rows = heads, 576 deep): mma.sync m16n8k16; warp w takes
//                          one 16-row tile, 8, 16 or 32 token columns (16, 32, 64
//                          heads) and one half of the 576 (the halves add in the
//                          softmax);
//   softmax online per head row (running max and sum in shared memory), P in bf16;
//   values  O += P · C[:, 0:512]: warp w owns output columns 64w .. 64w + 63 of
//                          every head row (its accumulators stay in registers).
// Tokens past the sequence's end are zero-filled by the copy and masked in the
// softmax, so the tail of the last page is never read.

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/mla_kernels.h"
#include "backends/cuda/mma_ptx.cuh"
#include "core/error.h"

namespace servecast::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 32;                        // tokens per tile (half a page)
constexpr int kRow = kMlaCacheDim + 8;           // bf16 elements per shared row (1168 B: conflict-free ldmatrix)
constexpr int kPRow = kTile + 8;                 // bf16 elements per P row (80 B)
constexpr int kChunks = kMlaCacheDim * 2 / 16;   // 16-byte chunks of a bf16 row (72)
constexpr int kMaxSplits = 64;
constexpr float kLog2e = 1.4426950408889634f;

static_assert(kPagedKvPageSize % kTile == 0, "a tile never crosses a page");
static_assert(kMlaLatent == kWarps * 64, "each warp owns 64 output columns");

// 16 bytes global -> shared through L2; zero-filled (nothing read) when !valid.
__device__ __forceinline__ void CopyAsync16(void* smem, const void* gmem, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddr(smem)), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void CopyAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int kPending>
__device__ __forceinline__ void CopyAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}
__device__ __forceinline__ unsigned PackBf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}
// Two e4m3 bytes (the low 16 bits of w) as a bf16 pair, exactly.
__device__ __forceinline__ unsigned Fp8x2ToBf16x2(unsigned w) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w & 0xffffu), __NV_E4M3);
  const float2 f = __half22float2(__half2(h));
  return PackBf16(f.x, f.y);
}

struct DecodeArgs {
  const __nv_bfloat16* q;
  const unsigned char* pool;
  const std::int32_t* table;
  // Sparse (DSA): slot[b][j] (pool token slot of query b's j-th selected key, j <
  // len[b]); null: the page table's contiguous tokens.
  const std::int32_t* slots;
  const std::int32_t* lens;
  int slots_ld;
  __nv_bfloat16* out;
  float* ws_o;    // [batch][splits][heads][512]
  float* ws_lse;  // [batch][splits][heads] (log2 domain)
  int heads, tokens, pages_per_seq, splits, tiles_per_split;
  float score_scale_log2;  // softmax_scale · kv_scale · log2(e)
  float out_scale;         // kv_scale
};

template <int HT, bool kFp8>
struct DecodeSmem {
  static constexpr int kRows = 16 * HT;
  static constexpr int kStageBytes = kFp8 ? kTile * kMlaCacheDim : kTile * kRow * 2;
  // Tiles in the ring. 16 heads: two CTAs per SM with two stages each (their barriers
  // and dependent mma chains interleave; one CTA with a deeper ring measured 15% slower
  // on the H200). 32 and 64 heads: one CTA per SM with as deep a ring as fits.
  static constexpr int kCtasPerSm = HT == 1 ? 2 : 1;
  static constexpr int kStages = HT == 1 ? 2 : kFp8 ? (HT == 2 ? 6 : 4) : (HT == 4 ? 3 : 4);
  static constexpr int kQ = 0;
  static constexpr int kRing = kQ + kRows * kRow * 2;
  static constexpr int kConv = kRing + kStages * kStageBytes;  // fp8: the bf16 tile
  static constexpr int kS = kConv + (kFp8 ? kTile * kRow * 2 : 0);
  static constexpr int kP = kS + 2 * kRows * kTile * 4;  // two partial score tiles (the 576 halves)
  static constexpr int kStats = kP + kRows * kPRow * 2;
  static constexpr int kBytes = kStats + 3 * kRows * 4;
  static_assert(kCtasPerSm * (kBytes + 1024) <= 228 * 1024, "the CTAs per SM fit in shared memory");
};

template <int HT, bool kFp8>
__global__ void __launch_bounds__(kThreads, DecodeSmem<HT, kFp8>::kCtasPerSm) mla_decode(const __grid_constant__ DecodeArgs a) {
  using L = DecodeSmem<HT, kFp8>;
  constexpr int R = L::kRows;
  constexpr int EB = kFp8 ? 1 : 2;
  constexpr int kRowChunks = kMlaCacheDim * EB / 16;  // 72 bf16, 36 fp8
  extern __shared__ __align__(128) unsigned char smem[];
  __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(smem + L::kQ);
  unsigned char* stages = smem + L::kRing;
  float* ss = reinterpret_cast<float*>(smem + L::kS);
  __nv_bfloat16* ps = reinterpret_cast<__nv_bfloat16*>(smem + L::kP);
  float* row_m = reinterpret_cast<float*>(smem + L::kStats);
  float* row_l = row_m + R;
  float* row_alpha = row_l + R;

  const int h0 = blockIdx.x * R, split = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int tokens = a.lens ? a.lens[b] : a.tokens;
  const int tiles_total = (tokens + kTile - 1) / kTile;
  const int t_begin = split * a.tiles_per_split;
  const int t_end = min(tiles_total, t_begin + a.tiles_per_split);
  const std::int32_t* table = a.slots ? nullptr : a.table + static_cast<std::size_t>(b) * a.pages_per_seq;
  const std::int32_t* slots = a.slots ? a.slots + static_cast<std::size_t>(b) * a.slots_ld : nullptr;

  // The head block's query rows (zero rows past the last head).
  for (int c = tid; c < R * kChunks; c += kThreads) {
    const int r = c / kChunks, k = c % kChunks, h = h0 + r;
    const bool valid = h < a.heads;
    const __nv_bfloat16* src = a.q + (static_cast<std::size_t>(b) * a.heads + (valid ? h : 0)) * kMlaCacheDim + k * 8;
    CopyAsync16(qs + r * kRow + k * 8, src, valid);
  }
  if (tid < R) {
    row_m[tid] = -INFINITY;
    row_l[tid] = 0.f;
  }
  auto load_tile = [&](int tile, int stage) {
    const int tok0 = tile * kTile;
    unsigned char* dst = stages + stage * L::kStageBytes;
    if (slots) {  // gathered rows: each its own pool slot
      for (int c = tid; c < kTile * kRowChunks; c += kThreads) {
        const int r = c / kRowChunks, k = c % kRowChunks;
        const bool valid = tok0 + r < tokens;
        const std::size_t slot = valid ? static_cast<std::size_t>(slots[tok0 + r]) : 0;
        unsigned char* d = dst + (kFp8 ? r * kMlaCacheDim : r * kRow * 2) + k * 16;
        CopyAsync16(d, a.pool + slot * kMlaCacheDim * EB + k * 16, valid);
      }
      return;
    }
    const std::size_t page = static_cast<std::size_t>(table[tok0 / kPagedKvPageSize]);
    const unsigned char* src =
        a.pool + (page * kPagedKvPageSize + static_cast<std::size_t>(tok0 % kPagedKvPageSize)) * kMlaCacheDim * EB;
    for (int c = tid; c < kTile * kRowChunks; c += kThreads) {
      const int r = c / kRowChunks, k = c % kRowChunks;
      const bool valid = tok0 + r < tokens;
      unsigned char* d = dst + (kFp8 ? r * kMlaCacheDim : r * kRow * 2) + k * 16;
      CopyAsync16(d, valid ? src + static_cast<std::size_t>(r) * kMlaCacheDim * EB + k * 16 : src, valid);
    }
  };
  CopyAsyncCommit();  // the query rows: their own group, waited for before the first tile
  // The ring's first kStages - 1 tiles (empty groups past the split's end keep the count).
#pragma unroll
  for (int i = 0; i < L::kStages - 1; ++i) {
    if (t_begin + i < t_end) load_tile(t_begin + i, i);
    CopyAsyncCommit();
  }

  // Scores: warp w takes row tile w mod HT, token tiles ((w / HT) mod NG) x NT .. of
  // the 32-token tile, and half w / 4 of the 576 (the two halves add in the softmax).
  constexpr int NG = 4 / HT, NT = 4 / NG, kSteps = kMlaCacheDim / 2 / 16;  // 18 k-steps a half
  // 32 heads: the query fragments in 72 registers; 16 heads (two CTAs per SM, 128
  // registers a thread) and 64 (the accumulators take 128) read them from shared memory.
  constexpr bool kQInRegs = HT == 2;
  const int s_mt = warp % HT, s_ng = (warp / HT) % NG, s_half = warp / 4;
  const int k_begin = s_half * (kMlaCacheDim / 2);
  [[maybe_unused]] unsigned qf[kQInRegs ? kSteps : 1][4];
  if constexpr (kQInRegs) {
    CopyAsyncWait<L::kStages - 1>();  // the query group is complete
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kSteps; ++k)
      LdMatrixX4(qf[k], qs + (s_mt * 16 + (lane & 15)) * kRow + k_begin + k * 16 + (lane >> 4) * 8);
  }

  float acc[HT][8][4];
#pragma unroll
  for (int i = 0; i < HT; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;

  for (int t = t_begin; t < t_end; ++t) {
    const int stage = (t - t_begin) % L::kStages;
    {
      const int ahead = t + L::kStages - 1;
      if (ahead < t_end) load_tile(ahead, (ahead - t_begin) % L::kStages);
    }
    CopyAsyncCommit();
    CopyAsyncWait<L::kStages - 1>();
    __syncthreads();
    const __nv_bfloat16* ks;
    if constexpr (kFp8) {
      const unsigned char* src = stages + stage * L::kStageBytes;
      __nv_bfloat16* conv = reinterpret_cast<__nv_bfloat16*>(smem + L::kConv);
      for (int c = tid; c < kTile * kMlaCacheDim / 8; c += kThreads) {
        const int r = c / (kMlaCacheDim / 8), k = c % (kMlaCacheDim / 8);
        const uint2 w = *reinterpret_cast<const uint2*>(src + r * kMlaCacheDim + k * 8);
        uint4 o;
        o.x = Fp8x2ToBf16x2(w.x);
        o.y = Fp8x2ToBf16x2(w.x >> 16);
        o.z = Fp8x2ToBf16x2(w.y);
        o.w = Fp8x2ToBf16x2(w.y >> 16);
        *reinterpret_cast<uint4*>(conv + r * kRow + k * 8) = o;
      }
      __syncthreads();
      ks = conv;
    } else {
      ks = reinterpret_cast<const __nv_bfloat16*>(stages + stage * L::kStageBytes);
    }

    {
      float sacc[NT][4];
#pragma unroll
      for (int j = 0; j < NT; ++j) sacc[j][0] = sacc[j][1] = sacc[j][2] = sacc[j][3] = 0.f;
      const int n_row0 = s_ng * NT * 8;
#pragma unroll
      for (int k = 0; k < kSteps; ++k) {
        const int k0 = k_begin + k * 16;
        unsigned af[4];
        if constexpr (kQInRegs) {
          af[0] = qf[k][0], af[1] = qf[k][1], af[2] = qf[k][2], af[3] = qf[k][3];
        } else {
          LdMatrixX4(af, qs + (s_mt * 16 + (lane & 15)) * kRow + k0 + (lane >> 4) * 8);
        }
        if constexpr (NT == 1) {
          unsigned bf[2];
          LdMatrixX2(bf, ks + (n_row0 + (lane & 7)) * kRow + k0 + ((lane >> 3) & 1) * 8);
          Mma16816(sacc[0], af, bf[0], bf[1]);
        } else {
#pragma unroll
          for (int j = 0; j < NT; j += 2) {  // two token tiles per ldmatrix.x4
            unsigned bf[4];
            LdMatrixX4(bf, ks + (n_row0 + j * 8 + (lane & 7) + ((lane >> 4) & 1) * 8) * kRow + k0 +
                               ((lane >> 3) & 1) * 8);
            Mma16816(sacc[j], af, bf[0], bf[1]);
            Mma16816(sacc[j + 1], af, bf[2], bf[3]);
          }
        }
      }
      float* dst = ss + s_half * R * kTile;
      const int row = s_mt * 16 + lane / 4;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int col = n_row0 + j * 8 + 2 * (lane % 4);
        *reinterpret_cast<float2*>(dst + row * kTile + col) = make_float2(sacc[j][0], sacc[j][1]);
        *reinterpret_cast<float2*>(dst + (row + 8) * kTile + col) = make_float2(sacc[j][2], sacc[j][3]);
      }
    }
    __syncthreads();

    // Online softmax: kThreads / R threads per head row (consecutive lanes).
    {
      constexpr int TPR = kThreads / R, CPT = kTile / TPR;
      const int r = tid / TPR, part = tid % TPR, tok0 = t * kTile;
      float s[CPT], mx = -INFINITY;
#pragma unroll
      for (int c = 0; c < CPT; ++c) {
        const int col = part * CPT + c;
        float v = ss[r * kTile + col];
        v += ss[R * kTile + r * kTile + col];
        v = tok0 + col < tokens ? v * a.score_scale_log2 : -INFINITY;
        s[c] = v;
        mx = fmaxf(mx, v);
      }
#pragma unroll
      for (int off = TPR / 2; off >= 1; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float m_old = row_m[r], m_new = fmaxf(m_old, mx);  // every tile holds a valid token: finite
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < CPT; c += 2) {
        const float p0 = exp2f(s[c] - m_new), p1 = exp2f(s[c + 1] - m_new);
        sum += p0 + p1;
        *reinterpret_cast<unsigned*>(ps + r * kPRow + part * CPT + c) = PackBf16(p0, p1);
      }
#pragma unroll
      for (int off = TPR / 2; off >= 1; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      if (part == 0) {
        const float alpha = exp2f(m_old - m_new);
        row_alpha[r] = alpha;
        row_l[r] = row_l[r] * alpha + sum;
        row_m[r] = m_new;
      }
    }
    __syncthreads();

    // Values: O[rows][64w .. 64w + 63] = alpha · O + P · C[:, cols].
    {
#pragma unroll
      for (int mt = 0; mt < HT; ++mt) {
        const float a0 = row_alpha[mt * 16 + lane / 4], a1 = row_alpha[mt * 16 + lane / 4 + 8];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          acc[mt][nt][0] *= a0;
          acc[mt][nt][1] *= a0;
          acc[mt][nt][2] *= a1;
          acc[mt][nt][3] *= a1;
        }
      }
      const int col0 = warp * 64;
#pragma unroll
      for (int k0 = 0; k0 < kTile; k0 += 16) {
        unsigned af[HT][4];
#pragma unroll
        for (int mt = 0; mt < HT; ++mt) LdMatrixX4(af[mt], ps + (mt * 16 + (lane & 15)) * kPRow + k0 + (lane >> 4) * 8);
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          unsigned bf[4];
          const int row = k0 + (lane & 7) + ((lane >> 3) & 1) * 8;
          const int col = col0 + np * 16 + (lane >> 4) * 8;
          LdMatrixX4Trans(bf, ks + row * kRow + col);
#pragma unroll
          for (int mt = 0; mt < HT; ++mt) {
            Mma16816(acc[mt][2 * np], af[mt], bf[0], bf[1]);
            Mma16816(acc[mt][2 * np + 1], af[mt], bf[2], bf[3]);
          }
        }
      }
    }
    __syncthreads();  // the stage, S and P are rewritten by the next tile
  }

  // Epilogue: O / l (× kv_scale) to out, or, split, to the workspace with the row's
  // log2-sum-exp.
#pragma unroll
  for (int mt = 0; mt < HT; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = mt * 16 + lane / 4 + half * 8, h = h0 + row;
      if (h >= a.heads) continue;
      const float l = row_l[row];
      const float inv = l > 0.f ? a.out_scale / l : 0.f;
      if (a.splits == 1) {
        __nv_bfloat16* dst = a.out + (static_cast<std::size_t>(b) * a.heads + h) * kMlaLatent;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          const int col = warp * 64 + nt * 8 + 2 * (lane % 4);
          *reinterpret_cast<unsigned*>(dst + col) =
              PackBf16(acc[mt][nt][2 * half] * inv, acc[mt][nt][2 * half + 1] * inv);
        }
      } else {
        const std::size_t slot = (static_cast<std::size_t>(b) * a.splits + split) * a.heads + h;
        float* dst = a.ws_o + slot * kMlaLatent;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          const int col = warp * 64 + nt * 8 + 2 * (lane % 4);
          *reinterpret_cast<float2*>(dst + col) =
              make_float2(acc[mt][nt][2 * half] * inv, acc[mt][nt][2 * half + 1] * inv);
        }
        if (warp == 0 && lane % 4 == 0) a.ws_lse[slot] = l > 0.f ? row_m[row] + log2f(l) : -INFINITY;
      }
    }
  }
}

// Combine: out[b][h] = Σ_s w_s o_s / Σ_s w_s with w_s = 2^(lse_s - max lse).
__global__ void __launch_bounds__(128) mla_decode_combine(const float* ws_o, const float* ws_lse, int heads, int splits,
                                                          __nv_bfloat16* out) {
  const int h = blockIdx.x, b = blockIdx.y;
  __shared__ float w[kMaxSplits];
  __shared__ float total;
  if (threadIdx.x < 32) {
    float mx = -INFINITY;
    for (int s = threadIdx.x; s < splits; s += 32)
      mx = fmaxf(mx, ws_lse[(static_cast<std::size_t>(b) * splits + s) * heads + h]);
    for (int off = 16; off >= 1; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    float sum = 0.f;
    for (int s = threadIdx.x; s < splits; s += 32) {
      const float lse = ws_lse[(static_cast<std::size_t>(b) * splits + s) * heads + h];
      const float e = lse == -INFINITY ? 0.f : exp2f(lse - mx);
      w[s] = e;
      sum += e;
    }
    for (int off = 16; off >= 1; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (threadIdx.x == 0) total = sum;
  }
  __syncthreads();
  const float inv = total > 0.f ? 1.f / total : 0.f;
  const int col = threadIdx.x * 4;
  float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
  // Unrolled so that eight splits' loads are in flight at once (one at a time, one
  // token's combine over 32 splits took 18 us on the H200).
#pragma unroll 8
  for (int s = 0; s < splits; ++s) {
    const float4 x = *reinterpret_cast<const float4*>(
        ws_o + ((static_cast<std::size_t>(b) * splits + s) * heads + h) * kMlaLatent + col);
    o.x += w[s] * x.x;
    o.y += w[s] * x.y;
    o.z += w[s] * x.z;
    o.w += w[s] * x.w;
  }
  __nv_bfloat16* dst = out + (static_cast<std::size_t>(b) * heads + h) * kMlaLatent + col;
  uint2 packed{PackBf16(o.x * inv, o.y * inv), PackBf16(o.z * inv, o.w * inv)};
  *reinterpret_cast<uint2*>(dst) = packed;
}
static_assert(kMlaLatent == 128 * 4, "the combine kernel's 128 threads take 4 columns each");

template <int HT, bool kFp8>
const void* DecodeKernel() {
  return reinterpret_cast<const void*>(&mla_decode<HT, kFp8>);
}
const void* PickKernel(int head_tile, bool fp8) {
  switch (head_tile) {
    case 16:
      return fp8 ? DecodeKernel<1, true>() : DecodeKernel<1, false>();
    case 32:
      return fp8 ? DecodeKernel<2, true>() : DecodeKernel<2, false>();
    case 64:
      return fp8 ? DecodeKernel<4, true>() : DecodeKernel<4, false>();
    default:
      throw Error("mla decode: head tile " + std::to_string(head_tile) + " (have 16, 32, 64)");
  }
}
int SmemBytes(int head_tile, bool fp8) {
  switch (head_tile) {
    case 16:
      return fp8 ? DecodeSmem<1, true>::kBytes : DecodeSmem<1, false>::kBytes;
    case 32:
      return fp8 ? DecodeSmem<2, true>::kBytes : DecodeSmem<2, false>::kBytes;
    default:
      return fp8 ? DecodeSmem<4, true>::kBytes : DecodeSmem<4, false>::kBytes;
  }
}
// The kernel's dynamic shared memory, allowed once per kernel (above 48 KiB needs the opt-in).
void AllowSmem(const void* kernel, int bytes) {
  SC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

// ---- prefill cache write --------------------------------------------------------------

__device__ __forceinline__ unsigned char ToE4m3(float x) {
  return static_cast<unsigned char>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

// One block of 128 threads per token: 72 threads move the latent's 16-byte chunks into
// the page slot; all of them copy the rope part (8 chunks) into every head's k.
__global__ void __launch_bounds__(128) mla_prefill_cache_write(const __nv_bfloat16* latent,
                                                               const std::int32_t* table, int seq, int pages_per_seq,
                                                               int heads, bool fp8, float inv_scale,
                                                               unsigned char* pool, __nv_bfloat16* k) {
  const std::size_t token = blockIdx.x;  // b * seq + pos
  const int b = static_cast<int>(token / seq), pos = static_cast<int>(token % seq);
  const __nv_bfloat16* src = latent + token * kMlaCacheDim;
  const std::size_t page = static_cast<std::size_t>(table[static_cast<std::size_t>(b) * pages_per_seq +
                                                         pos / kPagedKvPageSize]);
  const std::size_t slot = page * kPagedKvPageSize + pos % kPagedKvPageSize;
  const int c = threadIdx.x;
  if (c < kChunks) {
    const uint4 v = *reinterpret_cast<const uint4*>(src + c * 8);
    if (!fp8) {
      *reinterpret_cast<uint4*>(pool + slot * kMlaCacheDim * 2 + c * 16) = v;
    } else {
      const __nv_bfloat16* e = reinterpret_cast<const __nv_bfloat16*>(&v);
      unsigned lo = 0, hi = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) lo |= static_cast<unsigned>(ToE4m3(__bfloat162float(e[i]) * inv_scale)) << (8 * i);
#pragma unroll
      for (int i = 0; i < 4; ++i)
        hi |= static_cast<unsigned>(ToE4m3(__bfloat162float(e[4 + i]) * inv_scale)) << (8 * i);
      *reinterpret_cast<uint2*>(pool + slot * kMlaCacheDim + c * 8) = make_uint2(lo, hi);
    }
  }
  constexpr int kRopeChunks = kMlaRope * 2 / 16;  // 8
  for (int i = c; i < heads * kRopeChunks; i += blockDim.x) {
    const int h = i / kRopeChunks, r = i % kRopeChunks;
    const uint4 v = *reinterpret_cast<const uint4*>(src + kMlaLatent + r * 8);
    *reinterpret_cast<uint4*>(k + (token * heads + h) * kMlaQkDim + kMlaNope + r * 8) = v;
  }
}

}  // namespace

std::string MlaDecodePlan::Describe() const {
  return std::string(wgmma ? "wgmma,tile=" + std::to_string(tile_tokens) + "," : "") +
         "heads=" + std::to_string(head_tile) + ",splits=" + std::to_string(splits) +
         ",tiles_per_split=" + std::to_string(tiles_per_split);
}

bool MlaDecodeWgmmaRuns() {
  return MlaDecodeWgmmaBuilt() && CurrentDeviceIsSm90();
}

MlaDecodePlan PlanMlaDecode(const MlaDecodeShape& s, int multiprocessors, KvDtype kv_dtype, bool gathered) {
  if (s.batch <= 0 || s.num_heads <= 0 || s.tokens <= 0)
    throw Error("mla decode: batch, num_heads and tokens must be positive");
  const bool fp8 = kv_dtype == KvDtype::kFp8E4m3;
  MlaDecodePlan p;
  p.wgmma = !fp8 && !gathered && MlaDecodeWgmmaRuns();
  p.tile_tokens = p.wgmma ? kPagedKvPageSize : kTile;
  p.head_tile = s.num_heads <= 16 ? 16 : s.num_heads <= 32 ? 32 : 64;
  p.head_blocks = static_cast<int>((s.num_heads + p.head_tile - 1) / p.head_tile);
  if (p.wgmma) {
    PrepareMlaDecodeWgmma(p.head_tile);
    p.ctas_per_sm = 1;
  } else {
    const void* kernel = PickKernel(p.head_tile, fp8);
    const int smem = SmemBytes(p.head_tile, fp8);
    AllowSmem(kernel, smem);
    int ctas = 0;
    SC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, kernel, kThreads, smem));
    p.ctas_per_sm = std::max(1, ctas);
  }
  const std::int64_t tiles = (s.tokens + p.tile_tokens - 1) / p.tile_tokens;
  const double slots = static_cast<double>(multiprocessors) * p.ctas_per_sm;
  const double base = static_cast<double>(p.head_blocks) * static_cast<double>(s.batch);
  // Wave model in tile times: waves x (tiles per split + 2 for the CTA's set-up and
  // query load), plus 3 for the combine pass when split.
  double best = std::numeric_limits<double>::infinity();
  for (std::int64_t splits = 1; splits <= std::min<std::int64_t>(tiles, kMaxSplits); ++splits) {
    const std::int64_t per = (tiles + splits - 1) / splits;
    const std::int64_t used = (tiles + per - 1) / per;  // no empty split
    if (used != splits) continue;
    const double waves = std::ceil(base * static_cast<double>(splits) / slots);
    const double cost = waves * (static_cast<double>(per) + 2) + (splits > 1 ? 3 : 0);
    if (cost < best - 1e-9) {
      best = cost;
      p.splits = static_cast<int>(splits);
      p.tiles_per_split = per;
    }
  }
  p.workspace_bytes = p.WorkspaceFor(s.batch, s.num_heads);
  return p;
}

namespace {
// One launch of the decode (and combine) over queries [0, s.batch) of the pointers
// given; batches above the grid's z extent go in chunks (the workspace reused in
// stream order).
void LaunchDecode(const MlaDecodeShape& s, const MlaDecodePlan& plan, KvDtype kv_dtype, const void* q, const void* pool,
                  const std::int32_t* page_table, const std::int32_t* slots, const std::int32_t* lens, int slots_ld,
                  float kv_scale, float softmax_scale, void* out, void* workspace, cudaStream_t stream) {
  const bool fp8 = kv_dtype == KvDtype::kFp8E4m3;
  if (plan.splits > 1 && (!workspace || plan.splits > kMaxSplits))
    throw Error("mla decode: a split plan needs its workspace (and at most 64 splits)");
  if (plan.wgmma && (fp8 || slots))
    throw Error("mla decode: the wgmma plan is for a bf16 paged cache (plan fp8 and sparse launches without it)");
  constexpr std::int64_t kChunk = 65535;  // the grid's z extent
  const void* kernel = plan.wgmma ? nullptr : PickKernel(plan.head_tile, fp8);
  const int smem = plan.wgmma ? 0 : SmemBytes(plan.head_tile, fp8);
  for (std::int64_t b0 = 0; b0 < s.batch; b0 += kChunk) {
    const std::int64_t nb = std::min(kChunk, s.batch - b0);
    const std::size_t q_off = static_cast<std::size_t>(b0 * s.num_heads);
    DecodeArgs a{};
    a.q = static_cast<const __nv_bfloat16*>(q) + q_off * kMlaCacheDim;
    a.pool = static_cast<const unsigned char*>(pool);
    a.table = page_table ? page_table + static_cast<std::size_t>(b0) * s.pages_per_seq() : nullptr;
    a.slots = slots ? slots + static_cast<std::size_t>(b0) * slots_ld : nullptr;
    a.lens = lens ? lens + b0 : nullptr;
    a.slots_ld = slots_ld;
    a.out = static_cast<__nv_bfloat16*>(out) + q_off * kMlaLatent;
    a.ws_o = static_cast<float*>(workspace);
    a.ws_lse = plan.splits > 1 ? a.ws_o + static_cast<std::size_t>(nb) * plan.splits * s.num_heads * kMlaLatent
                               : nullptr;
    a.heads = static_cast<int>(s.num_heads);
    a.tokens = static_cast<int>(s.tokens);
    a.pages_per_seq = static_cast<int>(s.pages_per_seq());
    a.splits = plan.splits;
    a.tiles_per_split = static_cast<int>(plan.tiles_per_split);
    a.score_scale_log2 = softmax_scale * kv_scale * kLog2e;
    a.out_scale = kv_scale;
    if (plan.wgmma) {
      LaunchMlaDecodeWgmmaPart(s, plan, a.q, a.pool, a.table, softmax_scale, a.out, a.ws_o, a.ws_lse, nb, stream);
    } else {
      const dim3 grid(static_cast<unsigned>(plan.head_blocks), static_cast<unsigned>(plan.splits),
                      static_cast<unsigned>(nb));
      void* args[] = {&a};
      SC_CUDA_CHECK(
          cudaLaunchKernel(kernel, grid, dim3(kThreads), args, static_cast<std::size_t>(smem), stream));
    }
    if (plan.splits > 1) {
      mla_decode_combine<<<dim3(static_cast<unsigned>(s.num_heads), static_cast<unsigned>(nb)), 128, 0, stream>>>(
          a.ws_o, a.ws_lse, a.heads, plan.splits, a.out);
      SC_CUDA_CHECK(cudaGetLastError());
    }
  }
}
}  // namespace

std::size_t MlaDecodePlan::WorkspaceFor(std::int64_t batch, std::int64_t num_heads) const {
  if (splits <= 1) return 0;
  return static_cast<std::size_t>(std::min<std::int64_t>(batch, 65535)) * splits *
         static_cast<std::size_t>(num_heads) * (kMlaLatent + 1) * sizeof(float);
}

void LaunchMlaDecode(const MlaDecodeShape& s, const MlaDecodePlan& plan, KvDtype kv_dtype, const void* q,
                     const void* pool, const std::int32_t* page_table, float kv_scale, float softmax_scale, void* out,
                     void* workspace, cudaStream_t stream) {
  if (s.batch > 65535) throw Error("mla decode: batch above 65535 (the grid's z extent)");
  LaunchDecode(s, plan, kv_dtype, q, pool, page_table, nullptr, nullptr, 0, kv_scale, softmax_scale, out, workspace,
               stream);
}

void LaunchMlaSparse(const MlaDecodeShape& s, const MlaDecodePlan& plan, KvDtype kv_dtype, const void* q,
                     const void* pool, const std::int32_t* slots, const std::int32_t* lens, float kv_scale,
                     float softmax_scale, void* out, void* workspace, cudaStream_t stream) {
  if (!slots || !lens) throw Error("mla sparse: slots and lens are required");
  LaunchDecode(s, plan, kv_dtype, q, pool, nullptr, slots, lens, static_cast<int>(s.tokens), kv_scale, softmax_scale,
               out, workspace, stream);
}

void LaunchMlaPrefillCacheWrite(const MlaPrefillShape& s, KvDtype kv_dtype, const void* latent,
                                const std::int32_t* page_table, float kv_scale, void* pool, void* k,
                                cudaStream_t stream) {
  const std::int64_t tokens = s.batch * s.seq;
  if (tokens <= 0 || tokens > std::numeric_limits<int>::max()) throw Error("mla prefill: token count out of range");
  mla_prefill_cache_write<<<static_cast<unsigned>(tokens), 128, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(latent), page_table, static_cast<int>(s.seq),
      static_cast<int>(s.pages_per_seq()), static_cast<int>(s.num_heads), kv_dtype == KvDtype::kFp8E4m3,
      1.0f / kv_scale, static_cast<unsigned char*>(pool), static_cast<__nv_bfloat16*>(k));
  SC_CUDA_CHECK(cudaGetLastError());
}

#if !defined(SERVECAST_HAVE_SM90A)
bool MlaDecodeWgmmaBuilt() {
  return false;
}
int PrepareMlaDecodeWgmma(int) {
  throw Error("mla decode wgmma: this build has no sm_90a kernels (CUDA architectures without 90)");
}
void LaunchMlaDecodeWgmmaPart(const MlaDecodeShape&, const MlaDecodePlan&, const void*, const void*,
                              const std::int32_t*, float, void*, float*, float*, std::int64_t, cudaStream_t) {
  throw Error("mla decode wgmma: this build has no sm_90a kernels (CUDA architectures without 90)");
}
#endif

}  // namespace servecast::cuda
