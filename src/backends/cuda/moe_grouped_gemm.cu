#include "backends/cuda/moe_grouped_gemm.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/moe_gemm_device.cuh"
#include "core/error.h"

namespace servecast::cuda {
namespace {

using bf16 = __nv_bfloat16;

using moe_gemm::CpAsyncCommit;
using moe_gemm::CpAsyncWait;
using moe_gemm::GroupScales;
using moe_gemm::kN;
using moe_gemm::kOutStride;
using moe_gemm::kTileK;
using moe_gemm::LoadStage;
using moe_gemm::SmemAddr;
using moe_gemm::StoreTile;
using moe_gemm::Swz;

constexpr int kWarpRows = kN / 4;  // weight rows per warp: two m16 MMA tiles

// Warps: 4 along the tile's weight rows times BT / kWarpTokens along its tokens. A
// warp takes at most 16 token rows when BT <= 32 and 32 above, so a CTA has 8 or 16
// warps once the tile is big enough to need them (profiled on H200: with 4 warps and 2
// CTAs per SM the MMA loop stalled on latency at 37% issue utilization). Stages: 4
// for tiles up to 32 rows (weight streaming), 3 above (more CTAs per SM).
template <int BT, MoeGemmType T>
struct Cfg {
  static constexpr int kWarpTokens = BT <= 32 ? (BT < 16 ? BT : 16) : 32;
  static constexpr int kWarpsT = BT / kWarpTokens;
  static constexpr int kThreads = 32 * 4 * kWarpsT;
  static constexpr int kNt = kWarpTokens / 8;  // n8 MMA tiles per warp
  static constexpr int kStages = BT <= 32 ? 4 : 3;
  static constexpr int kStageBytes = (kN + BT) * kTileK;
  static constexpr int kSmem =
      kStages * kStageBytes > BT * kOutStride * 2 ? kStages * kStageBytes : BT * kOutStride * 2;
};

__device__ __forceinline__ void Ldsm4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void Ldsm2(unsigned (&r)[2], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}

// The token (N-side) fragments of one 32-byte k step for this warp's kNt n8 tiles,
// from the swizzled activation stage at `asa` (shared-memory address); both the
// 8-bit/16-bit kernel and the 4-bit kernel read them this way.
template <class C>
__device__ __forceinline__ void LoadTokenFragments(unsigned (&bfr)[C::kNt][2], unsigned asa, int wt, int ks, int lane) {
  if constexpr (C::kNt == 1) {
    Ldsm2(bfr[0], asa + Swz(wt * C::kWarpTokens + (lane & 7), ks * 2 + ((lane >> 3) & 1)));
  } else {
#pragma unroll
    for (int j = 0; j < C::kNt / 2; ++j) {
      unsigned t4[4];
      Ldsm4(t4, asa + Swz(wt * C::kWarpTokens + j * 16 + (lane & 7) + ((lane >> 4) << 3), ks * 2 + ((lane >> 3) & 1)));
      bfr[2 * j][0] = t4[0];
      bfr[2 * j][1] = t4[1];
      bfr[2 * j + 1][0] = t4[2];
      bfr[2 * j + 1][1] = t4[3];
    }
  }
}

// c += a · b over one 32-byte k step (16 bf16 or 32 e4m3 elements). The fragments'
// byte layout is the same for both types, so one ldmatrix scheme feeds both.
template <MoeGemmType T>
__device__ __forceinline__ void Mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if constexpr (T == MoeGemmType::kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// One CTA per tile: 4 warps along the tile's 128 weight rows (32 each) times
// kWarpsT warps along its BT token rows. The weight rows are the MMA's M side, the
// tokens its N side (8 per MMA), so small token counts waste little.
template <int BT, MoeGemmType T>
__global__ void __launch_bounds__(Cfg<BT, T>::kThreads)
    moe_grouped_gemm(const char* __restrict__ a, const char* __restrict__ w, bf16* __restrict__ d, int n, int k_bytes,
                     const MoeGemmTile* __restrict__ tiles, const float* __restrict__ a_scale,
                     const float* __restrict__ w_scale, int w_scale_ld) {
  using C = Cfg<BT, T>;
  extern __shared__ __align__(128) char smem[];
  const MoeGemmTile tile = tiles[blockIdx.x];
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int wn = warp & 3, wt = warp >> 2;
  const char* wbase = w + tile.w_offset;
  const int ktiles = (k_bytes + kTileK - 1) / kTileK;

  auto load = [&](int kt, int stage) {
    char* ws = smem + stage * C::kStageBytes;
    LoadStage<BT, C::kThreads>(ws, ws + kN * kTileK, tile, a, wbase, n, k_bytes, kt, tid);
  };

  float acc[2][C::kNt][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < C::kNt; ++nt)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[mt][nt][q] = 0.f;

#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    if (s < ktiles) load(s, s);
    CpAsyncCommit();
  }

  for (int kt = 0; kt < ktiles; ++kt) {
    CpAsyncWait<C::kStages - 2>();
    __syncthreads();  // stage kt landed for every thread; stage kt - 1 is free
    if (kt + C::kStages - 1 < ktiles) load(kt + C::kStages - 1, (kt + C::kStages - 1) % C::kStages);
    CpAsyncCommit();

    const char* ws = smem + (kt % C::kStages) * C::kStageBytes;
    const unsigned wsa = SmemAddr(ws), asa = SmemAddr(ws + kN * kTileK);
    // Both fp8 types sum each 128-wide k block apart and fold it into fp32 afterwards
    // (scaled for fp8_block): Hopper's fp8 tensor-core accumulation keeps fewer bits
    // than fp32, and over k = 14336 the error exceeded the check's bound (run h200-moe).
    constexpr bool kPromote = T != MoeGemmType::kBf16;
    float part[2][C::kNt][4];
    if constexpr (kPromote) {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < C::kNt; ++nt)
#pragma unroll
          for (int q = 0; q < 4; ++q) part[mt][nt][q] = 0.f;
    }
    auto& sum = kPromote ? part : acc;
#pragma unroll
    for (int ks = 0; ks < kTileK / 32; ++ks) {
      unsigned af[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
        Ldsm4(af[mt], wsa + Swz(wn * kWarpRows + mt * 16 + (lane & 15), ks * 2 + (lane >> 4)));
      unsigned bfr[C::kNt][2];
      LoadTokenFragments<C>(bfr, asa, wt, ks, lane);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < C::kNt; ++nt) Mma<T>(sum[mt][nt], af[mt], bfr[nt][0], bfr[nt][1]);
    }
    if constexpr (T == MoeGemmType::kFp8) {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < C::kNt; ++nt)
#pragma unroll
          for (int q = 0; q < 4; ++q) acc[mt][nt][q] += part[mt][nt][q];
    }
    if constexpr (T == MoeGemmType::kFp8Block) {
      // Promote this 128-wide k block: scale by its weight block and token group scales.
      const float wsc = __ldg(w_scale + tile.w_scale + (tile.n0 / 128) * w_scale_ld + kt);
      const float* as = GroupScales(a_scale, tile, ktiles, kt);
#pragma unroll
      for (int nt = 0; nt < C::kNt; ++nt) {
        const int t0 = wt * C::kWarpTokens + nt * 8 + 2 * (lane & 3);
        const float s0 = t0 < tile.rows ? __ldg(as + t0) * wsc : 0.f;
        const float s1 = t0 + 1 < tile.rows ? __ldg(as + t0 + 1) * wsc : 0.f;
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          acc[mt][nt][0] += part[mt][nt][0] * s0;
          acc[mt][nt][1] += part[mt][nt][1] * s1;
          acc[mt][nt][2] += part[mt][nt][2] * s0;
          acc[mt][nt][3] += part[mt][nt][3] * s1;
        }
      }
    }
  }
  CpAsyncWait<0>();
  __syncthreads();  // the pipeline's shared memory is reused for the output tile

  float scale = 1.f;
  if constexpr (T == MoeGemmType::kFp8) scale = __ldg(a_scale) * __ldg(w_scale + tile.w_scale);
  bf16* os = reinterpret_cast<bf16*>(smem);
  const int g = lane >> 2, tig = lane & 3;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < C::kNt; ++nt) {
      const int nl = wn * kWarpRows + mt * 16 + g;
      const int tk = wt * C::kWarpTokens + nt * 8 + 2 * tig;
      os[tk * kOutStride + nl] = __float2bfloat16(acc[mt][nt][0] * scale);
      os[(tk + 1) * kOutStride + nl] = __float2bfloat16(acc[mt][nt][1] * scale);
      os[tk * kOutStride + nl + 8] = __float2bfloat16(acc[mt][nt][2] * scale);
      os[(tk + 1) * kOutStride + nl + 8] = __float2bfloat16(acc[mt][nt][3] * scale);
    }
  __syncthreads();
  StoreTile<BT, C::kThreads>(os, tile, d, n, tid);
}

