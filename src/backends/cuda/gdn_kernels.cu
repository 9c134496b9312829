// Gated DeltaNet kernels (gdn_kernels.h): the short convolution in prefill and decode,
// the chunked prefill scan and the recurrent decode step. All math in float32 on CUDA
// cores (no tensor cores yet); inputs and outputs bf16, the state float32.
//
// Prefill scan (gdn_chunk_prefill): one CTA of 256 threads per (value head, sequence),
// the 128 x 128 state in shared memory for the whole sequence. Per chunk of 64 tokens
// (rows past the sequence's end are zeros with g = 0, so they change nothing):
//   1. q, k (L2-normalized, q scaled), v, g, beta into shared memory; G = cumsum(g);
//   2. thread (column d, row half) forms, for its 32 rows, K S0 and Q S0 over the 128
//      state rows: U = beta (V - exp(G) K S0) replaces V, exp(G) Q S0 stays in registers;
//   3. A = beta_i exp(G_i - G_j) k_i.k_j (j < i); then threads 0..127 solve
//      (I + A) U = R for their own column by forward substitution (in registers) while
//      threads 128..255 form P = exp(G_i - G_j) q_i.k_j (j <= i);
//   4. O = exp(G) Q S0 + P U written out (bf16);
//   5. S = exp(G_L) S + K^T diag(exp(G_L - G)) U, in place (each thread owns its entries).
// Decode step (gdn_recurrent_decode): one CTA of 128 threads per (32 value columns,
// value head, sequence); each thread holds 32 state rows of one column in registers.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cuda/cuda_check.h"
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
constexpr int kConvThreads = 256;
constexpr int kConvVec = 8;  // channels per convolution thread (one 16-byte load)

static_assert(D == 128 && L == 64, "the thread maps below assume dk = dv = 128 and 64-token chunks");

struct ScanSmem {
  float S[D * D];
  float Q[L * kRowQ];
  float K[L * kRowQ];
  float U[L * D];
  float A[L * kRowA];
  float P[L * kRowA];
  float G[L], beta[L], eG[L], dec[L];
};

__device__ __forceinline__ float Silu(float x) { return x / (1.0f + __expf(-x)); }

__device__ __forceinline__ void Unpack8(const uint4& raw, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __bfloat1622float2(h[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}
__device__ __forceinline__ uint4 Pack8(const float* f) {
  uint4 raw;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return raw;
}

// ---- convolution ----------------------------------------------------------------

__global__ void __launch_bounds__(kConvThreads) gdn_conv_prefill(const __nv_bfloat16* __restrict__ x,
                                                                 const __nv_bfloat16* __restrict__ w,
                                                                 __nv_bfloat16* __restrict__ y,
                                                                 __nv_bfloat16* __restrict__ state, std::int64_t tokens,
                                                                 std::int64_t seq, int C, int K) {
  const int groups = C / kConvVec;
  const std::int64_t total = tokens * groups;
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t t = idx / groups;
    const int c0 = static_cast<int>(idx % groups) * kConvVec;
    const std::int64_t b = t / seq, p = t % seq;
    float acc[kConvVec] = {};
    float xin[kConvVec];
    uint4 own{};
#pragma unroll
    for (int j = 0; j < kGdnMaxConv; ++j) {
      if (j >= K) break;
      const std::int64_t back = K - 1 - j;  // tap j reads the input `back` tokens earlier
      if (p - back < 0) continue;
      const uint4 raw = *reinterpret_cast<const uint4*>(x + (t - back) * C + c0);
      if (back == 0) own = raw;
      Unpack8(raw, xin);
#pragma unroll
      for (int e = 0; e < kConvVec; ++e) acc[e] += __bfloat162float(w[(c0 + e) * K + j]) * xin[e];
    }
#pragma unroll
    for (int e = 0; e < kConvVec; ++e) acc[e] = Silu(acc[e]);
    *reinterpret_cast<uint4*>(y + t * C + c0) = Pack8(acc);
    if (K > 1) {
      // Slot j of the window holds position seq - (K - 1) + j.
      const std::int64_t slot = p - (seq - (K - 1));
      __nv_bfloat16* win = state + b * (K - 1) * C + c0;
      if (slot >= 0) *reinterpret_cast<uint4*>(win + slot * C) = own;
      if (p == 0)
        for (std::int64_t j = 0; j < (K - 1) - seq; ++j) *reinterpret_cast<uint4*>(win + j * C) = uint4{0, 0, 0, 0};
    }
  }
}

__global__ void __launch_bounds__(kConvThreads) gdn_conv_decode(const __nv_bfloat16* __restrict__ x,
                                                                const __nv_bfloat16* __restrict__ w,
                                                                __nv_bfloat16* __restrict__ y,
                                                                __nv_bfloat16* __restrict__ state, std::int64_t batch,
                                                                int C, int K) {
  const int groups = C / kConvVec;
  const std::int64_t total = batch * groups;
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t b = idx / groups;
    const int c0 = static_cast<int>(idx % groups) * kConvVec;
    __nv_bfloat16* win = state + b * (K - 1) * C + c0;
    float acc[kConvVec] = {};
    float v[kConvVec];
    uint4 prev[kGdnMaxConv];
#pragma unroll
    for (int j = 0; j < kGdnMaxConv - 1; ++j) {
      if (j >= K - 1) break;
      prev[j] = *reinterpret_cast<const uint4*>(win + j * C);
      Unpack8(prev[j], v);
#pragma unroll
      for (int e = 0; e < kConvVec; ++e) acc[e] += __bfloat162float(w[(c0 + e) * K + j]) * v[e];
    }
    const uint4 cur = *reinterpret_cast<const uint4*>(x + b * C + c0);
    Unpack8(cur, v);
#pragma unroll
    for (int e = 0; e < kConvVec; ++e) acc[e] = Silu(acc[e] + __bfloat162float(w[(c0 + e) * K + K - 1]) * v[e]);
    *reinterpret_cast<uint4*>(y + b * C + c0) = Pack8(acc);
#pragma unroll
    for (int j = 0; j < kGdnMaxConv - 1; ++j) {
      if (j >= K - 1) break;
      *reinterpret_cast<uint4*>(win + j * C) = j + 1 < K - 1 ? prev[j + 1] : cur;
    }
  }
}

