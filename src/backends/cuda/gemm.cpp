// Op `gemm` on the cuda backend (table gemm_perf): y[m x n] = x[m x k] · Wᵀ through
// cuBLASLt, W being [n x k] like a linear layer's weight, bf16 output. What each
// dtype's row includes is in docs/kernels.md.
//
// cuBLASLt is column-major, so the call computes yᵀ (n x m, ld n) = op(A) · B with
// A = W stored k x n (ld k, transposed: "T") and B = x stored k x m (ld k, "N"): the
// TN form Hopper's fp8 kernels require, with both operands K-major.

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/fill.h"
#include "backends/cuda/gemm_internal.h"
#include "backends/cuda/gemm_ops.h"
#include "backends/cuda/harness.h"
#include "backends/cuda/op_vocabulary.h"
#include "backends/cuda/quantize.h"
#include "collect/case.h"
#include "collect/registry.h"
#include "core/error.h"

namespace servecast::cuda {

void RegisterGemmOps(collect::Registry& r) {
  r.AddOp("cuda", gemm::MakeGemmOp());
  r.AddOp("cuda", gemm::MakeComputeScaleOp());
}

namespace gemm {
namespace {

enum class Dtype { kBf16, kFp8, kFp8Block };

struct Shape {
  Dtype dtype = Dtype::kBf16;
  std::string name;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t rows = 0;  // rows of x and y as allocated: m, or m rounded up to 4 for fp8_block
  std::int64_t kg = 0;    // 128-wide K groups (fp8_block)
  std::int64_t kbp = 0;   // K blocks padded to a multiple of 4: the weight scales' leading dimension
  std::int64_t nb = 0;    // 128-row weight blocks
};

std::int64_t RoundUp(std::int64_t v, std::int64_t to) {
  return (v + to - 1) / to * to;
}

// Per-element tolerance of the output check: |y - ref| <= 2^-8·|ref| + eps·Σ|a·b|.
// 2^-8 is bf16's unit roundoff (the output is rounded once to bf16). eps bounds the
// accumulation error relative to Σ|a·b|:
//   bfloat16: fp32 accumulation; a worst-case truncating fp32 chain over k/16 MMA steps
//     is ~2^-19·Σ|a·b| at k = 65536, so 2^-14 leaves 30x margin;
//   fp8, fp8_block: the fp8 tensor-core accumulator keeps ~14 bits between promotions
//     to fp32 (each 128-deep K block for fp8_block; cuBLASLt's fast-accumulation kernels
//     for fp8): <= 2^-11 per promoted chunk; 2^-10 used. Measured on an H200 with
//     cuBLASLt 13.1 (m=16, n=256, k=65536): worst error/tolerance 0.12 (fp8) and 0.07
//     (fp8_block); at k=4096 0.37 and 0.25.
double AccumEpsilon(const Shape& s) {
  return s.dtype == Dtype::kBf16 ? std::ldexp(1.0, -14) : std::ldexp(1.0, -10);
}

std::string ToleranceRule(const Shape& s) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "2^-8·|ref| + %.3g·Σ|a·b|", AccumEpsilon(s));
  return buf;
}

template <class T>
T AlgoAttr(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  std::size_t written = 0;
  SC_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written));
  return v;
}

}  // namespace

std::string AlgoString(const cublasLtMatmulAlgo_t& algo) {
  const auto id = AlgoAttr<std::int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID);
  const auto tile = AlgoAttr<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID);
  const auto stages = AlgoAttr<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID);
  const auto splitk = AlgoAttr<std::int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
  const auto cluster = AlgoAttr<std::uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
  return "cublaslt:algo=" + std::to_string(id) + ",tile=" + std::to_string(tile) + ",stages=" + std::to_string(stages) +
         ",splitk=" + std::to_string(splitk) + ",cluster=" + std::to_string(cluster);
}

std::string StatusName(cublasStatus_t st) {
  return cublasLtGetStatusName(st);
}

std::string CublasLtVersion() {
  const std::size_t v = cublasLtGetVersion();
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." + std::to_string(v % 100);
}

