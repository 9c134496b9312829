#include "backends/cpu/gemm.h"


#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_timer.h"
#include "backends/cpu/openblas.h"
#include "backends/cpu/op_support.h"
#include "collect/case.h"
#include "core/error.h"

namespace servecast::cpu {

namespace {

using collect::CaseResult;


constexpr std::int64_t kCheckAllUpTo = 4096;
constexpr std::int64_t kRandomChecks = 256;

// Compares C with a double-precision reference on a sample of elements. `a(i, l)`
// and `b(l, j)` read the inputs as the kernel saw them.
template <class ReadA, class ReadB>
RefCheck CheckGemm(std::int64_t m, std::int64_t n, std::int64_t k, ReadA a, ReadB b, const float* c,
                   double bound_factor, std::uint64_t seed) {
  std::vector<std::pair<std::int64_t, std::int64_t>> points;
  if (m * n <= kCheckAllUpTo) {
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) points.emplace_back(i, j);
  } else {
    points = {{0, 0}, {0, n - 1}, {m - 1, 0}, {m - 1, n - 1}};
    Rng rng(seed);
    for (std::int64_t t = 0; t < kRandomChecks; ++t)
      points.emplace_back(static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(m))),
                          static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(n))));
  }
  const double gamma = bound_factor * Gamma(k + 2);
  RefCheck check;
  for (auto [i, j] : points) {
    double sum = 0, abs_sum = 0;
    for (std::int64_t l = 0; l < k; ++l) {
      double prod = static_cast<double>(a(i, l)) * static_cast<double>(b(l, j));
      sum += prod;
      abs_sum += std::fabs(prod);
    }
    double tol = std::max(gamma * abs_sum, std::numeric_limits<double>::min());
    check.Add(c[i * n + j], sum, tol, [&] { return "C[" + std::to_string(i) + "," + std::to_string(j) + "]"; });
  }
  return check;
}

class GemmOp : public collect::TableOp {
 public:
  GemmOp() : TableOp("gemm", TableOrThrow("gemm_perf")) {}
  std::vector<collect::Requirement> requirements() const override {
    collect::Requirement sbgemm;
    sbgemm.applies_when = "gemm_dtype == \"bfloat16\"";
    sbgemm.feature = "cblas_sbgemm";
    return {sbgemm};
  }

  double MemoryBytes(const collect::Params& p) const override {
    try {
      double m = static_cast<double>(p.Int("m")), n = static_cast<double>(p.Int("n"));
      double k = static_cast<double>(p.Int("k"));
      double in_bytes = p.Str("gemm_dtype") == "bfloat16" ? 2 : 4;
      return (m * k + k * n) * in_bytes + m * n * 4;
    } catch (const Error&) {
      return 0;  // Run reports the bad parameter
    }
  }

  CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override {
    std::string dtype;
    std::int64_t m = 0, n = 0, k = 0;
    try {
      dtype = c.params.Str("gemm_dtype");
      m = PositiveInt(c.params, "m");
      n = PositiveInt(c.params, "n");
      k = PositiveInt(c.params, "k");
    } catch (const Error& e) {
      return InvalidParams(name(), e.what());
    }
    if (auto bad = CheckDtype("gemm_dtype", dtype, {"float32", "bfloat16"})) return *bad;
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
      return NotSupported("ShapeTooLarge",
                          "gemm: m, n and k must fit a 32-bit BLAS integer; got m=" + std::to_string(m) +
                              " n=" + std::to_string(n) + " k=" + std::to_string(k));
    if (dtype == "float32") return RunFloat32(c, ctx, m, n, k);
    return RunBfloat16(c, ctx, m, n, k);
  }

 private:
  CaseResult RunFloat32(const collect::Case& c, const collect::RunContext& ctx, std::int64_t m, std::int64_t n,
                        std::int64_t k) {
    std::vector<float> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
    std::vector<float> out(static_cast<std::size_t>(m * n), std::numeric_limits<float>::quiet_NaN());
    Rng ra(SeedFromCaseId(c.id, 1)), rb(SeedFromCaseId(c.id, 2));
    FillUniform(a.data(), a.size(), ra, -1, 1);
    FillUniform(b.data(), b.size(), rb, -1, 1);
    const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
    const OpenBlas::SgemmFn sgemm = LoadOpenBlas().sgemm;
    auto call = [&] {
      sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mi, ni, ki, 1.0f, a.data(), ki, b.data(), ni, 0.0f,
                  out.data(), ni);
    };
    call();
    RefCheck check = CheckGemm(
        m, n, k, [&](std::int64_t i, std::int64_t l) { return a[i * k + l]; },
        [&](std::int64_t l, std::int64_t j) { return b[l * n + j]; }, out.data(), 1.0, SeedFromCaseId(c.id, 3));
    if (!check.ok()) return IncorrectOutput(name(), check, "C", "gamma_{k+2} * sum|a*b|");
    collect::TimingStats stats = TimeCpu(call, ctx.timing);
    return PassedRow(*this, c, ctx, "openblas:sgemm", stats);
  }

  CaseResult RunBfloat16(const collect::Case& c, const collect::RunContext& ctx, std::int64_t m, std::int64_t n,
                         std::int64_t k) {
    const OpenBlas& blas = LoadOpenBlas();
    const OpenBlas::SbgemmFn sbgemm = blas.sbgemm;
    if (!sbgemm) {
      const char* config = blas.get_config();
      return CaseResult::Failure(collect::Disposition::kNotSupported, collect::FailureClass::kUnsupportedConfig,
                                 "MissingFeature",
                                 "gemm bfloat16 needs cblas_sbgemm; found no cblas_sbgemm in the loaded OpenBLAS (" +
                                     std::string(config ? config : "unknown config") + ")");
    }
    std::vector<std::uint16_t> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
    std::vector<float> out(static_cast<std::size_t>(m * n), std::numeric_limits<float>::quiet_NaN());
    Rng ra(SeedFromCaseId(c.id, 1)), rb(SeedFromCaseId(c.id, 2));
    for (auto& x : a) x = FloatToBf16(ra.Uniform(-1, 1));
    for (auto& x : b) x = FloatToBf16(rb.Uniform(-1, 1));
    const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
    auto call = [&] {
      sbgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mi, ni, ki, 1.0f, a.data(), ki, b.data(), ni, 0.0f, out.data(),
             ni);
    };
    call();
    RefCheck check = CheckGemm(
        m, n, k, [&](std::int64_t i, std::int64_t l) { return Bf16ToFloat(a[i * k + l]); },
        [&](std::int64_t l, std::int64_t j) { return Bf16ToFloat(b[l * n + j]); }, out.data(), 2.0,
        SeedFromCaseId(c.id, 3));
    if (!check.ok()) return IncorrectOutput(name(), check, "C", "2 * gamma_{k+2} * sum|a*b|");
    collect::TimingStats stats = TimeCpu(call, ctx.timing);
    return PassedRow(*this, c, ctx, "openblas:sbgemm", stats);
  }

};

}  // namespace

std::unique_ptr<collect::Op> MakeGemmOp() {
  return std::make_unique<GemmOp>();
}

}  // namespace servecast::cpu
