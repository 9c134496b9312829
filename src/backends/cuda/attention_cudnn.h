#pragma once

// Causal prefill attention through cuDNN's fused flash-attention (SDPA) engine,
// built with the cuDNN 9 backend graph API (no frontend library).
//
// bf16 (SdpaDtype::kBf16): an operation graph of
//   S = Q·Kᵀ (fp32) → S·scale → causal mask (row ≥ col) [→ window mask
//   (col + window > row)] → softmax (max, exp, sum, stats = max + log sum) →
//   P (bf16) → O = P·V
// which cuDNN's heuristics map onto its fused attention kernels. The window mask is
// first built as cudnn-frontend builds it before cuDNN 9.21 (fresh FLOAT row and
// column indices of the causal-masked scores, + window along axis 3, CMP_GT, select),
// and where that does not build, as a select on the causal INT32 indices;
// kernel_source says which (",window=band_chain" / ",window=causal_index").
//
// fp8 (SdpaDtype::kFp8, Hopper and newer): Q, K, V fp8 e4m3 with per-tensor
// dequantization multipliers, in the node order cuDNN's fp8 flash-attention
// forward engine matches (the one cuDNN's frontend sdpa_fp8 node lowers to):
//   S = Q·Kᵀ (fp32) → ·attn_scale (by value) → ·descale_q → ·descale_k → causal
//   mask [→ window mask] → softmax with stats → amax_s = max|P| (output) →
//   P·scale_s → P8 (e4m3, virtual) → P8·V (fp32) → ·descale_s → ·descale_v (O in
//   real units) → amax_o = max|O| (output) → ·scale_o → O.
// O: Build first asks for a bf16 O with scale_o the by-value constant 1 (the
// graph TransformerEngine's fp8 "current scaling" attention builds); where cuDNN
// does not build that graph, it builds the documented e4m3 O (scale_o a device
// scalar). output_fp8() and kernel_source() ("o=bf16" / "o=fp8") say which.
// descale_* / scale_* are device fp32 scalars (fp32 [1,1,1,1]); amax_s and amax_o
// are device fp32 scalars written by the call.
//
// Layouts (row-major, "bshd"): q [batch][seq][num_heads][head_dim], k
// [batch][seq][num_kv_heads][head_dim], v [batch][seq][num_kv_heads][head_dim_v], o
// [batch][seq][num_heads][head_dim_v], bf16 or e4m3. Query head h reads KV head
// h / (num_heads / num_kv_heads).

#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace servecast::cuda {

enum class SdpaDtype { kBf16, kFp8 };

struct SdpaShape {
  std::int64_t batch = 1;
  std::int64_t seq = 1;
  std::int64_t num_heads = 1;
  std::int64_t num_kv_heads = 1;
  std::int64_t head_dim = 128;  // Q and K (the softmax scale is 1/sqrt(head_dim))
  std::int64_t window = 0;      // 0: full causal
  SdpaDtype dtype = SdpaDtype::kBf16;
  std::int64_t head_dim_v = 0;  // V and O; 0: head_dim (MLA prefill: 128 with Q/K 192)
};

// The fp8 graph's scalars, each a device fp32 (16-byte aligned). Real values are
// fp8 value × descale; P8 = e4m3(P × scale_s) with descale_s = 1 / scale_s;
// an e4m3 O holds O_real × scale_o (scale_o is not read for a bf16 O).
struct SdpaFp8Scalars {
  const float* descale_q = nullptr;
  const float* descale_k = nullptr;
  const float* descale_v = nullptr;
  const float* descale_s = nullptr;
  const float* scale_s = nullptr;
  const float* scale_o = nullptr;
  float* amax_s = nullptr;  // written: max |P| (softmax output, before scale_s)
  float* amax_o = nullptr;  // written: max |O| (before scale_o)
};

// Device buffers of one call.
struct SdpaBuffers {
  void* q = nullptr;
  void* k = nullptr;
  void* v = nullptr;
  void* o = nullptr;
  float* stats = nullptr;  // [batch][num_heads][seq] (the softmax log-sum-exp)
  SdpaFp8Scalars fp8;      // SdpaDtype::kFp8 only
};

// Test hooks for the fp8 graph (GPU tests bisecting its wrong outputs): how a graph
// built with them differs from the default. The op builds with the defaults.
struct SdpaFp8Options {
  bool virtual_stats = false;  // the softmax stats a virtual tensor (an inference graph: not written)
  int skip_configs = 0;        // pass over the first n engine configurations that finalize
  // The O scaling listed before the amax of O in the operation graph (the order
  // cudnn-frontend's matmul_fp8 node emits them; the same operations either way).
  bool scale_o_first = false;
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
  // supports the graph (the case is then not_supported, not failed). `fp8_options`
  // (tests only) changes the fp8 graph; the bf16 graph ignores it.
  static std::unique_ptr<CudnnSdpa> Build(const SdpaShape& shape, std::string& why, bool& unsupported,
                                          const SdpaFp8Options& fp8_options = {});

  std::size_t workspace_bytes() const { return workspace_bytes_; }
  // The engine that runs (for kernel_source), e.g. "cudnn_sdpa:engine=3", or for
  // fp8 "cudnn_sdpa_fp8:engine=5,o=bf16" ("o=fp8" for an e4m3 O).
  const std::string& kernel_source() const { return kernel_source_; }
  // fp8 only: O is e4m3 (scaled by scale_o) rather than bf16.
  bool output_fp8() const { return output_fp8_; }
  // fp8 with an e4m3 O only: why cuDNN refused the bf16-output graph (empty otherwise).
  const std::string& bf16_output_refusal() const { return bf16_output_refusal_; }

  // Binds one set of buffers (and the workspace); returns its index.
  int Bind(const SdpaBuffers& buffers, void* workspace);
  // Enqueues one call on `stream` with the buffers of binding `index`.
  void Run(int index, cudaStream_t stream) const;

 private:
  CudnnSdpa() = default;
  // One output type: for fp8, an e4m3 O when `output_fp8`, else a bf16 O (BuildGraph,
  // each window form in turn).
  static std::unique_ptr<CudnnSdpa> BuildOne(const SdpaShape& shape, bool output_fp8, std::string& why,
                                             bool& unsupported, const SdpaFp8Options& fp8_options);
  // One graph: `window_chain` builds a sliding window as its own index chain on the
  // causal select's output (cudnn-frontend's form), otherwise as a second select on the
  // causal indices. BuildOne tries the first, then the second.
  static std::unique_ptr<CudnnSdpa> BuildGraph(const SdpaShape& shape, bool output_fp8, bool window_chain,
                                               std::string& why, bool& unsupported,
                                               const SdpaFp8Options& fp8_options);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::size_t workspace_bytes_ = 0;
  std::string kernel_source_;
  bool output_fp8_ = false;
  std::string bf16_output_refusal_;
};


// cuDNN's runtime version as "9.14.0".
std::string CudnnVersionString();

}  // namespace servecast::cuda