template <int BT, MoeGemmType T>
void LaunchTyped(const MoeGroupedGemmArgs& g, cudaStream_t stream) {
  static unsigned configured = 0;
  moe_gemm::LaunchTiles(moe_grouped_gemm<BT, T>, configured, Cfg<BT, T>::kThreads, Cfg<BT, T>::kSmem, g, stream);
}

// ---- weight-only 4-bit experts (mxfp4, int4): dequantized to bf16 in registers ----
//
// The CTA and warp layout of the bf16 kernel above (4 warps along the tile's 128
// weight rows, BT / kWarpTokens along its tokens). A stage holds the tile's 4-bit
// codes for 64 k (8 chunks of 512 bytes, moe_grouped_gemm.h's tiled layout), their
// group scales and the BT activation rows (bf16, 128 bytes each, swizzled as above).
// Each lane reads its codes for both of its m16 tiles with two 16-byte shared loads
// per stage and builds the A fragments of 4 k16 steps from them with shifts, masks and
// one bf16 multiply per pair: weight memory is read at 4.25 (mxfp4) or 4.5 (int4)
// bits per weight, the MMA runs on bf16. Stages are a quarter of the bf16 kernel's,
// so the ring is twice as deep (8) for decode-sized tiles.
using moe_gemm::kW4Chunk;
using moe_gemm::kW4StageCodes;
using moe_gemm::W4Dequant;
using moe_gemm::W4Scale2;