double TimeCallsMs(const std::function<void(cudaStream_t, int)>& call, int calls, cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  bool graphed = true;
  SC_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    for (int i = 0; i < calls; ++i) call(stream, i);
  } catch (const CudaError& e) {
    cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    graph = nullptr;
    if (e.sticky()) throw;
    cudaGetLastError();
    graphed = false;
  }
  if (graphed) {
    cudaError_t err = cudaStreamEndCapture(stream, &graph);
    if (err == cudaSuccess) err = cudaGraphInstantiate(&exec, graph, 0);
    if (err != cudaSuccess) {
      cudaGetLastError();
      graphed = false;
    }
  }
  auto run = [&] {
    if (graphed)
      SC_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    else
      for (int i = 0; i < calls; ++i) call(stream, i);
  };
  cudaEvent_t start = nullptr, stop = nullptr;
  double ms = 0;
  try {
    run();  // warm
    SC_CUDA_CHECK(cudaEventCreate(&start));
    SC_CUDA_CHECK(cudaEventCreate(&stop));
    SC_CUDA_CHECK(cudaEventRecord(start, stream));
    run();
    SC_CUDA_CHECK(cudaEventRecord(stop, stream));
    SC_CUDA_CHECK(cudaEventSynchronize(stop));
    float f = 0;
    SC_CUDA_CHECK(cudaEventElapsedTime(&f, start, stop));
    ms = static_cast<double>(f) / calls;
  } catch (...) {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  return ms;
}

