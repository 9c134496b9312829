#include "backends/cpu/silu_and_mul.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_timer.h"
#include "backends/cpu/op_support.h"
#include "collect/case.h"

namespace servecast::cpu {

void SiluAndMul(const float* __restrict in, float* __restrict out, std::int64_t num_tokens, std::int64_t hidden_size) {
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    const float* __restrict gate = in + t * 2 * hidden_size;
    const float* __restrict up = gate + hidden_size;
    float* __restrict o = out + t * hidden_size;
    for (std::int64_t d = 0; d < hidden_size; ++d) o[d] = gate[d] / (1.0f + std::exp(-gate[d])) * up[d];
  }
}

namespace {

constexpr std::int64_t kCheckAllUpTo = std::int64_t{1} << 18;
constexpr std::int64_t kCheckRows = 64;
constexpr float kGateRange = 8.0f;  // covers both tails of the sigmoid

class SiluAndMulOp : public collect::TableOp {
 public:
  SiluAndMulOp() : TableOp("silu_and_mul", TableOrThrow("elementwise_perf")) {}

  double MemoryBytes(const collect::Params& p) const override {
    ElementwiseParams e = ParseElementwiseParams(name(), p);
    if (e.failure) return 0;  // Run reports it
    return 4 * 3 * static_cast<double>(e.num_tokens) * static_cast<double>(e.hidden_size);
  }

  collect::CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override {
    ElementwiseParams e = ParseElementwiseParams(name(), c.params);
    if (e.failure) return *e.failure;
    const std::int64_t T = e.num_tokens, Hd = e.hidden_size;
    std::vector<float> in(static_cast<std::size_t>(T * 2 * Hd));
    std::vector<float> out(static_cast<std::size_t>(T * Hd), std::numeric_limits<float>::quiet_NaN());
    Rng rg(SeedFromCaseId(c.id, 1)), ru(SeedFromCaseId(c.id, 2)), rrows(SeedFromCaseId(c.id, 3));
    for (std::int64_t t = 0; t < T; ++t) {
      FillUniform(in.data() + t * 2 * Hd, static_cast<std::size_t>(Hd), rg, -kGateRange, kGateRange);
      FillUniform(in.data() + t * 2 * Hd + Hd, static_cast<std::size_t>(Hd), ru, -1, 1);
    }

    SiluAndMul(in.data(), out.data(), T, Hd);
    std::vector<std::int64_t> rows = SampleIndices(T, T * Hd <= kCheckAllUpTo ? T : kCheckRows, rrows);
    const double rel_tol = 16 * kFloat32Roundoff;
    RefCheck check;
    for (std::int64_t t : rows) {
      for (std::int64_t d = 0; d < Hd; ++d) {
        double g = in[t * 2 * Hd + d], u = in[t * 2 * Hd + Hd + d];
        double ref = g / (1.0 + std::exp(-g)) * u;
        double tol = std::max(rel_tol * std::fabs(ref), std::numeric_limits<double>::min());
        check.Add(out[t * Hd + d], ref, tol,
                  [&] { return "out[" + std::to_string(t) + "," + std::to_string(d) + "]"; });
      }
    }
    if (!check.ok()) return IncorrectOutput(name(), check, "out", "16u * |out|");

    collect::TimingStats stats = TimeCpu([&] { SiluAndMul(in.data(), out.data(), T, Hd); }, ctx.timing);
    return PassedRow(*this, c, ctx, "servecast_cpu_silu_and_mul", stats);
  }

};

}  // namespace

std::unique_ptr<collect::Op> MakeSiluAndMulOp() {
  return std::make_unique<SiluAndMulOp>();
}

}  // namespace servecast::cpu