template <int BT, MoeGemmType T>
struct W4Cfg {
  static constexpr int kWarpTokens = BT <= 32 ? (BT < 16 ? BT : 16) : 32;
  static constexpr int kWarpsT = BT / kWarpTokens;
  static constexpr int kThreads = 32 * 4 * kWarpsT;
  static constexpr int kNt = kWarpTokens / 8;
  static constexpr int kScaleBytes = T == MoeGemmType::kW4Int4 ? 2 : 1;
  static constexpr int kChunkScales = moe_gemm::W4ChunkScales(kScaleBytes);
  static constexpr int kStageScales = kN / 16 * kChunkScales;
  static constexpr int kStages = BT <= 32 ? 8 : 4;
  static constexpr int kStageBytes = kW4StageCodes + kStageScales + BT * kTileK;
  static constexpr int kSmem =
      kStages * kStageBytes > BT * kOutStride * 2 ? kStages * kStageBytes : BT * kOutStride * 2;
};

template <int BT, MoeGemmType T>
__global__ void __launch_bounds__(W4Cfg<BT, T>::kThreads)
    moe_grouped_gemm_w4(const char* __restrict__ a, const char* __restrict__ w, bf16* __restrict__ d, int n,
                        int k_bytes, const MoeGemmTile* __restrict__ tiles, const float* __restrict__,
                        const float* __restrict__, int) {
  using C = W4Cfg<BT, T>;
  extern __shared__ __align__(128) char smem[];
  const MoeGemmTile tile = tiles[blockIdx.x];
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int wn = warp & 3, wt = warp >> 2;
  const char* wbase = w + tile.w_offset;
  const int ktiles = (k_bytes + kTileK - 1) / kTileK;  // = kp / 64

  auto load = [&](int kt, int stage) {
    char* cs = smem + stage * C::kStageBytes;
    moe_gemm::LoadStageW4<BT, C::kThreads, C::kScaleBytes>(cs, cs + kW4StageCodes, cs + kW4StageCodes + C::kStageScales,
                                                          tile, a, wbase, n, k_bytes, ktiles, kt, tid);
  };

  float acc[2][C::kNt][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < C::kNt; ++nt)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[mt][nt][q] = 0.f;

#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    if (s < ktiles) load(s, s);
    CpAsyncCommit();
  }

  const int g = lane >> 2;
  for (int kt = 0; kt < ktiles; ++kt) {
    CpAsyncWait<C::kStages - 2>();
    __syncthreads();
    if (kt + C::kStages - 1 < ktiles) load(kt + C::kStages - 1, (kt + C::kStages - 1) % C::kStages);
    CpAsyncCommit();

    const char* cs = smem + (kt % C::kStages) * C::kStageBytes;
    const unsigned char* ss = reinterpret_cast<const unsigned char*>(cs + kW4StageCodes);
    const unsigned asa = SmemAddr(cs + kW4StageCodes + C::kStageScales);
    uint4 code[2];
    unsigned sc[2][2][2];  // [mt][group][row g, row g + 8]
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      const int chunk = wn * 2 + mt;
      code[mt] = *reinterpret_cast<const uint4*>(cs + chunk * kW4Chunk + lane * 16);
#pragma unroll
      for (int q = 0; q < 2; ++q)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          sc[mt][q][h] = W4Scale2<T>(ss + chunk * C::kChunkScales + ((g + 8 * h) * 2 + q) * C::kScaleBytes);
    }
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      unsigned af[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const unsigned word = ks == 0 ? code[mt].x : ks == 1 ? code[mt].y : ks == 2 ? code[mt].z : code[mt].w;
        const int q = ks >> 1;
        af[mt][0] = W4Dequant<T, 0>(word, sc[mt][q][0]);
        af[mt][1] = W4Dequant<T, 1>(word, sc[mt][q][1]);
        af[mt][2] = W4Dequant<T, 2>(word, sc[mt][q][0]);
        af[mt][3] = W4Dequant<T, 3>(word, sc[mt][q][1]);
      }
      unsigned bfr[C::kNt][2];
      LoadTokenFragments<C>(bfr, asa, wt, ks, lane);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < C::kNt; ++nt) Mma<MoeGemmType::kBf16>(acc[mt][nt], af[mt], bfr[nt][0], bfr[nt][1]);
    }
  }
  CpAsyncWait<0>();
  __syncthreads();

  bf16* os = reinterpret_cast<bf16*>(smem);
  const int tig = lane & 3;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < C::kNt; ++nt) {
      const int nl = wn * kWarpRows + mt * 16 + g;
      const int tk = wt * C::kWarpTokens + nt * 8 + 2 * tig;
      os[tk * kOutStride + nl] = __float2bfloat16(acc[mt][nt][0]);
      os[(tk + 1) * kOutStride + nl] = __float2bfloat16(acc[mt][nt][1]);
      os[tk * kOutStride + nl + 8] = __float2bfloat16(acc[mt][nt][2]);
      os[(tk + 1) * kOutStride + nl + 8] = __float2bfloat16(acc[mt][nt][3]);
    }
  __syncthreads();
  StoreTile<BT, C::kThreads>(os, tile, d, n, tid);
}

