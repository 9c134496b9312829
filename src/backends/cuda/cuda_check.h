#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <exception>
#include <optional>
#include <string>

#include "collect/op.h"
#include "collect/phases.h"
#include "core/error.h"

namespace servecast::cuda {

// A failed CUDA runtime or library call: the statement, where it was, and the
// library's own error name. `sticky` marks errors that poison the CUDA context
// (illegal address, launch failure, ...): the worker must exit after recording.
class CudaError : public Error {
 public:
  CudaError(const std::string& message, bool sticky, bool out_of_memory)
      : Error(message), sticky_(sticky), out_of_memory_(out_of_memory) {}
  bool sticky() const { return sticky_; }
  bool out_of_memory() const { return out_of_memory_; }

 private:
  bool sticky_;
  bool out_of_memory_;
};

[[noreturn]] void ThrowCuda(cudaError_t err, const char* stmt, const char* file, int line);
[[noreturn]] void ThrowCublas(cublasStatus_t st, const char* stmt, const char* file, int line);

// The CUDA backend's one mapping of errors to a case's outcome, for the phase
// driver: a CudaError (CUDA runtime, cuBLASLt, cuDNN, NCCL) that is out of memory ->
// failed/resource "CudaOutOfMemory"; any other -> failed/`library_class` "CudaError"
// (framework_bug where a vendor library rejects or breaks on a valid case,
// collector_bug where the failing calls are servecast's own kernels); sticky ->
// poisons the context. Nothing for an exception that is not a CudaError.
std::optional<collect::PhaseError> ClassifyCudaError(const std::exception& e, collect::FailureClass library_class);

// Runs a CUDA case's phases (collect::RunPhases) with ClassifyCudaError.
collect::CaseResult RunCudaPhases(collect::CasePhases& phases, collect::FailureClass library_class,
                                  const collect::PhaseOptions& opt = {});

}  // namespace servecast::cuda

// Every CUDA runtime and cuBLASLt call goes through one of these.
#define SC_CUDA_CHECK(stmt)                                                               \
  do {                                                                                    \
    cudaError_t sc_err_ = (stmt);                                                         \
    if (sc_err_ != cudaSuccess) ::servecast::cuda::ThrowCuda(sc_err_, #stmt, __FILE__, __LINE__); \
  } while (0)

#define SC_CUBLAS_CHECK(stmt)                                                                  \
  do {                                                                                         \
    cublasStatus_t sc_st_ = (stmt);                                                            \
    if (sc_st_ != CUBLAS_STATUS_SUCCESS) ::servecast::cuda::ThrowCublas(sc_st_, #stmt, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: the launch error (bad configuration) at once.
#define SC_CUDA_CHECK_LAUNCH() SC_CUDA_CHECK(cudaGetLastError())
