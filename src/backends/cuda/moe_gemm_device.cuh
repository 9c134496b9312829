#pragma once

// Device pieces shared by the moe op's two grouped GEMM kernels (moe_grouped_gemm.cu,
// mma.sync; sm90a/moe_grouped_wgmma.cu, wgmma): the cp.async stage loads of one tile
// in the 128-byte-swizzled K-major layout that both ldmatrix (conflict-free) and
// wgmma's SWIZZLE_128B descriptors read, and the epilogue's store of a staged tile.
// Include from .cu files only.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/moe_grouped_gemm.h"
#include "core/error.h"

namespace servecast::cuda::moe_gemm {

constexpr int kTileK = 128;        // bytes of k per stage: 64 bf16 or 128 e4m3 elements
constexpr int kN = kMoeGemmTileN;  // weight rows (output columns) per tile
constexpr int kOutStride = kN + 8;  // bf16 elements per staged output row (16-byte multiple)

__device__ __forceinline__ unsigned SmemAddr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, zero-filled when !valid (no global read then).
__device__ __forceinline__ void CpAsync16(unsigned dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Byte offset of 16-byte chunk c of row r in a [rows x 128 B] stage tile: chunk
// c ^ (r mod 8). With the tile 1024-byte aligned this is exactly the hardware's
// 128-byte swizzle (address bits 4-6 XOR bits 7-9), and the 8 rows an ldmatrix
// phase reads land in 8 different bank groups.
__device__ __forceinline__ int Swz(int r, int c) {
  return r * kTileK + (((c ^ r) & 7) << 4);
}

// Issues the cp.async loads of k tile `kt` of `tile` into one stage: the weight tile
// [kN x 128 B] at `ws`, the token rows [BT x 128 B] at `as`. Rows past n or the tile's
// rows, and bytes past k, are zero-filled.
template <int BT, int Threads>
__device__ __forceinline__ void LoadStage(char* ws, char* as, const MoeGemmTile& tile, const char* a,
                                          const char* wbase, int n, int k_bytes, int kt, int tid) {
  const int kb0 = kt * kTileK;
  for (int i = tid; i < kN * 8; i += Threads) {
    const int r = i >> 3, c = i & 7, gk = kb0 + c * 16;
    const bool ok = tile.n0 + r < n && gk < k_bytes;
    const char* src = ok ? wbase + static_cast<long long>(tile.n0 + r) * k_bytes + gk : wbase;
    CpAsync16(SmemAddr(ws + Swz(r, c)), src, ok);
  }
  for (int i = tid; i < BT * 8; i += Threads) {
    const int r = i >> 3, c = i & 7, gk = kb0 + c * 16;
    const bool ok = r < tile.rows && gk < k_bytes;
    const char* src = ok ? a + static_cast<long long>(tile.row0 + r) * k_bytes + gk : a;
    CpAsync16(SmemAddr(as + Swz(r, c)), src, ok);
  }
}

// The fp8_block activation scales of k block `kb` for the tile's first row (segment
// layout: scales[k/128 * seg_off + kb * seg_rows + (row - seg_off)]).
__device__ __forceinline__ const float* GroupScales(const float* a_scale, const MoeGemmTile& tile, int kblocks,
                                                    int kb) {
  return a_scale + static_cast<long long>(kblocks) * tile.seg_off + static_cast<long long>(kb) * tile.seg_rows +
         (tile.row0 - tile.seg_off);
}

// Writes the staged output tile os[BT][kOutStride] (bf16, token-major) to rows
// [row0, row0 + rows) and columns [n0, min(n0 + kN, n)) of d, 16 bytes a thread.
template <int BT, int Threads>
__device__ __forceinline__ void StoreTile(const __nv_bfloat16* os, const MoeGemmTile& tile, __nv_bfloat16* d, int n,
                                          int tid) {
  for (int i = tid; i < BT * (kN / 8); i += Threads) {
    const int r = i / (kN / 8), c = i % (kN / 8), col = tile.n0 + c * 8;
    if (r < tile.rows && col < n)
      *reinterpret_cast<uint4*>(d + static_cast<long long>(tile.row0 + r) * n + col) =
          *reinterpret_cast<const uint4*>(os + r * kOutStride + c * 8);
  }
}

// ---- the weight-only 4-bit types (moe_grouped_gemm.h's tiled layout) ----------------

constexpr int kW4Chunk = 512;                      // bytes of codes per (16 rows, 64 k) chunk
constexpr int kW4StageCodes = kN / 16 * kW4Chunk;  // a stage's codes: 8 chunks, 4096 bytes
constexpr int W4ChunkScales(int scale_bytes) {     // a chunk's scales: 16 rows x 2 groups
  return 32 * scale_bytes;
}

// Issues the cp.async loads of k tile `kt` (64 k) of `tile` for the 4-bit types: the
// tile's 8 code chunks to `cs`, their scale chunks to `ss`, the BT activation rows
// (bf16, 128 bytes each) to `as` in the swizzled layout of LoadStage. Row blocks past n
// are zero-filled (codes 0 with scale 0 or 2^-1: value 0); so are rows past the tile's
// and activation bytes past k.
template <int BT, int Threads, int ScaleBytes>
__device__ __forceinline__ void LoadStageW4(char* cs, char* ss, char* as, const MoeGemmTile& tile, const char* a,
                                            const char* wbase, int n, int k_bytes, int ktiles, int kt, int tid) {
  const int rb0 = tile.n0 / 16, nrb = n / 16;
  for (int i = tid; i < 8 * 32; i += Threads) {
    const int c = i >> 5, p = i & 31;
    const bool ok = rb0 + c < nrb;
    const char* src = ok ? wbase + (static_cast<long long>(rb0 + c) * ktiles + kt) * kW4Chunk + p * 16 : wbase;
    CpAsync16(SmemAddr(cs + c * kW4Chunk + p * 16), src, ok);
  }
  constexpr int kChunkScales = W4ChunkScales(ScaleBytes), kPieces = kChunkScales / 16;
  const char* sbase = wbase + static_cast<long long>(n) * ktiles * 32;  // the scales follow n x kp / 2 code bytes
  for (int i = tid; i < 8 * kPieces; i += Threads) {
    const int c = i / kPieces, p = i % kPieces;
    const bool ok = rb0 + c < nrb;
    const char* src = ok ? sbase + (static_cast<long long>(rb0 + c) * ktiles + kt) * kChunkScales + p * 16 : sbase;
    CpAsync16(SmemAddr(ss + c * kChunkScales + p * 16), src, ok);
  }
  const int kb0 = kt * kTileK;
  for (int i = tid; i < BT * 8; i += Threads) {
    const int r = i >> 3, c = i & 7, gk = kb0 + c * 16;
    const bool ok = r < tile.rows && gk < k_bytes;
    const char* src = ok ? a + static_cast<long long>(tile.row0 + r) * k_bytes + gk : a;
    CpAsync16(SmemAddr(as + Swz(r, c)), src, ok);
  }
}

// Lane register j (0..3) of a k16 step from its code word: low half from nibble j,
// high half from nibble j + 4. mxfp4: the e2m1 code placed as a bf16 of value
// code · 2^-126 (its exponent and mantissa bits land on bf16's lowest exponent bits and
// top mantissa bit; the code's subnormal 0.5 becomes bf16's subnormal 2^-127), to be
// multiplied by 2^(e - 1). int4: 128 + u as a bf16 (0x4300 | u), minus 136, times scale.
template <int J>
__device__ __forceinline__ unsigned W4Mx(unsigned w) {
  constexpr int kMag = 6 - 4 * J;
  const unsigned mag = (kMag >= 0 ? (w << (kMag >= 0 ? kMag : 0)) : (w >> (kMag < 0 ? -kMag : 0))) & 0x01C001C0u;
  const unsigned sgn = (w << (12 - 4 * J)) & 0x80008000u;
  return mag | sgn;
}
template <int J>
__device__ __forceinline__ unsigned W4Int(unsigned w) {
  return ((w >> (4 * J)) & 0x000F000Fu) | 0x43004300u;
}
__device__ __forceinline__ unsigned Bf2Mul(unsigned a, unsigned b) {
  __nv_bfloat162 r = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<unsigned*>(&r);
}
__device__ __forceinline__ unsigned Bf2Sub(unsigned a, unsigned b) {
  __nv_bfloat162 r = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<unsigned*>(&r);
}

template <MoeGemmType T, int J>
__device__ __forceinline__ unsigned W4Dequant(unsigned w, unsigned scale2) {
  if constexpr (T == MoeGemmType::kW4Mxfp4) {
    return Bf2Mul(W4Mx<J>(w), scale2);
  } else {
    constexpr unsigned k136 = 0x43084308u;  // bf16 136.0 in both halves
    return Bf2Mul(Bf2Sub(W4Int<J>(w), k136), scale2);
  }
}

// The bf16 pair (s, s) of one scale as stored: mxfp4 2^(e - 1) (bits (e + 126) << 7),
// int4 the bf16 itself.
template <MoeGemmType T>
__device__ __forceinline__ unsigned W4Scale2(const unsigned char* p) {
  unsigned bits;
  if constexpr (T == MoeGemmType::kW4Mxfp4)
    bits = (static_cast<unsigned>(*p) + 126u) << 7;
  else
    bits = *reinterpret_cast<const unsigned short*>(p);
  return bits | (bits << 16);
}

// ---- host side: argument checks and the launch, shared by both kernels -------------

// Bytes per element of the activations (the A rows; k_bytes = k · ElemBytes).
inline int ElemBytes(MoeGemmType t) {
  return t == MoeGemmType::kFp8 || t == MoeGemmType::kFp8Block ? 1 : 2;
}

// Throws Error when the arguments do not fit the kernels (`who` names the kernel);
// false when there is nothing to launch (no tiles).
inline bool ReadyToLaunch(const MoeGroupedGemmArgs& g, const char* who) {
  if (!MoeGroupedGemmSupported(g.type, g.n, g.k))
    throw Error(std::string(who) + ": shape n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) +
                " is not supported (rows of k elements must be 16-byte multiples, n a multiple of 8; fp8_block: "
                "k and n multiples of 128; w4 types: n a multiple of 16)");
  if (g.type == MoeGemmType::kFp8Block && (g.w_scale_ld <= 0 || g.w_scale_ld > INT_MAX))
    throw Error(std::string(who) + ": fp8_block needs the weight scales' leading dimension");
  if (g.num_tiles < 0) throw Error(std::string(who) + ": negative tile count");
  return g.num_tiles > 0;
}

using TileKernel = void (*)(const char*, const char*, __nv_bfloat16*, int, int, const MoeGemmTile*, const float*,
                            const float*, int);

// Launches one grid of `kernel` (a tile per CTA) after opting it in to `smem` bytes of
// dynamic shared memory, once per device (`configured`: that kernel's device bits).
inline void LaunchTiles(TileKernel kernel, unsigned& configured, int threads, int smem, const MoeGroupedGemmArgs& g,
                        cudaStream_t stream) {
  int dev = 0;
  SC_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev >= 32 || !(configured & (1u << dev))) {
    SC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    if (dev < 32) configured |= 1u << dev;
  }
  kernel<<<g.num_tiles, threads, smem, stream>>>(
      static_cast<const char*>(g.a), static_cast<const char*>(g.w), static_cast<__nv_bfloat16*>(g.d),
      static_cast<int>(g.n), static_cast<int>(g.k * ElemBytes(g.type)), g.tiles, g.a_scale, g.w_scale,
      static_cast<int>(g.w_scale_ld));
  SC_CUDA_CHECK_LAUNCH();
}

}  // namespace servecast::cuda::moe_gemm