template <int BT, MoeGemmType T>
void LaunchW4Typed(const MoeGroupedGemmArgs& g, cudaStream_t stream) {
  static unsigned configured = 0;
  moe_gemm::LaunchTiles(moe_grouped_gemm_w4<BT, T>, configured, W4Cfg<BT, T>::kThreads, W4Cfg<BT, T>::kSmem, g,
                        stream);
}

// ---- the 4-bit layouts: quantizer (bf16 -> plain) and the load-time repack (plain -> tiled) ----

// e2m1 code (sign, 2 exponent bits, 1 mantissa bit) of x, rounded to nearest, ties to
// the even code, saturated at ±6.
__device__ __forceinline__ unsigned E2m1Code(float x) {
  const unsigned sign = x < 0.f ? 8u : 0u;
  const float m = fabsf(x);
  unsigned c;
  if (m <= 0.25f) c = 0;        // 0
  else if (m < 0.75f) c = 1;    // 0.5
  else if (m <= 1.25f) c = 2;   // 1
  else if (m < 1.75f) c = 3;    // 1.5
  else if (m <= 2.5f) c = 4;    // 2
  else if (m < 3.5f) c = 5;     // 3
  else if (m <= 5.f) c = 6;     // 4
  else c = 7;                   // 6
  return sign | c;
}

