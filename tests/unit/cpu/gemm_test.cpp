#include "backends/cpu/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "collect/expr.h"
#include "cpu_test_util.h"

namespace servecast::cpu {
namespace {

using collect::Disposition;
using collect::FailureClass;
using testing::Describe;

collect::Params GemmParams(const std::string& dtype, std::int64_t m, std::int64_t n, std::int64_t k) {
  return {{"gemm_dtype", dtype}, {"m", m}, {"n", n}, {"k", k}};
}

TEST(GemmOpTest, Float32PassesOnSmallAndOddShapes) {
  auto op = MakeGemmOp();
  // The last two have m·n > 4096, so only a sample of C is checked.
  for (auto [m, n, k] :
       std::vector<std::array<std::int64_t, 3>>{{1, 1, 1}, {7, 5, 3}, {64, 48, 33}, {1, 300, 257}, {100, 70, 129}}) {
    collect::Params p = GemmParams("float32", m, n, k);
    collect::CaseResult r = testing::RunCase(*op, p);
    testing::ExpectPassedRow(r, *op, p, "openblas:sgemm");
  }
}

TEST(GemmOpTest, Bfloat16NeedsSbgemm) {
  auto op = MakeGemmOp();
  collect::Params p = GemmParams("bfloat16", 16, 24, 40);
  collect::CaseResult r = testing::RunCase(*op, p);
  if (testing::Runtime().features.count("cblas_sbgemm")) {
    testing::ExpectPassedRow(r, *op, p, "openblas:sbgemm");
  } else {
    EXPECT_EQ(r.disposition, Disposition::kNotSupported) << Describe(r);
    EXPECT_EQ(r.failure_class, FailureClass::kUnsupportedConfig);
    EXPECT_EQ(r.error_type, "MissingFeature");
    EXPECT_NE(r.message.find("cblas_sbgemm"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("OpenBLAS"), std::string::npos) << r.message;
    EXPECT_TRUE(r.rows.empty());
  }
}

TEST(GemmOpTest, DeclaresTheSbgemmRequirementForBfloat16Only) {
  auto op = MakeGemmOp();
  auto reqs = op->requirements();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].feature, "cblas_sbgemm");
  EXPECT_EQ(reqs[0].applies_when, "gemm_dtype == \"bfloat16\"");
  collect::RuntimeInfo without = testing::Runtime();
  without.features.erase("cblas_sbgemm");
  collect::RuntimeInfo with = without;
  with.features.insert("cblas_sbgemm");
  EXPECT_TRUE(reqs[0].Check(without).has_value());
  EXPECT_FALSE(reqs[0].Check(with).has_value());
  // The condition is valid planner syntax and selects bfloat16 cases only.
  collect::Expr when = collect::Expr::Parse(reqs[0].applies_when);
  EXPECT_TRUE(when.Test(GemmParams("bfloat16", 4, 4, 4)));
  EXPECT_FALSE(when.Test(GemmParams("float32", 4, 4, 4)));
}

TEST(GemmOpTest, RejectsBadParameters) {
  auto op = MakeGemmOp();
  collect::CaseResult fp8 = testing::RunCase(*op, GemmParams("fp8", 8, 8, 8));
  EXPECT_EQ(fp8.disposition, Disposition::kNotSupported) << Describe(fp8);
  EXPECT_EQ(fp8.failure_class, FailureClass::kUnsupportedConfig);

  collect::CaseResult junk = testing::RunCase(*op, GemmParams("float31", 8, 8, 8));
  EXPECT_EQ(junk.disposition, Disposition::kFailed) << Describe(junk);
  EXPECT_EQ(junk.failure_class, FailureClass::kUnsupportedConfig);

  collect::CaseResult zero = testing::RunCase(*op, GemmParams("float32", 0, 8, 8));
  EXPECT_EQ(zero.disposition, Disposition::kFailed) << Describe(zero);
  EXPECT_NE(zero.message.find("'m'"), std::string::npos) << zero.message;

  collect::CaseResult missing = testing::RunCase(*op, {{"gemm_dtype", std::string("float32")}, {"m", std::int64_t{4}}});
  EXPECT_EQ(missing.disposition, Disposition::kFailed) << Describe(missing);
  EXPECT_EQ(missing.failure_class, FailureClass::kUnsupportedConfig);
  EXPECT_NE(missing.message.find("'n'"), std::string::npos) << missing.message;
}

TEST(GemmOpTest, MemoryBytesCountsAllBuffers) {
  auto op = MakeGemmOp();
  EXPECT_EQ(op->MemoryBytes(GemmParams("float32", 2, 3, 5)), 4.0 * (2 * 5 + 5 * 3 + 2 * 3));
  EXPECT_EQ(op->MemoryBytes(GemmParams("bfloat16", 2, 3, 5)), 2.0 * (2 * 5 + 5 * 3) + 4.0 * 2 * 3);
  EXPECT_EQ(op->MemoryBytes({{"m", std::int64_t{2}}}), 0);  // not declared: Run reports the bad case
}

TEST(Bf16Test, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(Bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(-2.5f)), -2.5f);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 0x1.0p-8f)), 1.0f);
  // 1 + 3·2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: ties go to 1 + 2^-6.
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 3 * 0x1.0p-8f)), 1.0f + 0x1.0p-6f);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 0x1.8p-8f + 0x1.0p-20f)), 1.0f + 0x1.0p-7f);  // above half: up
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::infinity()))));
}

}  // namespace
}  // namespace servecast::cpu
