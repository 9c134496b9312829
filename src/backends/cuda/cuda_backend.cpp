#include "backends/cuda/cuda_backend.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include "backends/cuda/comm_group.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/nvml.h"

namespace servecast::cuda {
namespace {

// "13.0" from CUDA's 13000, "13.1" from cuBLASLt's 130100, ...
std::string MajorMinor(long long v, long long major_div, long long minor_div) {
  return std::to_string(v / major_div) + "." + std::to_string((v % major_div) / minor_div);
}

std::string Full(long long v, long long major_div, long long minor_div) {
  return MajorMinor(v, major_div, minor_div) + "." + std::to_string(v % minor_div);
}

int DeviceCount() {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw StartupError(std::string("cuda backend: no usable CUDA device (") + cudaGetErrorName(err) + ": " +
                       cudaGetErrorString(err) + "); expected an NVIDIA GPU with a driver for CUDA 13");
  }
  if (n == 0) throw StartupError("cuda backend: no CUDA device is visible; expected at least one GPU");
  return n;
}

}  // namespace

collect::RuntimeInfo CudaBackend::DetectRuntime() const {
  DeviceCount();
  int runtime = 0, driver = 0;
  SC_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  SC_CUDA_CHECK(cudaDriverGetVersion(&driver));
  cudaDeviceProp prop{};
  SC_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  long long lt = static_cast<long long>(cublasLtGetVersion());
  long long dnn = static_cast<long long>(cudnnGetVersion());
  int nccl = 0;
  if (ncclGetVersion(&nccl) != ncclSuccess) throw StartupError("cuda backend: ncclGetVersion failed");

  collect::RuntimeInfo rt;
  rt.backend = "cuda";
  rt.version = MajorMinor(runtime, 1000, 10) + "-cublaslt" + MajorMinor(lt, 10000, 100) + "-cudnn" +
               MajorMinor(dnn, 10000, 100) + "-nccl" + MajorMinor(nccl, 10000, 100);
  rt.device_name = prop.name;
  rt.sm = prop.major * 10 + prop.minor;
  rt.arch = "sm" + std::to_string(rt.sm);
  char bus[32] = {0};
  SC_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof(bus), 0));
  std::string drv = Nvml::ForPciBusId(bus).DriverVersion();
  rt.driver = drv.empty() ? "cuda-driver-api-" + MajorMinor(driver, 1000, 10) : drv;
  rt.libraries["cuda_runtime"] = Full(runtime, 1000, 10);
  rt.libraries["cuda_driver_api"] = Full(driver, 1000, 10);
  rt.libraries["cublaslt"] = Full(lt, 10000, 100);
  rt.libraries["cudnn"] = Full(dnn, 10000, 100);
  rt.libraries["nccl"] = Full(nccl, 10000, 100);
  if (!drv.empty()) rt.libraries["driver"] = drv;
  if (Nvml::ForPciBusId(bus).available()) rt.features.insert("nvml");
  return rt;
}

std::vector<int> CudaBackend::DefaultDevices() const {
  int n = DeviceCount();
  std::vector<int> out;
  for (int i = 0; i < n; ++i) out.push_back(i);
  return out;
}

std::string CudaBackend::DeviceProblem(int device) const {
  const int n = DeviceCount();
  if (device < n) return "";
  return "device " + std::to_string(device) + " is not present: this machine shows " + std::to_string(n) +
         " CUDA device" + (n == 1 ? " (index 0)" : "s (indices 0-" + std::to_string(n - 1) + ")") +
         ", counting only those CUDA_VISIBLE_DEVICES leaves visible";
}

std::string CudaBackend::DefaultSystem(const collect::RuntimeInfo&) const { return ""; }

void CudaBackend::InitWorker(int device) const { InitDevice(device); }

std::string CudaBackend::NewGroupId() const { return NewNcclGroupId(); }

}  // namespace servecast::cuda
