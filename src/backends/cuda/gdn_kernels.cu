// Gated DeltaNet kernels (gdn_kernels.h): the chunked prefill scan and the recurrent
// decode step (the short convolution before them is short_conv_kernels.cu, shared
// with Mamba2). All math in float32 on CUDA cores (no tensor cores yet); inputs and
// outputs bf16, the state float32.
//
// Prefill scan, two kernels (chunks of 64 tokens; rows past a sequence's end are zeros
// with g = 0, so they change nothing; G = the chunk's cumulative log decay):
//   gdn_chunk_prep, one CTA per (chunk, value head, sequence), all chunks at once: what
//     does not depend on the state. A = beta_i exp(G_i - G_j) k_i.k_j (j < i); the
//     forward substitution through (I + A) of beta V and beta exp(G) K gives U' and W
//     (one column per thread); P = exp(G_i - G_j) q_i.k_j (j <= i). Into a float32
//     workspace per chunk.
//   gdn_chunk_scan, one CTA per (32 value columns, value head, sequence), the chunks in
//     order, that slice of the 128 x 128 state in shared memory (the delta rule is
//     independent per value column): U = U' - W S0; O = exp(G) Q S0 + P U written out
//     (bf16); S = exp(G_L) S0 + K^T diag(exp(G_L - G)) U in place.
// Decode step (gdn_recurrent_decode): one CTA of 128 threads per (32 value columns,
// value head, sequence); each thread holds 32 state rows of one column in registers.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/gdn_kernels.h"
#include "core/error.h"

namespace servecast::cuda {
namespace {

constexpr int D = kGdnHeadDim;
constexpr int L = kGdnChunk;
constexpr int kRowQ = D + 4;  // floats per shared q / k row (16-byte aligned, conflict-free row groups)
constexpr int kRowA = L + 4;  // floats per shared A / P row
constexpr int kScanThreads = 256;
constexpr int kDecodeThreads = 128;
constexpr int kDecodeCols = 32;  // value columns per decode CTA
constexpr int kFlatThreads = 256;

static_assert(D == 128 && L == 64, "the thread maps below assume dk = dv = 128 and 64-token chunks");

constexpr int kScanCols = 32;  // value columns per CTA of the state pass
constexpr std::int64_t kChunkWork = 2 * L * D + L * L;  // floats of workspace per (sequence, head, chunk)

struct ChunkGates {
  float G[L], eG[L], dec[L];
};
struct PrepSmem {
  float Q[L * kRowQ];
  float K[L * kRowQ];
  float A[L * kRowA];
  float beta[L];
  ChunkGates gates;
};
struct ScanSmem {
  float S[D * kScanCols];
  float U[L * kScanCols];
  float Q[L * kRowQ];  // exp(G_i) q_i
  float K[L * kRowQ];  // exp(G_L - G_j) k_j
  float W[L * kRowQ];
  float P[L * kRowA];
};

// ---- scan -------------------------------------------------------------------------

// Lane `lane` of a warp holds elements 4 lane .. 4 lane + 3 of one 128-wide bf16 row
// (`raw`, from RawRow4); unpacks them and, with `norm`, L2-normalizes the row across
// the warp, times `scale`.
__device__ __forceinline__ void Row4(uint2 raw, bool norm, float scale, float* out) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
  const float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
  out[0] = a.x, out[1] = a.y, out[2] = b.x, out[3] = b.y;
  if (!norm) return;
  float ss = out[0] * out[0] + out[1] * out[1] + out[2] * out[2] + out[3] * out[3];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = rsqrtf(ss + kGdnNormEps) * scale;
#pragma unroll
  for (int e = 0; e < 4; ++e) out[e] *= inv;
}

// The chunk's cumulative log decay across a warp: lane l holds g of rows l and l + 32
// (0 past the sequence's end) and gets G of those rows back, a warp scan in row order
// (every warp that runs it on the same values gets the same sums).
__device__ __forceinline__ void WarpCumsum64(float& lo, float& hi, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float a = __shfl_up_sync(0xffffffffu, lo, o), b = __shfl_up_sync(0xffffffffu, hi, o);
    if (lane >= o) lo += a, hi += b;
  }
  hi += __shfl_sync(0xffffffffu, lo, 31);
}
// G of row r (0..63) from WarpCumsum64's output; every lane gets it.
__device__ __forceinline__ float RowOf64(float lo, float hi, int r) {
  const float a = __shfl_sync(0xffffffffu, lo, r & 31), b = __shfl_sync(0xffffffffu, hi, r & 31);
  return r < 32 ? a : b;
}

