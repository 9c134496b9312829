#include "toy_op.h"

#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/cpu_timer.h"
#include "backends/cpu/op_support.h"
#include "collect/case.h"
#include "collect/phases.h"
#include "core/error.h"
#include "tables/table_spec.h"

namespace servecast::testing {
namespace {

// Step 1 of "Add a table": the declaration. Name, family folder, key columns and
// the op's cost (2 FLOPs and 12 bytes per element: read x and y, write y) for the
// physics gate; its estimator read (one slice per dtype, n interpolated raw and
// bound to the pass's tokens; the roofline is the cost) lets the estimator cost
// an op of kind kTable on it (tests/unit/search/toy_family_test.cpp) and `db
// query` answer it, with no reader of its own.
const tables::TableSpec& ToyTable() {
  static const tables::TableSpec* spec = [] {
    if (!tables::FindTableSpec("toy_axpy_perf")) {
      tables::TableSpec t;
      t.name = "toy_axpy_perf";
      t.family = "toy";
      t.key_columns = {{"dtype", ValueType::kString}, {"n", ValueType::kInt64}};
      t.cost = [](const Params& key) {
        const double n = key.Num("n");
        return tables::OpCost{2 * n, 12 * n, "float32"};
      };
      t.estimator = tables::EstimatorRead{{"dtype"}, {{"n", tables::AxisBlend::kLinear, tables::AxisSource::kTokens}}};
      tables::AddTableSpec(std::move(t));
    }
    return tables::FindTableSpec("toy_axpy_perf");
  }();
  return *spec;
}

void Axpy(float a, const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
}

// Step 2 of "Add a collector op": the phases of one case.
class AxpyPhases final : public collect::CasePhases {
 public:
  AxpyPhases(const collect::Op& op, const collect::Case& c, const collect::RunContext& ctx, std::int64_t n)
      : op_(op), case_(c), ctx_(ctx), n_(n) {}

  std::optional<collect::CaseResult> Prepare() override {
    x_.resize(static_cast<std::size_t>(n_));
    y_.resize(static_cast<std::size_t>(n_));
    cpu::Rng rx(cpu::SeedFromCaseId(case_.id, 1)), ry(cpu::SeedFromCaseId(case_.id, 2));
    cpu::FillUniform(x_.data(), x_.size(), rx, -1, 1);
    cpu::FillUniform(y_.data(), y_.size(), ry, -1, 1);
    return std::nullopt;
  }
  std::optional<collect::CaseResult> Check() override {
    const std::vector<float> y0 = y_;
    Axpy(kA, x_.data(), y_.data(), n_);
    cpu::RefCheck check;
    for (std::int64_t i = 0; i < n_; ++i) {
      const double ref = static_cast<double>(kA) * x_[i] + y0[i];
      // one product and one sum in float32: two roundings of at most |ref| u each, plus the product's
      const double tol = 4 * cpu::kFloat32Roundoff * (std::fabs(static_cast<double>(kA) * x_[i]) + std::fabs(y0[i])) +
                         1e-30;
      check.Add(y_[i], ref, tol, [&] { return "y[" + std::to_string(i) + "]"; });
    }
    if (!check.ok()) return cpu::IncorrectOutput(op_.name(), check, "y", "4u (|a x| + |y|)");
    return std::nullopt;
  }
  void Time() override {
    stats_ = cpu::TimeCpu([&] { Axpy(kA, x_.data(), y_.data(), n_); }, ctx_.timing);
  }
  std::vector<collect::Params> Emit() override {
    return {collect::MakeRow(op_.table(), *ctx_.runtime, op_.name(), "test:toy_axpy", case_.params, stats_, false)};
  }

 private:
  static constexpr float kA = 0.75f;
  const collect::Op& op_;
  const collect::Case& case_;
  const collect::RunContext& ctx_;
  std::int64_t n_;
  std::vector<float> x_, y_;
  collect::TimingStats stats_;
};

// Step 2 (cont.): the op, declaring its table and parameters.
class ToyAxpyOp final : public collect::TableOp {
 public:
  ToyAxpyOp() : TableOp("toy_axpy", ToyTable()) {}
  double MemoryBytes(const collect::Params& p) const override { return 8 * p.Num("n"); }

  collect::CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override {
    if (auto bad = cpu::CheckDtype("dtype", c.params.Str("dtype"), {"float32"})) return *bad;
    std::int64_t n = 0;
    try {
      n = cpu::PositiveInt(c.params, "n");
    } catch (const Error& e) {
      return cpu::InvalidParams(name(), e.what());
    }
    AxpyPhases phases(*this, c, ctx, n);
    return collect::RunPhases(phases);
  }
};

}  // namespace

std::unique_ptr<collect::Op> MakeToyAxpyOp() {
  ToyTable();  // declared with the op's registration, so `check` and `db` know the table too
  return std::make_unique<ToyAxpyOp>();
}

}  // namespace servecast::testing