namespace {

template <class T>
std::vector<T> ToHost(const void* src, std::size_t count, cudaStream_t stream) {
  std::vector<T> out(count);
  if (count) SC_CUDA_CHECK(cudaMemcpyAsync(out.data(), src, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
  SC_CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}

// Rows `rows` (each `row_elems` elements of T, leading dimension `ld` elements) of a
// device matrix, packed one after another.
template <class T>
std::vector<T> RowsToHost(const void* base, const std::vector<std::int64_t>& rows, std::int64_t row_elems,
                          std::int64_t ld, cudaStream_t stream) {
  std::vector<T> out(rows.size() * static_cast<std::size_t>(row_elems));
  for (std::size_t r = 0; r < rows.size(); ++r)
    SC_CUDA_CHECK(cudaMemcpyAsync(out.data() + r * static_cast<std::size_t>(row_elems),
                                  static_cast<const T*>(base) + rows[r] * ld,
                                  static_cast<std::size_t>(row_elems) * sizeof(T), cudaMemcpyDeviceToHost, stream));
  SC_CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}

std::optional<CaseResult> ParseShape(const collect::Params& p, Shape& s) {
  try {
    s.name = p.Str("gemm_dtype");
    s.m = p.Int("m");
    s.n = p.Int("n");
    s.k = p.Int("k");
  } catch (const Error& e) {
    return InvalidParams("gemm", e.what());
  }
  if (s.m <= 0 || s.n <= 0 || s.k <= 0)
    return InvalidParams("gemm", "m, n and k must be positive; got m=" + std::to_string(s.m) +
                                     " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k));
  if (s.name == "bfloat16")
    s.dtype = Dtype::kBf16;
  else if (s.name == "fp8")
    s.dtype = Dtype::kFp8;
  else if (s.name == "fp8_block")
    s.dtype = Dtype::kFp8Block;
  else if (s.name == "float32" || s.name == "float16" || s.name == "nvfp4" || s.name == "int8")
    return NotSupported("UnsupportedDtype",
                        "gemm on cuda runs gemm_dtype bfloat16, fp8 and fp8_block; got '" + s.name + "'");
  else
    return InvalidParams("gemm", "unknown gemm_dtype '" + s.name + "'; expected bfloat16, fp8 or fp8_block");
  if (s.m > INT32_MAX || s.n > INT32_MAX || s.k > INT32_MAX)
    return NotSupported("ShapeTooLarge", "gemm: m, n and k must fit 32 bits for cuBLASLt layouts");
  s.rows = s.m;
  if (s.dtype == Dtype::kFp8Block) {
    if (s.k % 128 != 0)
      return NotSupported(
          "BlockShape",
          "gemm fp8_block: servecast's 1x128 activation quantizer needs k % 128 == 0; got k=" + std::to_string(s.k));
    // cuBLASLt's VEC128_32F activation scales are token-contiguous per K group; the
    // token count is padded to a multiple of 4 (16-byte aligned scale columns), as
    // engines calling it do. The padding rows are computed and ignored.
    s.rows = RoundUp(s.m, 4);
    s.kg = s.k / 128;
    s.kbp = RoundUp(s.kg, 4);
    s.nb = (s.n + 127) / 128;
  }
  return std::nullopt;
}

double WeightBytes(const Shape& s) {
  const double nk = static_cast<double>(s.n) * static_cast<double>(s.k);
  switch (s.dtype) {
    case Dtype::kBf16:
      return 2 * nk;
    case Dtype::kFp8:
      return nk;
    case Dtype::kFp8Block:
      return nk + 4.0 * static_cast<double>(s.nb * s.kbp);
  }
  return nk;
}

struct Buffers {
  DeviceBuffer x;               // bf16 [rows x k]
  DeviceBuffer xq;              // e4m3 [rows x k] (fp8 dtypes)
  DeviceBuffer x_scale;         // fp8: 1 float; fp8_block: [kg x rows] floats
  DeviceBuffer x_state;         // fp8: the amax kernel's two words
  std::vector<DeviceBuffer> w;  // weight copies: bf16 or e4m3 [n x k]
  DeviceBuffer w_scale;         // fp8: 1 float; fp8_block: [nb x kbp] floats
  DeviceBuffer y;               // bf16 [rows x n]
  DeviceBuffer scratch;         // reference amax, counters
};

// Fills the inputs and quantizes the weight (outside any timing); returns the copies.
int PrepareBuffers(const Shape& s, const std::string& case_id, Buffers& b, cudaStream_t st) {
  const std::size_t xk = static_cast<std::size_t>(s.rows * s.k), nk = static_cast<std::size_t>(s.n * s.k);
  b.x = DeviceBuffer(xk * 2);
  b.y = DeviceBuffer(static_cast<std::size_t>(s.rows * s.n) * 2);
  b.scratch = DeviceBuffer(64);
  FillUniformBf16(b.x.get(), xk, SeedFor(case_id, 1), 1.0f, st);
  ScaleBf16ByBlockPattern(b.x.get(), s.rows, s.k, 1, 0, st);
  if (s.dtype == Dtype::kBf16) {
    b.w.emplace_back(nk * 2);
    FillUniformBf16(b.w[0].get(), nk, SeedFor(case_id, 2), 1.0f, st);
    ScaleBf16ByBlockPattern(b.w[0].get(), s.n, s.k, 128, 1, st);
  } else {
    b.xq = DeviceBuffer(xk);
    DeviceBuffer staging(nk * 2);
    FillUniformBf16(staging.get(), nk, SeedFor(case_id, 2), 1.0f, st);
    ScaleBf16ByBlockPattern(staging.get(), s.n, s.k, 128, 1, st);
    b.w.emplace_back(nk);
    if (s.dtype == Dtype::kFp8) {
      b.x_scale = DeviceBuffer(sizeof(float));
      b.x_state = DeviceBuffer(2 * sizeof(unsigned));
      SC_CUDA_CHECK(cudaMemsetAsync(b.x_state.get(), 0, b.x_state.bytes(), st));
      b.w_scale = DeviceBuffer(sizeof(float));
      DeviceBuffer w_state(2 * sizeof(unsigned));
      SC_CUDA_CHECK(cudaMemsetAsync(w_state.get(), 0, w_state.bytes(), st));
      QuantFp8TensorAmax(staging.get(), nk, w_state.as<unsigned>(), b.w_scale.as<float>(), st);
      QuantFp8TensorApply(staging.get(), nk, b.w_scale.as<float>(), b.w[0].get(), st);
      SC_CUDA_CHECK(cudaStreamSynchronize(st));
    } else {
      b.x_scale = DeviceBuffer(static_cast<std::size_t>(s.kg * s.rows) * sizeof(float));
      b.w_scale = DeviceBuffer(static_cast<std::size_t>(s.nb * s.kbp) * sizeof(float));
      SC_CUDA_CHECK(cudaMemsetAsync(b.w_scale.get(), 0, b.w_scale.bytes(), st));
      QuantFp8Block128x128(staging.get(), s.n, s.k, s.kbp, b.w[0].get(), b.w_scale.as<float>(), st);
      SC_CUDA_CHECK(cudaStreamSynchronize(st));
    }
  }  // staging freed here
  SC_CUDA_CHECK(cudaStreamSynchronize(st));
  const int copies = CopiesForColdL2(WeightBytes(s));
  for (int c = 1; c < copies; ++c) {
    b.w.emplace_back(b.w[0].bytes());
    SC_CUDA_CHECK(cudaMemcpyAsync(b.w[c].get(), b.w[0].get(), b.w[0].bytes(), cudaMemcpyDeviceToDevice, st));
  }
  SC_CUDA_CHECK(cudaStreamSynchronize(st));
  return copies;
}

void BuildMatmul(const Shape& s, const Buffers& b, LtMatmul& mm) {
  const DeviceContext& dc = Context();
  const cudaDataType_t ab = s.dtype == Dtype::kBf16 ? CUDA_R_16BF : CUDA_R_8F_E4M3;
  SC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&mm.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  SetDesc(mm.desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  SetDesc(mm.desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  if (s.dtype == Dtype::kFp8) {
    SetDesc(mm.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, b.w_scale.get());
    SetDesc(mm.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b.x_scale.get());
    SetDesc(mm.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, static_cast<std::int8_t>(1));
  } else if (s.dtype == Dtype::kFp8Block) {
    SetDesc(mm.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
            static_cast<std::int32_t>(CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F));
    SetDesc(mm.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
            static_cast<std::int32_t>(CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F));
    SetDesc(mm.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, b.w_scale.get());
    SetDesc(mm.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b.x_scale.get());
  }
  SC_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&mm.a, ab, static_cast<std::uint64_t>(s.k), static_cast<std::uint64_t>(s.n), s.k));
  SC_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&mm.b, ab, static_cast<std::uint64_t>(s.k), static_cast<std::uint64_t>(s.rows), s.k));
  SC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&mm.d, CUDA_R_16BF, static_cast<std::uint64_t>(s.n),
                                             static_cast<std::uint64_t>(s.rows), s.n));
  SC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&mm.pref));
  const std::uint64_t ws = dc.workspace_bytes;
  SC_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(mm.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
}