// G, exp(G) and exp(G_L - G) of the chunk into shared memory (warp 0), then a barrier.
__device__ __forceinline__ void ChunkDecay(const float* __restrict__ g, std::int64_t tok0, int n, int hv, int h,
                                           ChunkGates& cg) {
  const int tid = threadIdx.x;
  if (tid < 32) {
    float lo = tid < n ? g[(tok0 + tid) * hv + h] : 0.0f, hi = tid + 32 < n ? g[(tok0 + tid + 32) * hv + h] : 0.0f;
    WarpCumsum64(lo, hi, tid);
    const float GL = __shfl_sync(0xffffffffu, hi, 31);
    cg.G[tid] = lo, cg.G[tid + 32] = hi;
    cg.eG[tid] = __expf(lo), cg.eG[tid + 32] = __expf(hi);
    cg.dec[tid] = __expf(GL - lo), cg.dec[tid + 32] = __expf(GL - hi);
  }
  __syncthreads();
}

__device__ __forceinline__ uint2 RawRow4(const __nv_bfloat16* __restrict__ p, int lane, bool valid) {
  return valid ? *reinterpret_cast<const uint2*>(p + 4 * lane) : make_uint2(0u, 0u);
}
__device__ __forceinline__ void StoreRow4(float* dst, int lane, const float* f, float mul) {
  *reinterpret_cast<float4*>(dst + 4 * lane) = make_float4(f[0] * mul, f[1] * mul, f[2] * mul, f[3] * mul);
}

// Kernel 1 of the prefill scan: what does not depend on the state, for every chunk at
// once (one CTA per chunk, value head, sequence). With A strictly lower,
// A_ij = beta_i exp(G_i - G_j) k_i.k_j, T = (I + A)^-1:
//   U' = T diag(beta) V,  W = T diag(beta exp(G)) K   (forward substitution, one column per thread)
//   P_ij = exp(G_i - G_j) q_i.k_j for j <= i, else 0
// written to the chunk's workspace [U' 64x128 | W 64x128 | P 64x64] float32.
__global__ void __launch_bounds__(kScanThreads)
    gdn_chunk_prep(const __nv_bfloat16* __restrict__ qkv, const float* __restrict__ g,
                   const float* __restrict__ beta, float* __restrict__ work, std::int64_t seq, int hk, int hv,
                   float scale) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  PrepSmem& sm = *reinterpret_cast<PrepSmem*>(smem_raw);
  const std::int64_t c = blockIdx.x;
  const int h = blockIdx.y;
  const std::int64_t b = blockIdx.z;
  const std::int64_t nchunks = gridDim.x;
  const int kh = h / (hv / hk);
  const std::int64_t C = static_cast<std::int64_t>(2 * hk + hv) * D;
  const std::int64_t q_col = static_cast<std::int64_t>(kh) * D, k_col = (hk + kh) * static_cast<std::int64_t>(D),
                     v_col = (2 * hk + h) * static_cast<std::int64_t>(D);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const std::int64_t c0 = c * L;
  const int n = seq - c0 < L ? static_cast<int>(seq - c0) : L;
  const std::int64_t tok0 = b * seq + c0;
  float* out = work + ((b * hv + h) * nchunks + c) * kChunkWork;

  ChunkDecay(g, tok0, n, hv, h, sm.gates);
  if (tid < L) sm.beta[tid] = tid < n ? beta[(tok0 + tid) * hv + h] : 0.0f;
  {
    constexpr int kPer = L / (kScanThreads / 32);
    uint2 rq[kPer], rk[kPer];
#pragma unroll
    for (int t = 0; t < kPer; ++t) {  // all loads first, then the row reductions
      const int r = warp * kPer + t;
      const __nv_bfloat16* row = qkv + (tok0 + r) * C;
      rq[t] = RawRow4(row + q_col, lane, r < n);
      rk[t] = RawRow4(row + k_col, lane, r < n);
    }
#pragma unroll
    for (int t = 0; t < kPer; ++t) {
      const int r = warp * kPer + t;
      float f[4];
      Row4(rq[t], true, scale, f);
      StoreRow4(&sm.Q[r * kRowQ], lane, f, 1.0f);
      Row4(rk[t], true, 1.0f, f);
      StoreRow4(&sm.K[r * kRowQ], lane, f, 1.0f);
    }
  }
  __syncthreads();

  // A and P: row i = tid / 4, columns j = 4 jj + tid % 4.
  {
    const int i = tid >> 2, jg = tid & 3;
    float ka[16] = {}, pa[16] = {};
    for (int k = 0; k < D; k += 4) {
      const float4 ki = *reinterpret_cast<const float4*>(&sm.K[i * kRowQ + k]);
      const float4 qi = *reinterpret_cast<const float4*>(&sm.Q[i * kRowQ + k]);
#pragma unroll
      for (int jj = 0; jj < 16; ++jj) {
        const float4 kj = *reinterpret_cast<const float4*>(&sm.K[(4 * jj + jg) * kRowQ + k]);
        ka[jj] += ki.x * kj.x + ki.y * kj.y + ki.z * kj.z + ki.w * kj.w;
        pa[jj] += qi.x * kj.x + qi.y * kj.y + qi.z * kj.z + qi.w * kj.w;
      }
    }
    float* P = out + 2 * L * D;
#pragma unroll
    for (int jj = 0; jj < 16; ++jj) {
      const int j = 4 * jj + jg;
      const float m = __expf(sm.gates.G[i] - sm.gates.G[j]);
      sm.A[i * kRowA + j] = j < i ? sm.beta[i] * m * ka[jj] : 0.0f;
      P[i * L + j] = j <= i ? m * pa[jj] : 0.0f;
    }
  }
  __syncthreads();
  // Forward substitution: threads 0..127 column tid of beta V, 128..255 column tid - 128
  // of beta exp(G) K.
  {
    const bool is_v = tid < D;
    const int col = tid & (D - 1);
    float u[L];
#pragma unroll
    for (int i = 0; i < L; ++i) {
      const float x = is_v ? (i < n ? __bfloat162float(qkv[(tok0 + i) * C + v_col + col]) : 0.0f)
                           : sm.gates.eG[i] * sm.K[i * kRowQ + col];
      u[i] = sm.beta[i] * x;
    }
#pragma unroll
    for (int i = 1; i < L; ++i) {
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < i; ++j) acc += sm.A[i * kRowA + j] * u[j];
      u[i] -= acc;
    }
    float* dst = out + (is_v ? 0 : L * D) + col;