// ---- scan -------------------------------------------------------------------------

// Lane `lane` of a warp loads elements 4 lane .. 4 lane + 3 of one 128-wide bf16 row;
// with `norm`, the row is L2-normalized (then multiplied by `scale`).
__device__ __forceinline__ void LoadRow4(const __nv_bfloat16* row, int lane, bool norm, float scale, float* out) {
  const uint2 raw = *reinterpret_cast<const uint2*>(row + 4 * lane);
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

__global__ void __launch_bounds__(kScanThreads, 1)
    gdn_chunk_prefill(const __nv_bfloat16* __restrict__ qkv, const float* __restrict__ g,
                      const float* __restrict__ beta, __nv_bfloat16* __restrict__ o, float* __restrict__ state,
                      std::int64_t seq, int hk, int hv, float scale) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  ScanSmem& sm = *reinterpret_cast<ScanSmem*>(smem_raw);
  const int h = blockIdx.x;
  const std::int64_t b = blockIdx.y;
  const int kh = h / (hv / hk);
  const std::int64_t C = static_cast<std::int64_t>(2 * hk + hv) * D;
  const std::int64_t q_col = static_cast<std::int64_t>(kh) * D, k_col = (hk + kh) * static_cast<std::int64_t>(D),
                     v_col = (2 * hk + h) * static_cast<std::int64_t>(D);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int d = tid & (D - 1), half = tid >> 7;

  for (int i = tid; i < D * D; i += kScanThreads) sm.S[i] = 0.0f;

  for (std::int64_t c0 = 0; c0 < seq; c0 += L) {
    const int n = seq - c0 < L ? static_cast<int>(seq - c0) : L;
    const std::int64_t tok0 = b * seq + c0;
    // 1. the chunk's rows.
    for (int r = warp; r < L; r += kScanThreads / 32) {
      float qf[4] = {}, kf[4] = {}, vf[4] = {};
      if (r < n) {
        const __nv_bfloat16* row = qkv + (tok0 + r) * C;
        LoadRow4(row + q_col, lane, true, scale, qf);
        LoadRow4(row + k_col, lane, true, 1.0f, kf);
        LoadRow4(row + v_col, lane, false, 1.0f, vf);
      }
      *reinterpret_cast<float4*>(&sm.Q[r * kRowQ + 4 * lane]) = make_float4(qf[0], qf[1], qf[2], qf[3]);
      *reinterpret_cast<float4*>(&sm.K[r * kRowQ + 4 * lane]) = make_float4(kf[0], kf[1], kf[2], kf[3]);
      *reinterpret_cast<float4*>(&sm.U[r * D + 4 * lane]) = make_float4(vf[0], vf[1], vf[2], vf[3]);
    }
    if (tid < L) {
      sm.G[tid] = tid < n ? g[(tok0 + tid) * hv + h] : 0.0f;
      sm.beta[tid] = tid < n ? beta[(tok0 + tid) * hv + h] : 0.0f;
    }
    __syncthreads();
    if (tid == 0) {
      float run = 0.0f;
      for (int i = 0; i < L; ++i) sm.G[i] = (run += sm.G[i]);
    }
    __syncthreads();
    if (tid < L) {
      sm.eG[tid] = __expf(sm.G[tid]);
      sm.dec[tid] = __expf(sm.G[L - 1] - sm.G[tid]);
    }
    __syncthreads();

    // 2. K S0 and Q S0 for rows half*32 .. half*32 + 31 of column d.
    float oq[32];
    {
      float ks[32];
#pragma unroll
      for (int r = 0; r < 32; ++r) ks[r] = oq[r] = 0.0f;
      for (int k = 0; k < D; k += 4) {
        const float s0 = sm.S[(k + 0) * D + d], s1 = sm.S[(k + 1) * D + d], s2 = sm.S[(k + 2) * D + d],
                    s3 = sm.S[(k + 3) * D + d];
#pragma unroll
        for (int r = 0; r < 32; ++r) {
          const int i = half * 32 + r;
          const float4 kv = *reinterpret_cast<const float4*>(&sm.K[i * kRowQ + k]);
          const float4 qv = *reinterpret_cast<const float4*>(&sm.Q[i * kRowQ + k]);
          ks[r] += kv.x * s0 + kv.y * s1 + kv.z * s2 + kv.w * s3;
          oq[r] += qv.x * s0 + qv.y * s1 + qv.z * s2 + qv.w * s3;
        }
      }
#pragma unroll
      for (int r = 0; r < 32; ++r) {
        const int i = half * 32 + r;
        sm.U[i * D + d] = sm.beta[i] * (sm.U[i * D + d] - sm.eG[i] * ks[r]);
        oq[r] *= sm.eG[i];
      }
    }
    // 3a. A (strictly lower): row i = tid / 4, columns j = 4 jj + tid % 4.
    {
      const int i = tid >> 2, jg = tid & 3;
      float acc[16] = {};
      for (int k = 0; k < D; k += 4) {
        const float4 ki = *reinterpret_cast<const float4*>(&sm.K[i * kRowQ + k]);
#pragma unroll
        for (int jj = 0; jj < 16; ++jj) {
          const float4 kj = *reinterpret_cast<const float4*>(&sm.K[(4 * jj + jg) * kRowQ + k]);
          acc[jj] += ki.x * kj.x + ki.y * kj.y + ki.z * kj.z + ki.w * kj.w;
        }
      }
#pragma unroll
      for (int jj = 0; jj < 16; ++jj) {
        const int j = 4 * jj + jg;
        sm.A[i * kRowA + j] = j < i ? sm.beta[i] * __expf(sm.G[i] - sm.G[j]) * acc[jj] : 0.0f;
      }
    }
    __syncthreads();
    // 3b. forward substitution (threads 0..127, one column each) and P (threads 128..255).
    if (tid < D) {
      float u[L];
#pragma unroll
      for (int i = 0; i < L; ++i) u[i] = sm.U[i * D + tid];
#pragma unroll
      for (int i = 1; i < L; ++i) {
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < i; ++j) s += sm.A[i * kRowA + j] * u[j];
        u[i] -= s;
      }
#pragma unroll
      for (int i = 0; i < L; ++i) sm.U[i * D + tid] = u[i];
    } else {
      const int t2 = tid - D, i = t2 >> 1, jg = t2 & 1;
      float acc[32] = {};
      for (int k = 0; k < D; k += 4) {
        const float4 qi = *reinterpret_cast<const float4*>(&sm.Q[i * kRowQ + k]);
#pragma unroll
        for (int jj = 0; jj < 32; ++jj) {
          const float4 kj = *reinterpret_cast<const float4*>(&sm.K[(2 * jj + jg) * kRowQ + k]);
          acc[jj] += qi.x * kj.x + qi.y * kj.y + qi.z * kj.z + qi.w * kj.w;
        }
      }
#pragma unroll
      for (int jj = 0; jj < 32; ++jj) {
        const int j = 2 * jj + jg;
        sm.P[i * kRowA + j] = j <= i ? __expf(sm.G[i] - sm.G[j]) * acc[jj] : 0.0f;
      }
    }
    __syncthreads();
    // 4. O = exp(G) Q S0 + P U.
    for (int j = 0; j < L; j += 4) {
      const float u0 = sm.U[(j + 0) * D + d], u1 = sm.U[(j + 1) * D + d], u2 = sm.U[(j + 2) * D + d],
                  u3 = sm.U[(j + 3) * D + d];
#pragma unroll
      for (int r = 0; r < 32; ++r) {
        const float4 p = *reinterpret_cast<const float4*>(&sm.P[(half * 32 + r) * kRowA + j]);
        oq[r] += p.x * u0 + p.y * u1 + p.z * u2 + p.w * u3;
      }
    }
#pragma unroll
    for (int r = 0; r < 32; ++r) {
      const int i = half * 32 + r;
      if (i < n) o[((tok0 + i) * hv + h) * D + d] = __float2bfloat16_rn(oq[r]);
    }
    // 5. the state: rows half*64 .. half*64 + 63 of column d.
    {
      float acc[64];
#pragma unroll
      for (int kk = 0; kk < 64; ++kk) acc[kk] = 0.0f;
      for (int j = 0; j < L; ++j) {
        const float uj = sm.U[j * D + d] * sm.dec[j];
#pragma unroll
        for (int kk = 0; kk < 64; kk += 4) {
          const float4 kv = *reinterpret_cast<const float4*>(&sm.K[j * kRowQ + half * 64 + kk]);
          acc[kk] += kv.x * uj;
          acc[kk + 1] += kv.y * uj;
          acc[kk + 2] += kv.z * uj;
          acc[kk + 3] += kv.w * uj;
        }
      }
      const float eL = sm.eG[L - 1];
#pragma unroll
      for (int kk = 0; kk < 64; ++kk) {
        float& s = sm.S[(half * 64 + kk) * D + d];
        s = eL * s + acc[kk];
      }
    }
    __syncthreads();
  }
  float* out = state + (b * hv + h) * static_cast<std::int64_t>(D * D);
  for (int i = tid; i < D * D; i += kScanThreads) out[i] = sm.S[i];
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
    LoadRow4(row + (quarter == 0 ? kh : hk + kh) * static_cast<std::int64_t>(D), lane, true,
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
  return static_cast<int>(std::clamp<std::int64_t>((items + kConvThreads - 1) / kConvThreads, 1, 65535LL * 16));
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

std::size_t GdnChunkSmemBytes() { return sizeof(ScanSmem); }

void LaunchGdnConvPrefill(const GdnShape& s, const void* x, const void* conv_w, void* y, void* conv_state,
                          cudaStream_t stream) {
  CheckShape(s, "LaunchGdnConvPrefill");
  const int C = static_cast<int>(s.channels());
  gdn_conv_prefill<<<FlatBlocks(s.tokens() * (C / kConvVec)), kConvThreads, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(conv_w),
      static_cast<__nv_bfloat16*>(y), static_cast<__nv_bfloat16*>(conv_state), s.tokens(), s.seq, C,
      static_cast<int>(s.conv));
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchGdnConvDecode(const GdnShape& s, const void* x, const void* conv_w, void* y, void* conv_state,
                         cudaStream_t stream) {
  CheckShape(s, "LaunchGdnConvDecode");
  const int C = static_cast<int>(s.channels());
  gdn_conv_decode<<<FlatBlocks(s.batch * (C / kConvVec)), kConvThreads, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(conv_w),
      static_cast<__nv_bfloat16*>(y), static_cast<__nv_bfloat16*>(conv_state), s.batch, C,
      static_cast<int>(s.conv));
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchGdnChunkPrefill(const GdnShape& s, const void* qkv, const float* g, const float* beta, void* o,
                           float* state, cudaStream_t stream) {
  CheckShape(s, "LaunchGdnChunkPrefill");
  const int bytes = static_cast<int>(sizeof(ScanSmem));
  SC_CUDA_CHECK(cudaFuncSetAttribute(gdn_chunk_prefill, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  const dim3 grid(static_cast<unsigned>(s.hv), static_cast<unsigned>(s.batch));
  gdn_chunk_prefill<<<grid, kScanThreads, bytes, stream>>>(
      static_cast<const __nv_bfloat16*>(qkv), g, beta, static_cast<__nv_bfloat16*>(o), state, s.seq,
      static_cast<int>(s.hk), static_cast<int>(s.hv), 1.0f / std::sqrt(static_cast<float>(D)));
  SC_CUDA_CHECK(cudaGetLastError());
}

void LaunchGdnAffineF32(float* x, std::int64_t n, float a, float b, cudaStream_t stream) {
  gdn_affine_f32<<<FlatBlocks(n), kConvThreads, 0, stream>>>(x, n, a, b);
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
