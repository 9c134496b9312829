// Mamba2 kernels (mamba2_kernels.h): the chunked SSD prefill scan and the decode state
// update.
//
// Prefill, per (sequence, head), chunks of Lc tokens (the model's chunk_size, a
// multiple of 64), G = the chunk's cumulative dt A (G_i <= 0, decreasing), rows past a
// sequence's end with dt = 0 (they change nothing):
//   mamba2_chunk_state, one CTA per (chunk, head, sequence), all chunks at once: the
//     chunk's own contribution to its end state, dS = sum_j exp(G_L - G_j) dt_j x_j B_j^T
//     (p x n), as X'^T B on tensor cores, X'_j = exp(G_L - G_j) dt_j x_j rounded to bf16;
//     and its total decay exp(G_L). Into a float32 workspace per chunk.
//   mamba2_state_pass, one thread per 4 state elements of a (sequence, head), the chunks
//     in order: the state at each chunk's start replaces its dS in the workspace
//     (S_0 = 0; S_c+1 = exp(G_L,c) S_c + dS_c), the final state written out.
//   mamba2_chunk_scan, one CTA per (64 rows of a chunk, head, sequence), all at once:
//     y_i = exp(G_i) C_i S_start^T + sum_{j <= i} exp(G_i - G_j) dt_j (C_i . B_j) x_j
//     + D x_i, the first product with exp(G_i) C_i and S_start rounded to bf16, the
//     second with the masked, decayed C B^T tile rounded to bf16 (as the Triton kernels
//     the engines run round their operands), float32 accumulation.
// Decode (mamba2_state_update): one CTA of 4 warps per (16 rows of p, head, sequence);
// a warp updates 4 rows, lane l holding state columns l, l + 32, ... (coalesced).

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "backends/cuda/bf16_pack.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/mamba2_kernels.h"
#include "core/error.h"

namespace servecast::cuda {
namespace {

using namespace nvcuda;

constexpr int P = kMamba2HeadDim;
constexpr int RB = 64;  // rows of a row block / tokens of a j tile
constexpr int kThreads = 256;
constexpr int kPadH = 8;  // bf16 row padding (16 bytes): wmma's ldm rule, fewer bank conflicts
constexpr int kPadF = 4;  // float row padding
static_assert(P == 64 && RB == 64, "the warp-to-tile maps below assume p = 64 and 64-row blocks");

using Frag16A = wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
using Frag16ACol = wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::col_major>;
using Frag16B = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
using Frag16BCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major>;
using FragAcc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

__device__ __forceinline__ float Softplus(float x) { return x > 20.0f ? x : log1pf(__expf(x)); }


// The chunk's dt (softplus(dt_raw + dt_bias), 0 past the sequence's end) and G (the
// inclusive cumulative sum of dt A) for its Lc <= 256 rows, into shared memory, then a
// barrier. `scratch` holds 8 floats.
__device__ void ChunkDt(const __nv_bfloat16* __restrict__ dt_raw, std::int64_t tok0, int nvalid, int Lc, int nh, int h,
                        float bias, float A, float* dts, float* G, float* scratch) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float d = tid < nvalid ? Softplus(__bfloat162float(dt_raw[(tok0 + tid) * nh + h]) + bias) : 0.0f;
  float a = d * A;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float u = __shfl_up_sync(0xffffffffu, a, o);
    if (lane >= o) a += u;
  }
  if (lane == 31) scratch[warp] = a;
  __syncthreads();
  float before = 0.0f;
  for (int w = 0; w < warp; ++w) before += scratch[w];
  if (tid < Lc) {
    dts[tid] = d;
    G[tid] = a + before;
  }
  __syncthreads();
}

struct ChunkPos {
  std::int64_t tok0;  // the chunk's first token (global row)
  int nvalid;         // its rows inside the sequence
};
__device__ __forceinline__ ChunkPos PosOf(int c, int b, std::int64_t seq, int Lc) {
  const std::int64_t start = static_cast<std::int64_t>(c) * Lc;
  const std::int64_t left = seq - start;
  return {static_cast<std::int64_t>(b) * seq + start, static_cast<int>(left < Lc ? left : Lc)};
}