#pragma unroll
    for (int i = 0; i < L; ++i) dst[i * D] = u[i];
  }
}

// Kernel 2 of the prefill scan: the pass over the chunks in order that needs the state,
// from a zero state. One CTA per (kScanCols value columns, value head, sequence): the
// delta rule is independent per value column, so the state's columns split over CTAs.
// Thread (column lane, warp w) owns output rows 8w .. 8w + 7 and state rows
// 16w .. 16w + 15 of its column. Per chunk:
//   U = U' - W S0;  O = exp(G) Q S0 + P U;  S = exp(G_L) S0 + (diag(exp(G_L - G)) K)^T U.
__global__ void __launch_bounds__(kScanThreads, 1)
    gdn_chunk_scan(const __nv_bfloat16* __restrict__ qkv, const float* __restrict__ g,
                   const float* __restrict__ work, __nv_bfloat16* __restrict__ o, float* __restrict__ state,
                   std::int64_t seq, int hk, int hv, float scale) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  ScanSmem& sm = *reinterpret_cast<ScanSmem*>(smem_raw);
  const int col0 = blockIdx.x * kScanCols;
  const int h = blockIdx.y;
  const std::int64_t b = blockIdx.z;
  const std::int64_t nchunks = (seq + L - 1) / L;
  const int kh = h / (hv / hk);
  const std::int64_t C = static_cast<std::int64_t>(2 * hk + hv) * D;
  const std::int64_t q_col = static_cast<std::int64_t>(kh) * D, k_col = (hk + kh) * static_cast<std::int64_t>(D);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  constexpr int kRows = L / (kScanThreads / 32);      // output rows per warp (8)
  constexpr int kStateRows = D / (kScanThreads / 32);  // state rows per warp (16)

  for (int i = tid; i < D * kScanCols; i += kScanThreads) sm.S[i] = 0.0f;

  // The next chunk's inputs, loaded into registers while the current chunk computes.
  struct Raw {
    uint2 q[kRows], k[kRows];
    float4 w[kRows], p[kRows];
    float up[kRows];
    float g_lo, g_hi;
  } raw;
  auto load = [&](std::int64_t c) {
    const std::int64_t c0 = c * L, tok0 = b * seq + c0;
    const int n = seq - c0 < L ? static_cast<int>(seq - c0) : L;
    const float* cw = work + ((b * hv + h) * nchunks + c) * kChunkWork;
#pragma unroll
    for (int t = 0; t < kRows; ++t) {
      const int r = warp * kRows + t;
      const __nv_bfloat16* row = qkv + (tok0 + r) * C;
      raw.q[t] = RawRow4(row + q_col, lane, r < n);
      raw.k[t] = RawRow4(row + k_col, lane, r < n);
      raw.w[t] = *reinterpret_cast<const float4*>(cw + L * D + r * D + 4 * lane);
      raw.p[t] = lane < L / 4 ? *reinterpret_cast<const float4*>(cw + 2 * L * D + r * L + 4 * lane)
                              : make_float4(0.f, 0.f, 0.f, 0.f);
      raw.up[t] = cw[r * D + col0 + lane];
    }
    raw.g_lo = lane < n ? g[(tok0 + lane) * hv + h] : 0.0f;
    raw.g_hi = lane + 32 < n ? g[(tok0 + lane + 32) * hv + h] : 0.0f;
  };
  load(0);

  for (std::int64_t c = 0; c < nchunks; ++c) {
    const std::int64_t c0 = c * L;
    const int n = seq - c0 < L ? static_cast<int>(seq - c0) : L;
    const std::int64_t tok0 = b * seq + c0;
    // The chunk's rows into shared memory: q times exp(G), k times exp(G_L - G).
    float lo = raw.g_lo, hi = raw.g_hi;
    WarpCumsum64(lo, hi, lane);
    const float GL = __shfl_sync(0xffffffffu, hi, 31), eL = __expf(GL);
    float up[kRows];
#pragma unroll
    for (int t = 0; t < kRows; ++t) {
      const int r = warp * kRows + t;
      const float Gr = RowOf64(lo, hi, r);
      float f[4];
      Row4(raw.q[t], true, scale, f);
      StoreRow4(&sm.Q[r * kRowQ], lane, f, __expf(Gr));
      Row4(raw.k[t], true, 1.0f, f);
      StoreRow4(&sm.K[r * kRowQ], lane, f, __expf(GL - Gr));
      *reinterpret_cast<float4*>(&sm.W[r * kRowQ + 4 * lane]) = raw.w[t];
      if (lane < L / 4) *reinterpret_cast<float4*>(&sm.P[r * kRowA + 4 * lane]) = raw.p[t];
      up[t] = raw.up[t];
    }
    if (c + 1 < nchunks) load(c + 1);
    __syncthreads();

    // W S0 and exp(G) Q S0 for the warp's rows.
    float ws[kRows], qs[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) ws[r] = qs[r] = 0.0f;
    for (int k = 0; k < D; k += 4) {
      const float s0 = sm.S[(k + 0) * kScanCols + lane], s1 = sm.S[(k + 1) * kScanCols + lane],
                  s2 = sm.S[(k + 2) * kScanCols + lane], s3 = sm.S[(k + 3) * kScanCols + lane];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int i = warp * kRows + r;
        const float4 wv = *reinterpret_cast<const float4*>(&sm.W[i * kRowQ + k]);
        const float4 qv = *reinterpret_cast<const float4*>(&sm.Q[i * kRowQ + k]);
        ws[r] += wv.x * s0 + wv.y * s1 + wv.z * s2 + wv.w * s3;
        qs[r] += qv.x * s0 + qv.y * s1 + qv.z * s2 + qv.w * s3;
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) sm.U[(warp * kRows + r) * kScanCols + lane] = up[r] - ws[r];
    __syncthreads();

    // O = exp(G) Q S0 + P U (P is zero above the diagonal).
    const int jmax = (warp + 1) * kRows;
    for (int j = 0; j < jmax; j += 4) {
      const float u0 = sm.U[(j + 0) * kScanCols + lane], u1 = sm.U[(j + 1) * kScanCols + lane],
                  u2 = sm.U[(j + 2) * kScanCols + lane], u3 = sm.U[(j + 3) * kScanCols + lane];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float4 p = *reinterpret_cast<const float4*>(&sm.P[(warp * kRows + r) * kRowA + j]);
        qs[r] += p.x * u0 + p.y * u1 + p.z * u2 + p.w * u3;
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int i = warp * kRows + r;
      if (i < n) o[((tok0 + i) * hv + h) * D + col0 + lane] = __float2bfloat16_rn(qs[r]);
    }

    // The state's rows 16w .. 16w + 15 of the column.
    {
      float acc[kStateRows];
#pragma unroll
      for (int kk = 0; kk < kStateRows; ++kk) acc[kk] = 0.0f;
      for (int j = 0; j < L; ++j) {
        const float uj = sm.U[j * kScanCols + lane];
#pragma unroll
        for (int kk = 0; kk < kStateRows; kk += 4) {
          const float4 kv = *reinterpret_cast<const float4*>(&sm.K[j * kRowQ + warp * kStateRows + kk]);
          acc[kk] += kv.x * uj;
          acc[kk + 1] += kv.y * uj;
          acc[kk + 2] += kv.z * uj;
          acc[kk + 3] += kv.w * uj;
        }
      }
#pragma unroll
      for (int kk = 0; kk < kStateRows; ++kk) {
        float& s = sm.S[(warp * kStateRows + kk) * kScanCols + lane];
        s = eL * s + acc[kk];
      }
    }
    __syncthreads();
  }
  float* out = state + (b * hv + h) * static_cast<std::int64_t>(D * D);
  for (int i = tid; i < D * kScanCols; i += kScanThreads)
    out[(i / kScanCols) * D + col0 + i % kScanCols] = sm.S[i];
}

