#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

namespace servecast::cuda {

// Per-worker device state, created once by the backend's InitWorker.
struct DeviceContext {
  int device = 0;
  cudaDeviceProp prop{};
  std::size_t l2_bytes = 0;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;  // cuBLASLt workspace
  std::size_t workspace_bytes = 0;
};

// Initializes the context for `device` (idempotent within a process).
void InitDevice(int device);
// The worker's context; throws Error when InitDevice has not run.
DeviceContext& Context();

// Whether the current device is compute capability 9.0 (Hopper), where the sm_90a
// kernels (wgmma) run.
bool CurrentDeviceIsSm90();

// Free and total device memory in bytes.
void MemInfo(std::size_t& free_bytes, std::size_t& total_bytes);

// Owning device allocation (cudaMalloc / cudaFree).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace servecast::cuda