// ---- kernel 1: each chunk's own contribution to its end state --------------------

template <int N>
struct StateSmem {
  float G[kMamba2MaxChunk], dts[kMamba2MaxChunk], scratch[8];
  alignas(32) __nv_bfloat16 X[RB * (P + kPadH)];  // X'_j rows
  alignas(32) __nv_bfloat16 B[RB * (N + kPadH)];
};

template <int N>
__global__ void __launch_bounds__(kThreads) mamba2_chunk_state(const __nv_bfloat16* __restrict__ xbc,
                                                               const __nv_bfloat16* __restrict__ dt_raw,
                                                               const float* __restrict__ A,
                                                               const float* __restrict__ dt_bias,
                                                               float* __restrict__ dS, float* __restrict__ decay,
                                                               std::int64_t seq, int nh, int ng, int Lc) {
  extern __shared__ __align__(128) unsigned char raw_smem[];
  StateSmem<N>& sm = *reinterpret_cast<StateSmem<N>*>(raw_smem);
  const int c = blockIdx.x, h = blockIdx.y, b = blockIdx.z, nch = gridDim.x;
  const int tid = threadIdx.x, warp = tid >> 5;
  const int C = nh * P + 2 * ng * N, grp = h / (nh / ng);
  const ChunkPos pos = PosOf(c, b, seq, Lc);
  ChunkDt(dt_raw, pos.tok0, pos.nvalid, Lc, nh, h, dt_bias[h], A[h], sm.dts, sm.G, sm.scratch);
  const float GL = sm.G[Lc - 1];

  constexpr int kTiles = N / 32;  // accumulator tiles per warp: (p/16) x (n/16) over 8 warps
  const int pi = warp & 3, ni0 = warp >> 2;
  FragAcc acc[kTiles];
#pragma unroll
  for (int k = 0; k < kTiles; ++k) wmma::fill_fragment(acc[k], 0.0f);

  for (int j0 = 0; j0 < Lc; j0 += RB) {
    __syncthreads();
    for (int idx = tid; idx < RB * P / 8; idx += kThreads) {
      const int r = idx / (P / 8), c8 = (idx % (P / 8)) * 8, j = j0 + r;
      uint4 v{0, 0, 0, 0};
      if (j < pos.nvalid) {
        float f[8];
        Unpack8(*reinterpret_cast<const uint4*>(xbc + (pos.tok0 + j) * C + h * P + c8), f);
        const float s = sm.dts[j] * __expf(GL - sm.G[j]);
#pragma unroll
        for (int e = 0; e < 8; ++e) f[e] *= s;
        v = Pack8(f);
      }
      *reinterpret_cast<uint4*>(&sm.X[r * (P + kPadH) + c8]) = v;
    }
    for (int idx = tid; idx < RB * N / 8; idx += kThreads) {
      const int r = idx / (N / 8), c8 = (idx % (N / 8)) * 8, j = j0 + r;
      const uint4 v = j < pos.nvalid
                          ? *reinterpret_cast<const uint4*>(xbc + (pos.tok0 + j) * C + nh * P + grp * N + c8)
                          : uint4{0, 0, 0, 0};
      *reinterpret_cast<uint4*>(&sm.B[r * (N + kPadH) + c8]) = v;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < RB / 16; ++kk) {
      Frag16ACol a;  // X'^T (p x RB): X' stored [j][p] is X'^T column-major
      wmma::load_matrix_sync(a, &sm.X[kk * 16 * (P + kPadH) + pi * 16], P + kPadH);
#pragma unroll
      for (int k = 0; k < kTiles; ++k) {
        Frag16B bf;
        wmma::load_matrix_sync(bf, &sm.B[kk * 16 * (N + kPadH) + (ni0 + 2 * k) * 16], N + kPadH);
        wmma::mma_sync(acc[k], a, bf, acc[k]);
      }
    }
  }
  const std::int64_t slot = (static_cast<std::int64_t>(b) * nh + h) * nch + c;
  float* out = dS + slot * (P * N);
#pragma unroll
  for (int k = 0; k < kTiles; ++k)
    wmma::store_matrix_sync(out + pi * 16 * N + (ni0 + 2 * k) * 16, acc[k], N, wmma::mem_row_major);
  if (tid == 0) decay[slot] = __expf(GL);
}