__global__ void __launch_bounds__(kDecodeThreads)
    gdn_recurrent_decode(const __nv_bfloat16* __restrict__ qkv, const float* __restrict__ g,
                         const float* __restrict__ beta, __nv_bfloat16* __restrict__ o, float* __restrict__ state,
                         int hk, int hv, float scale) {
  __shared__ float qs[D], ks[D], red[4][kDecodeCols];
  const int col = blockIdx.x * kDecodeCols + (threadIdx.x & 31);
  const int h = blockIdx.y;
  const std::int64_t b = blockIdx.z;
  const int quarter = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int kh = h / (hv / hk);
  const std::int64_t C = static_cast<std::int64_t>(2 * hk + hv) * D;
  const __nv_bfloat16* row = qkv + b * C;
  if (quarter < 2) {
    float f[4];
    Row4(RawRow4(row + (quarter == 0 ? kh : hk + kh) * static_cast<std::int64_t>(D), lane, true), true,
         quarter == 0 ? scale : 1.0f, f);
    float* dst = quarter == 0 ? qs : ks;
#pragma unroll
    for (int e = 0; e < 4; ++e) dst[4 * lane + e] = f[e];
  }
  const float decay = __expf(g[b * hv + h]), bt = beta[b * hv + h];
  const float v = __bfloat162float(row[(2 * hk + h) * static_cast<std::int64_t>(D) + col]);
  float* st = state + (b * hv + h) * static_cast<std::int64_t>(D * D) + col;
  float s[32];
#pragma unroll
  for (int kk = 0; kk < 32; ++kk) s[kk] = st[(quarter * 32 + kk) * D] * decay;
  __syncthreads();
  float part = 0.0f;
#pragma unroll
  for (int kk = 0; kk < 32; ++kk) part += s[kk] * ks[quarter * 32 + kk];
  red[quarter][lane] = part;
  __syncthreads();
  const float u = bt * (v - (red[0][lane] + red[1][lane] + red[2][lane] + red[3][lane]));
  __syncthreads();
  part = 0.0f;
#pragma unroll
  for (int kk = 0; kk < 32; ++kk) {
    s[kk] += ks[quarter * 32 + kk] * u;
    part += s[kk] * qs[quarter * 32 + kk];
  }
  red[quarter][lane] = part;
#pragma unroll
  for (int kk = 0; kk < 32; ++kk) st[(quarter * 32 + kk) * D] = s[kk];
  __syncthreads();
  if (quarter == 0)
    o[(b * hv + h) * static_cast<std::int64_t>(D) + col] =
        __float2bfloat16_rn(red[0][lane] + red[1][lane] + red[2][lane] + red[3][lane]);
}