cublasStatus_t Matmul(const LtMatmul& mm, const cublasLtMatmulAlgo_t& algo, const void* w, const Buffers& b,
                      cudaStream_t st) {
  const DeviceContext& dc = Context();
  const float alpha = 1.0f, beta = 0.0f;
  const void* x = b.xq.get() ? b.xq.get() : b.x.get();
  return cublasLtMatmul(dc.lt, mm.desc, &alpha, w, mm.a, x, mm.b, &beta, b.y.get(), mm.d, b.y.get(), mm.d, &algo,
                        dc.workspace, dc.workspace_bytes, st);
}

// The timed region's activation quantization (nothing for bfloat16).
void QuantizeActivations(const Shape& s, const Buffers& b, cudaStream_t st) {
  const std::size_t xk = static_cast<std::size_t>(s.rows * s.k);
  if (s.dtype == Dtype::kFp8) {
    QuantFp8TensorAmax(b.x.get(), xk, b.x_state.as<unsigned>(), b.x_scale.as<float>(), st);
    QuantFp8TensorApply(b.x.get(), xk, b.x_scale.as<float>(), b.xq.get(), st);
  } else if (s.dtype == Dtype::kFp8Block) {
    QuantFp8Group128(b.x.get(), s.rows, s.k, b.xq.get(), b.x_scale.as<float>(), st);
  }
}