// ---- kernel 2: the state passed from chunk to chunk --------------------------------

constexpr int kAhead = 4;  // chunks whose dS are loaded ahead of the dependent update

__global__ void __launch_bounds__(kThreads) mamba2_state_pass(float* __restrict__ ws, const float* __restrict__ decay,
                                                              float* __restrict__ state, int nch, int PN) {
  const int h = blockIdx.y, b = blockIdx.z, nh = gridDim.y;
  const int e4 = blockIdx.x * kThreads + threadIdx.x;
  if (e4 * 4 >= PN) return;
  const std::int64_t head = static_cast<std::int64_t>(b) * nh + h;
  float4* base = reinterpret_cast<float4*>(ws + head * nch * PN) + e4;
  const float* dec = decay + head * nch;
  const int stride4 = PN / 4;
  float4 buf[kAhead];
  float dbuf[kAhead];
#pragma unroll
  for (int i = 0; i < kAhead; ++i) {
    buf[i] = i < nch ? base[static_cast<std::int64_t>(i) * stride4] : make_float4(0, 0, 0, 0);
    dbuf[i] = i < nch ? dec[i] : 0.0f;
  }
  float4 S = make_float4(0, 0, 0, 0);
  for (int c0 = 0; c0 < nch; c0 += kAhead) {
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      const int cc = c0 + i;
      if (cc >= nch) break;
      const float4 v = buf[i];
      const float d = dbuf[i];
      const int nx = cc + kAhead;
      if (nx < nch) {
        buf[i] = base[static_cast<std::int64_t>(nx) * stride4];
        dbuf[i] = dec[nx];
      }
      base[static_cast<std::int64_t>(cc) * stride4] = S;  // the state at chunk cc's start
      S = make_float4(d * S.x + v.x, d * S.y + v.y, d * S.z + v.z, d * S.w + v.w);
    }
  }
  reinterpret_cast<float4*>(state + head * PN)[e4] = S;
}

// ---- kernel 3: each row block's output ----------------------------------------------

template <int N>
struct ScanSmem {
  float G[kMamba2MaxChunk], dts[kMamba2MaxChunk], scratch[8];
  alignas(32) __nv_bfloat16 Cr[RB * (N + kPadH)];  // C_i, this block's rows
  alignas(32) __nv_bfloat16 Ce[RB * (N + kPadH)];  // exp(G_i) C_i
  alignas(32) __nv_bfloat16 B[RB * (N + kPadH)];   // B_j, the j tile
  alignas(32) __nv_bfloat16 X[RB * (P + kPadH)];   // x_j, the j tile
  alignas(32) __nv_bfloat16 S[P * (N + kPadH)];    // the state at the chunk's start
  alignas(32) float F[RB * (RB + kPadF)];          // C B^T tile, then the output block
  alignas(32) __nv_bfloat16 M[RB * (RB + kPadH)];  // the masked, decayed tile
};

