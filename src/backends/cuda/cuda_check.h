#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "collect/op.h"
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

// Turns a CudaError into the case's outcome: out of memory -> failed/resource;
// an error of a vendor library on a valid case -> failed/framework_bug; a sticky
// error additionally marks the result poisoned so the worker restarts.
collect::CaseResult CaseResultFromCudaError(const CudaError& e, collect::FailureClass library_class);

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