__global__ void gdn_affine_f32(float* __restrict__ x, std::int64_t n, float a, float b) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    x[i] = a * x[i] + b;
}

int FlatBlocks(std::int64_t items) {
  return static_cast<int>(std::clamp<std::int64_t>((items + kFlatThreads - 1) / kFlatThreads, 1, 65535LL * 16));
}

void CheckShape(const GdnShape& s, const char* what) {
  if (s.batch < 1 || s.seq < 1 || s.hk < 1 || s.hv < 1 || s.hv % s.hk != 0 || s.conv < 1 || s.conv > kGdnMaxConv ||
      s.batch > 65535 || s.hv > 65535)
    throw Error(std::string(what) + ": bad shape (batch " + std::to_string(s.batch) + ", seq " +
                std::to_string(s.seq) + ", hk " + std::to_string(s.hk) + ", hv " + std::to_string(s.hv) +
                ", d_conv " + std::to_string(s.conv) + "); expected hv a multiple of hk, 1 <= d_conv <= " +
                std::to_string(kGdnMaxConv) + ", batch and hv <= 65535");
}

}  // namespace

std::size_t GdnChunkSmemBytes() { return std::max(sizeof(ScanSmem), sizeof(PrepSmem)); }

std::size_t GdnChunkWorkspaceBytes(const GdnShape& s) {
  return static_cast<std::size_t>(s.batch * s.hv * ((s.seq + L - 1) / L) * kChunkWork) * sizeof(float);
}

