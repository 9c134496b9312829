// Op `compute_scale` on the cuda backend (table computescale_perf, AIC §4.2): the
// extra time of dynamic over static per-tensor fp8 quantization of bf16 activations
// [m x k], with the kernels the `fp8` GEMM row runs:
//   dynamic = quant_fp8_tensor_amax (amax -> scale) + quant_fp8_tensor_apply,
//   static  = quant_fp8_tensor_apply with a given scale,
//   latency = max(0, dynamic - static), separately for the median, p10 and p90.
// docs/kernels.md has the details.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/fill.h"
#include "backends/cuda/gemm_internal.h"
#include "backends/cuda/harness.h"
#include "backends/cuda/op_vocabulary.h"
#include "backends/cuda/quantize.h"
#include "collect/case.h"
#include "core/error.h"

namespace servecast::cuda::gemm {
namespace {

template <class T>
T OneToHost(const void* src, cudaStream_t st) {
  T v{};
  SC_CUDA_CHECK(cudaMemcpyAsync(&v, src, sizeof(T), cudaMemcpyDeviceToHost, st));
  SC_CUDA_CHECK(cudaStreamSynchronize(st));
  return v;
}

template <class T>
std::vector<T> SampledRows(const void* base, const std::vector<std::int64_t>& rows, std::int64_t k, cudaStream_t st) {
  std::vector<T> out(rows.size() * static_cast<std::size_t>(k));
  for (std::size_t r = 0; r < rows.size(); ++r)
    SC_CUDA_CHECK(cudaMemcpyAsync(out.data() + r * static_cast<std::size_t>(k),
                                  static_cast<const T*>(base) + rows[r] * k, static_cast<std::size_t>(k) * sizeof(T),
                                  cudaMemcpyDeviceToHost, st));
  SC_CUDA_CHECK(cudaStreamSynchronize(st));
  return out;
}

// One compute_scale case through the phase driver; `rep` gets the two timings.
class ComputeScalePhases : public collect::CasePhases {
 public:
  ComputeScalePhases(const collect::Case& c, const collect::RunContext& ctx, std::int64_t m, std::int64_t k,
                     ComputeScaleReport& rep)
      : c_(c), ctx_(ctx), m_(m), k_(k), n_(static_cast<std::size_t>(m * k)), rep_(rep), st_(Context().stream) {}

  std::optional<CaseResult> Prepare() override {
    x_ = DeviceBuffer(n_ * 2);
    q_ = DeviceBuffer(n_);
    state_ = DeviceBuffer(2 * sizeof(unsigned));
    scale_dynamic_ = DeviceBuffer(sizeof(float));
    scale_static_ = DeviceBuffer(sizeof(float));
    scratch_ = DeviceBuffer(64);
    SC_CUDA_CHECK(cudaMemsetAsync(state_.get(), 0, state_.bytes(), st_));
    FillUniformBf16(x_.get(), n_, SeedFor(c_.id, 1), 1.0f, st_);
    ScaleBf16ByBlockPattern(x_.get(), m_, k_, 1, 0, st_);
    return std::nullopt;
  }

  std::optional<CaseResult> Check() override {
    rows_ = SampleIndices(m_, 16, SeedFor(c_.id, 3));
    xr_ = SampledRows<std::uint16_t>(x_.get(), rows_, k_, st_);

    // Dynamic: the scale must be max(amax / 448, min) for the exact amax, q must match it.
    FillPoison(q_.get(), q_.bytes(), st_);
    FillPoison(scale_dynamic_.get(), scale_dynamic_.bytes(), st_);
    Dynamic(st_);
    SC_CUDA_CHECK(cudaStreamSynchronize(st_));
    const float sx = OneToHost<float>(scale_dynamic_.get(), st_);
    AmaxBf16Reference(x_.get(), n_, scratch_.as<float>(), st_);
    const float amax = OneToHost<float>(scratch_.get(), st_);
    const float want = std::max(amax / kFp8E4m3Max, kFp8MinScale);
    if (!(sx == want))
      return Incorrect("compute_scale", "dynamic scale " + std::to_string(sx) + " != max(amax/448, min) = " +
                                            std::to_string(want) + " (amax " + std::to_string(amax) +
                                            " by the reference kernel)");
    if (auto bad = CheckQ(sx, "dynamic quantization")) return bad;
    // Static: a calibrated scale with 2x headroom (so the check sees it was used).
    const float given = 2.0f * sx;
    SC_CUDA_CHECK(cudaMemcpyAsync(scale_static_.get(), &given, sizeof(float), cudaMemcpyHostToDevice, st_));
    FillPoison(q_.get(), q_.bytes(), st_);
    Static(st_);
    SC_CUDA_CHECK(cudaStreamSynchronize(st_));
    return CheckQ(given, "static quantization");
  }

  // Activations are not rotated (as in the GEMM row, where an engine's activation was
  // just written by the previous kernel): l2 is labelled warm.
  void Time() override {
    if (!ctx_.runtime) throw Error("compute_scale: RunContext without runtime info");
    table_ = collect::FindTableSpec("computescale_perf");
    if (!table_) throw Error("compute_scale: table computescale_perf is not defined");
    dyn_ = TimeOnDevice([this](cudaStream_t s, int) { Dynamic(s); }, ctx_.timing, TimeOptions{}, ctx_.measure_power);
    stat_ = TimeOnDevice([this](cudaStream_t s, int) { Static(s); }, ctx_.timing, TimeOptions{}, false);
    rep_.dynamic_ms = dyn_.median_ms;
    rep_.static_ms = stat_.median_ms;
  }

