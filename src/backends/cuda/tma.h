#pragma once

// Host side of the tensor memory accelerator: a tiled tensor map over a bf16 tensor in
// global memory (cuTensorMapEncodeTiled, reached through the runtime's driver entry
// point so that the backend links no libcuda). The device side is tma.cuh.

#include <cuda.h>

namespace servecast::cuda {

// A bf16 tensor of `rank` (2..5) dimensions, innermost first: `dims` elements each,
// `strides_bytes` the byte strides of dimensions 1..rank-1 (multiples of 16); boxes of
// `box` elements, laid out in shared memory in the 128-byte swizzle (the innermost box
// extent is 64 elements: 128 bytes); reads past the tensor's ends are zero. L2
// promotion of `promotion_bytes` (0, 64, 128 or 256). Throws Error naming `who` when
// the driver lacks the entry point or refuses the map.
CUtensorMap TensorMapBf16Swizzle128(const char* who, const void* base, int rank, const cuuint64_t* dims,
                                    const cuuint64_t* strides_bytes, const cuuint32_t* box, int promotion_bytes);

}  // namespace servecast::cuda
