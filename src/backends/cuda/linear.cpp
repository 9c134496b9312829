// One projection of a module op through cuBLASLt (linear.h).

#include "backends/cuda/linear.h"

#include <cmath>
#include <string>
#include <vector>

#include "backends/cuda/attention_check.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/fill.h"
#include "backends/cuda/quantize.h"
#include "core/error.h"

namespace servecast::cuda {

namespace {
std::uint64_t U(std::int64_t v) { return static_cast<std::uint64_t>(v); }
}  // namespace

Linear::Linear(const LinearSpec& spec, std::uint64_t seed, cudaStream_t st) : s_(spec) {
  if (s_.ldx == 0) s_.ldx = s_.k;
  if (s_.ldy == 0) s_.ldy = s_.n;
  if (s_.rows <= 0 || s_.n <= 0 || s_.k <= 0 || s_.batch <= 0) throw Error("linear: non-positive shape");
  if (s_.fp8_block && (s_.batch != 1 || s_.k % 128 != 0 || s_.rows % 4 != 0 || s_.ldx != s_.k))
    throw Error("linear: fp8_block needs one contiguous batch, k % 128 == 0 and rows % 4 == 0");
  const float range = s_.weight_range > 0 ? s_.weight_range : static_cast<float>(1.0 / std::sqrt(double(s_.k)));
  const std::size_t wn = static_cast<std::size_t>(s_.batch * s_.n * s_.k);
  const DeviceContext& dc = Context();
  SC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&mm_.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  gemm::SetDesc(mm_.desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  gemm::SetDesc(mm_.desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  if (!s_.fp8_block) {
    w_ = DeviceBuffer(wn * 2);
    FillUniformBf16(w_.get(), wn, seed, range, st);
  } else {
    DeviceBuffer staging(wn * 2);
    FillUniformBf16(staging.get(), wn, seed, range, st);
    w_ = DeviceBuffer(wn);
    scale_ld_ = ((s_.k / 128 + 3) / 4) * 4;
    const std::int64_t nb = (s_.n + 127) / 128;
    w_scale_ = DeviceBuffer(static_cast<std::size_t>(nb * scale_ld_) * sizeof(float));
    SC_CUDA_CHECK(cudaMemsetAsync(w_scale_.get(), 0, w_scale_.bytes(), st));
    QuantFp8Block128x128(staging.get(), s_.n, s_.k, scale_ld_, w_.get(), w_scale_.as<float>(), st);
    xq_ = DeviceBuffer(static_cast<std::size_t>(s_.rows * s_.k));
    x_scale_ = DeviceBuffer(static_cast<std::size_t>(s_.k / 128 * s_.rows) * sizeof(float));
    SC_CUDA_CHECK(cudaStreamSynchronize(st));  // staging is freed at the end of this block
    gemm::SetDesc(mm_.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                  static_cast<std::int32_t>(CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F));
    gemm::SetDesc(mm_.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                  static_cast<std::int32_t>(CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F));
    gemm::SetDesc(mm_.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, w_scale_.get());
    gemm::SetDesc(mm_.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, x_scale_.get());
  }
  const cudaDataType_t ab = s_.fp8_block ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  SC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&mm_.a, ab, U(s_.k), U(s_.n), s_.k));
  SC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&mm_.b, ab, U(s_.k), U(s_.rows), s_.ldx));
  SC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&mm_.d, CUDA_R_16BF, U(s_.n), U(s_.rows), s_.ldy));
  if (s_.batch > 1) {
    const std::int32_t count = static_cast<std::int32_t>(s_.batch);
    const std::int64_t sa = s_.n * s_.k;
    for (auto [layout, stride] : {std::pair{mm_.a, sa}, std::pair{mm_.b, s_.stride_x}, std::pair{mm_.d, s_.stride_y}}) {
      SC_CUBLAS_CHECK(
          cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      SC_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                       sizeof(stride)));
    }
  }
  SC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&mm_.pref));
  const std::uint64_t ws = dc.workspace_bytes;
  SC_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(mm_.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  SC_CUDA_CHECK(cudaStreamSynchronize(st));
}

