#pragma once

// One projection of a module op (y = x · Wᵀ, optionally batched over heads with
// strided operands) through cuBLASLt, with its own deterministic weights: the
// building block of ops that time a whole layer module (the DSA module: dsa.cpp).
// bfloat16, or fp8_block (DeepSeek's 128x128 weight blocks, the activations
// quantized per token and 128-column group inside Run, cuBLASLt's BLK128x128 /
// VEC128 scale modes). The algorithm is cuBLASLt's first heuristic candidate that
// runs (no autotune: the gemm op's tables hold autotuned GEMMs). The host accessors
// give what the GEMM consumed, for reference checks.

#include <cublasLt.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/device.h"
#include "backends/cuda/gemm_internal.h"

namespace servecast::cuda {

struct LinearSpec {
  bool fp8_block = false;
  std::int64_t rows = 1;  // tokens (x and y rows); fp8_block: a multiple of 4
  std::int64_t n = 1;     // output columns (weight rows)
  std::int64_t k = 1;     // reduction (fp8_block: a multiple of 128)
  std::int64_t batch = 1; // heads of a batched projection (bf16 only), weights [batch][n][k]
  std::int64_t ldx = 0, stride_x = 0;  // x row stride (0: k) and batch stride (elements)
  std::int64_t ldy = 0, stride_y = 0;  // y row stride (0: n) and batch stride
  float weight_range = 0;              // weights uniform in ±range (0: 1/sqrt(k))
};

class Linear {
 public:
  Linear(const LinearSpec& spec, std::uint64_t seed, cudaStream_t stream);
  Linear(const Linear&) = delete;
  Linear& operator=(const Linear&) = delete;

  // Picks the algorithm on the real buffers (x, y as Run gets them): the message
  // when no heuristic candidate runs.
  std::optional<std::string> Choose(const void* x, void* y, cudaStream_t stream);
  // Enqueues (the activation quantization and) the matmul; graph-capturable.
  void Run(const void* x, void* y, cudaStream_t stream) const;
  // "cublaslt:algo=.." of the chosen algorithm.
  std::string Describe() const;
  double weight_bytes() const;

  // Host: weight row j (output column j) of head b, dequantized.
  std::vector<double> WeightRow(std::int64_t b, std::int64_t j, cudaStream_t stream) const;
  // Host: the row r of head b of x as the GEMM consumed it (bf16, or the e4m3 values
  // times their group scales after the last Run).
  std::vector<double> InputRow(const void* x, std::int64_t b, std::int64_t r, cudaStream_t stream) const;
  const LinearSpec& spec() const { return s_; }

 private:
  LinearSpec s_;
  DeviceBuffer w_, w_scale_, xq_, x_scale_;
  std::int64_t scale_ld_ = 0;
  gemm::LtMatmul mm_;
  cublasLtMatmulAlgo_t algo_{};
  bool chosen_ = false;
};

}  // namespace servecast::cuda
