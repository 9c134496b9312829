#pragma once

// The host reference of the short causal convolution (short_conv_kernels.h), shared by
// the ops that run it before their scan (gdn, mamba2), and the strided download they
// use to read sampled rows and columns back.

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/attention_check.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/short_conv_kernels.h"

namespace servecast::cuda {

// Rows [row0, row0 + n) x columns [col0, col0 + width) of a row-major [*][pitch]
// device tensor, to the host.
template <class T>
std::vector<T> DownloadBlock(const void* dev, std::int64_t row0, std::int64_t n, std::int64_t pitch, std::int64_t col0,
                             std::int64_t width, cudaStream_t st) {
  std::vector<T> out(static_cast<std::size_t>(n * width));
  const auto* base = static_cast<const T*>(dev) + row0 * pitch + col0;
  SC_CUDA_CHECK(cudaMemcpy2DAsync(out.data(), static_cast<std::size_t>(width) * sizeof(T), base,
                                  static_cast<std::size_t>(pitch) * sizeof(T), static_cast<std::size_t>(width) * sizeof(T),
                                  static_cast<std::size_t>(n), cudaMemcpyDeviceToHost, st));
  SC_CUDA_CHECK(cudaStreamSynchronize(st));
  return out;
}

// The windows of sequences `seqs` (bf16 bits, [K - 1][C] each), e.g. before a decode
// call updates them in place.
std::vector<std::vector<std::uint16_t>> DownloadWindows(const ShortConvShape& s, const void* window,
                                                        const std::vector<std::int64_t>& seqs, cudaStream_t st);

// One call of the convolution against a double-precision reference, in every channel:
// prefill at positions 0, the first full window, the last and one drawn from `seed`
// of each sequence in `seqs`; decode at each one's token from `window0` (its window
// before the call, DownloadWindows). Output tolerance 2^-8 |ref| + 2^-16 sum_j |w_j x_j|
// (+ |bias|) + 1e-6 into `out`; the window after the call must hold the exact last
// K - 1 inputs (zeros before the sequence) into `win`. `bias` may be null.
void CheckShortConv(const ShortConvShape& s, bool prefill, const void* x, const void* w, const void* bias,
                    const void* y, const void* window, const std::vector<std::int64_t>& seqs,
                    const std::vector<std::vector<std::uint16_t>>& window0, std::uint64_t seed, RefCheck& out,
                    RefCheck& win, cudaStream_t st);

// The rule CheckShortConv applies, for the failure messages.
inline constexpr const char* kShortConvRule = "2^-8 |ref| + 2^-16 (sum_j |w_j x_j| + |bias|) + 1e-6 (bf16 output, fp32 sums)";
inline constexpr const char* kShortConvWindowRule =
    "the window: exact copies of the last d_conv - 1 inputs (zeros before the sequence)";

}  // namespace servecast::cuda