  std::vector<collect::Params> Emit() override {
    collect::TimingStats row = dyn_;
    row.median_ms = std::max(0.0, dyn_.median_ms - stat_.median_ms);
    row.p10_ms = std::max(0.0, dyn_.p10_ms - stat_.p10_ms);
    row.p90_ms = std::max(0.0, dyn_.p90_ms - stat_.p90_ms);
    row.throttled = dyn_.throttled || stat_.throttled;
    return {collect::MakeRow(*table_, *ctx_.runtime, "compute_scale", "servecast_quant_fp8_tensor:dynamic-static",
                             c_.params, row, ctx_.measure_power)};
  }

 private:
  void Dynamic(cudaStream_t s) const {
    QuantFp8TensorAmax(x_.get(), n_, state_.as<unsigned>(), scale_dynamic_.as<float>(), s);
    QuantFp8TensorApply(x_.get(), n_, scale_dynamic_.as<float>(), q_.get(), s);
  }
  void Static(cudaStream_t s) const { QuantFp8TensorApply(x_.get(), n_, scale_static_.as<float>(), q_.get(), s); }

  std::optional<CaseResult> CheckQ(float scale, const std::string& which) {
    auto* count = reinterpret_cast<unsigned long long*>(scratch_.as<char>() + 8);
    CountNanE4m3(q_.get(), n_, count, st_);
    const auto nan_q = OneToHost<unsigned long long>(count, st_);
    if (nan_q)
      return Incorrect("compute_scale", which + ": " + std::to_string(nan_q) + " of " + std::to_string(n_) +
                                            " quantized values are e4m3 NaN (unwritten; poisoned first)");
    const auto qr = SampledRows<std::uint8_t>(q_.get(), rows_, k_, st_);
    RefCheck chk = CheckTensorQuant(xr_, qr, k_, scale, rows_);
    if (!chk.ok()) return Incorrect("compute_scale", which + ": " + chk.Describe("q", "half an e4m3 step"));
    return std::nullopt;
  }

  const collect::Case& c_;
  const collect::RunContext& ctx_;
  const std::int64_t m_, k_;
  const std::size_t n_;
  ComputeScaleReport& rep_;
  cudaStream_t st_;
  DeviceBuffer x_, q_, state_, scale_dynamic_, scale_static_, scratch_;
  std::vector<std::int64_t> rows_;
  std::vector<std::uint16_t> xr_;
  const collect::TableSpec* table_ = nullptr;
  collect::TimingStats dyn_, stat_;
};

class ComputeScaleOp : public collect::Op {
 public:
  ComputeScaleOp() {
    table_ = collect::FindTableSpec("computescale_perf");
    if (!table_) throw Error("compute_scale: table computescale_perf is not defined");
  }
  std::string name() const override { return "compute_scale"; }
  const collect::TableSpec& table() const override { return *table_; }
  std::vector<std::string> required_params() const override { return table_->KeyColumnNames(); }
  std::vector<collect::Requirement> requirements() const override {
    collect::Requirement r;
    r.min_sm = 89;  // e4m3 conversion instructions (AIC: op_min_sm.compute_scale = 89)
    return {r};
  }
  double MemoryBytes(const collect::Params& p) const override {
    try {
      return 3.0 * static_cast<double>(p.Int("m")) * static_cast<double>(p.Int("k"));
    } catch (const Error&) {
      return 0;
    }
  }
  CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override {
    return RunComputeScaleCase(c, ctx, true).result;
  }

 private:
  const collect::TableSpec* table_ = nullptr;
};

}  // namespace

ComputeScaleReport RunComputeScaleCase(const collect::Case& c, const collect::RunContext& ctx, bool time) {
  ComputeScaleReport rep;
  std::string dtype;
  std::int64_t m = 0, k = 0;
  try {
    dtype = c.params.Str("quant_dtype");
    m = c.params.Int("m");
    k = c.params.Int("k");
  } catch (const Error& e) {
    rep.result = InvalidParams("compute_scale", e.what());
    return rep;
  }
  if (m <= 0 || k <= 0) {
    rep.result = InvalidParams("compute_scale",
                               "m and k must be positive; got m=" + std::to_string(m) + " k=" + std::to_string(k));
    return rep;
  }
  if (dtype != "fp8") {
    rep.result =
        NotSupported("UnsupportedDtype", "compute_scale on cuda runs quant_dtype fp8 (e4m3); got '" + dtype + "'");
    return rep;
  }
  ComputeScalePhases phases(c, ctx, m, k, rep);
  rep.result = RunCudaPhases(phases, collect::FailureClass::kFrameworkBug, {time});
  return rep;
}

std::unique_ptr<collect::Op> MakeComputeScaleOp() {
  return std::make_unique<ComputeScaleOp>();
}

}  // namespace servecast::cuda::gemm
