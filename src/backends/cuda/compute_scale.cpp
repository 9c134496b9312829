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
#include "backends/cuda/quantize.h"
#include "collect/case.h"
#include "core/error.h"

namespace servecast::cuda::gemm {
namespace {

using collect::CaseResult;

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

ComputeScaleReport RunChecked(const collect::Case& c, const collect::RunContext& ctx, bool time, std::int64_t m,
                              std::int64_t k) {
  ComputeScaleReport rep;
  cudaStream_t st = Context().stream;
  const std::size_t n = static_cast<std::size_t>(m * k);
  DeviceBuffer x(n * 2), q(n), state(2 * sizeof(unsigned)), scale_dynamic(sizeof(float)), scale_static(sizeof(float)),
      scratch(64);
  SC_CUDA_CHECK(cudaMemsetAsync(state.get(), 0, state.bytes(), st));
  FillUniformBf16(x.get(), n, SeedFor(c.id, 1), 1.0f, st);
  ScaleBf16ByBlockPattern(x.get(), m, k, 1, 0, st);

  LaunchFn dynamic = [&](cudaStream_t s, int) {
    QuantFp8TensorAmax(x.get(), n, state.as<unsigned>(), scale_dynamic.as<float>(), s);
    QuantFp8TensorApply(x.get(), n, scale_dynamic.as<float>(), q.get(), s);
  };
  LaunchFn fixed = [&](cudaStream_t s, int) { QuantFp8TensorApply(x.get(), n, scale_static.as<float>(), q.get(), s); };

  const auto rows = SampleIndices(m, 16, SeedFor(c.id, 3));
  const auto xr = SampledRows<std::uint16_t>(x.get(), rows, k, st);
  auto* count = reinterpret_cast<unsigned long long*>(scratch.as<char>() + 8);
  auto check_q = [&](float scale, const std::string& which) -> std::optional<CaseResult> {
    CountNanE4m3(q.get(), n, count, st);
    const auto nan_q = OneToHost<unsigned long long>(count, st);
    if (nan_q)
      return Incorrect("compute_scale", which + ": " + std::to_string(nan_q) + " of " + std::to_string(n) +
                                            " quantized values are e4m3 NaN (unwritten; poisoned first)");
    const auto qr = SampledRows<std::uint8_t>(q.get(), rows, k, st);
    RefCheck chk = CheckTensorQuant(xr, qr, k, scale, rows);
    if (!chk.ok()) return Incorrect("compute_scale", which + ": " + chk.Describe("q", "half an e4m3 step"));
    return std::nullopt;
  };

  // Dynamic: the scale must be max(amax / 448, min) for the exact amax, q must match it.
  FillPoison(q.get(), q.bytes(), st);
  FillPoison(scale_dynamic.get(), scale_dynamic.bytes(), st);
  dynamic(st, 0);
  SC_CUDA_CHECK(cudaStreamSynchronize(st));
  const float sx = OneToHost<float>(scale_dynamic.get(), st);
  AmaxBf16Reference(x.get(), n, scratch.as<float>(), st);
  const float amax = OneToHost<float>(scratch.get(), st);
  const float want = std::max(amax / kFp8E4m3Max, kFp8MinScale);
  if (!(sx == want)) {
    rep.result = Incorrect("compute_scale", "dynamic scale " + std::to_string(sx) +
                                                " != max(amax/448, min) = " + std::to_string(want) + " (amax " +
                                                std::to_string(amax) + " by the reference kernel)");
    return rep;
  }
  if (auto bad = check_q(sx, "dynamic quantization")) {
    rep.result = *bad;
    return rep;
  }
  // Static: a calibrated scale with 2x headroom (so the check sees it was used).
  const float given = 2.0f * sx;
  SC_CUDA_CHECK(cudaMemcpyAsync(scale_static.get(), &given, sizeof(float), cudaMemcpyHostToDevice, st));
  FillPoison(q.get(), q.bytes(), st);
  fixed(st, 0);
  SC_CUDA_CHECK(cudaStreamSynchronize(st));
  if (auto bad = check_q(given, "static quantization")) {
    rep.result = *bad;
    return rep;
  }
  if (!time) {
    rep.result = CaseResult::Passed({});
    return rep;
  }

  if (!ctx.runtime) throw Error("compute_scale: RunContext without runtime info");
  const collect::TableSpec* table = collect::FindTableSpec("computescale_perf");
  if (!table) throw Error("compute_scale: table computescale_perf is not defined");
  // Activations are not rotated (as in the GEMM row, where an engine's activation was
  // just written by the previous kernel): l2 is labelled warm.
  const collect::TimingStats dyn = TimeOnDevice(dynamic, ctx.timing, TimeOptions{}, ctx.measure_power);
  const collect::TimingStats stat = TimeOnDevice(fixed, ctx.timing, TimeOptions{}, false);
  rep.dynamic_ms = dyn.median_ms;
  rep.static_ms = stat.median_ms;
  collect::TimingStats row = dyn;
  row.median_ms = std::max(0.0, dyn.median_ms - stat.median_ms);
  row.p10_ms = std::max(0.0, dyn.p10_ms - stat.p10_ms);
  row.p90_ms = std::max(0.0, dyn.p90_ms - stat.p90_ms);
  row.throttled = dyn.throttled || stat.throttled;
  rep.result = CaseResult::Passed(
      {collect::MakeRow(*table, *ctx.runtime, "compute_scale", "servecast_quant_fp8_tensor:dynamic-static", c.params,
                        row, ctx.measure_power)});
  return rep;
}

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
  try {
    return RunChecked(c, ctx, time, m, k);
  } catch (const CudaError& e) {
    rep.result = CaseResultFromCudaError(e, collect::FailureClass::kFrameworkBug);
    return rep;
  }
}

std::unique_ptr<collect::Op> MakeComputeScaleOp() {
  return std::make_unique<ComputeScaleOp>();
}

}  // namespace servecast::cuda::gemm
