// The moe op's grouped expert GEMM on Hopper's warpgroup MMA (wgmma), compiled for
// sm_90a only (its own library, src/CMakeLists.txt). Same tiles, arguments and results
// as the mma.sync kernel (moe_grouped_gemm.cu): one CTA per tile of 128 weight rows
// (output columns) x BT token rows, two warpgroups of 64 weight rows each issuing
// wgmma.m64n<BT> with both operands read from shared memory through SWIZZLE_128B
// K-major descriptors; the stages arrive by cp.async in that swizzled layout
// (moe_gemm_device.cuh), made visible to the async proxy by fence.proxy.async. Both
// fp8 types fold each 128-wide k block's wgmma sums into fp32 registers (fp8_block
// with its scales), as DeepGEMM does: Hopper's fp8 accumulation keeps fewer bits.
// The weight-only 4-bit types (moe_grouped_gemm_w4_wgmma below) take the weights as
// wgmma's A operand from registers, dequantized there from the tiled 4-bit codes; the
// activations stay a shared-memory descriptor.
#include <cuda_bf16.h>

#include <climits>
#include <cstdint>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/moe_gemm_device.cuh"
#include "backends/cuda/moe_grouped_gemm.h"
#include "backends/cuda/sm90a/wgmma.cuh"
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
using wgmma::Desc;
using wgmma::FenceProxyAsync;
using wgmma::FenceRegs;
using wgmma::Wgmma;
using wgmma::WgmmaRegA;
using wgmma::WgCommit;
using wgmma::WgFence;
using wgmma::WgType;
using wgmma::WgWait0;

constexpr int kThreads = 256;  // two warpgroups: weight rows [0, 64) and [64, 128)
constexpr int kAlign = 1024;   // a 128-byte-swizzle atom (8 rows x 128 B)

template <int BT>
struct WgCfg {
  static constexpr int kStages = BT <= 32 ? 4 : 3;
  static constexpr int kStageBytes = (kN + BT) * kTileK;  // a multiple of 1024
  static constexpr int kBody =
      kStages * kStageBytes > BT * kOutStride * 2 ? kStages * kStageBytes : BT * kOutStride * 2;
  static constexpr int kSmem = kBody + kAlign;  // room to align the base to 1024 bytes
};


template <int BT, MoeGemmType T>
__global__ void __launch_bounds__(kThreads)
    moe_grouped_wgmma(const char* __restrict__ a, const char* __restrict__ w, bf16* __restrict__ d, int n,
                      int k_bytes, const MoeGemmTile* __restrict__ tiles, const float* __restrict__ a_scale,
                      const float* __restrict__ w_scale, int w_scale_ld) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = WgCfg<BT>;
  constexpr WgType kWt = T == MoeGemmType::kBf16 ? WgType::kBf16 : WgType::kFp8;
  constexpr int R = BT / 2;  // accumulators per thread
  extern __shared__ char smem_raw[];
  // Align the shared-window address (what the descriptors hold) to a swizzle atom.
  char* smem = smem_raw + ((0u - SmemAddr(smem_raw)) & static_cast<unsigned>(kAlign - 1));
  const MoeGemmTile tile = tiles[blockIdx.x];
  const int tid = static_cast<int>(threadIdx.x), wg = tid >> 7, lane = tid & 31, warp_in_wg = (tid >> 5) & 3;
  const char* wbase = w + tile.w_offset;
  const int ktiles = (k_bytes + kTileK - 1) / kTileK;

  auto load = [&](int kt, int stage) {
    char* ws = smem + stage * C::kStageBytes;
    LoadStage<BT, kThreads>(ws, ws + kN * kTileK, tile, a, wbase, n, k_bytes, kt, tid);
  };

  float acc[R];
#pragma unroll
  for (int i = 0; i < R; ++i) acc[i] = 0.f;
  // Both fp8 types sum each 128-wide k block apart and fold it into fp32 (scaled for
  // fp8_block): Hopper's fp8 tensor-core accumulation keeps fewer bits than fp32.
  constexpr bool kPromote = T != MoeGemmType::kBf16;
  float part[kPromote ? R : 1];

