#pragma once

// servecast's own memory-bound bf16 kernels for the elementwise_perf ops (fp32
// math inside). Pointers are device pointers to bf16 values (raw bits); every
// buffer comes from cudaMalloc (256-byte aligned). Each access is as wide as the
// row width allows, up to 16 bytes (8 bf16): the width is the largest of 8, 4,
// 2, 1 that divides the row, mapped to a compile-time instantiation by a small
// dispatch helper. Launchers enqueue on `stream`, never synchronize, and throw
// CudaError when the launch fails.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace servecast::cuda {

// Elements per access for a row of `n` bf16 values: 8, 4, 2 or 1.
int Bf16VectorWidth(std::int64_t n);

// rmsnorm has two kernels, one block per row:
//  - kRegisters: the row in registers (at most 1024 threads of at most 16 accesses,
//    so at most kRmsNormMaxAccessesPerRow accesses of Bf16VectorWidth(hidden));
//    spill-free up to 4 accesses per thread (2048 accesses: hidden 16384 at 8
//    elements per access);
//  - kShared: the row staged in shared memory (hidden·2 bytes, at most 48 KiB),
//    256 threads with four 16-byte loads in flight each.
// kAuto (RmsNormKernelFor) takes kRegisters up to kRmsNormRegistersUpTo accesses
// per row (kRmsNormFusedRegistersUpTo for the fused residual form, whose register
// kernel holds two tensors), then kShared where the row fits, then kRegisters up
// to its limit; kNone: neither fits (the case is not supported). Thresholds from
// both kernels timed side by side on an H200 (docs/kernels.md).
enum class RmsNormKernel { kAuto, kRegisters, kShared, kNone };
inline constexpr std::int64_t kRmsNormMaxAccessesPerRow = 16 * 1024;
inline constexpr std::int64_t kRmsNormMaxSharedBytes = 48 * 1024;
inline constexpr std::int64_t kRmsNormRegistersUpTo = 2048;
inline constexpr std::int64_t kRmsNormFusedRegistersUpTo = 512;
RmsNormKernel RmsNormKernelFor(std::int64_t hidden_size, bool residual);
bool RmsNormSupportsHidden(std::int64_t hidden_size);

// Rotary embedding: neox layout, head_dim 128 (two halves of 64), rotating all 128.
inline constexpr int kRotaryHeadDim = 128;

// y = x / sqrt(mean(x²) + eps) · w per row. With `residual` non-null (fused form):
// residual = bf16(x + residual) first, and the norm is taken of that stored value.
// x, residual, y: [tokens][hidden]; w: [hidden].
void LaunchRmsNormBf16(const void* x, void* residual, const void* w, void* y, std::int64_t tokens, std::int64_t hidden,
                       float eps, cudaStream_t stream, RmsNormKernel kernel = RmsNormKernel::kAuto);

// in: [tokens][2·hidden] = [gate | up] per row; out[t][d] = silu(gate)·up, [tokens][hidden].
void LaunchSiluAndMulBf16(const void* in, void* out, std::int64_t tokens, std::int64_t hidden, cudaStream_t stream);
// out[t][j] = max(in[t][j], 0)^2 over [tokens x hidden] (the relu2 of Nemotron-H's
// non-gated experts and MLPs).
void LaunchRelu2Bf16(const void* in, void* out, std::int64_t tokens, std::int64_t hidden, cudaStream_t stream);

// y = a + b, all [tokens][hidden].
void LaunchResidualAddBf16(const void* a, const void* b, void* y, std::int64_t tokens, std::int64_t hidden,
                           cudaStream_t stream);

// In place on q [tokens][hidden] (hidden = heads·128): for each head and i < 64,
// (q[i], q[i+64]) <- (q[i]·cos − q[i+64]·sin, q[i+64]·cos + q[i]·sin) with
// cos/sin = cos_sin[positions[t]][i] / [i+64] (a bf16 cache [max_position][128]).
void LaunchRotaryNeoxBf16(void* q, const std::int64_t* positions, const void* cos_sin, std::int64_t tokens,
                          std::int64_t hidden, cudaStream_t stream);

// out[t] = table[ids[t]] (rows of `hidden` bf16).
void LaunchEmbeddingBf16(const std::int64_t* ids, const void* table, void* out, std::int64_t tokens,
                         std::int64_t hidden, cudaStream_t stream);

// Number of NaN/Inf bf16 values among `n` (synchronizes `stream`); used to prove
// that a kernel wrote every element of a poisoned output.
std::uint64_t CountNonFiniteBf16(const void* data, std::size_t n, cudaStream_t stream);

}  // namespace servecast::cuda