void LaunchGdnChunkPrefill(const GdnShape& s, const void* qkv, const float* g, const float* beta, void* o,
                           float* state, float* workspace, cudaStream_t stream) {
  CheckShape(s, "LaunchGdnChunkPrefill");
  const std::int64_t nchunks = (s.seq + L - 1) / L;
  if (nchunks > 2147483647LL)
    throw Error("LaunchGdnChunkPrefill: seq " + std::to_string(s.seq) + " has more chunks than a grid holds");
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int prep_bytes = static_cast<int>(sizeof(PrepSmem)), scan_bytes = static_cast<int>(sizeof(ScanSmem));
  SC_CUDA_CHECK(cudaFuncSetAttribute(gdn_chunk_prep, cudaFuncAttributeMaxDynamicSharedMemorySize, prep_bytes));
  SC_CUDA_CHECK(cudaFuncSetAttribute(gdn_chunk_scan, cudaFuncAttributeMaxDynamicSharedMemorySize, scan_bytes));
  const dim3 prep_grid(static_cast<unsigned>(nchunks), static_cast<unsigned>(s.hv), static_cast<unsigned>(s.batch));
  gdn_chunk_prep<<<prep_grid, kScanThreads, prep_bytes, stream>>>(static_cast<const __nv_bfloat16*>(qkv), g, beta,
                                                                   workspace, s.seq, static_cast<int>(s.hk),
                                                                   static_cast<int>(s.hv), scale);
  SC_CUDA_CHECK(cudaGetLastError());
  const dim3 scan_grid(D / kScanCols, static_cast<unsigned>(s.hv), static_cast<unsigned>(s.batch));
  gdn_chunk_scan<<<scan_grid, kScanThreads, scan_bytes, stream>>>(
      static_cast<const __nv_bfloat16*>(qkv), g, workspace, static_cast<__nv_bfloat16*>(o), state, s.seq,
      static_cast<int>(s.hk), static_cast<int>(s.hv), scale);
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchGdnAffineF32(float* x, std::int64_t n, float a, float b, cudaStream_t stream) {
  gdn_affine_f32<<<FlatBlocks(n), kFlatThreads, 0, stream>>>(x, n, a, b);
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchGdnRecurrentDecode(const GdnShape& s, const void* qkv, const float* g, const float* beta, void* o,
                              float* state, cudaStream_t stream) {
  CheckShape(s, "LaunchGdnRecurrentDecode");
  const dim3 grid(D / kDecodeCols, static_cast<unsigned>(s.hv), static_cast<unsigned>(s.batch));
  gdn_recurrent_decode<<<grid, kDecodeThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(qkv), g, beta,
                                                            static_cast<__nv_bfloat16*>(o), state,
                                                            static_cast<int>(s.hk), static_cast<int>(s.hv),
                                                            1.0f / std::sqrt(static_cast<float>(D)));
  SC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace servecast::cuda
