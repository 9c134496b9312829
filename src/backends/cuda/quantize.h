#pragma once

// servecast's fp8 (e4m3) activation and weight quantization kernels, and the small
// device helpers the GEMM-family ops use around them. Every function enqueues on
// `stream`, never synchronizes, and checks its launch (CudaError on failure), so the
// timed ones can be captured in a CUDA graph.
//
// Scales are dequantization multipliers (real value ≈ e4m3 value × scale), the
// convention cuBLASLt's A/B scale pointers use. A scale is max(amax / 448, kFp8MinScale),
// and values are quantized as e4m3_satfinite(x × (1 / scale)), rounding to nearest even.

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace servecast::cuda {

inline constexpr float kFp8E4m3Max = 448.0f;
// The smallest scale a quantizer produces (an all-zero tensor still gets a finite,
// invertible scale).
inline constexpr float kFp8MinScale = 1.0f / (448.0f * 512.0f);

// --- per-tensor (the `fp8` GEMM row and compute_scale) ---------------------------

// Dynamic per-tensor scale: amax of the n bf16 values of `x` -> *scale. `state` is two
// device words that must be zero before the first call (cudaMemset at set-up); the
// kernel's last block consumes and re-zeroes them, so calls need no memset in between.
// One kernel: quant_fp8_tensor_amax.
void QuantFp8TensorAmax(const void* x_bf16, std::size_t n, unsigned* state, float* scale, cudaStream_t stream);
// Static per-tensor quantization with the device scale `*scale`: q = e4m3(x / scale).
// One kernel: quant_fp8_tensor_apply.
void QuantFp8TensorApply(const void* x_bf16, std::size_t n, const float* scale, void* q_e4m3, cudaStream_t stream);

// --- per-token-group 1x128 (the `fp8_block` GEMM row's activations) --------------

// For every row i < rows_padded and 128-column group g of the row-major
// [rows_padded x k] bf16 matrix: s = max(amax / 448, min) written to
// scales[g * rows_padded + i] (token index contiguous, cuBLASLt's VEC128_32F layout),
// q[i, 128g .. 128g+127] = e4m3(x / s). Requires k % 128 == 0 and rows_padded % 4 == 0.
// One kernel: quant_fp8_group128.
void QuantFp8Group128(const void* x_bf16, std::int64_t rows_padded, std::int64_t k, void* q_e4m3, float* scales,
                      cudaStream_t stream);

// --- 128x128 weight blocks (the `fp8_block` GEMM row's weights; set-up only) ------

// For every 128x128 block (rb, kb) of the row-major [rows x k] bf16 weight: s = max(amax / 448,
// min) written to scales[rb * scale_ld + kb] (cuBLASLt's BLK128x128_32F layout with the K-block
// index contiguous; scale_ld >= ceil(k / 128), padded to a multiple of 4), q = e4m3(w / s).
// Requires k % 128 == 0; rows may be ragged. One kernel: quant_fp8_block128x128.
void QuantFp8Block128x128(const void* w_bf16, std::int64_t rows, std::int64_t k, std::int64_t scale_ld, void* q_e4m3,
                          float* scales, cudaStream_t stream);

// --- checking and test-data helpers (never timed) ---------------------------------

// amax of n bf16 values by a deliberately different code path (scalar loads, one
// atomic per thread) into *amax, for checking QuantFp8TensorAmax.
void AmaxBf16Reference(const void* x_bf16, std::size_t n, float* amax, cudaStream_t stream);
// Counts the non-finite values (NaN, inf) among n bf16 values into *count (zeroed first).
void CountNonFiniteBf16(const void* x_bf16, std::size_t n, unsigned long long* count, cudaStream_t stream);
// Counts the e4m3 NaN bytes (0x7F, 0xFF; 0xFF is also FillPoison's pattern) among n
// bytes into *count (zeroed first): a saturating quantizer never writes them.
void CountNanE4m3(const void* q, std::size_t n, unsigned long long* count, cudaStream_t stream);
// Multiplies x[i, c] of a row-major [rows x cols] bf16 matrix by the power of two
// 2^(((i / row_block) * 5 + (c / 128) * 3 + salt) % 7 - 3), so that rows, 128-column groups
// and 128x128 blocks get different magnitudes (a scale applied to the wrong block shows).
// Exact in bf16.
void ScaleBf16ByBlockPattern(void* x_bf16, std::int64_t rows, std::int64_t cols, std::int64_t row_block, int salt,
                             cudaStream_t stream);

// Host: the values of the 256 e4m3 bytes (NaN for 0x7F / 0xFF), built at compile
// time: the reference checks decode tens of millions of bytes per MoE case, and a
// per-byte ldexp there cost seconds.
constexpr std::array<float, 256> MakeE4m3Values() {
  std::array<float, 256> t{};
  for (int b = 0; b < 256; ++b) {
    const int e = (b >> 3) & 0xF, mant = b & 7;
    float v = 0;
    if (e == 15 && mant == 7) {
      v = std::numeric_limits<float>::quiet_NaN();
    } else {
      // normal: (8 + mant) * 2^(e - 10); subnormal (e = 0): mant * 2^-9
      float p = e == 0 ? 1.0f / 512 : 1.0f / 1024;
      for (int i = 0; i < e; ++i) p *= 2;
      v = static_cast<float>(e == 0 ? mant : 8 + mant) * p;
    }
    t[static_cast<std::size_t>(b)] = (b >> 7) ? -v : v;
  }
  return t;
}
inline constexpr std::array<float, 256> kE4m3Values = MakeE4m3Values();
static_assert(kE4m3Values[0x38] == 1.0f && kE4m3Values[0xB8] == -1.0f && kE4m3Values[0x7E] == 448.0f &&
              kE4m3Values[0x01] == 1.0f / 512 && kE4m3Values[0x08] == 1.0f / 64 && kE4m3Values[0x0F] == 15.0f / 512);
inline float E4m3ToFloat(std::uint8_t b) {
  return kE4m3Values[b];
}
// Host: the spacing of e4m3 values at |v| (the spacing of the binade |v| lies in; 2^-9
// among subnormals).
double E4m3Ulp(double v);

}  // namespace servecast::cuda