// The output (and, for fp8, the activation quantization) against a host reference.
// Returns an incorrect outcome, or nothing when it passed; fills the report's summary.
std::optional<CaseResult> CheckOutput(const Shape& s, const std::string& case_id, const Buffers& b,
                                      const GemmRunOptions& opt, GemmRunReport& rep, cudaStream_t st) {
  auto* count = reinterpret_cast<unsigned long long*>(b.scratch.as<char>() + 8);
  CountNonFiniteBf16(b.y.get(), static_cast<std::size_t>(s.m * s.n), count, st);
  const auto bad = ToHost<unsigned long long>(count, 1, st)[0];
  if (bad)
    return Incorrect("gemm", std::to_string(bad) + " of " + std::to_string(s.m * s.n) +
                                 " outputs are NaN/inf after the run (output poisoned with NaN first: unwritten or "
                                 "non-finite)");

  const auto rows = SampleIndices(s.m, 16, SeedFor(case_id, 3));
  const std::int64_t want_cols = std::max<std::int64_t>(
      32, (512 + static_cast<std::int64_t>(rows.size()) - 1) / static_cast<std::int64_t>(rows.size()));
  const auto cols = SampleIndices(s.n, want_cols, SeedFor(case_id, 4));
  const std::size_t k = static_cast<std::size_t>(s.k);
  const auto y = RowsToHost<std::uint16_t>(b.y.get(), rows, s.n, s.n, st);

  // a(r, l) and b(c, l): the GEMM's inputs as it saw them, dequantized, in double.
  std::vector<double> a(rows.size() * k), w(cols.size() * k);
  if (s.dtype == Dtype::kBf16) {
    const auto xr = RowsToHost<std::uint16_t>(b.x.get(), rows, s.k, s.k, st);
    const auto wr = RowsToHost<std::uint16_t>(b.w[0].get(), cols, s.k, s.k, st);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = Bf16ToF32(xr[i]);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = Bf16ToF32(wr[i]);
  } else {
    const auto xr = RowsToHost<std::uint16_t>(b.x.get(), rows, s.k, s.k, st);
    const auto xq = RowsToHost<std::uint8_t>(b.xq.get(), rows, s.k, s.k, st);
    const auto wq = RowsToHost<std::uint8_t>(b.w[0].get(), cols, s.k, s.k, st);
    auto* nan_count = reinterpret_cast<unsigned long long*>(b.scratch.as<char>() + 16);
    CountNanE4m3(b.xq.get(), static_cast<std::size_t>(s.rows * s.k), nan_count, st);
    const auto nan_q = ToHost<unsigned long long>(nan_count, 1, st)[0];
    if (nan_q)
      return Incorrect("gemm", std::to_string(nan_q) + " quantized activations are e4m3 NaN (unwritten or wrong)");
    if (s.dtype == Dtype::kFp8) {
      const float sx = ToHost<float>(b.x_scale.get(), 1, st)[0];
      const float sw = ToHost<float>(b.w_scale.get(), 1, st)[0];
      AmaxBf16Reference(b.x.get(), static_cast<std::size_t>(s.rows * s.k), b.scratch.as<float>(), st);
      const float amax = ToHost<float>(b.scratch.get(), 1, st)[0];
      const float want = std::max(amax / kFp8E4m3Max, kFp8MinScale);
      if (!(sx == want))
        return Incorrect("gemm", "dynamic activation scale " + std::to_string(sx) +
                                     " != max(amax/448, min) = " + std::to_string(want) + " (amax " +
                                     std::to_string(amax) + " by the reference kernel)");
      RefCheck q = CheckTensorQuant(xr, xq, s.k, sx, rows);
      if (!q.ok()) return Incorrect("gemm", q.Describe("quantized activations", "half an e4m3 step"));
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<double>(E4m3ToFloat(xq[i])) * sx;
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<double>(E4m3ToFloat(wq[i])) * sw;
    } else {
      const auto sx = ToHost<float>(b.x_scale.get(), static_cast<std::size_t>(s.kg * s.rows), st);
      const auto sw = ToHost<float>(b.w_scale.get(), static_cast<std::size_t>(s.nb * s.kbp), st);
      RefCheck q = CheckGroupQuant(xr, xq, s.k, sx, s.rows, rows);
      if (!q.ok())
        return Incorrect("gemm",
                         q.Describe("quantized activations and their 1x128 scales", "exact scale; half an e4m3 step"));
      for (std::size_t r = 0; r < rows.size(); ++r)
        for (std::size_t l = 0; l < k; ++l)
          a[r * k + l] = static_cast<double>(E4m3ToFloat(xq[r * k + l])) *
                         sx[static_cast<std::size_t>(static_cast<std::int64_t>(l / 128) * s.rows + rows[r])];
      for (std::size_t c = 0; c < cols.size(); ++c)
        for (std::size_t l = 0; l < k; ++l)
          w[c * k + l] = static_cast<double>(E4m3ToFloat(wq[c * k + l])) *
                         sw[static_cast<std::size_t>((cols[c] / 128) * s.kbp + static_cast<std::int64_t>(l / 128))];
    }
  }
  if (opt.perturb_reference != 0)
    for (auto& v : a) v *= 1 + opt.perturb_reference;

  const double eps = AccumEpsilon(s);
  RefCheck check;
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (std::size_t c = 0; c < cols.size(); ++c) {
      double sum = 0, abs_sum = 0;
      const double* ar = &a[r * k];
      const double* wc = &w[c * k];
      for (std::size_t l = 0; l < k; ++l) {
        const double p = ar[l] * wc[l];
        sum += p;
        abs_sum += std::fabs(p);
      }
      const double got = Bf16ToF32(y[r * static_cast<std::size_t>(s.n) + static_cast<std::size_t>(cols[c])]);
      const double tol = std::ldexp(std::fabs(sum), -8) + eps * abs_sum + 1e-30;
      check.Add(got, sum, tol, [&] { return "y[" + std::to_string(rows[r]) + "," + std::to_string(cols[c]) + "]"; });
    }
  rep.check_summary = check.Describe("y", ToleranceRule(s));
  rep.worst_ratio = check.worst_ratio();
  if (!check.ok()) return Incorrect("gemm", rep.check_summary);
  return std::nullopt;
}

