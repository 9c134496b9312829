#pragma once

// Causal prefill attention through cuDNN's fused flash-attention (SDPA) engine,
// built with the cuDNN 9 backend graph API (no frontend library): an operation
// graph of
//   S = Q·Kᵀ (fp32) → S·scale → causal mask (row ≥ col) [→ window mask
//   (col + window > row)] → softmax (max, exp, sum, stats = max + log sum) →
//   P (bf16) → O = P·V
// which cuDNN's heuristics map onto its fused attention kernels.
//
// Layouts (row-major, "bshd"): q and o [batch][seq][num_heads][head_dim], k and v
// [batch][seq][num_kv_heads][head_dim], bf16. Query head h reads KV head
// h / (num_heads / num_kv_heads).

#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace servecast::cuda {

struct SdpaShape {
  std::int64_t batch = 1;
  std::int64_t seq = 1;
  std::int64_t num_heads = 1;
  std::int64_t num_kv_heads = 1;
  std::int64_t head_dim = 128;
  std::int64_t window = 0;  // 0: full causal
};

// Device buffers of one call.
struct SdpaBuffers {
  void* q = nullptr;
  void* k = nullptr;
  void* v = nullptr;
  void* o = nullptr;
  float* stats = nullptr;  // [batch][num_heads][seq] (the softmax log-sum-exp)
};

// A finalized cuDNN execution plan for one shape, plus the variant packs bound
// to each set of buffers (one per rotated copy).
class CudnnSdpa {
 public:
  ~CudnnSdpa();
  CudnnSdpa(const CudnnSdpa&) = delete;
  CudnnSdpa& operator=(const CudnnSdpa&) = delete;

  // Builds the graph and the first engine configuration (in heuristics order)
  // that finalizes. On failure returns null and sets `why` (cuDNN's status and
  // last error message); `unsupported` is true when cuDNN answered that no engine
  // supports the graph (the case is then not_supported, not failed).
  static std::unique_ptr<CudnnSdpa> Build(const SdpaShape& shape, std::string& why, bool& unsupported);

  std::size_t workspace_bytes() const { return workspace_bytes_; }
  // The engine that runs (for kernel_source), e.g. "cudnn_sdpa:engine=3".
  const std::string& kernel_source() const { return kernel_source_; }

  // Binds one set of buffers (and the workspace); returns its index.
  int Bind(const SdpaBuffers& buffers, void* workspace);
  // Enqueues one call on `stream` with the buffers of binding `index`.
  void Run(int index, cudaStream_t stream) const;

 private:
  CudnnSdpa() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::size_t workspace_bytes_ = 0;
  std::string kernel_source_;
};

// cuDNN's runtime version as "9.14.0".
std::string CudnnVersionString();

}  // namespace servecast::cuda
