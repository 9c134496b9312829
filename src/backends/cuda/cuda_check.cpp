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

std::optional<collect::PhaseError> ClassifyCudaError(const std::exception& e, collect::FailureClass library_class) {
  const auto* cuda = dynamic_cast<const CudaError*>(&e);
  if (!cuda) return std::nullopt;
  collect::PhaseError out;
  if (cuda->out_of_memory()) {
    out.failure_class = collect::FailureClass::kResource;
    out.error_type = "CudaOutOfMemory";
  } else {
    out.failure_class = library_class;
    out.error_type = "CudaError";
  }
  // A sticky error leaves the context unusable: record, then restart the worker.
  out.poisons_context = cuda->sticky();
  return out;
}

collect::CaseResult RunCudaPhases(collect::CasePhases& phases, collect::FailureClass library_class,
                                  const collect::PhaseOptions& opt) {
  return collect::RunPhases(phases, opt,
                            [library_class](const std::exception& e) { return ClassifyCudaError(e, library_class); });
}

}  // namespace servecast::cuda