template <int N>
__global__ void __launch_bounds__(kThreads) mamba2_chunk_scan(const __nv_bfloat16* __restrict__ xbc,
                                                              const __nv_bfloat16* __restrict__ dt_raw,
                                                              const float* __restrict__ A,
                                                              const float* __restrict__ Dp,
                                                              const float* __restrict__ dt_bias,
                                                              const float* __restrict__ S_start,
                                                              __nv_bfloat16* __restrict__ y, std::int64_t seq, int nh,
                                                              int ng, int Lc, int nch) {
  extern __shared__ __align__(128) unsigned char raw_smem[];
  ScanSmem<N>& sm = *reinterpret_cast<ScanSmem<N>*>(raw_smem);
  const int blocks = Lc / RB;
  const int c = blockIdx.x / blocks, rb = blockIdx.x % blocks, h = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, warp = tid >> 5;
  const int C = nh * P + 2 * ng * N, grp = h / (nh / ng);
  const ChunkPos pos = PosOf(c, b, seq, Lc);
  const int i0 = rb * RB;
  if (i0 >= pos.nvalid) return;  // the whole block past the sequence's end (uniform per CTA)
  ChunkDt(dt_raw, pos.tok0, pos.nvalid, Lc, nh, h, dt_bias[h], A[h], sm.dts, sm.G, sm.scratch);

  const std::int64_t b_col = nh * P + grp * N, c_col = nh * P + ng * N + grp * N;
  for (int idx = tid; idx < RB * N / 8; idx += kThreads) {
    const int r = idx / (N / 8), c8 = (idx % (N / 8)) * 8, i = i0 + r;
    uint4 v{0, 0, 0, 0}, ve{0, 0, 0, 0};
    if (i < pos.nvalid) {
      v = *reinterpret_cast<const uint4*>(xbc + (pos.tok0 + i) * C + c_col + c8);
      float f[8];
      Unpack8(v, f);
      const float e = __expf(sm.G[i]);
#pragma unroll
      for (int k = 0; k < 8; ++k) f[k] *= e;
      ve = Pack8(f);
    }
    *reinterpret_cast<uint4*>(&sm.Cr[r * (N + kPadH) + c8]) = v;
    *reinterpret_cast<uint4*>(&sm.Ce[r * (N + kPadH) + c8]) = ve;
  }
  const std::int64_t slot = (static_cast<std::int64_t>(b) * nh + h) * nch + c;
  if (c > 0) {
    const float* src = S_start + slot * (P * N);
    for (int idx = tid; idx < P * N / 4; idx += kThreads) {
      const int r = idx / (N / 4), c4 = (idx % (N / 4)) * 4;
      const float4 s = *reinterpret_cast<const float4*>(src + r * N + c4);
      __nv_bfloat162* d = reinterpret_cast<__nv_bfloat162*>(&sm.S[r * (N + kPadH) + c4]);
      d[0] = __floats2bfloat162_rn(s.x, s.y);
      d[1] = __floats2bfloat162_rn(s.z, s.w);
    }
  }
  __syncthreads();

  // Output tiles: warp -> row tile ri, column tiles pj0, pj0 + 1 (16 tiles of 64 x 64).
  const int ri = warp >> 1, pj0 = (warp & 1) * 2;
  FragAcc acc[2];
  wmma::fill_fragment(acc[0], 0.0f);
  wmma::fill_fragment(acc[1], 0.0f);
  if (c > 0) {
#pragma unroll
    for (int kk = 0; kk < N / 16; ++kk) {
      Frag16A a;
      wmma::load_matrix_sync(a, &sm.Ce[ri * 16 * (N + kPadH) + kk * 16], N + kPadH);
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        Frag16BCol bf;  // S^T (n x p): S stored [p][n] is S^T column-major
        wmma::load_matrix_sync(bf, &sm.S[(pj0 + k) * 16 * (N + kPadH) + kk * 16], N + kPadH);
        wmma::mma_sync(acc[k], a, bf, acc[k]);
      }
    }
  }

  for (int j0 = 0; j0 <= i0; j0 += RB) {
    __syncthreads();  // the previous tile's B, X and M are consumed
    for (int idx = tid; idx < RB * N / 8; idx += kThreads) {
      const int r = idx / (N / 8), c8 = (idx % (N / 8)) * 8, j = j0 + r;
      const uint4 v = j < pos.nvalid ? *reinterpret_cast<const uint4*>(xbc + (pos.tok0 + j) * C + b_col + c8)
                                     : uint4{0, 0, 0, 0};
      *reinterpret_cast<uint4*>(&sm.B[r * (N + kPadH) + c8]) = v;
    }
    for (int idx = tid; idx < RB * P / 8; idx += kThreads) {
      const int r = idx / (P / 8), c8 = (idx % (P / 8)) * 8, j = j0 + r;
      const uint4 v = j < pos.nvalid ? *reinterpret_cast<const uint4*>(xbc + (pos.tok0 + j) * C + h * P + c8)
                                     : uint4{0, 0, 0, 0};
      *reinterpret_cast<uint4*>(&sm.X[r * (P + kPadH) + c8]) = v;
    }
    __syncthreads();
    {  // C B^T (RB x RB): the same warp -> tile map as the output
      FragAcc cb[2];
      wmma::fill_fragment(cb[0], 0.0f);
      wmma::fill_fragment(cb[1], 0.0f);
#pragma unroll
      for (int kk = 0; kk < N / 16; ++kk) {
        Frag16A a;
        wmma::load_matrix_sync(a, &sm.Cr[ri * 16 * (N + kPadH) + kk * 16], N + kPadH);
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          Frag16BCol bf;  // B^T (n x RB): B stored [j][n] is B^T column-major
          wmma::load_matrix_sync(bf, &sm.B[(pj0 + k) * 16 * (N + kPadH) + kk * 16], N + kPadH);
          wmma::mma_sync(cb[k], a, bf, cb[k]);
        }
      }
#pragma unroll
      for (int k = 0; k < 2; ++k)
        wmma::store_matrix_sync(&sm.F[ri * 16 * (RB + kPadF) + (pj0 + k) * 16], cb[k], RB + kPadF,
                                wmma::mem_row_major);
    }
    __syncthreads();
    for (int idx = tid; idx < RB * RB; idx += kThreads) {
      const int r = idx / RB, q = idx % RB, i = i0 + r, j = j0 + q;
      const float v = j <= i ? sm.F[r * (RB + kPadF) + q] * __expf(sm.G[i] - sm.G[j]) * sm.dts[j] : 0.0f;
      sm.M[r * (RB + kPadH) + q] = __float2bfloat16_rn(v);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < RB / 16; ++kk) {
      Frag16A a;
      wmma::load_matrix_sync(a, &sm.M[ri * 16 * (RB + kPadH) + kk * 16], RB + kPadH);
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        Frag16B bf;
        wmma::load_matrix_sync(bf, &sm.X[kk * 16 * (P + kPadH) + (pj0 + k) * 16], P + kPadH);
        wmma::mma_sync(acc[k], a, bf, acc[k]);
      }
    }
  }
  __syncthreads();  // F is free