std::optional<std::string> Linear::Choose(const void* x, void* y, cudaStream_t st) {
  const DeviceContext& dc = Context();
  constexpr int kWant = 8;
  std::vector<cublasLtMatmulHeuristicResult_t> heur(kWant);
  int returned = 0;
  const std::string where = std::string(s_.fp8_block ? "fp8_block" : "bfloat16") + " rows=" + std::to_string(s_.rows) +
                            " n=" + std::to_string(s_.n) + " k=" + std::to_string(s_.k) +
                            " batch=" + std::to_string(s_.batch);
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(dc.lt, mm_.desc, mm_.a, mm_.b, mm_.d, mm_.d, mm_.pref,
                                                           kWant, heur.data(), &returned);
  if (hs != CUBLAS_STATUS_SUCCESS || returned == 0)
    return "cublasLtMatmulAlgoGetHeuristic returned " + gemm::StatusName(hs) + " with " + std::to_string(returned) +
           " algorithms for " + where;
  std::string rejected;
  for (int i = 0; i < returned; ++i) {
    if (heur[static_cast<std::size_t>(i)].state != CUBLAS_STATUS_SUCCESS) continue;
    algo_ = heur[static_cast<std::size_t>(i)].algo;
    chosen_ = true;
    cublasStatus_t ms = CUBLAS_STATUS_SUCCESS;
    if (s_.fp8_block) QuantFp8Group128(x, s_.rows, s_.k, xq_.get(), x_scale_.as<float>(), st);
    const float alpha = 1.0f, beta = 0.0f;
    ms = cublasLtMatmul(dc.lt, mm_.desc, &alpha, w_.get(), mm_.a, s_.fp8_block ? xq_.get() : x, mm_.b, &beta, y,
                        mm_.d, y, mm_.d, &algo_, dc.workspace, dc.workspace_bytes, st);
    SC_CUDA_CHECK(cudaStreamSynchronize(st));
    SC_CUDA_CHECK(cudaGetLastError());
    if (ms == CUBLAS_STATUS_SUCCESS) return std::nullopt;
    rejected += (rejected.empty() ? "" : ", ") + gemm::AlgoString(algo_) + ": " + gemm::StatusName(ms);
  }
  chosen_ = false;
  return "every heuristic algorithm failed in cublasLtMatmul for " + where + ": " + rejected;
}

void Linear::Run(const void* x, void* y, cudaStream_t st) const {
  if (!chosen_) throw Error("linear: Run before Choose");
  const DeviceContext& dc = Context();
  if (s_.fp8_block) QuantFp8Group128(x, s_.rows, s_.k, xq_.get(), x_scale_.as<float>(), st);
  const float alpha = 1.0f, beta = 0.0f;
  SC_CUBLAS_CHECK(cublasLtMatmul(dc.lt, mm_.desc, &alpha, w_.get(), mm_.a, s_.fp8_block ? xq_.get() : x, mm_.b, &beta,
                                 y, mm_.d, y, mm_.d, &algo_, dc.workspace, dc.workspace_bytes, st));
}

std::string Linear::Describe() const { return chosen_ ? gemm::AlgoString(algo_) : "none"; }

double Linear::weight_bytes() const {
  return static_cast<double>(s_.batch * s_.n * s_.k) * (s_.fp8_block ? 1 : 2);
}

std::vector<double> Linear::WeightRow(std::int64_t b, std::int64_t j, cudaStream_t st) const {
  std::vector<double> out(static_cast<std::size_t>(s_.k));
  const std::size_t off = static_cast<std::size_t>((b * s_.n + j) * s_.k);
  if (!s_.fp8_block) {
    const auto raw = Download<std::uint16_t>(w_.get(), static_cast<std::size_t>(s_.k), off, st);
    for (std::size_t i = 0; i < raw.size(); ++i) out[i] = Bf16(raw[i]);
    return out;
  }
  const auto raw = Download<std::uint8_t>(w_.get(), static_cast<std::size_t>(s_.k), off, st);
  const auto sc = Download<float>(w_scale_.get(), static_cast<std::size_t>(scale_ld_),
                                  static_cast<std::size_t>(j / 128 * scale_ld_), st);
  for (std::size_t i = 0; i < raw.size(); ++i) out[i] = Fp8E4m3(raw[i]) * sc[i / 128];
  return out;
}

std::vector<double> Linear::InputRow(const void* x, std::int64_t b, std::int64_t r, cudaStream_t st) const {
  std::vector<double> out(static_cast<std::size_t>(s_.k));
  if (!s_.fp8_block) {
    const auto raw = Download<std::uint16_t>(x, static_cast<std::size_t>(s_.k),
                                             static_cast<std::size_t>(b * s_.stride_x + r * s_.ldx), st);
    for (std::size_t i = 0; i < raw.size(); ++i) out[i] = Bf16(raw[i]);
    return out;
  }
  const auto raw = Download<std::uint8_t>(xq_.get(), static_cast<std::size_t>(s_.k), static_cast<std::size_t>(r * s_.k), st);
  const auto all = Download<float>(x_scale_.get(), static_cast<std::size_t>(s_.k / 128 * s_.rows), 0, st);
  for (std::size_t i = 0; i < raw.size(); ++i)
    out[i] = Fp8E4m3(raw[i]) * all[static_cast<std::size_t>(static_cast<std::int64_t>(i / 128) * s_.rows + r)];
  return out;
}

}  // namespace servecast::cuda
