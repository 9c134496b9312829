#include "backends/cuda/device.h"

#include "backends/cuda/cuda_check.h"

namespace servecast::cuda {
namespace {

DeviceContext* g_context = nullptr;

}  // namespace

void InitDevice(int device) {
  if (g_context && g_context->device == device) return;
  auto* ctx = new DeviceContext();
  ctx->device = device;
  SC_CUDA_CHECK(cudaSetDevice(device));
  SC_CUDA_CHECK(cudaGetDeviceProperties(&ctx->prop, device));
  int l2 = 0;
  SC_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  ctx->l2_bytes = static_cast<std::size_t>(l2);
  SC_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
  SC_CUBLAS_CHECK(cublasLtCreate(&ctx->lt));
  ctx->workspace_bytes = 64u << 20;  // what serving engines give cuBLASLt on Hopper
  SC_CUDA_CHECK(cudaMalloc(&ctx->workspace, ctx->workspace_bytes));
  g_context = ctx;
}

DeviceContext& Context() {
  if (!g_context) throw Error("CUDA device context used before InitDevice");
  return *g_context;
}

void MemInfo(std::size_t& free_bytes, std::size_t& total_bytes) { SC_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes)); }

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) SC_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);  // never throws from a destructor; a sticky error surfaces on the next checked call
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

bool CurrentDeviceIsSm90() {
  int dev = 0, major = 0, minor = 0;
  SC_CUDA_CHECK(cudaGetDevice(&dev));
  SC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  SC_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  return major == 9 && minor == 0;
}

}  // namespace servecast::cuda