#pragma unroll
  for (int k = 0; k < 2; ++k)
    wmma::store_matrix_sync(&sm.F[ri * 16 * (P + kPadF) + (pj0 + k) * 16], acc[k], P + kPadF, wmma::mem_row_major);
  __syncthreads();
  const float Dh = Dp[h];
  for (int idx = tid; idx < RB * P / 8; idx += kThreads) {
    const int r = idx / (P / 8), c8 = (idx % (P / 8)) * 8, i = i0 + r;
    if (i >= pos.nvalid) continue;
    float f[8];
    Unpack8(*reinterpret_cast<const uint4*>(xbc + (pos.tok0 + i) * C + h * P + c8), f);
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = sm.F[r * (P + kPadF) + c8 + e] + Dh * f[e];
    *reinterpret_cast<uint4*>(y + ((pos.tok0 + i) * nh + h) * P + c8) = Pack8(f);
  }
}

// ---- decode -----------------------------------------------------------------------

constexpr int kDecodeThreads = 128;
constexpr int kDecodeRows = 16;  // rows of p per CTA, 4 per warp

template <int N>
__global__ void __launch_bounds__(kDecodeThreads) mamba2_state_update(const __nv_bfloat16* __restrict__ xbc,
                                                                      const __nv_bfloat16* __restrict__ dt_raw,
                                                                      const float* __restrict__ A,
                                                                      const float* __restrict__ Dp,
                                                                      const float* __restrict__ dt_bias,
                                                                      __nv_bfloat16* __restrict__ y,
                                                                      float* __restrict__ state, int nh, int ng) {
  constexpr int E = N / 32;  // state columns per lane
  const int h = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int C = nh * P + 2 * ng * N, grp = h / (nh / ng);
  const __nv_bfloat16* row = xbc + static_cast<std::int64_t>(b) * C;
  float Bv[E], Cv[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    Bv[e] = __bfloat162float(row[nh * P + grp * N + e * 32 + lane]);
    Cv[e] = __bfloat162float(row[nh * P + ng * N + grp * N + e * 32 + lane]);
  }
  const float dt = Softplus(__bfloat162float(dt_raw[static_cast<std::int64_t>(b) * nh + h]) + dt_bias[h]);
  const float dA = __expf(dt * A[h]), Dh = Dp[h];
  const std::int64_t head = static_cast<std::int64_t>(b) * nh + h;
#pragma unroll
  for (int r = 0; r < kDecodeRows / 4; ++r) {
    const int p = blockIdx.x * kDecodeRows + warp * (kDecodeRows / 4) + r;
    const float xp = __bfloat162float(row[h * P + p]);
    float* s = state + (head * P + p) * N;
    float acc = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float v = dA * s[e * 32 + lane] + dt * xp * Bv[e];
      s[e * 32 + lane] = v;
      acc += v * Cv[e];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) y[head * P + p] = __float2bfloat16_rn(acc + Dh * xp);
  }
}

