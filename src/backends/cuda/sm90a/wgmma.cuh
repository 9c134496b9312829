#pragma once

// Hopper's warpgroup MMA (wgmma) as the sm_90a kernels use it (the moe op's grouped
// GEMM, the MLA decode): shared-memory matrix descriptors for the 128-byte swizzle,
// the fences and waits around an asynchronous MMA, and the generated instruction
// wrappers (wgmma_ops.inc, wgmma_rega_ops.inc, wgmma_transa_ops.inc). Only for files
// compiled for sm_90a (src/CMakeLists.txt); elsewhere the wrappers are not defined.
//
// SWIZZLE_128B layout (both K-major and MN-major operands): rows of 128 bytes, 8-row
// atoms of 1024 bytes (1024-byte aligned), the 16-byte chunk c of row r stored at
// chunk c ^ (r % 8).

#include <cstdint>

namespace servecast::cuda::wgmma {

// Descriptor of a K-major operand: rows of the M (or N) dimension, 64 bf16 (or 128
// fp8) of K per 128-byte row, 8-row groups 1024 bytes apart (stride byte offset); the
// leading byte offset is unused for this layout. A k step inside the row moves the
// start address by its bytes.
__device__ __forceinline__ std::uint64_t Desc(unsigned smem_addr) {
  std::uint64_t d = 0;
  d |= static_cast<std::uint64_t>((smem_addr & 0x3FFFF) >> 4);
  d |= static_cast<std::uint64_t>(1) << 16;          // leading byte offset (ignored)
  d |= static_cast<std::uint64_t>(1024 >> 4) << 32;  // stride byte offset
  d |= static_cast<std::uint64_t>(1) << 62;          // SWIZZLE_128B
  return d;
}

// Descriptor of an MN-major operand of 64 rows of M (one 128-byte row of 64 bf16 per
// K index), K in 8-row groups 1024 bytes apart. With one 64-wide block of M the
// offset between M blocks is never used, so both byte offsets are 1024 and the
// layout reads the same whichever of them the hardware takes for the K groups.
__device__ __forceinline__ std::uint64_t DescMn64(unsigned smem_addr) {
  std::uint64_t d = 0;
  d |= static_cast<std::uint64_t>((smem_addr & 0x3FFFF) >> 4);
  d |= static_cast<std::uint64_t>(1024 >> 4) << 16;  // leading byte offset
  d |= static_cast<std::uint64_t>(1024 >> 4) << 32;  // stride byte offset
  d |= static_cast<std::uint64_t>(1) << 62;          // SWIZZLE_128B
  return d;
}

__device__ __forceinline__ void WgFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void WgCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void WgWait0() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
// Generic-proxy writes to shared memory (cp.async, st.shared), visible to wgmma's reads.
__device__ __forceinline__ void FenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Keeps the compiler from moving accumulator accesses across the asynchronous MMA.
template <int R>
__device__ __forceinline__ void FenceRegs(float* d) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

enum class WgType { kBf16, kFp8 };

// d[0 .. N/2) += A(64 x k-step) · B(N x k-step)^T, both K-major descriptors; scale_d =
// 0 overwrites instead. Accumulator order: per n8 block, rows g, g + 8 of the warp's
// 16 x columns 2t, 2t + 1 (g = lane / 4, t = lane % 4).
template <int N, WgType T>
__device__ __forceinline__ void Wgmma(float* d, std::uint64_t da, std::uint64_t db, int scale_d);

// d[0 .. N/2) += A(64 x 16, registers) · B(N x 16)^T.
template <int N>
__device__ __forceinline__ void WgmmaRegA(float* d, const unsigned* a, std::uint64_t db);

// d[0 .. N/2) += A(64 x 16) · B(N x 16)^T, bf16, A an MN-major descriptor (DescMn64),
// B K-major.
template <int N>
__device__ __forceinline__ void WgmmaTransA(float* d, std::uint64_t da, std::uint64_t db);

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "backends/cuda/sm90a/wgmma_ops.inc"
#include "backends/cuda/sm90a/wgmma_rega_ops.inc"
#include "backends/cuda/sm90a/wgmma_transa_ops.inc"
#endif

}  // namespace servecast::cuda::wgmma
