#include "backends/cpu/rmsnorm.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_timer.h"
#include "backends/cpu/op_support.h"
#include "collect/case.h"

namespace servecast::cpu {

void RmsNorm(const float* __restrict x, const float* __restrict w, float* __restrict y, std::int64_t num_tokens,
             std::int64_t hidden_size) {
  const float inv_hidden = 1.0f / static_cast<float>(hidden_size);
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    const float* __restrict row = x + t * hidden_size;
    float* __restrict out = y + t * hidden_size;
    float lanes[8] = {};  // independent partial sums: vectorizable without reassociation
    std::int64_t d = 0;
    for (; d + 8 <= hidden_size; d += 8)
      for (int u = 0; u < 8; ++u) lanes[u] += row[d + u] * row[d + u];
    float sum_sq = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
    for (; d < hidden_size; ++d) sum_sq += row[d] * row[d];
    const float inv_rms = 1.0f / std::sqrt(sum_sq * inv_hidden + kRmsNormEpsilon);
    for (std::int64_t e = 0; e < hidden_size; ++e) out[e] = row[e] * inv_rms * w[e];
  }
}

namespace {

constexpr std::int64_t kCheckAllUpTo = std::int64_t{1} << 18;
constexpr std::int64_t kCheckRows = 64;

class RmsNormOp : public collect::TableOp {
 public:
  RmsNormOp() : TableOp("rmsnorm", TableOrThrow("elementwise_perf")) {}

  double MemoryBytes(const collect::Params& p) const override {
    ElementwiseParams e = ParseElementwiseParams(name(), p);
    if (e.failure) return 0;  // Run reports it
    double t = static_cast<double>(e.num_tokens), h = static_cast<double>(e.hidden_size);
    return 4 * (2 * t * h + h);
  }

  collect::CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override {
    ElementwiseParams e = ParseElementwiseParams(name(), c.params);
    if (e.failure) return *e.failure;
    const std::int64_t T = e.num_tokens, Hd = e.hidden_size;
    std::vector<float> x(static_cast<std::size_t>(T * Hd)), w(static_cast<std::size_t>(Hd));
    std::vector<float> y(x.size(), std::numeric_limits<float>::quiet_NaN());
    Rng rx(SeedFromCaseId(c.id, 1)), rw(SeedFromCaseId(c.id, 2)), rrows(SeedFromCaseId(c.id, 3));
    FillUniform(x.data(), x.size(), rx, -1, 1);
    FillUniform(w.data(), w.size(), rw, 0.5f, 1.5f);

    RmsNorm(x.data(), w.data(), y.data(), T, Hd);
    std::vector<std::int64_t> rows = SampleIndices(T, T * Hd <= kCheckAllUpTo ? T : kCheckRows, rrows);
    const double rel_tol = 0.5 * Gamma(Hd) + 8 * kFloat32Roundoff;
    RefCheck check;
    for (std::int64_t t : rows) {
      const float* row = x.data() + t * Hd;
      double sum_sq = 0;
      for (std::int64_t d = 0; d < Hd; ++d) sum_sq += static_cast<double>(row[d]) * row[d];
      const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(Hd) + 1e-6);
      for (std::int64_t d = 0; d < Hd; ++d) {
        double ref = static_cast<double>(row[d]) * inv_rms * static_cast<double>(w[d]);
        double tol = std::max(rel_tol * std::fabs(ref), std::numeric_limits<double>::min());
        check.Add(y[t * Hd + d], ref, tol, [&] { return "y[" + std::to_string(t) + "," + std::to_string(d) + "]"; });
      }
    }
    if (!check.ok()) return IncorrectOutput(name(), check, "y", "(gamma_hidden/2 + 8u) * |y|");

    collect::TimingStats stats = TimeCpu([&] { RmsNorm(x.data(), w.data(), y.data(), T, Hd); }, ctx.timing);
    return PassedRow(*this, c, ctx, "servecast_cpu_rmsnorm", stats);
  }

};

}  // namespace

std::unique_ptr<collect::Op> MakeRmsNormOp() {
  return std::make_unique<RmsNormOp>();
}

}  // namespace servecast::cpu