// Calls f(std::integral_constant<int, n>) for the d_state the kernels take.
template <class F>
void WithState(std::int64_t n, F&& f) {
  switch (n) {
    case 64: f(std::integral_constant<int, 64>{}); return;
    case 128: f(std::integral_constant<int, 128>{}); return;
    case 256: f(std::integral_constant<int, 256>{}); return;
    default: throw Error("mamba2: d_state " + std::to_string(n) + " (the kernels take 64, 128 or 256)");
  }
}

void CheckShape(const Mamba2Shape& s, const char* what) {
  if (const char* why = Mamba2Unsupported(s); why[0] != '\0')
    throw Error(std::string(what) + ": " + why + " (batch " + std::to_string(s.batch) + ", seq " +
                std::to_string(s.seq) + ", nheads " + std::to_string(s.nh) + ", head_dim " + std::to_string(s.p) +
                ", n_groups " + std::to_string(s.g) + ", d_state " + std::to_string(s.n) + ", chunk " +
                std::to_string(s.chunk) + ")");
}

std::int64_t Chunks(const Mamba2Shape& s) { return (s.seq + s.chunk - 1) / s.chunk; }

}  // namespace

const char* Mamba2Unsupported(const Mamba2Shape& s) {
  if (s.batch < 1 || s.seq < 1 || s.nh < 1 || s.g < 1) return "batch, seq, nheads and n_groups must be positive";
  if (s.nh % s.g != 0) return "nheads is not a multiple of n_groups";
  if (s.p != kMamba2HeadDim) return "head_dim must be 64";
  if (s.n != 64 && s.n != 128 && s.n != 256) return "d_state must be 64, 128 or 256";
  if (s.chunk < RB || s.chunk > kMamba2MaxChunk || s.chunk % RB != 0) return "chunk_size must be 64, 128, 192 or 256";
  if (s.batch > 65535 || s.nh > 65535) return "batch and nheads must be at most 65535";
  if ((s.seq + s.chunk - 1) / s.chunk * (s.chunk / RB) > 2147483647LL) return "too many chunks for one grid";
  return "";
}

