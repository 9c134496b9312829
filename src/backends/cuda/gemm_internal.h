#pragma once

// Internals of the CUDA GEMM family (ops `gemm` and `compute_scale`), shared by
// gemm.cpp, compute_scale.cpp and the GPU tests. docs/kernels.md describes what
// each row measures.

#include <cublasLt.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "collect/op.h"

namespace servecast::cuda::gemm {

// Compares computed values with a reference, each element with its own absolute
// tolerance, remembering the worst element (largest error / tolerance). A NaN or
// infinite value never passes.
class RefCheck {
 public:
  void Add(double got, double expected, double tolerance, const std::function<std::string()>& where);
  bool ok() const { return bad_ == 0 && checked_ > 0; }
  std::int64_t checked() const { return checked_; }
  std::int64_t bad() const { return bad_; }
  double worst_ratio() const { return worst_ratio_; }
  // "3 of 512 checked elements of <what> out of tolerance; worst at y[1,2]: got .., expected ..,
  // tolerance .. (<rule>)" (or "all N within tolerance; worst error/tolerance r").
  std::string Describe(const std::string& what, const std::string& rule) const;

 private:
  std::int64_t checked_ = 0;
  std::int64_t bad_ = 0;
  double worst_ratio_ = -1;
  double worst_got_ = 0, worst_expected_ = 0, worst_tolerance_ = 0;
  std::string worst_where_;
};

// Owning cuBLASLt descriptors of one matmul (also used by the moe op's per-expert GEMMs).
struct LtMatmul {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  LtMatmul() = default;
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;
  ~LtMatmul() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

template <class T>
void SetDesc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  SC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

// "cublaslt:algo=..,tile=..,stages=..,splitk=..,cluster=.." (the kernel_source of a gemm row).
std::string AlgoString(const cublasLtMatmulAlgo_t& algo);
// cuBLAS's name of a status ("CUBLAS_STATUS_NOT_SUPPORTED").
std::string StatusName(cublasStatus_t st);
// The loaded cuBLASLt's version, "13.1.0".
std::string CublasLtVersion();

// Device time (ms) per call of `calls` consecutive calls (call(stream, i), i = 0..),
// captured in one CUDA graph and replayed once warm (eager launches when capture
// fails): the autotuners' quick measurement, not a table row.
double TimeCallsMs(const std::function<void(cudaStream_t, int)>& call, int calls, cudaStream_t stream);

// Seed of one input stream of a case (FNV-1a of the case ID mixed with `stream`).
std::uint64_t SeedFor(const std::string& case_id, std::uint64_t stream);

// `count` distinct sorted indices in [0, n) including 0 and n - 1 (all of them when n <= count).
std::vector<std::int64_t> SampleIndices(std::int64_t n, std::int64_t count, std::uint64_t seed);

// Outcomes shared by the family's ops.
collect::CaseResult InvalidParams(const std::string& op, const std::string& message);
collect::CaseResult NotSupported(const std::string& type, const std::string& message);
collect::CaseResult Incorrect(const std::string& op, const std::string& message);

// What a GEMM case run does beyond the registered op's defaults (for tests).
struct GemmRunOptions {
  bool time = true;  // false: set up, select the algorithm, check, and stop (no row)
  // Testing the check itself: the host reference uses the activations multiplied by
  // (1 + perturb_reference); any non-zero value must make the case incorrect.
  double perturb_reference = 0;
  int algo_candidates = 4;  // heuristic results autotuned on the real shape (1 = heuristic top-1)
  // What the timing covers after the check (diagnostics; rows are always kRow):
  // kRow = the activation quantization then the GEMM; kGemmOnly = the GEMM on the
  // activations the check's call quantized; kQuantOnly = the quantization alone.
  enum class Timed { kRow, kGemmOnly, kQuantOnly } timed = Timed::kRow;
  // Diagnostics: when tile_id is set, the heuristic's first algorithm with this tile
  // and cluster shape (cuBLASLt ids) replaces the autotuned choice (a configuration
  // cublasLtMatmulAlgoCheck refuses makes the case not_supported).
  std::uint32_t force_tile_id = 0;
  std::uint16_t force_cluster_id = 0;
};

struct GemmRunReport {
  collect::CaseResult result;
  std::string kernel_source;  // also set when the case stops after the check
  std::string check_summary;  // RefCheck::Describe of the output check
  double worst_ratio = 0;     // worst |error| / tolerance of the output check
  int copies = 1;             // weight copies rotated while timing
};

// Runs one gemm case (gemm_dtype, m, n, k in c.params) on the current device.
GemmRunReport RunGemmCase(const collect::Case& c, const collect::RunContext& ctx, const GemmRunOptions& opt);

struct ComputeScaleReport {
  collect::CaseResult result;
  double dynamic_ms = 0;  // medians of the two timings (0 when not timed)
  double static_ms = 0;
};
ComputeScaleReport RunComputeScaleCase(const collect::Case& c, const collect::RunContext& ctx, bool time);

std::unique_ptr<collect::Op> MakeGemmOp();

// What the fp8 dtypes need of the runtime, for ops whose dtype parameter is
// `dtype_param` ("gemm_dtype", "moe_dtype"): fp8 e4m3 tensor cores (SM >= 89);
// fp8_block cuBLASLt's VEC128 / BLK128x128 scale modes (>= 12.9, SM 90).
std::vector<collect::Requirement> Fp8Requirements(const std::string& dtype_param);
std::unique_ptr<collect::Op> MakeComputeScaleOp();

// Exposed for tests: the activation-quantization checks the ops run before timing.
// Per-tensor: checks that *scale equals max(amax / 448, min) for the exact amax of x
// (from a separate reference kernel), and that the rows `rows` of q (row-major
// [.. x k]) dequantize to x within half an e4m3 step. x_host/q_host hold those rows.
RefCheck CheckTensorQuant(const std::vector<std::uint16_t>& x_rows, const std::vector<std::uint8_t>& q_rows,
                          std::int64_t k, float scale, const std::vector<std::int64_t>& rows);
// Per-token-group: the same per (row, 128-group), scales read from the VEC128 layout
// scales[g * rows_padded + i] (host copy of the whole scale tensor).
RefCheck CheckGroupQuant(const std::vector<std::uint16_t>& x_rows, const std::vector<std::uint8_t>& q_rows,
                         std::int64_t k, const std::vector<float>& scales, std::int64_t rows_padded,
                         const std::vector<std::int64_t>& rows);

}  // namespace servecast::cuda::gemm
