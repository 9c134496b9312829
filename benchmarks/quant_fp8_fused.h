#pragma once

// Benchmark-only: dynamic per-tensor fp8 quantization in one kernel
// (quant_fp8_fused.cu), an A/B candidate against the two kernels the ops run
// (QuantFp8TensorAmax, then QuantFp8TensorApply, quantize.h). No op runs it; it is
// compiled into bench_quant_fp8 and the GPU test QuantFp8Fused only, never into the
// product.
//
// The same scale and the same bytes as QuantFp8TensorAmax then QuantFp8TensorApply,
// reading the tensor once plus what did not fit on chip (a persistent, cooperatively
// launched grid that keeps its first vectors in registers and shared memory across a
// grid barrier). `state` is three device words that must be zero before the first
// call; the kernel leaves words 0 and 1 zero and bumps word 2.

#include <cuda_runtime.h>

#include <cstddef>

namespace servecast::cuda {

void QuantFp8TensorFused(const void* x_bf16, std::size_t n, unsigned* state, float* scale, void* q_e4m3,
                         cudaStream_t stream);
// The fused kernel's full grid on this device (CTAs per SM x SMs).
int QuantFp8TensorFusedGrid();

}  // namespace servecast::cuda
