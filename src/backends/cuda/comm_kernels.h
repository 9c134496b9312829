#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace servecast::cuda {

// The value rank `rank` puts at index `i` of its input buffer in the collective
// checks: a small integer in [-4, 4], so that sums over up to 8 ranks are exact in
// bfloat16 and int8, and different ranks' data differ.
inline int CommPattern(int rank, std::uint64_t i) { return static_cast<int>((i * 7 + static_cast<std::uint64_t>(rank) * 3) % 9) - 4; }

// Fills dst[0..n) with CommPattern(rank, i) as bfloat16 (elem_bytes 2) or int8 (1).
void FillCommPattern(void* dst, std::size_t n, int elem_bytes, int rank, cudaStream_t stream);

}  // namespace servecast::cuda