// One gemm case through the phase driver; `rep` (the caller's) gets the choices and
// the check's summary as the phases make them.
class GemmPhases : public collect::CasePhases {
 public:
  GemmPhases(const Shape& s, const collect::Case& c, const collect::RunContext& ctx, const GemmRunOptions& opt,
             GemmRunReport& rep)
      : s_(s), c_(c), ctx_(ctx), opt_(opt), rep_(rep), dc_(Context()), st_(dc_.stream) {}

  // Inputs and weight copies, the matmul descriptors, the heuristic's candidates that
  // run at all, and the autotuned (or forced) algorithm.
  std::optional<CaseResult> Prepare() override {
    copies_ = PrepareBuffers(s_, c_.id, b_, st_);
    rep_.copies = copies_;

    BuildMatmul(s_, b_, mm_);
    const int want = std::max(1, opt_.algo_candidates);
    std::vector<cublasLtMatmulHeuristicResult_t> heur(static_cast<std::size_t>(want));
    int returned = 0;
    const cublasStatus_t hs =
        cublasLtMatmulAlgoGetHeuristic(dc_.lt, mm_.desc, mm_.a, mm_.b, mm_.d, mm_.d, mm_.pref, want, heur.data(), &returned);
    const std::string where = "gemm_dtype=" + s_.name + " m=" + std::to_string(s_.m) + " n=" + std::to_string(s_.n) +
                              " k=" + std::to_string(s_.k) + " (cuBLASLt " + CublasLtVersion() + ", sm_" +
                              std::to_string(dc_.prop.major) + std::to_string(dc_.prop.minor) + ")";
    if (hs != CUBLAS_STATUS_SUCCESS || returned == 0)
      return NotSupported("NoCublasLtAlgorithm", "cublasLtMatmulAlgoGetHeuristic returned " + StatusName(hs) +
                                                     " with " + std::to_string(returned) + " algorithms for " + where);

    // Real activations for the candidates to run on.
    QuantizeActivations(s_, b_, st_);
    SC_CUDA_CHECK(cudaStreamSynchronize(st_));

    // Candidates that run at all (one eager call each).
    std::vector<cublasLtMatmulAlgo_t> algos;
    std::string rejected;
    bool all_not_supported = true;
    for (int i = 0; i < returned; ++i) {
      if (heur[static_cast<std::size_t>(i)].state != CUBLAS_STATUS_SUCCESS) continue;
      const cublasStatus_t ms = Matmul(mm_, heur[static_cast<std::size_t>(i)].algo, b_.w[0].get(), b_, st_);
      SC_CUDA_CHECK(cudaStreamSynchronize(st_));
      SC_CUDA_CHECK(cudaGetLastError());
      if (ms == CUBLAS_STATUS_SUCCESS) {
        algos.push_back(heur[static_cast<std::size_t>(i)].algo);
      } else {
        rejected += (rejected.empty() ? "" : ", ") + AlgoString(heur[static_cast<std::size_t>(i)].algo) + ": " +
                    StatusName(ms);
        all_not_supported = all_not_supported && ms == CUBLAS_STATUS_NOT_SUPPORTED;
      }
    }
    if (algos.empty()) {
      const std::string msg = "every heuristic algorithm failed in cublasLtMatmul for " + where + ": " + rejected;
      return all_not_supported ? NotSupported("CublasLtRejected", msg)
                               : CaseResult::Failure(collect::Disposition::kFailed,
                                                     collect::FailureClass::kFrameworkBug, "CublasLtFailed", msg);
    }

    // Autotune: the fastest candidate on this shape, weights rotated as when timed.
    std::size_t best = 0;
    if (algos.size() > 1 && opt_.force_tile_id == 0) {  // a forced configuration replaces the choice below
      auto gemm_with = [&](std::size_t a) {
        return [&, a](cudaStream_t stream, int it) {
          SC_CUBLAS_CHECK(Matmul(mm_, algos[a], b_.w[static_cast<std::size_t>(it % copies_)].get(), b_, stream));
        };
      };
      const double probe = TimeCallsMs(gemm_with(0), 1, st_);
      const int calls = std::clamp(static_cast<int>(std::ceil(1.0 / std::max(probe, 1e-4))), 1, 50);
      double best_ms = 0;
      for (std::size_t a = 0; a < algos.size(); ++a) {
        const double ms = TimeCallsMs(gemm_with(a), calls, st_);
        if (a == 0 || ms < best_ms) {
          best_ms = ms;
          best = a;
        }
      }
    }
    algo_ = algos[best];
    if (opt_.force_tile_id != 0) {
      algo_ = heur[0].algo;
      SC_CUBLAS_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&algo_, CUBLASLT_ALGO_CONFIG_TILE_ID, &opt_.force_tile_id,
                                                           sizeof(opt_.force_tile_id)));
      SC_CUBLAS_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&algo_, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID,
                                                           &opt_.force_cluster_id, sizeof(opt_.force_cluster_id)));
      cublasLtMatmulHeuristicResult_t r{};
      const cublasStatus_t cs = cublasLtMatmulAlgoCheck(dc_.lt, mm_.desc, mm_.a, mm_.b, mm_.d, mm_.d, &algo_, &r);
      if (cs != CUBLAS_STATUS_SUCCESS || r.workspaceSize > dc_.workspace_bytes)
        return NotSupported("ForcedConfigRejected", "cublasLtMatmulAlgoCheck: " + StatusName(cs) + " for " +
                                                        AlgoString(algo_) + " on " + where);
    }
    rep_.kernel_source = AlgoString(algo_);
    if (s_.dtype == Dtype::kFp8) rep_.kernel_source += "+servecast_quant_fp8_tensor";
    if (s_.dtype == Dtype::kFp8Block) rep_.kernel_source += "+servecast_quant_fp8_group128";
    return std::nullopt;
  }

  // Correctness before timing: poison everything the call writes, run it once, check.
  std::optional<CaseResult> Check() override {
    FillPoison(b_.y.get(), b_.y.bytes(), st_);
    if (b_.xq.get()) FillPoison(b_.xq.get(), b_.xq.bytes(), st_);
    if (s_.dtype == Dtype::kFp8Block) FillPoison(b_.x_scale.get(), b_.x_scale.bytes(), st_);
    Launch(st_, 0);
    SC_CUDA_CHECK(cudaStreamSynchronize(st_));
    return CheckOutput(s_, c_.id, b_, opt_, rep_, st_);
  }

  // The timed region: activation quantization (fp8 dtypes), then the GEMM on copy i % copies.
  void Time() override {
    if (!ctx_.runtime) throw Error("gemm: RunContext without runtime info");
    table_ = collect::FindTableSpec("gemm_perf");
    if (!table_) throw Error("gemm: table gemm_perf is not defined");
    TimeOptions topt;
    topt.copies = copies_;
    topt.rotated_bytes = copies_ * WeightBytes(s_);
    LaunchFn timed = [this](cudaStream_t stream, int it) { Launch(stream, it); };
    if (opt_.timed == GemmRunOptions::Timed::kGemmOnly)
      timed = [this](cudaStream_t stream, int it) { GemmOnly(stream, it); };
    if (opt_.timed == GemmRunOptions::Timed::kQuantOnly)
      timed = [this](cudaStream_t stream, int) { QuantizeActivations(s_, b_, stream); };
    stats_ = TimeOnDevice(timed, ctx_.timing, topt, ctx_.measure_power);
  }

  std::vector<collect::Params> Emit() override {
    return {collect::MakeRow(*table_, *ctx_.runtime, "gemm", rep_.kernel_source, c_.params, stats_,
                             ctx_.measure_power)};
  }

 private:
  void GemmOnly(cudaStream_t stream, int it) const {
    SC_CUBLAS_CHECK(Matmul(mm_, algo_, b_.w[static_cast<std::size_t>(it % copies_)].get(), b_, stream));
  }
  void Launch(cudaStream_t stream, int it) const {
    QuantizeActivations(s_, b_, stream);
    GemmOnly(stream, it);
  }

  const Shape& s_;
  const collect::Case& c_;
  const collect::RunContext& ctx_;
  const GemmRunOptions& opt_;
  GemmRunReport& rep_;
  DeviceContext& dc_;
  cudaStream_t st_;
  Buffers b_;
  int copies_ = 1;
  LtMatmul mm_;
  cublasLtMatmulAlgo_t algo_{};
  const collect::TableSpec* table_ = nullptr;
  collect::TimingStats stats_;
};