std::size_t Mamba2ChunkSmemBytes(std::int64_t n) {
  std::size_t bytes = 0;
  WithState(n, [&](auto kn) {
    constexpr int N = decltype(kn)::value;
    bytes = std::max(sizeof(StateSmem<N>), sizeof(ScanSmem<N>));
  });
  return bytes;
}

std::size_t Mamba2ChunkWorkspaceBytes(const Mamba2Shape& s) {
  const std::int64_t slots = s.batch * s.nh * Chunks(s);
  return static_cast<std::size_t>(slots * (s.p * s.n + 1)) * sizeof(float);
}

void LaunchMamba2ChunkPrefill(const Mamba2Shape& s, const void* xbc, const void* dt, const float* A, const float* D,
                              const float* dt_bias, void* y, float* state, float* workspace, cudaStream_t stream) {
  CheckShape(s, "LaunchMamba2ChunkPrefill");
  const int nch = static_cast<int>(Chunks(s)), PN = static_cast<int>(s.p * s.n);
  float* dS = workspace;
  float* decay = workspace + static_cast<std::int64_t>(s.batch) * s.nh * nch * PN;
  const auto* x16 = static_cast<const __nv_bfloat16*>(xbc);
  const auto* dt16 = static_cast<const __nv_bfloat16*>(dt);
  WithState(s.n, [&](auto kn) {
    constexpr int N = decltype(kn)::value;
    const int state_bytes = static_cast<int>(sizeof(StateSmem<N>)), scan_bytes = static_cast<int>(sizeof(ScanSmem<N>));
    SC_CUDA_CHECK(
        cudaFuncSetAttribute(mamba2_chunk_state<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, state_bytes));
    SC_CUDA_CHECK(cudaFuncSetAttribute(mamba2_chunk_scan<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, scan_bytes));
    const dim3 grid1(static_cast<unsigned>(nch), static_cast<unsigned>(s.nh), static_cast<unsigned>(s.batch));
    mamba2_chunk_state<N><<<grid1, kThreads, state_bytes, stream>>>(x16, dt16, A, dt_bias, dS, decay, s.seq,
                                                                    static_cast<int>(s.nh), static_cast<int>(s.g),
                                                                    static_cast<int>(s.chunk));
    SC_CUDA_CHECK(cudaGetLastError());
    const dim3 grid2(static_cast<unsigned>((PN / 4 + kThreads - 1) / kThreads), static_cast<unsigned>(s.nh),
                     static_cast<unsigned>(s.batch));
    mamba2_state_pass<<<grid2, kThreads, 0, stream>>>(dS, decay, state, nch, PN);
    SC_CUDA_CHECK(cudaGetLastError());
    const dim3 grid3(static_cast<unsigned>(nch * (s.chunk / RB)), static_cast<unsigned>(s.nh),
                     static_cast<unsigned>(s.batch));
    mamba2_chunk_scan<N><<<grid3, kThreads, scan_bytes, stream>>>(x16, dt16, A, D, dt_bias, dS,
                                                                  static_cast<__nv_bfloat16*>(y), s.seq,
                                                                  static_cast<int>(s.nh), static_cast<int>(s.g),
                                                                  static_cast<int>(s.chunk), nch);
    SC_CUDA_CHECK(cudaGetLastError());
  });
}

void LaunchMamba2StateUpdate(const Mamba2Shape& s, const void* xbc, const void* dt, const float* A, const float* D,
                             const float* dt_bias, void* y, float* state, cudaStream_t stream) {
  CheckShape(s, "LaunchMamba2StateUpdate");
  WithState(s.n, [&](auto kn) {
    constexpr int N = decltype(kn)::value;
    const dim3 grid(P / kDecodeRows, static_cast<unsigned>(s.nh), static_cast<unsigned>(s.batch));
    mamba2_state_update<N><<<grid, kDecodeThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(xbc), static_cast<const __nv_bfloat16*>(dt), A, D, dt_bias,
        static_cast<__nv_bfloat16*>(y), state, static_cast<int>(s.nh), static_cast<int>(s.g));
    SC_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace servecast::cuda