__global__ void moe_w4_quantize(const bf16* __restrict__ src, int n, int k, int kp, int int4,
                                unsigned char* __restrict__ dst) {
  const int groups = kp / 32;
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<long long>(n) * groups) return;
  const int r = static_cast<int>(idx / groups), gr = static_cast<int>(idx % groups);
  const long long row_bytes = kp / 2 + static_cast<long long>(groups) * (int4 ? 2 : 1);
  unsigned char* out = dst + r * row_bytes;
  float v[32];
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int kk = gr * 32 + i;
    v[i] = kk < k ? __bfloat162float(src[static_cast<long long>(r) * k + kk]) : 0.f;
    amax = fmaxf(amax, fabsf(v[i]));
  }
  unsigned codes[32];
  if (!int4) {
    // OCP MX: shared exponent floor(log2(amax)) - emax(e2m1) = floor(log2(amax)) - 2;
    // e8m0 = that + 127, kept in [0, 128] (the kernel's range; scales of real expert
    // weights are far below 2).
    int e = 0;
    if (amax > 0.f) {
      int ex = 0;
      frexpf(amax, &ex);  // amax = f · 2^ex, f in [0.5, 1): floor(log2 amax) = ex - 1
      e = ex - 1 - 2 + 127;
      e = e < 0 ? 0 : (e > 128 ? 128 : e);
    }
    const float inv = ldexpf(1.f, 127 - e);
#pragma unroll
    for (int i = 0; i < 32; ++i) codes[i] = E2m1Code(v[i] * inv);
    out[kp / 2 + gr] = static_cast<unsigned char>(e);
  } else {
    const bf16 sb = __float2bfloat16(amax / 7.f);
    const float s = __bfloat162float(sb);
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      float q = s > 0.f ? rintf(v[i] / s) : 0.f;
      q = fminf(fmaxf(q, -8.f), 7.f);
      codes[i] = static_cast<unsigned>(static_cast<int>(q) + 8);
    }
    const unsigned short bits = *reinterpret_cast<const unsigned short*>(&sb);
    out[kp / 2 + gr * 2] = static_cast<unsigned char>(bits & 0xff);
    out[kp / 2 + gr * 2 + 1] = static_cast<unsigned char>(bits >> 8);
  }
#pragma unroll
  for (int i = 0; i < 16; ++i) out[gr * 16 + i] = static_cast<unsigned char>(codes[2 * i] | (codes[2 * i + 1] << 4));
}

// One thread per 32-bit word of the tiled codes, then one per tiled scale.
__global__ void moe_w4_tile(const unsigned char* __restrict__ src, int n, int kp, int sb,
                            unsigned char* __restrict__ dst) {
  const long long kb_n = kp / 64, row_bytes = kp / 2 + kp / 32 * sb;
  const long long words = static_cast<long long>(n) * kp / 8;
  const long long scales = static_cast<long long>(n) * (kp / 32);
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx < words) {
    const int i = static_cast<int>(idx & 3), lane = static_cast<int>((idx >> 2) & 31);
    const long long chunk = idx >> 7, rb = chunk / kb_n, kb = chunk % kb_n;
    const int g = lane >> 2, t = lane & 3;
    unsigned word = 0;
    for (int p = 0; p < 8; ++p) {
      const int j = p & 3, h = p >> 2;
      const long long row = rb * 16 + g + 8 * (j & 1);
      const long long kk = kb * 64 + 16 * i + 2 * t + 8 * (j >> 1) + h;
      const unsigned byte = src[row * row_bytes + kk / 2];
      word |= ((kk & 1) ? (byte >> 4) : (byte & 15u)) << (4 * p);
    }
    *reinterpret_cast<unsigned*>(dst + chunk * kW4Chunk + lane * 16 + i * 4) = word;
  } else if (idx < words + scales) {
    const long long s = idx - words;
    const int q = static_cast<int>(s & 1), rr = static_cast<int>((s >> 1) & 15);
    const long long chunk = s >> 5, rb = chunk / kb_n, kb = chunk % kb_n;
    const long long row = rb * 16 + rr, gr = kb * 2 + q;
    const unsigned char* from = src + row * row_bytes + kp / 2 + gr * sb;
    unsigned char* to = dst + static_cast<long long>(n) * kp / 2 + (chunk * 32 + rr * 2 + q) * sb;
    for (int b = 0; b < sb; ++b) to[b] = from[b];
  }
}