class GemmOp : public collect::Op {
 public:
  GemmOp() {
    table_ = collect::FindTableSpec("gemm_perf");
    if (!table_) throw Error("gemm: table gemm_perf is not defined");
  }
  std::string name() const override { return "gemm"; }
  const collect::TableSpec& table() const override { return *table_; }
  std::vector<std::string> required_params() const override { return table_->KeyColumnNames(); }
  double default_timeout_s() const override { return 180; }
  std::vector<collect::Requirement> requirements() const override { return Fp8Requirements("gemm_dtype"); }
  double MemoryBytes(const collect::Params& p) const override {
    Shape s;
    if (ParseShape(p, s)) return 0;  // Run reports the problem
    int copies = 1;
    try {
      copies = CopiesForColdL2(WeightBytes(s));
    } catch (const std::exception&) {
      copies = 1;
    }
    const double rk = static_cast<double>(s.rows) * static_cast<double>(s.k);
    const double rn = static_cast<double>(s.rows) * static_cast<double>(s.n);
    const double nk = static_cast<double>(s.n) * static_cast<double>(s.k);
    double bytes = copies * WeightBytes(s) + 2 * rk + 2 * rn;
    if (s.dtype != Dtype::kBf16) bytes += rk + 4 * rk / 128 + 2 * nk;  // xq, scales, the bf16 weight staged once
    return bytes;
  }
  CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override {
    return RunGemmCase(c, ctx, GemmRunOptions{}).result;
  }

