#pragma once

// Device side of the tensor memory accelerator (TMA) rings: mbarrier phases with
// transaction counts, bulk tensor copies into shared memory, and the proxy fences
// between them. Shared by the paged decode (attention_kernels.cu) and the MLA decode
// (sm90a/mla_decode_wgmma.cu); the maps are made on the host by tma.h.
//
// The PTX needs sm_90 (mbarrier transaction counts, cp.async.bulk.tensor, proxy
// fences). Built for an older target the helpers trap; the plans take a TMA ring only
// on a device of compute capability 9.0 or newer.

#include <cuda.h>

#include <cstdint>

#include "backends/cuda/mma_ptx.cuh"

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define SC_TMA_PTX(...) asm volatile(__VA_ARGS__)
#else
#define SC_TMA_PTX(...) __trap()
#endif

namespace servecast::cuda {

__device__ __forceinline__ void MbarInit(unsigned long long* bar, unsigned count) {
  SC_TMA_PTX("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SmemAddr(bar)), "r"(count) : "memory");
}
// The barriers' initialization, visible to the async proxy before any TMA uses them.
__device__ __forceinline__ void FenceMbarrierInit() {
  SC_TMA_PTX("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// Generic-proxy accesses to shared memory ordered before later async-proxy ones (TMA).
__device__ __forceinline__ void FenceProxyAsyncShared() {
  SC_TMA_PTX("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Arrives once and adds `bytes` to the transaction count the phase waits for.
__device__ __forceinline__ void MbarArriveExpectTx(unsigned long long* bar, unsigned bytes) {
  SC_TMA_PTX("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(SmemAddr(bar)), "r"(bytes)
             : "memory");
}
// Spins until the phase of `parity` (0 for a barrier's first phase, then 1, 0, ...)
// has completed.
__device__ __forceinline__ void MbarWait(unsigned long long* bar, unsigned parity) {
  unsigned done = 0;
  do {
    SC_TMA_PTX("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(done)
               : "r"(SmemAddr(bar)), "r"(parity)
               : "memory");
  } while (!done);
}
// One 2-D box of `map` at element coordinates (x, y), completing on `bar`.
__device__ __forceinline__ void TmaLoad2d(void* dst, const CUtensorMap* map, int x, int y, unsigned long long* bar) {
  SC_TMA_PTX(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(x), "r"(y), "r"(SmemAddr(bar))
      : "memory");
}
// One 3-D box of `map` starting at row y (columns and halves from 0), completing on `bar`.
__device__ __forceinline__ void TmaLoad3d(void* dst, const CUtensorMap* map, int y, unsigned long long* bar) {
  SC_TMA_PTX(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(0), "r"(0), "r"(y), "r"(SmemAddr(bar))
      : "memory");
}

}  // namespace servecast::cuda