template <int BT>
void LaunchBt(const MoeGroupedGemmArgs& g, cudaStream_t stream) {
  switch (g.type) {
    case MoeGemmType::kBf16: return LaunchTyped<BT, MoeGemmType::kBf16>(g, stream);
    case MoeGemmType::kFp8:
      if constexpr (BT <= 64) return LaunchTyped<BT, MoeGemmType::kFp8>(g, stream);
      break;
    case MoeGemmType::kFp8Block:
      if constexpr (BT <= 64) return LaunchTyped<BT, MoeGemmType::kFp8Block>(g, stream);
      break;
    case MoeGemmType::kW4Mxfp4: return LaunchW4Typed<BT, MoeGemmType::kW4Mxfp4>(g, stream);
    case MoeGemmType::kW4Int4: return LaunchW4Typed<BT, MoeGemmType::kW4Int4>(g, stream);
  }
  throw Error("moe grouped gemm: no kernel for this type with " + std::to_string(BT) + " rows per tile");
}

}  // namespace

bool MoeGroupedGemmSupported(MoeGemmType type, std::int64_t n, std::int64_t k) {
  const std::int64_t esz = moe_gemm::ElemBytes(type);
  if (n <= 0 || k <= 0 || n > INT_MAX || k * esz > INT_MAX) return false;
  if ((k * esz) % 16 != 0 || n % 8 != 0) return false;
  if (type == MoeGemmType::kFp8Block && (k % 128 != 0 || n % 128 != 0)) return false;
  if (IsW4(type) && n % 16 != 0) return false;
  return true;
}

MoeW4Layout MoeW4LayoutOf(MoeGemmType type, std::int64_t n, std::int64_t k) {
  if (!IsW4(type)) throw Error("moe w4 layout: not a weight-only 4-bit type");
  if (n <= 0 || k <= 0 || n % 16 != 0)
    throw Error("moe w4 layout: n=" + std::to_string(n) + " k=" + std::to_string(k) +
                " (n must be a positive multiple of 16, k positive)");
  MoeW4Layout l;
  l.n = n;
  l.k = k;
  l.kp = (k + 63) / 64 * 64;
  l.scale_bytes = type == MoeGemmType::kW4Int4 ? 2 : 1;
  return l;
}

void LaunchMoeW4Quantize(MoeGemmType type, const void* src, const MoeW4Layout& l, void* dst, cudaStream_t stream) {
  if (!IsW4(type)) throw Error("moe w4 quantize: not a weight-only 4-bit type");
  if (l.n > INT_MAX || l.kp > INT_MAX) throw Error("moe w4 quantize: matrix too large");
  const long long threads = l.n * (l.kp / 32);
  if (threads == 0) return;
  const int block = 128;
  moe_w4_quantize<<<static_cast<unsigned>((threads + block - 1) / block), block, 0, stream>>>(
      static_cast<const bf16*>(src), static_cast<int>(l.n), static_cast<int>(l.k), static_cast<int>(l.kp),
      type == MoeGemmType::kW4Int4 ? 1 : 0, static_cast<unsigned char*>(dst));
  SC_CUDA_CHECK_LAUNCH();
}

void LaunchMoeW4Tile(const void* src, const MoeW4Layout& l, void* dst, cudaStream_t stream) {
  if (l.n > INT_MAX || l.kp > INT_MAX || l.n % 16 != 0 || l.kp % 64 != 0)
    throw Error("moe w4 tile: bad layout n=" + std::to_string(l.n) + " kp=" + std::to_string(l.kp));
  const long long threads = l.n * l.kp / 8 + l.n * (l.kp / 32);
  if (threads == 0) return;
  const int block = 256;
  moe_w4_tile<<<static_cast<unsigned>((threads + block - 1) / block), block, 0, stream>>>(
      static_cast<const unsigned char*>(src), static_cast<int>(l.n), static_cast<int>(l.kp), l.scale_bytes,
      static_cast<unsigned char*>(dst));
  SC_CUDA_CHECK_LAUNCH();
}

