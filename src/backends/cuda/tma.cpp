#include "backends/cuda/tma.h"

#include <cuda_runtime.h>

#include <string>

#include "backends/cuda/cuda_check.h"
#include "core/error.h"

namespace servecast::cuda {

CUtensorMap TensorMapBf16Swizzle128(const char* who, const void* base, int rank, const cuuint64_t* dims,
                                    const cuuint64_t* strides_bytes, const cuuint32_t* box, int promotion_bytes) {
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static const Encode encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    SC_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    return found == cudaDriverEntryPointSuccess ? reinterpret_cast<Encode>(fn) : nullptr;
  }();
  if (!encode)
    throw Error(std::string(who) + ": the driver has no cuTensorMapEncodeTiled (needed by the TMA ring)");
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  const CUtensorMapL2promotion promo = promotion_bytes >= 256   ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                                       : promotion_bytes >= 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B
                                       : promotion_bytes >= 64  ? CU_TENSOR_MAP_L2_PROMOTION_L2_64B
                                                                : CU_TENSOR_MAP_L2_PROMOTION_NONE;
  CUtensorMap map{};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, static_cast<cuuint32_t>(rank),
                            const_cast<void*>(base), dims, strides_bytes, box, element_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, promo,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::string shape;
    for (int d = rank - 1; d >= 0; --d) shape += std::to_string(dims[d]) + (d ? " x " : "");
    throw Error(std::string(who) + ": cuTensorMapEncodeTiled failed (CUresult " + std::to_string(static_cast<int>(r)) +
                ") for a bf16 tensor of " + shape);
  }
  return map;
}

}  // namespace servecast::cuda
