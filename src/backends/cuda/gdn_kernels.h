#pragma once

// servecast's own kernels of the Gated DeltaNet layer core (Qwen3.5, Qwen3-Next),
// as the engines run it after the in_proj GEMMs: the short causal convolution over
// the q, k, v channels (with SiLU, no bias: short_conv_kernels.h), then the gated
// delta rule over a float32 state per (sequence, value head).
//
// Layouts (T = batch x seq tokens, a sequence's tokens consecutive):
//   x, y       [T][C] bf16, C = 2 hk dk + hv dv channels: q (hk dk) | k (hk dk) | v (hv dv)
//   conv_w     [C][K] bf16 (depthwise, no bias), K = d_conv
//   conv_state [batch][K - 1][C] bf16: each sequence's last K - 1 inputs, oldest first
//   g, beta    [T][hv] float32: the log decay (g <= 0) and the write strength in (0, 1)
//   o          [T][hv][dv] bf16
//   state      [batch][hv][dk][dv] float32
// Value head h reads key head h / (hv / hk) (the engines repeat q and k over the
// value heads). q and k are L2-normalized in the kernel (x / sqrt(|x|^2 + 1e-6)) and
// q scaled by dk^-1/2 (use_qk_l2norm_in_kernel, as Qwen3.5 calls it). Per token:
//   S <- exp(g) S;  u = beta (v - S^T k);  S <- S + k u^T;  o = S^T q.
// dk = dv = 128 (every Qwen3.5 / Qwen3-Next checkpoint); 1 <= K <= kGdnMaxConv.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/short_conv_kernels.h"

namespace servecast::cuda {

inline constexpr int kGdnHeadDim = 128;   // dk = dv
inline constexpr int kGdnChunk = 64;      // tokens per chunk of the prefill scan
inline constexpr int kGdnMaxConv = kShortConvMax;  // largest d_conv the convolution takes
inline constexpr float kGdnNormEps = 1e-6f;

struct GdnShape {
  std::int64_t batch = 1;
  std::int64_t seq = 1;  // tokens per sequence (1 in decode)
  std::int64_t hk = 1, hv = 1;
  std::int64_t conv = 4;  // d_conv
  std::int64_t channels() const { return 2 * hk * kGdnHeadDim + hv * kGdnHeadDim; }
  std::int64_t tokens() const { return batch * seq; }
  // The convolution over q, k, v before the scan (no bias).
  ShortConvShape conv_shape() const { return {batch, seq, channels(), conv}; }
};

// Prefill scan (chunk_gated_delta_rule's job) from a zero state, chunks of kGdnChunk
// tokens. Per chunk, with G its cumulative log decay, A strictly lower (A_ij = beta_i
// exp(G_i - G_j) k_i.k_j) and T = (I + A)^-1: U' = T beta V and W = T beta exp(G) K
// (a first kernel, all chunks in parallel, with P = exp(G_i - G_j) q_i.k_j for j <= i);
// then in chunk order (a second kernel, the state's value columns split over CTAs):
// U = U' - W S0, O = exp(G) Q S0 + P U, S = exp(G_L) S0 + K^T diag(exp(G_L - G)) U.
// `qkv` is the convolution's output y; `workspace` holds GdnChunkWorkspaceBytes(s)
// (written before it is read; no initial contents). Writes o and the final state.
void LaunchGdnChunkPrefill(const GdnShape& s, const void* qkv, const float* g, const float* beta, void* o,
                           float* state, float* workspace, cudaStream_t stream);

// The prefill scan's float32 workspace for shape s (bytes).
std::size_t GdnChunkWorkspaceBytes(const GdnShape& s);

// Decode step (fused_recurrent_gated_delta_rule's job): one token per sequence, the
// state read and written in place.
void LaunchGdnRecurrentDecode(const GdnShape& s, const void* qkv, const float* g, const float* beta, void* o,
                              float* state, cudaStream_t stream);

// x <- a x + b over n floats (the inputs' gates from uniform fills).
void LaunchGdnAffineF32(float* x, std::int64_t n, float a, float b, cudaStream_t stream);

// Shared memory the larger of the prefill scan's two CTAs needs (bytes).
std::size_t GdnChunkSmemBytes();

}  // namespace servecast::cuda