std::vector<MoeGemmTile> MoeGemmTiles(const std::vector<MoeGemmSegment>& segments, std::int64_t n, int bt) {
  if (bt <= 0 || n <= 0) throw Error("moe grouped gemm: tiles need bt > 0 and n > 0");
  std::vector<MoeGemmTile> tiles;
  for (const MoeGemmSegment& sg : segments) {
    if (sg.rows <= 0) continue;
    if (sg.row0 < 0 || sg.row0 + sg.rows > INT_MAX || sg.w_scale < 0 || sg.w_scale > INT_MAX || n > INT_MAX)
      throw Error("moe grouped gemm: a segment (rows " + std::to_string(sg.row0) + " + " + std::to_string(sg.rows) +
                  ", weight scale " + std::to_string(sg.w_scale) + ") does not fit 32 bits");
    for (std::int64_t n0 = 0; n0 < n; n0 += kMoeGemmTileN)
      for (std::int64_t m0 = 0; m0 < sg.rows; m0 += bt) {
        MoeGemmTile t;
        t.w_offset = sg.w_offset;
        t.row0 = static_cast<std::int32_t>(sg.row0 + m0);
        t.rows = static_cast<std::int32_t>(std::min<std::int64_t>(bt, sg.rows - m0));
        t.n0 = static_cast<std::int32_t>(n0);
        t.seg_off = static_cast<std::int32_t>(sg.row0);
        t.seg_rows = static_cast<std::int32_t>(sg.rows);
        t.w_scale = static_cast<std::int32_t>(sg.w_scale);
        tiles.push_back(t);
      }
  }
  if (tiles.size() > static_cast<std::size_t>(INT_MAX)) throw Error("moe grouped gemm: more than 2^31 tiles");
  return tiles;
}

bool MoeGroupedGemmValidBt(MoeGemmType type, int bt) {
  return bt == 8 || bt == 16 || bt == 32 || bt == 64 ||
         (bt == 128 && (type == MoeGemmType::kBf16 || IsW4(type)));
}

void LaunchMoeGroupedGemm(const MoeGroupedGemmArgs& g, int bt, cudaStream_t stream) {
  if (!moe_gemm::ReadyToLaunch(g, "moe grouped gemm")) return;
  if (!MoeGroupedGemmValidBt(g.type, bt))
    throw Error("moe grouped gemm: rows per tile " + std::to_string(bt) +
                "; expected 8, 16, 32, 64 or 128 (fp8 types: up to 64)");
  if (IsW4(g.type) && (g.n % 16 != 0 || g.n * ((g.k + 63) / 64) * 32 > INT_MAX))
    throw Error("moe grouped gemm: w4 weights need n a multiple of 16 and n x kp / 2 below 2^31 bytes");
  switch (bt) {
    case 8: return LaunchBt<8>(g, stream);
    case 16: return LaunchBt<16>(g, stream);
    case 32: return LaunchBt<32>(g, stream);
    case 64: return LaunchBt<64>(g, stream);
    case 128: return LaunchBt<128>(g, stream);
  }
}

bool MoeGroupedWgmmaRuns() {
  return MoeGroupedWgmmaBuilt() && CurrentDeviceIsSm90();
}

bool MoeGroupedWgmmaValidBt(int bt) {
  return bt == 8 || bt == 16 || bt == 32 || bt == 64 || bt == 128;
}

#if !defined(SERVECAST_HAVE_SM90A)
bool MoeGroupedWgmmaBuilt() {
  return false;
}

void LaunchMoeGroupedGemmWgmma(const MoeGroupedGemmArgs&, int, cudaStream_t) {
  throw Error("moe grouped wgmma: this build has no sm_90a kernels (CUDA architectures without 90)");
}
#endif

}  // namespace servecast::cuda