#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    if (s < ktiles) load(s, s);
    CpAsyncCommit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    CpAsyncWait<C::kStages - 2>();
    FenceProxyAsync();  // this thread's cp.async writes, visible to wgmma's reads
    __syncthreads();    // every thread's part of stage kt landed; stage kt - 1 is free
    if (kt + C::kStages - 1 < ktiles) load(kt + C::kStages - 1, (kt + C::kStages - 1) % C::kStages);
    CpAsyncCommit();

    const char* ws = smem + (kt % C::kStages) * C::kStageBytes;
    const unsigned wa = SmemAddr(ws + wg * 64 * kTileK), ta = SmemAddr(ws + kN * kTileK);
    float* sum = acc;
    if constexpr (kPromote) sum = part;
    FenceRegs<R>(sum);
    __syncwarp();
    WgFence();
#pragma unroll
    for (int ks = 0; ks < kTileK / 32; ++ks) {
      // The fp8 types start each k block's partial sums afresh; bf16 accumulates.
      const int scale_d = kPromote ? (ks > 0 ? 1 : 0) : 1;
      Wgmma<BT, kWt>(sum, Desc(wa + ks * 32), Desc(ta + ks * 32), scale_d);
    }
    WgCommit();
    WgWait0();
    FenceRegs<R>(sum);
    if constexpr (T == MoeGemmType::kFp8) {
#pragma unroll
      for (int i = 0; i < R; ++i) acc[i] += part[i];
    }
    if constexpr (T == MoeGemmType::kFp8Block) {
      const float wsc = __ldg(w_scale + tile.w_scale + (tile.n0 / 128) * w_scale_ld + kt);
      const float* as = GroupScales(a_scale, tile, ktiles, kt);
#pragma unroll
      for (int j = 0; j < BT / 8; ++j) {
        const int t0 = j * 8 + 2 * (lane & 3);
        const float s0 = t0 < tile.rows ? __ldg(as + t0) * wsc : 0.f;
        const float s1 = t0 + 1 < tile.rows ? __ldg(as + t0 + 1) * wsc : 0.f;
        acc[4 * j + 0] += part[4 * j + 0] * s0;
        acc[4 * j + 1] += part[4 * j + 1] * s1;
        acc[4 * j + 2] += part[4 * j + 2] * s0;
        acc[4 * j + 3] += part[4 * j + 3] * s1;
      }
    }
  }
  CpAsyncWait<0>();
  __syncthreads();  // the stages are reused for the output tile

  float scale = 1.f;
  if constexpr (T == MoeGemmType::kFp8) scale = __ldg(a_scale) * __ldg(w_scale + tile.w_scale);
  bf16* os = reinterpret_cast<bf16*>(smem);
  const int g = lane >> 2, tig = lane & 3;
  const int nl = wg * 64 + warp_in_wg * 16 + g;  // accumulator rows nl and nl + 8
#pragma unroll
  for (int j = 0; j < BT / 8; ++j) {
    const int tk = j * 8 + 2 * tig;
    os[tk * kOutStride + nl] = __float2bfloat16(acc[4 * j + 0] * scale);
    os[(tk + 1) * kOutStride + nl] = __float2bfloat16(acc[4 * j + 1] * scale);
    os[tk * kOutStride + nl + 8] = __float2bfloat16(acc[4 * j + 2] * scale);
    os[(tk + 1) * kOutStride + nl + 8] = __float2bfloat16(acc[4 * j + 3] * scale);
  }
  __syncthreads();
  StoreTile<BT, kThreads>(os, tile, d, n, tid);
#else
  __trap();  // built for sm_90a only: never launched elsewhere (MoeGroupedWgmmaRuns)
#endif
}


