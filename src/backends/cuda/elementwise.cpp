// The CUDA backend's elementwise ops (elementwise_ops.h): one class per op, each
// declaring its buffers, how to fill them, how to launch, and its reference;
// ElementwiseOp runs every case through prepare -> check against a double-precision
// host reference -> time with rotated copies -> one elementwise_perf row.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/elementwise_kernels.h"
#include "backends/cuda/elementwise_ops.h"
#include "backends/cuda/fill.h"
#include "backends/cuda/harness.h"
#include "backends/cuda/op_vocabulary.h"
#include "collect/case.h"
#include "collect/table_spec.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/value.h"

namespace servecast::cuda {
namespace {

constexpr double kF32Roundoff = 0x1p-24;  // unit roundoff of float32
constexpr float kRmsNormEpsilon = 1e-6f;
constexpr double kRopeBase = 10000.0;
constexpr std::int64_t kCheckAllUpTo = std::int64_t{1} << 18;  // elements
constexpr std::int64_t kCheckRows = 64;
constexpr std::size_t kBf16Bytes = 2;

struct Shape {
  std::int64_t tokens = 0;
  std::int64_t hidden = 0;
  std::size_t elems() const { return static_cast<std::size_t>(tokens) * static_cast<std::size_t>(hidden); }
  double td() const { return static_cast<double>(tokens) * static_cast<double>(hidden); }
};

// Compares outputs with the reference element by element, each with its own
// absolute tolerance; keeps the worst element (error / tolerance). Non-finite
// output never passes. Every reference value is multiplied by `reference_scale`
// (1 except in the test that proves the check can fail).
class RefCheck {
 public:
  explicit RefCheck(double reference_scale) : scale_(reference_scale) {}

  void Add(const char* tensor, std::int64_t row, std::int64_t col, double got, double ref, double tol) {
    ref *= scale_;
    ++checked_;
    const double err = std::fabs(got - ref);
    double ratio;
    if (!std::isfinite(got))
      ratio = std::numeric_limits<double>::infinity();
    else if (tol > 0)
      ratio = err / tol;
    else
      ratio = err == 0 ? 0 : std::numeric_limits<double>::infinity();
    if (!(ratio <= 1)) ++bad_;
    if (checked_ == 1 || ratio > worst_ratio_) {
      worst_ratio_ = ratio;
      worst_ = tensor + std::string("[") + std::to_string(row) + "," + std::to_string(col) + "]: got " + FormatG6(got) +
               ", expected " + FormatG6(ref) + ", abs error " + FormatG6(err) + ", tolerance " + FormatG6(tol);
    }
  }

  // A whole-tensor scan found `count` NaN/Inf values in a poisoned output: the
  // kernel left elements unwritten (or produced non-finite values).
  void AddNonFinite(const char* tensor, std::uint64_t count, std::size_t of) {
    if (count == 0) return;
    ++bad_;
    unwritten_ += std::string(unwritten_.empty() ? "" : "; ") + std::to_string(count) + " of " + std::to_string(of) +
                  " elements of " + tensor + " are NaN/Inf after the run (unwritten poison?)";
  }

  bool ok() const { return bad_ == 0 && checked_ > 0; }

  std::string Describe(const std::string& rule) const {
    std::string s = std::to_string(bad_) + " of " + std::to_string(checked_) + " checked elements out of tolerance";
    if (checked_ > 0) s += "; worst at " + worst_ + " (" + rule + ")";
    if (!unwritten_.empty()) s += "; " + unwritten_;
    return s;
  }

 private:
  double scale_;
  std::int64_t checked_ = 0;
  std::int64_t bad_ = 0;
  double worst_ratio_ = 0;
  std::string worst_;
  std::string unwritten_;
};

double Bf16(std::uint16_t bits) {
  return static_cast<double>(Bf16ToF32(bits));
}

std::uint64_t SeedFor(std::uint64_t base, std::uint64_t stream) {
  SplitMix64 mix(base ^ (stream * 0x9E3779B97F4A7C15ULL));
  return mix.Next();
}

// Row indices to check: all rows for small shapes, else kCheckRows distinct rows
// with the first and the last among them (sorted).
std::vector<std::int64_t> RowsToCheck(const Shape& s, std::uint64_t seed) {
  std::vector<std::int64_t> rows;
  if (s.td() <= static_cast<double>(kCheckAllUpTo) || s.tokens <= kCheckRows) {
    for (std::int64_t t = 0; t < s.tokens; ++t) rows.push_back(t);
    return rows;
  }
  std::set<std::int64_t> picked = {0, s.tokens - 1};
  SplitMix64 rng(seed);
  while (static_cast<std::int64_t>(picked.size()) < kCheckRows)
    picked.insert(static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(s.tokens))));
  return {picked.begin(), picked.end()};
}

