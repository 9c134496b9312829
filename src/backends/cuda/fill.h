#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/bf16.h"

namespace servecast::cuda {

// Deterministic pseudo-random fills on the device (a counter-based hash of
// (seed, index)), uniform in [-scale, scale). Never zeros: timing on zeros
// flatters tensor cores, and zeros hide unwritten outputs.
void FillUniformBf16(void* dst, std::size_t n, std::uint64_t seed, float scale, cudaStream_t stream);
void FillUniformF32(float* dst, std::size_t n, std::uint64_t seed, float scale, cudaStream_t stream);
// Fills with a constant bit pattern (e.g. 0xFF bytes = NaN for bf16/f32) so that
// unwritten outputs are caught by the reference check.
void FillPoison(void* dst, std::size_t bytes, cudaStream_t stream);

// Host-side bf16 helpers (round to nearest even), from core.
using ::servecast::Bf16ToF32;
using ::servecast::F32ToBf16;

}  // namespace servecast::cuda
