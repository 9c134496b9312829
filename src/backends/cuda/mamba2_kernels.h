#pragma once

// servecast's own kernels of the Mamba2 layer core (Nemotron-H, NVIDIA Nemotron 3), as
// the engines run it after the in_proj GEMM and the short convolution over x, B, C
// (short_conv_kernels.h, with bias): the SSD scan over a float32 state per (sequence,
// head) in prefill (mamba_chunk_scan_combined's job) and the one-token state update in
// decode (selective_state_update's job). The gated RMSNorm and out_proj after them
// are other ops.
//
// Layouts (T = batch x seq tokens, a sequence's tokens consecutive):
//   xbc    [T][C] bf16, the convolution's output, C = nh p + 2 g n: x (nh p) | B (g n) | C (g n)
//   dt     [T][nh] bf16, the raw time step (before dt_bias and softplus)
//   A, D, dt_bias  [nh] float32 (A < 0)
//   y      [T][nh][p] bf16
//   state  [batch][nh][p][n] float32
// Head h reads group h / (nh / g) of B and C. Per token:
//   dt = softplus(dt_raw + dt_bias);  S <- exp(dt A) S + dt x B^T;  y = S C + D x.
// p = 64 (every Nemotron-H checkpoint); n (d_state) 64, 128 or 256.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/short_conv_kernels.h"

namespace servecast::cuda {

inline constexpr int kMamba2HeadDim = 64;  // p
inline constexpr int kMamba2MaxChunk = 256;

struct Mamba2Shape {
  std::int64_t batch = 1;
  std::int64_t seq = 1;  // tokens per sequence (1 in decode)
  std::int64_t nh = 1, p = kMamba2HeadDim, g = 1, n = 128;
  std::int64_t conv = 4;     // d_conv
  std::int64_t chunk = 128;  // tokens per chunk of the prefill scan (the model's chunk_size)
  std::int64_t channels() const { return nh * p + 2 * g * n; }
  std::int64_t tokens() const { return batch * seq; }
  // The convolution over x, B, C before the scan (with bias).
  ShortConvShape conv_shape() const { return {batch, seq, channels(), conv}; }
};

// Empty when the kernels take shape s, else what they do not take.
const char* Mamba2Unsupported(const Mamba2Shape& s);

// Prefill scan from a zero state, chunks of s.chunk tokens, three kernels (bf16 tensor
// cores, float32 accumulation and state; mamba2_kernels.cu says which products are
// rounded to bf16): per chunk, its own contribution to the state; the state passed
// from chunk to chunk; then each chunk's output from the state at its start and its
// own tokens. `workspace` holds Mamba2ChunkWorkspaceBytes(s) (written before it is
// read). Writes y and the final state.
void LaunchMamba2ChunkPrefill(const Mamba2Shape& s, const void* xbc, const void* dt, const float* A, const float* D,
                              const float* dt_bias, void* y, float* state, float* workspace, cudaStream_t stream);

// The prefill scan's float32 workspace for shape s (bytes).
std::size_t Mamba2ChunkWorkspaceBytes(const Mamba2Shape& s);

// Shared memory the prefill scan's largest CTA needs for d_state n (bytes).
std::size_t Mamba2ChunkSmemBytes(std::int64_t n);

// Decode step: one token per sequence, the state read and written in place (float32 math).
void LaunchMamba2StateUpdate(const Mamba2Shape& s, const void* xbc, const void* dt, const float* A, const float* D,
                             const float* dt_bias, void* y, float* state, cudaStream_t stream);

}  // namespace servecast::cuda