 private:
  const collect::TableSpec* table_ = nullptr;
};

}  // namespace

GemmRunReport RunGemmCase(const collect::Case& c, const collect::RunContext& ctx, const GemmRunOptions& opt) {
  GemmRunReport rep;
  Shape s;
  if (auto bad = ParseShape(c.params, s)) {
    rep.result = *bad;
    return rep;
  }
  GemmPhases phases(s, c, ctx, opt, rep);
  rep.result = RunCudaPhases(phases, collect::FailureClass::kFrameworkBug, {opt.time});
  return rep;
}

std::vector<collect::Requirement> Fp8Requirements(const std::string& dtype_param) {
  collect::Requirement fp8;
  fp8.applies_when = dtype_param + " == \"fp8\"";
  fp8.min_sm = 89;  // e4m3 tensor cores
  collect::Requirement block;
  block.applies_when = dtype_param + " == \"fp8_block\"";
  block.library = "cublaslt";
  block.min_version = "12.9.0";  // VEC128_32F / BLK128x128_32F scale modes
  block.min_sm = 90;             // cuBLASLt implements those modes for Hopper
  return {fp8, block};
}

std::unique_ptr<collect::Op> MakeGemmOp() {
  return std::make_unique<GemmOp>();
}

}  // namespace gemm
}  // namespace servecast::cuda