// Copies rows `rows` (of `row_elems` elements of type T) of a device tensor to the
// host, concatenated; synchronizes `stream` first and last.
template <class T>
std::vector<T> ReadRows(const void* dev, std::int64_t row_elems, const std::vector<std::int64_t>& rows,
                        std::int64_t total_rows, cudaStream_t stream) {
  const std::size_t row_bytes = static_cast<std::size_t>(row_elems) * sizeof(T);
  std::vector<T> host(rows.size() * static_cast<std::size_t>(row_elems));
  SC_CUDA_CHECK(cudaStreamSynchronize(stream));
  const auto* base = static_cast<const unsigned char*>(dev);
  if (static_cast<std::int64_t>(rows.size()) == total_rows) {  // all rows: one copy
    SC_CUDA_CHECK(cudaMemcpyAsync(host.data(), base, rows.size() * row_bytes, cudaMemcpyDeviceToHost, stream));
  } else {
    for (std::size_t i = 0; i < rows.size(); ++i)
      SC_CUDA_CHECK(cudaMemcpyAsync(host.data() + i * static_cast<std::size_t>(row_elems),
                                    base + static_cast<std::size_t>(rows[i]) * row_bytes, row_bytes,
                                    cudaMemcpyDeviceToHost, stream));
  }
  SC_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

template <class T>
void Upload(void* dev, const std::vector<T>& host, cudaStream_t stream) {
  SC_CUDA_CHECK(cudaMemcpyAsync(dev, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
  SC_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host vector may go away after return
}

using Buffers = std::vector<DeviceBuffer>;

Buffers Allocate(const std::vector<std::size_t>& sizes) {
  Buffers out;
  for (std::size_t b : sizes) out.emplace_back(b);
  return out;
}

// One elementwise_perf op. Buffers come in two groups: `shared` (weights, tables,
// caches: read by every call, allocated once) and one `set` per rotated copy (the
// call's activations in and out). The L2 rotation covers the sets.
class ElementwiseOp : public collect::Op {
 public:
  ElementwiseOp(std::string name, std::string kernel_source, double reference_scale)
      : name_(std::move(name)),
        kernel_source_(std::move(kernel_source)),
        reference_scale_(reference_scale),
        table_(*collect::FindTableSpec("elementwise_perf")) {}

  std::string name() const override { return name_; }
  const collect::TableSpec& table() const override { return table_; }
  std::vector<std::string> required_params() const override { return {"dtype", "num_tokens", "hidden_size"}; }
  double default_timeout_s() const override { return 60; }

  double MemoryBytes(const Params& p) const override {
    std::optional<Shape> s = ParseShape(p);
    if (!s) return 0;  // Run reports the bad parameters
    double total = 0;
    for (std::size_t b : SharedSizes(*s)) total += static_cast<double>(b);
    for (std::size_t b : SetSizes(*s)) total += static_cast<double>(b);
    return total;
  }

  CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override {
    std::optional<Shape> shape = ParseShape(c.params);
    if (!shape)
      return CaseResult::Failure(Disposition::kFailed, FailureClass::kUnsupportedConfig, "InvalidParams",
                                 name_ + ": num_tokens and hidden_size must be positive integers below 2^31 (got " +
                                     c.params.Canonical() + ")");
    const std::string& dtype = c.params.Str("dtype");
    if (dtype != "bfloat16")
      return CaseResult::Failure(Disposition::kNotSupported, FailureClass::kUnsupportedConfig, "UnsupportedDtype",
                                 name_ + " on cuda runs dtype bfloat16 only; the case asks for " + dtype);
    if (std::optional<std::string> why = WhyUnsupported(*shape))
      return CaseResult::Failure(Disposition::kNotSupported, FailureClass::kUnsupportedConfig, "UnsupportedShape",
                                 name_ + ": " + *why);
    if (!ctx.runtime)
      return CaseResult::Failure(Disposition::kFailed, FailureClass::kCollectorBug, "MissingRuntime",
                                 name_ + ": the run context carries no runtime");
    Phases phases(*this, c, ctx, *shape);
    return RunCudaPhases(phases, FailureClass::kCollectorBug);
  }

 protected:
  // A reason the shape cannot run (the case becomes not_supported), or nothing.
  virtual std::optional<std::string> WhyUnsupported(const Shape&) const { return std::nullopt; }
  virtual std::vector<std::size_t> SharedSizes(const Shape&) const { return {}; }
  virtual std::vector<std::size_t> SetSizes(const Shape& s) const = 0;
  // Device bytes one call touches in its set (default: the whole set); the
  // rotation's coverage of L2 is counted with this.
  virtual double CallBytes(const Shape& s) const {
    double total = 0;
    for (std::size_t b : SetSizes(s)) total += static_cast<double>(b);
    return total;
  }
  virtual void FillShared(const Shape&, std::uint64_t /*seed*/, Buffers& /*shared*/, cudaStream_t) const {}
  // Fills the set's inputs (from `seed`) and poisons its outputs.
  virtual void FillSet(const Shape& s, std::uint64_t seed, Buffers& set, cudaStream_t stream) const = 0;
  virtual void Launch(const Shape& s, const Buffers& shared, Buffers& set, cudaStream_t stream) const = 0;
  // Launches once on `set` and compares rows `rows` with the host reference.
  virtual void LaunchAndCheck(const Shape& s, const Buffers& shared, Buffers& set,
                              const std::vector<std::int64_t>& rows, RefCheck& check, cudaStream_t stream) const = 0;
  virtual std::string ToleranceRule() const = 0;
  // What runs for this shape (the kernel_source column).
  virtual std::string KernelSource(const Shape&) const { return kernel_source_; }

 private:
  static std::optional<Shape> ParseShape(const Params& p) {
    const Value* t = p.Find("num_tokens");
    const Value* h = p.Find("hidden_size");
    if (!t || !h || !p.Find("dtype") || TypeOf(*t) != ValueType::kInt64 || TypeOf(*h) != ValueType::kInt64 ||
        TypeOf(*p.Find("dtype")) != ValueType::kString)
      return std::nullopt;
    Shape s{std::get<std::int64_t>(*t), std::get<std::int64_t>(*h)};
    constexpr std::int64_t kMax = (std::int64_t{1} << 31) - 1;
    if (s.tokens <= 0 || s.hidden <= 0 || s.tokens > kMax || s.hidden > kMax) return std::nullopt;
    return s;
  }

  // One case: prepare -> check against the reference (fresh inputs, poisoned outputs,
  // one call) -> time, rotating through copies of the sets so repeated calls miss in
  // L2 -> one row.
  class Phases : public collect::CasePhases {
   public:
    Phases(const ElementwiseOp& op, const collect::Case& c, const collect::RunContext& ctx, const Shape& s)
        : op_(op), ctx_(ctx), s_(s), stream_(Context().stream), base_seed_(Fnv1a64(c.id)) {}

    std::optional<CaseResult> Prepare() override {
      shared_ = Allocate(op_.SharedSizes(s_));
      op_.FillShared(s_, SeedFor(base_seed_, 1), shared_, stream_);
      sets_.push_back(Allocate(op_.SetSizes(s_)));
      op_.FillSet(s_, SeedFor(base_seed_, 100), sets_[0], stream_);
      return std::nullopt;
    }

    std::optional<CaseResult> Check() override {
      RefCheck check(op_.reference_scale_);
      op_.LaunchAndCheck(s_, shared_, sets_[0], RowsToCheck(s_, SeedFor(base_seed_, 2)), check, stream_);
      if (check.ok()) return std::nullopt;
      return CaseResult::Failure(Disposition::kIncorrect, FailureClass::kCollectorBug, "IncorrectOutput",
                                 op_.name_ + " (" + op_.KernelSource(s_) + "): " + check.Describe(op_.ToleranceRule()));
    }

    void Time() override {
      const double call_bytes = op_.CallBytes(s_);
      const int copies = CopiesForColdL2(call_bytes);
      for (int k = 1; k < copies; ++k) {
        sets_.push_back(Allocate(op_.SetSizes(s_)));
        op_.FillSet(s_, SeedFor(base_seed_, 100 + static_cast<std::uint64_t>(k)), sets_.back(), stream_);
      }
      SC_CUDA_CHECK(cudaStreamSynchronize(stream_));
      TimeOptions opt;
      opt.copies = copies;
      opt.rotated_bytes = call_bytes * copies;
      stats_ = TimeOnDevice(
          [&](cudaStream_t st, int iteration) {
            op_.Launch(s_, shared_, sets_[static_cast<std::size_t>(iteration % copies)], st);
          },
          ctx_.timing, opt, ctx_.measure_power);
    }

    std::vector<Params> Emit() override {
      Params key;
      key.Set("dtype", std::string("bfloat16"));
      key.Set("num_tokens", s_.tokens);
      key.Set("hidden_size", s_.hidden);
      return {collect::MakeRow(op_.table_, *ctx_.runtime, op_.name_, op_.KernelSource(s_), key, stats_,
                               ctx_.measure_power)};
    }

   private:
    const ElementwiseOp& op_;
    const collect::RunContext& ctx_;
    const Shape s_;
    cudaStream_t stream_;
    const std::uint64_t base_seed_;
    Buffers shared_;
    std::vector<Buffers> sets_;
    collect::TimingStats stats_;
  };

  std::string name_;
  std::string kernel_source_;
  double reference_scale_;
  const collect::TableSpec& table_;
};

// ---- rmsnorm and rmsnorm_residual -------------------------------------------------

class RmsNormOp : public ElementwiseOp {
 public:
  RmsNormOp(bool fused, double reference_scale)
      : ElementwiseOp(fused ? "rmsnorm_residual" : "rmsnorm",
                      fused ? "servecast_rmsnorm_residual_bf16" : "servecast_rmsnorm_bf16", reference_scale),
        fused_(fused) {}

 protected:
  // shared: w [H]; set: x, y (, residual) [T][H]
  std::optional<std::string> WhyUnsupported(const Shape& s) const override {
    if (RmsNormSupportsHidden(s.hidden)) return std::nullopt;
    return "hidden_size " + std::to_string(s.hidden) + " needs " +
           std::to_string(s.hidden / Bf16VectorWidth(s.hidden)) + " accesses of " +
           std::to_string(Bf16VectorWidth(s.hidden)) + " elements per row: more than one block's registers hold (" +
           std::to_string(kRmsNormMaxAccessesPerRow) + ") and a row of " + std::to_string(s.hidden * 2) +
           " bytes exceeds the " + std::to_string(kRmsNormMaxSharedBytes) + "-byte shared-memory stage";
  }
  std::vector<std::size_t> SharedSizes(const Shape& s) const override {
    return {static_cast<std::size_t>(s.hidden) * kBf16Bytes};
  }
  std::vector<std::size_t> SetSizes(const Shape& s) const override {
    std::vector<std::size_t> sizes(fused_ ? 3 : 2, s.elems() * kBf16Bytes);
    return sizes;
  }
  void FillShared(const Shape& s, std::uint64_t seed, Buffers& shared, cudaStream_t stream) const override {
    FillUniformBf16(shared[0].get(), static_cast<std::size_t>(s.hidden), seed, 1.0f, stream);
  }
  void FillSet(const Shape& s, std::uint64_t seed, Buffers& set, cudaStream_t stream) const override {
    FillUniformBf16(set[0].get(), s.elems(), SeedFor(seed, 1), 1.0f, stream);
    FillPoison(set[1].get(), set[1].bytes(), stream);
    if (fused_) FillUniformBf16(set[2].get(), s.elems(), SeedFor(seed, 2), 1.0f, stream);
  }
  void Launch(const Shape& s, const Buffers& shared, Buffers& set, cudaStream_t stream) const override {
    LaunchRmsNormBf16(set[0].get(), fused_ ? set[2].get() : nullptr, shared[0].get(), set[1].get(), s.tokens, s.hidden,
                      kRmsNormEpsilon, stream);
  }
  void LaunchAndCheck(const Shape& s, const Buffers& shared, Buffers& set, const std::vector<std::int64_t>& rows,
                      RefCheck& check, cudaStream_t stream) const override {
    const std::int64_t H = s.hidden;
    auto x = ReadRows<std::uint16_t>(set[0].get(), H, rows, s.tokens, stream);
    std::vector<std::uint16_t> res_in;
    if (fused_) res_in = ReadRows<std::uint16_t>(set[2].get(), H, rows, s.tokens, stream);
    auto w = ReadRows<std::uint16_t>(shared[0].get(), H, {0}, 1, stream);
    Launch(s, shared, set, stream);
    auto y = ReadRows<std::uint16_t>(set[1].get(), H, rows, s.tokens, stream);
    check.AddNonFinite("y", CountNonFiniteBf16(set[1].get(), s.elems(), stream), s.elems());
    std::vector<std::uint16_t> res_out;
    if (fused_) {
      res_out = ReadRows<std::uint16_t>(set[2].get(), H, rows, s.tokens, stream);
      check.AddNonFinite("residual", CountNonFiniteBf16(set[2].get(), s.elems(), stream), s.elems());
    }
    // Relative error of the fp32 sum of squares (any order) halved by the square
    // root, a few more fp32 roundings, then the bf16 rounding of y.
    const double n = static_cast<double>(H) * kF32Roundoff;
    const double rel_tol = kBf16Roundoff + 2 * (0.5 * n / (1 - n) + 8 * kF32Roundoff);
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const std::size_t off = r * static_cast<std::size_t>(H);
      // The normalized row: x, or (fused) the stored bf16 residual x + residual,
      // itself checked against the exact sum.
      std::vector<double> z(static_cast<std::size_t>(H));
      for (std::int64_t d = 0; d < H; ++d) {
        if (fused_) {
          const double a = Bf16(x[off + d]), b = Bf16(res_in[off + d]);
          check.Add("residual", rows[r], d, Bf16(res_out[off + d]), a + b,
                    kBf16Roundoff * std::fabs(a + b) + 2 * kF32Roundoff * (std::fabs(a) + std::fabs(b)));
          z[static_cast<std::size_t>(d)] = Bf16(res_out[off + d]);
        } else {
          z[static_cast<std::size_t>(d)] = Bf16(x[off + d]);
        }
      }
      double sum_sq = 0;
      for (double v : z) sum_sq += v * v;
      const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(H) + kRmsNormEpsilon);
      for (std::int64_t d = 0; d < H; ++d) {
        const double ref = z[static_cast<std::size_t>(d)] * inv_rms * Bf16(w[static_cast<std::size_t>(d)]);
        check.Add("y", rows[r], d, Bf16(y[off + d]), ref, rel_tol * std::fabs(ref));
      }
    }
  }
  std::string ToleranceRule() const override {
    return "y: (2^-8 + gamma_hidden + 16u) * |y|; residual: 2^-8 * |a + b| + 2u * (|a| + |b|)";
  }
  // servecast_rmsnorm[_residual]_bf16_regs (row in registers) or ..._smem (row
  // staged in shared memory).
  std::string KernelSource(const Shape& s) const override {
    const bool shared = RmsNormKernelFor(s.hidden, fused_) == RmsNormKernel::kShared;
    return std::string(fused_ ? "servecast_rmsnorm_residual_bf16" : "servecast_rmsnorm_bf16") +
           (shared ? "_smem" : "_regs");
  }

 private:
  bool fused_;
};

// ---- silu_and_mul -------------------------------------------------------------------

class SiluAndMulOp : public ElementwiseOp {
 public:
  explicit SiluAndMulOp(double reference_scale)
      : ElementwiseOp("silu_and_mul", "servecast_silu_and_mul_bf16", reference_scale) {}

 protected:
  static constexpr float kInputRange = 8.0f;  // gate in [-8, 8): both tails of the sigmoid

  // set: in [T][2H] = [gate | up], out [T][H]
  std::vector<std::size_t> SetSizes(const Shape& s) const override {
    return {2 * s.elems() * kBf16Bytes, s.elems() * kBf16Bytes};
  }
  void FillSet(const Shape& s, std::uint64_t seed, Buffers& set, cudaStream_t stream) const override {
    FillUniformBf16(set[0].get(), 2 * s.elems(), seed, kInputRange, stream);
    FillPoison(set[1].get(), set[1].bytes(), stream);
  }
  void Launch(const Shape& s, const Buffers&, Buffers& set, cudaStream_t stream) const override {
    LaunchSiluAndMulBf16(set[0].get(), set[1].get(), s.tokens, s.hidden, stream);
  }
  void LaunchAndCheck(const Shape& s, const Buffers& shared, Buffers& set, const std::vector<std::int64_t>& rows,
                      RefCheck& check, cudaStream_t stream) const override {
    const std::int64_t H = s.hidden;
    auto in = ReadRows<std::uint16_t>(set[0].get(), 2 * H, rows, s.tokens, stream);
    Launch(s, shared, set, stream);
    auto out = ReadRows<std::uint16_t>(set[1].get(), H, rows, s.tokens, stream);
    check.AddNonFinite("out", CountNonFiniteBf16(set[1].get(), s.elems(), stream), s.elems());
    for (std::size_t r = 0; r < rows.size(); ++r) {
      for (std::int64_t d = 0; d < H; ++d) {
        const double g = Bf16(in[r * 2 * H + d]), u = Bf16(in[r * 2 * H + H + d]);
        const double ref = g / (1.0 + std::exp(-g)) * u;
        check.Add("out", rows[r], d, Bf16(out[r * H + d]), ref, (kBf16Roundoff + 64 * kF32Roundoff) * std::fabs(ref));
      }
    }
  }
  std::string ToleranceRule() const override { return "(2^-8 + 64u) * |out| (fast exp: a few ulp)"; }
};

// ---- residual_add -------------------------------------------------------------------

class ResidualAddOp : public ElementwiseOp {
 public:
  explicit ResidualAddOp(double reference_scale)
      : ElementwiseOp("residual_add", "servecast_residual_add_bf16", reference_scale) {}

 protected:
  // set: a, b, y [T][H]
  std::vector<std::size_t> SetSizes(const Shape& s) const override {
    return std::vector<std::size_t>(3, s.elems() * kBf16Bytes);
  }
  void FillSet(const Shape& s, std::uint64_t seed, Buffers& set, cudaStream_t stream) const override {
    FillUniformBf16(set[0].get(), s.elems(), SeedFor(seed, 1), 1.0f, stream);
    FillUniformBf16(set[1].get(), s.elems(), SeedFor(seed, 2), 1.0f, stream);
    FillPoison(set[2].get(), set[2].bytes(), stream);
  }
  void Launch(const Shape& s, const Buffers&, Buffers& set, cudaStream_t stream) const override {
    LaunchResidualAddBf16(set[0].get(), set[1].get(), set[2].get(), s.tokens, s.hidden, stream);
  }
  void LaunchAndCheck(const Shape& s, const Buffers& shared, Buffers& set, const std::vector<std::int64_t>& rows,
                      RefCheck& check, cudaStream_t stream) const override {
    const std::int64_t H = s.hidden;
    auto a = ReadRows<std::uint16_t>(set[0].get(), H, rows, s.tokens, stream);
    auto b = ReadRows<std::uint16_t>(set[1].get(), H, rows, s.tokens, stream);
    Launch(s, shared, set, stream);
    auto y = ReadRows<std::uint16_t>(set[2].get(), H, rows, s.tokens, stream);
    check.AddNonFinite("y", CountNonFiniteBf16(set[2].get(), s.elems(), stream), s.elems());
    for (std::size_t r = 0; r < rows.size(); ++r) {
      for (std::int64_t d = 0; d < H; ++d) {
        const std::size_t i = r * static_cast<std::size_t>(H) + static_cast<std::size_t>(d);
        const double av = Bf16(a[i]), bv = Bf16(b[i]);
        check.Add("y", rows[r], d, Bf16(y[i]), av + bv,
                  kBf16Roundoff * std::fabs(av + bv) + 2 * kF32Roundoff * (std::fabs(av) + std::fabs(bv)));
      }
    }
  }
  std::string ToleranceRule() const override { return "2^-8 * |a + b| + 2u * (|a| + |b|)"; }
};

// ---- rotary_embedding ---------------------------------------------------------------

class RotaryEmbeddingOp : public ElementwiseOp {
 public:
  explicit RotaryEmbeddingOp(double reference_scale)
      : ElementwiseOp("rotary_embedding", "servecast_rotary_neox_bf16", reference_scale) {}

 protected:
  static constexpr int kHalf = kRotaryHeadDim / 2;

  std::optional<std::string> WhyUnsupported(const Shape& s) const override {
    if (s.hidden % kRotaryHeadDim == 0) return std::nullopt;
    return "hidden_size " + std::to_string(s.hidden) + " is not a whole number of heads: the kernel runs head_dim " +
           std::to_string(kRotaryHeadDim) + " only";
  }
  // shared: positions int64 [T] (0..T-1), cos_sin bf16 [T][128] = [cos(64) | sin(64)];
  // set: q [T][H], rotated in place
  std::vector<std::size_t> SharedSizes(const Shape& s) const override {
    const auto t = static_cast<std::size_t>(s.tokens);
    return {t * sizeof(std::int64_t), t * kRotaryHeadDim * kBf16Bytes};
  }
  std::vector<std::size_t> SetSizes(const Shape& s) const override { return {s.elems() * kBf16Bytes}; }
  void FillShared(const Shape& s, std::uint64_t, Buffers& shared, cudaStream_t stream) const override {
    std::vector<std::int64_t> positions(static_cast<std::size_t>(s.tokens));
    std::vector<std::uint16_t> cos_sin(static_cast<std::size_t>(s.tokens) * kRotaryHeadDim);
    for (std::int64_t t = 0; t < s.tokens; ++t) {
      positions[static_cast<std::size_t>(t)] = t;
      for (int i = 0; i < kHalf; ++i) {
        const double inv_freq = std::pow(kRopeBase, -2.0 * i / kRotaryHeadDim);
        const double angle = static_cast<double>(t) * inv_freq;
        cos_sin[static_cast<std::size_t>(t) * kRotaryHeadDim + i] = F32ToBf16(static_cast<float>(std::cos(angle)));
        cos_sin[static_cast<std::size_t>(t) * kRotaryHeadDim + kHalf + i] =
            F32ToBf16(static_cast<float>(std::sin(angle)));
      }
    }
    Upload(shared[0].get(), positions, stream);
    Upload(shared[1].get(), cos_sin, stream);
  }
  void FillSet(const Shape& s, std::uint64_t seed, Buffers& set, cudaStream_t stream) const override {
    FillUniformBf16(set[0].get(), s.elems(), seed, 1.0f, stream);
  }
  void Launch(const Shape& s, const Buffers& shared, Buffers& set, cudaStream_t stream) const override {
    LaunchRotaryNeoxBf16(set[0].get(), shared[0].as<std::int64_t>(), shared[1].get(), s.tokens, s.hidden, stream);
  }
  void LaunchAndCheck(const Shape& s, const Buffers& shared, Buffers& set, const std::vector<std::int64_t>& rows,
                      RefCheck& check, cudaStream_t stream) const override {
    const std::int64_t H = s.hidden;
    auto before = ReadRows<std::uint16_t>(set[0].get(), H, rows, s.tokens, stream);
    auto cs = ReadRows<std::uint16_t>(shared[1].get(), kRotaryHeadDim, rows, s.tokens, stream);
    Launch(s, shared, set, stream);
    auto after = ReadRows<std::uint16_t>(set[0].get(), H, rows, s.tokens, stream);
    check.AddNonFinite("q", CountNonFiniteBf16(set[0].get(), s.elems(), stream), s.elems());
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const std::size_t row = r * static_cast<std::size_t>(H);
      for (std::int64_t head = 0; head < H / kRotaryHeadDim; ++head) {
        for (int i = 0; i < kHalf; ++i) {
          const std::size_t i1 = row + static_cast<std::size_t>(head * kRotaryHeadDim + i), i2 = i1 + kHalf;
          const double a = Bf16(before[i1]), b = Bf16(before[i2]);
          const double c = Bf16(cs[r * kRotaryHeadDim + i]), sn = Bf16(cs[r * kRotaryHeadDim + kHalf + i]);
          const double mag = 4 * kF32Roundoff * (std::fabs(a * c) + std::fabs(b * sn));
          const double ref1 = a * c - b * sn, ref2 = b * c + a * sn;
          check.Add("q", rows[r], head * kRotaryHeadDim + i, Bf16(after[i1]), ref1,
                    kBf16Roundoff * std::fabs(ref1) + mag);
          check.Add("q", rows[r], head * kRotaryHeadDim + kHalf + i, Bf16(after[i2]), ref2,
                    kBf16Roundoff * std::fabs(ref2) + mag);
        }
      }
    }
  }
  std::string ToleranceRule() const override { return "2^-8 * |ref| + 4u * (|x1 cos| + |x2 sin|)"; }
};