// ---- the weight-only 4-bit types: A (weights) from registers ------------------------
//
// A stage: the BT activation rows (1024-aligned, SWIZZLE_128B as above), the tile's 8
// code chunks (one per warp: warp w of warpgroup g holds rows 16 (4 g + w) .. + 15, the
// 16-row block its A fragment covers) and their scales. Each thread reads its 16 bytes
// of codes (4 k16 steps) with one shared load, dequantizes 16 registers (as the
// mma.sync kernel does), and issues 4 wgmma with them.
template <int BT, MoeGemmType T>
struct WgW4Cfg {
  static constexpr int kScaleBytes = T == MoeGemmType::kW4Int4 ? 2 : 1;
  static constexpr int kChunkScales = moe_gemm::W4ChunkScales(kScaleBytes);
  static constexpr int kStages = BT <= 32 ? 8 : 4;
  static constexpr int kRaw = BT * kTileK + moe_gemm::kW4StageCodes + kN / 16 * kChunkScales;
  static constexpr int kStageBytes = (kRaw + kAlign - 1) / kAlign * kAlign;
  static constexpr int kBody =
      kStages * kStageBytes > BT * kOutStride * 2 ? kStages * kStageBytes : BT * kOutStride * 2;
  static constexpr int kSmem = kBody + kAlign;
};

template <int BT, MoeGemmType T>
__global__ void __launch_bounds__(kThreads)
    moe_grouped_wgmma_w4(const char* __restrict__ a, const char* __restrict__ w, bf16* __restrict__ d, int n,
                         int k_bytes, const MoeGemmTile* __restrict__ tiles, const float* __restrict__,
                         const float* __restrict__, int) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = WgW4Cfg<BT, T>;
  constexpr int R = BT / 2;
  extern __shared__ char smem_raw[];
  char* smem = smem_raw + ((0u - SmemAddr(smem_raw)) & static_cast<unsigned>(kAlign - 1));
  const MoeGemmTile tile = tiles[blockIdx.x];
  const int tid = static_cast<int>(threadIdx.x), wg = tid >> 7, lane = tid & 31, warp_in_wg = (tid >> 5) & 3;
  const int chunk = wg * 4 + warp_in_wg, g = lane >> 2;
  const char* wbase = w + tile.w_offset;
  const int ktiles = (k_bytes + kTileK - 1) / kTileK;

  auto load = [&](int kt, int stage) {
    char* as = smem + stage * C::kStageBytes;
    char* cs = as + BT * kTileK;
    moe_gemm::LoadStageW4<BT, kThreads, C::kScaleBytes>(cs, cs + moe_gemm::kW4StageCodes, as, tile, a, wbase, n,
                                                         k_bytes, ktiles, kt, tid);
  };

  float acc[R];
#pragma unroll
  for (int i = 0; i < R; ++i) acc[i] = 0.f;
#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    if (s < ktiles) load(s, s);
    CpAsyncCommit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    CpAsyncWait<C::kStages - 2>();
    FenceProxyAsync();
    __syncthreads();
    if (kt + C::kStages - 1 < ktiles) load(kt + C::kStages - 1, (kt + C::kStages - 1) % C::kStages);
    CpAsyncCommit();

    const char* as = smem + (kt % C::kStages) * C::kStageBytes;
    const char* cs = as + BT * kTileK;
    const unsigned char* ss = reinterpret_cast<const unsigned char*>(cs + moe_gemm::kW4StageCodes);
    const unsigned ta = SmemAddr(as);
    const uint4 code = *reinterpret_cast<const uint4*>(cs + chunk * moe_gemm::kW4Chunk + lane * 16);
    unsigned sc[2][2];  // [group][row g, row g + 8]
