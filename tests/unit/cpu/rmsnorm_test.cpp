#include "backends/cpu/rmsnorm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "backends/cpu/op_support.h"
#include "cpu_test_util.h"

namespace servecast::cpu {
namespace {

using collect::Disposition;
using testing::Describe;

TEST(RmsNormTest, KnownValues) {
  const float x[4] = {3, 4, -1, 1};
  const float w[2] = {1, 2};
  float y[4];
  RmsNorm(x, w, y, 2, 2);
  double r0 = 1 / std::sqrt(12.5 + 1e-6), r1 = 1 / std::sqrt(1.0 + 1e-6);
  EXPECT_NEAR(y[0], 3 * r0, 1e-6);
  EXPECT_NEAR(y[1], 8 * r0, 1e-6);
  EXPECT_NEAR(y[2], -1 * r1, 1e-6);
  EXPECT_NEAR(y[3], 2 * r1, 1e-6);
}

TEST(RmsNormTest, HandlesWidthsThatAreNotAMultipleOfTheLanes) {
  for (std::int64_t hidden : {1, 7, 13, 64, 1001}) {
    std::vector<float> x(static_cast<std::size_t>(3 * hidden)), w(static_cast<std::size_t>(hidden)), y(x.size());
    Rng rng(static_cast<std::uint64_t>(hidden));
    FillUniform(x.data(), x.size(), rng, -2, 2);
    FillUniform(w.data(), w.size(), rng, 0.5f, 1.5f);
    RmsNorm(x.data(), w.data(), y.data(), 3, hidden);
    for (std::int64_t t = 0; t < 3; ++t) {
      double ss = 0;
      for (std::int64_t d = 0; d < hidden; ++d) ss += double(x[t * hidden + d]) * x[t * hidden + d];
      double inv = 1 / std::sqrt(ss / double(hidden) + 1e-6);
      for (std::int64_t d = 0; d < hidden; ++d) {
        double ref = x[t * hidden + d] * inv * w[d];
        EXPECT_NEAR(y[t * hidden + d], ref, 1e-5 * std::fabs(ref) + 1e-7) << "hidden " << hidden;
      }
    }
  }
}

collect::Params NormParams(std::int64_t tokens, std::int64_t hidden, std::string dtype = "float32") {
  return {{"op_name", std::string("rmsnorm")}, {"dtype", dtype}, {"num_tokens", tokens}, {"hidden_size", hidden}};
}

TEST(RmsNormOpTest, PassesAndEmitsARow) {
  auto op = MakeRmsNormOp();
  // The last shape exceeds 2^18 elements, so only sampled rows are checked.
  for (const collect::Params& p : {NormParams(1, 8), NormParams(5, 100), NormParams(64, 4096), NormParams(80, 4000)}) {
    collect::CaseResult r = testing::RunCase(*op, p);
    testing::ExpectPassedRow(r, *op, p, "servecast_cpu_rmsnorm");
  }
  // op_name in the params is optional for the op itself.
  collect::Params no_op_name{
      {"dtype", std::string("float32")}, {"num_tokens", std::int64_t{3}}, {"hidden_size", std::int64_t{16}}};
  EXPECT_EQ(testing::RunCase(*op, no_op_name).disposition, Disposition::kPassed);
}

TEST(RmsNormOpTest, OtherDtypesAreNotSupported) {
  auto op = MakeRmsNormOp();
  collect::CaseResult bf16 = testing::RunCase(*op, NormParams(4, 64, "bfloat16"));
  EXPECT_EQ(bf16.disposition, Disposition::kNotSupported) << Describe(bf16);
  collect::CaseResult junk = testing::RunCase(*op, NormParams(4, 64, "floaty"));
  EXPECT_EQ(junk.disposition, Disposition::kFailed) << Describe(junk);
  collect::CaseResult zero = testing::RunCase(*op, NormParams(0, 64));
  EXPECT_EQ(zero.disposition, Disposition::kFailed) << Describe(zero);
}

TEST(RmsNormOpTest, MemoryBytes) {
  auto op = MakeRmsNormOp();
  EXPECT_EQ(op->MemoryBytes(NormParams(10, 100)), 4.0 * (2 * 10 * 100 + 100));
}

}  // namespace
}  // namespace servecast::cpu