// ---- embedding ----------------------------------------------------------------------

class EmbeddingOp : public ElementwiseOp {
 public:
  explicit EmbeddingOp(double reference_scale)
      : ElementwiseOp("embedding", "servecast_embedding_bf16", reference_scale) {}

 protected:
  // shared: table [V][H]; set: ids int64 [T], out [T][H]
  std::vector<std::size_t> SharedSizes(const Shape& s) const override {
    return {static_cast<std::size_t>(kEmbeddingVocab) * static_cast<std::size_t>(s.hidden) * kBf16Bytes};
  }
  std::vector<std::size_t> SetSizes(const Shape& s) const override {
    return {static_cast<std::size_t>(s.tokens) * sizeof(std::int64_t), s.elems() * kBf16Bytes};
  }
  // A call also reads T rows of the table, different rows in each copy.
  double CallBytes(const Shape& s) const override {
    return static_cast<double>(s.tokens) * sizeof(std::int64_t) + 2 * s.td() * kBf16Bytes;
  }
  void FillShared(const Shape& s, std::uint64_t seed, Buffers& shared, cudaStream_t stream) const override {
    FillUniformBf16(shared[0].get(), static_cast<std::size_t>(kEmbeddingVocab) * static_cast<std::size_t>(s.hidden),
                    seed, 1.0f, stream);
  }
  void FillSet(const Shape& s, std::uint64_t seed, Buffers& set, cudaStream_t stream) const override {
    std::vector<std::int64_t> ids(static_cast<std::size_t>(s.tokens));
    SplitMix64 rng(seed);
    for (auto& id : ids) id = static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(kEmbeddingVocab)));
    Upload(set[0].get(), ids, stream);
    FillPoison(set[1].get(), set[1].bytes(), stream);
  }
  void Launch(const Shape& s, const Buffers& shared, Buffers& set, cudaStream_t stream) const override {
    LaunchEmbeddingBf16(set[0].as<std::int64_t>(), shared[0].get(), set[1].get(), s.tokens, s.hidden, stream);
  }
  void LaunchAndCheck(const Shape& s, const Buffers& shared, Buffers& set, const std::vector<std::int64_t>& rows,
                      RefCheck& check, cudaStream_t stream) const override {
    const std::int64_t H = s.hidden;
    auto ids = ReadRows<std::int64_t>(set[0].get(), 1, rows, s.tokens, stream);
    auto table_rows = ReadRows<std::uint16_t>(shared[0].get(), H, ids, -1, stream);
    Launch(s, shared, set, stream);
    auto out = ReadRows<std::uint16_t>(set[1].get(), H, rows, s.tokens, stream);
    check.AddNonFinite("out", CountNonFiniteBf16(set[1].get(), s.elems(), stream), s.elems());
    for (std::size_t r = 0; r < rows.size(); ++r)
      for (std::int64_t d = 0; d < H; ++d) {
        const std::size_t i = r * static_cast<std::size_t>(H) + static_cast<std::size_t>(d);
        check.Add("out", rows[r], d, Bf16(out[i]), Bf16(table_rows[i]), 0.0);
      }
  }
  std::string ToleranceRule() const override { return "exact: a gather copies bits"; }
};

}  // namespace

std::vector<std::string> ElementwiseOpNames() {
  return {"rmsnorm", "rmsnorm_residual", "silu_and_mul", "residual_add", "rotary_embedding", "embedding"};
}

std::unique_ptr<collect::Op> MakeElementwiseOp(const std::string& op_name, double reference_scale) {
  if (op_name == "rmsnorm") return std::make_unique<RmsNormOp>(false, reference_scale);
  if (op_name == "rmsnorm_residual") return std::make_unique<RmsNormOp>(true, reference_scale);
  if (op_name == "silu_and_mul") return std::make_unique<SiluAndMulOp>(reference_scale);
  if (op_name == "residual_add") return std::make_unique<ResidualAddOp>(reference_scale);
  if (op_name == "rotary_embedding") return std::make_unique<RotaryEmbeddingOp>(reference_scale);
  if (op_name == "embedding") return std::make_unique<EmbeddingOp>(reference_scale);
  throw Error("cuda backend: no elementwise op named '" + op_name + "'");
}

void RegisterElementwiseOps(collect::Registry& r) {
  for (const std::string& name : ElementwiseOpNames()) r.AddOp("cuda", MakeElementwiseOp(name));
}

}  // namespace servecast::cuda