#pragma unroll
    for (int q = 0; q < 2; ++q)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        sc[q][h] = moe_gemm::W4Scale2<T>(ss + chunk * C::kChunkScales + ((g + 8 * h) * 2 + q) * C::kScaleBytes);
    unsigned af[4][4];
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      const unsigned word = ks == 0 ? code.x : ks == 1 ? code.y : ks == 2 ? code.z : code.w;
      const int q = ks >> 1;
      af[ks][0] = moe_gemm::W4Dequant<T, 0>(word, sc[q][0]);
      af[ks][1] = moe_gemm::W4Dequant<T, 1>(word, sc[q][1]);
      af[ks][2] = moe_gemm::W4Dequant<T, 2>(word, sc[q][0]);
      af[ks][3] = moe_gemm::W4Dequant<T, 3>(word, sc[q][1]);
    }
    FenceRegs<R>(acc);
    __syncwarp();
    WgFence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) WgmmaRegA<BT>(acc, af[ks], Desc(ta + ks * 32));
    WgCommit();
    WgWait0();
    FenceRegs<R>(acc);
  }
  CpAsyncWait<0>();
  __syncthreads();

  bf16* os = reinterpret_cast<bf16*>(smem);
  const int tig = lane & 3;
  const int nl = wg * 64 + warp_in_wg * 16 + g;
#pragma unroll
  for (int j = 0; j < BT / 8; ++j) {
    const int tk = j * 8 + 2 * tig;
    os[tk * kOutStride + nl] = __float2bfloat16(acc[4 * j + 0]);
    os[(tk + 1) * kOutStride + nl] = __float2bfloat16(acc[4 * j + 1]);
    os[tk * kOutStride + nl + 8] = __float2bfloat16(acc[4 * j + 2]);
    os[(tk + 1) * kOutStride + nl + 8] = __float2bfloat16(acc[4 * j + 3]);
  }
  __syncthreads();
  StoreTile<BT, kThreads>(os, tile, d, n, tid);
#else
  __trap();
#endif
}

template <int BT, MoeGemmType T>
void LaunchW4Typed(const MoeGroupedGemmArgs& g, cudaStream_t stream) {
  static unsigned configured = 0;
  moe_gemm::LaunchTiles(moe_grouped_wgmma_w4<BT, T>, configured, kThreads, WgW4Cfg<BT, T>::kSmem, g, stream);
}

template <int BT, MoeGemmType T>
void LaunchTyped(const MoeGroupedGemmArgs& g, cudaStream_t stream) {
  static unsigned configured = 0;
  moe_gemm::LaunchTiles(moe_grouped_wgmma<BT, T>, configured, kThreads, WgCfg<BT>::kSmem, g, stream);
}

template <int BT>
void LaunchBt(const MoeGroupedGemmArgs& g, cudaStream_t stream) {
  switch (g.type) {
    case MoeGemmType::kBf16: return LaunchTyped<BT, MoeGemmType::kBf16>(g, stream);
    case MoeGemmType::kFp8: return LaunchTyped<BT, MoeGemmType::kFp8>(g, stream);
    case MoeGemmType::kFp8Block: return LaunchTyped<BT, MoeGemmType::kFp8Block>(g, stream);
    case MoeGemmType::kW4Mxfp4: return LaunchW4Typed<BT, MoeGemmType::kW4Mxfp4>(g, stream);
    case MoeGemmType::kW4Int4: return LaunchW4Typed<BT, MoeGemmType::kW4Int4>(g, stream);
  }
}

}  // namespace

bool MoeGroupedWgmmaBuilt() {
  return true;
}

void LaunchMoeGroupedGemmWgmma(const MoeGroupedGemmArgs& g, int bt, cudaStream_t stream) {
  if (!moe_gemm::ReadyToLaunch(g, "moe grouped wgmma")) return;
  if (!MoeGroupedWgmmaValidBt(bt))
    throw Error("moe grouped wgmma: rows per tile " + std::to_string(bt) + "; expected 8, 16, 32, 64 or 128");
  switch (bt) {
    case 8: return LaunchBt<8>(g, stream);
    case 16: return LaunchBt<16>(g, stream);
    case 32: return LaunchBt<32>(g, stream);
    case 64: return LaunchBt<64>(g, stream);
    case 128: return LaunchBt<128>(g, stream);
  }
}

}  // namespace servecast::cuda
