#include "backends/cuda/cuda_check.h"

namespace servecast::cuda {
namespace {

bool IsSticky(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

}  // namespace

void ThrowCuda(cudaError_t err, const char* stmt, const char* file, int line) {
  std::string msg = std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ") from `" + stmt +
                    "` at " + file + ":" + std::to_string(line);
  throw CudaError(msg, IsSticky(err), err == cudaErrorMemoryAllocation);
}

void ThrowCublas(cublasStatus_t st, const char* stmt, const char* file, int line) {
  std::string msg = std::string(cublasLtGetStatusName(st)) + " (" + cublasLtGetStatusString(st) + ") from `" + stmt +
                    "` at " + file + ":" + std::to_string(line);
  bool sticky = st == CUBLAS_STATUS_EXECUTION_FAILED || st == CUBLAS_STATUS_INTERNAL_ERROR;
  throw CudaError(msg, sticky, st == CUBLAS_STATUS_ALLOC_FAILED);
}

collect::CaseResult CaseResultFromCudaError(const CudaError& e, collect::FailureClass library_class) {
  collect::CaseResult r;
  if (e.out_of_memory()) {
    r = collect::CaseResult::Failure(collect::Disposition::kFailed, collect::FailureClass::kResource, "CudaOutOfMemory",
                                     e.what());
  } else {
    r = collect::CaseResult::Failure(collect::Disposition::kFailed, library_class, "CudaError", e.what());
  }
  // A sticky error leaves the context unusable: record, then restart the worker.
  r.poisoned = e.sticky();
  return r;
}

}  // namespace servecast::cuda
