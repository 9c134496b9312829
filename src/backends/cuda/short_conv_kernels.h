#pragma once

// The short causal convolution of the recurrent layers (Gated DeltaNet's over q, k, v;
// Mamba2's over x, B, C), depthwise per channel with SiLU, as the engines run it
// after the in_proj GEMM (causal_conv1d_fn in prefill, causal_conv1d_update in
// decode). Shared by the gdn and mamba2 ops; short_conv_check.h has its reference.
//
// Layouts (T = batch x seq tokens, a sequence's tokens consecutive):
//   x, y    [T][C] bf16, C a multiple of 8
//   w       [C][K] bf16, K = d_conv (1 <= K <= kShortConvMax)
//   bias    [C] bf16, or null (no bias: Gated DeltaNet)
//   window  [batch][K - 1][C] bf16: each sequence's last K - 1 inputs, oldest first

#include <cuda_runtime.h>

#include <cstdint>

namespace servecast::cuda {

inline constexpr int kShortConvMax = 8;  // largest d_conv the kernels take
inline constexpr int kShortConvVec = 8;  // C must be a multiple of this

struct ShortConvShape {
  std::int64_t batch = 1;
  std::int64_t seq = 1;  // tokens per sequence (1 in decode)
  std::int64_t channels = 8;
  std::int64_t conv = 4;  // d_conv
  std::int64_t tokens() const { return batch * seq; }
};

// Prefill: y[t][c] = silu(bias[c] + sum_j w[c][j] x[t - K + 1 + j][c]), inputs before
// the sequence's first token 0 (a fresh prefill); writes each sequence's last K - 1
// inputs (zeros where it is shorter) into the window.
void LaunchShortConvPrefill(const ShortConvShape& s, const void* x, const void* w, const void* bias, void* y,
                            void* window, cudaStream_t stream);

// Decode, one token per sequence: y[b][c] = silu(bias[c] + sum_{j<K-1} w[c][j]
// window[b][j][c] + w[c][K-1] x[b][c]), then the window shifts by one (x becomes its
// newest entry), in place.
void LaunchShortConvDecode(const ShortConvShape& s, const void* x, const void* w, const void* bias, void* y,
                           void* window, cudaStream_t stream);

}  // namespace servecast::cuda
