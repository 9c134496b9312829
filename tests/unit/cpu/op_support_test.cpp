#include "backends/cpu/op_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "core/error.h"

namespace servecast::cpu {
namespace {

TEST(CpuRngTest, IsDeterministicAndInRange) {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 1000; ++i) {
    std::uint64_t x = a.Next(), y = b.Next();
    EXPECT_EQ(x, y);
    differs |= x != c.Next();
  }
  EXPECT_TRUE(differs);
  Rng r(7);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    float u = r.Uniform(-2, 3);
    ASSERT_GE(u, -2.0f);
    ASSERT_LT(u, 3.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.1);  // the mean of U(-2, 3)
  for (int i = 0; i < 1000; ++i) ASSERT_LT(r.Below(5), 5u);
}

TEST(CpuRngTest, SeedsDependOnCaseIdAndStream) {
  EXPECT_EQ(SeedFromCaseId("gemm:m=1", 1), SeedFromCaseId("gemm:m=1", 1));
  EXPECT_NE(SeedFromCaseId("gemm:m=1", 1), SeedFromCaseId("gemm:m=1", 2));
  EXPECT_NE(SeedFromCaseId("gemm:m=1", 1), SeedFromCaseId("gemm:m=2", 1));
}

TEST(CpuSampleIndicesTest, IncludesEndsAndIsSortedAndUnique) {
  Rng rng(1);
  auto all = SampleIndices(5, 10, rng);
  EXPECT_EQ(all, (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  auto some = SampleIndices(1000, 20, rng);
  ASSERT_EQ(some.size(), 20u);
  EXPECT_EQ(some.front(), 0);
  EXPECT_EQ(some.back(), 999);
  EXPECT_TRUE(std::is_sorted(some.begin(), some.end()));
  EXPECT_EQ(std::set<std::int64_t>(some.begin(), some.end()).size(), some.size());
  EXPECT_TRUE(SampleIndices(0, 4, rng).empty());
}

TEST(CpuGammaTest, MatchesNUOverOneMinusNU) {
  EXPECT_NEAR(Gamma(1000), 1000 * kFloat32Roundoff / (1 - 1000 * kFloat32Roundoff), 1e-18);
  EXPECT_GT(Gamma(2000), Gamma(1000));
  EXPECT_EQ(Gamma(std::int64_t{1} << 30), 1.0);
}

TEST(CpuRefCheckTest, PassesWithinToleranceAndReportsTheWorstOutside) {
  RefCheck ok;
  ok.Add(1.0005, 1.0, 1e-3, [] { return "x[0]"; });
  ok.Add(2.0, 2.0, 1e-9, [] { return "x[1]"; });
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.checked(), 2);

  RefCheck bad;
  bad.Add(1.0, 1.0, 1e-6, [] { return "y[0]"; });
  bad.Add(1.1, 1.0, 1e-2, [] { return "y[1]"; });   // 10x its tolerance
  bad.Add(1.01, 1.0, 1e-3, [] { return "y[2]"; });  // 10x too, not worse
  bad.Add(3.0, 1.0, 1e-2, [] { return "y[3]"; });   // 200x: the worst
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.bad(), 3);
  std::string msg = bad.Describe("y", "rule");
  EXPECT_NE(msg.find("3 of 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("y[3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rule"), std::string::npos) << msg;
}

TEST(CpuRefCheckTest, NanAndInfinityNeverPass) {
  RefCheck nan;
  nan.Add(std::numeric_limits<double>::quiet_NaN(), 1.0, 1e9, [] { return "n"; });
  EXPECT_FALSE(nan.ok());
  RefCheck inf;
  inf.Add(std::numeric_limits<double>::infinity(), 1.0, 1e9, [] { return "i"; });
  EXPECT_FALSE(inf.ok());
  RefCheck empty;
  EXPECT_FALSE(empty.ok());  // nothing checked proves nothing
}

TEST(CpuCheckDtypeTest, SeparatesUnsupportedFromUnknown) {
  EXPECT_FALSE(CheckDtype("dtype", "float32", {"float32"}).has_value());
  auto bf16 = CheckDtype("dtype", "bfloat16", {"float32"});
  ASSERT_TRUE(bf16.has_value());
  EXPECT_EQ(bf16->disposition, collect::Disposition::kNotSupported);
  EXPECT_EQ(bf16->failure_class, collect::FailureClass::kUnsupportedConfig);
  auto junk = CheckDtype("dtype", "float33", {"float32"});
  ASSERT_TRUE(junk.has_value());
  EXPECT_EQ(junk->disposition, collect::Disposition::kFailed);
  EXPECT_EQ(junk->failure_class, collect::FailureClass::kUnsupportedConfig);
  EXPECT_NE(junk->message.find("float33"), std::string::npos);
}

TEST(CpuParamsTest, PositiveAndNonNegativeIntegers) {
  collect::Params p{{"a", std::int64_t{3}}, {"z", std::int64_t{0}}, {"s", std::string("x")}};
  EXPECT_EQ(PositiveInt(p, "a"), 3);
  EXPECT_THROW(PositiveInt(p, "z"), Error);
  EXPECT_EQ(NonNegativeInt(p, "z"), 0);
  EXPECT_THROW(PositiveInt(p, "s"), Error);
  EXPECT_THROW(PositiveInt(p, "missing"), Error);
}

}  // namespace
}  // namespace servecast::cpu
