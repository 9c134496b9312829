#include "collect/op.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../core/core_test_util.h"
#include "core/error.h"

namespace servecast::collect {
namespace {

using servecast::testing::HasText;
using servecast::testing::ThrownMessage;

RuntimeInfo Runtime() {
  RuntimeInfo rt;
  rt.backend = "cuda";
  rt.version = "13.0-cublaslt13.1";
  rt.device_name = "NVIDIA H200";
  rt.arch = "sm90";
  rt.sm = 90;
  rt.libraries = {{"cublaslt", "13.1.0.3"}, {"cudnn", "9.14.0"}, {"nccl", "2.28.3-1"}};
  rt.features = {"fp8_block_scaling", "graphs"};
  return rt;
}

TEST(RequirementTest, EmptyRequirementIsMet) {
  EXPECT_FALSE(Requirement{}.Check(Runtime()).has_value());
}

TEST(RequirementTest, LibraryVersionFloor) {
  Requirement r;
  r.library = "cudnn";
  r.min_version = "9.5";
  EXPECT_FALSE(r.Check(Runtime()).has_value());  // 9.14 >= 9.5 (numerically, not as text)
  r.min_version = "9.14";
  EXPECT_FALSE(r.Check(Runtime()).has_value());
  r.min_version = "9.14.0.post1";
  auto unmet = r.Check(Runtime());
  ASSERT_TRUE(unmet.has_value());
  EXPECT_EQ(*unmet, "requires cudnn >= 9.14.0.post1; found 9.14.0");
  r.min_version = "10.0";
  unmet = r.Check(Runtime());
  ASSERT_TRUE(unmet.has_value());
  EXPECT_EQ(*unmet, "requires cudnn >= 10.0; found 9.14.0");
}

TEST(RequirementTest, LibraryVersionFloorUsesVendorForms) {
  Requirement r;
  r.library = "nccl";
  r.min_version = "2.28.3";
  EXPECT_FALSE(r.Check(Runtime()).has_value());  // 2.28.3-1 is after 2.28.3
  r.min_version = "2.28.4";
  EXPECT_TRUE(r.Check(Runtime()).has_value());
}

TEST(RequirementTest, MissingLibraryIsUnmetWithEvidence) {
  Requirement r;
  r.library = "cusparselt";
  r.min_version = "0.6";
  auto unmet = r.Check(Runtime());
  ASSERT_TRUE(unmet.has_value());
  EXPECT_TRUE(HasText(*unmet, "requires cusparselt >= 0.6"));
  EXPECT_TRUE(HasText(*unmet, "found no cusparselt"));
}

TEST(RequirementTest, Feature) {
  Requirement r;
  r.feature = "graphs";
  EXPECT_FALSE(r.Check(Runtime()).has_value());
  r.feature = "nvfp4";
  auto unmet = r.Check(Runtime());
  ASSERT_TRUE(unmet.has_value());
  EXPECT_EQ(*unmet, "requires the feature 'nvfp4'; the runtime (cuda 13.0-cublaslt13.1) has fp8_block_scaling, graphs");
  RuntimeInfo bare = Runtime();
  bare.features.clear();
  unmet = r.Check(bare);
  ASSERT_TRUE(unmet.has_value());
  EXPECT_TRUE(HasText(*unmet, "has none"));
}

TEST(RequirementTest, SmRange) {
  Requirement r;
  r.min_sm = 80;
  r.max_sm = 90;
  EXPECT_FALSE(r.Check(Runtime()).has_value());  // bounds are inclusive
  r.min_sm = 100;
  r.max_sm = 0;  // unbounded above
  auto unmet = r.Check(Runtime());
  ASSERT_TRUE(unmet.has_value());
  EXPECT_EQ(*unmet, "requires SM >= 100; found SM 90");
  r.min_sm = 0;
  r.max_sm = 89;
  unmet = r.Check(Runtime());
  ASSERT_TRUE(unmet.has_value());
  EXPECT_EQ(*unmet, "requires SM <= 89; found SM 90");
  r.max_sm = 0;
  EXPECT_FALSE(r.Check(Runtime()).has_value());
}

TEST(RequirementTest, EveryConditionMustHold) {
  Requirement r;
  r.library = "cublaslt";
  r.min_version = "13.0";
  r.feature = "graphs";
  r.min_sm = 90;
  EXPECT_FALSE(r.Check(Runtime()).has_value());
  RuntimeInfo ampere = Runtime();
  ampere.sm = 80;
  auto unmet = r.Check(ampere);
  ASSERT_TRUE(unmet.has_value());
  EXPECT_TRUE(HasText(*unmet, "SM >= 90"));
}

TEST(CaseResultTest, PassedAndFailure) {
  CaseResult ok = CaseResult::Passed({Params{{"latency", 1.0}}});
  EXPECT_EQ(ok.disposition, Disposition::kPassed);
  EXPECT_EQ(ok.failure_class, FailureClass::kNone);
  EXPECT_EQ(ok.rows.size(), 1u);
  CaseResult bad =
      CaseResult::Failure(Disposition::kIncorrect, FailureClass::kCollectorBug, "IncorrectOutput", "max error 0.5");
  EXPECT_EQ(bad.disposition, Disposition::kIncorrect);
  EXPECT_EQ(bad.failure_class, FailureClass::kCollectorBug);
  EXPECT_EQ(bad.error_type, "IncorrectOutput");
  EXPECT_EQ(bad.message, "max error 0.5");
  EXPECT_TRUE(bad.rows.empty());
  EXPECT_FALSE(bad.poisoned);
}

TimingStats Stats() {
  TimingStats s;
  s.median_ms = 1.5;
  s.p10_ms = 1.25;
  s.p90_ms = 2.0;
  s.samples = 12;
  s.rsd = 0.004;
  s.method = "graph";
  s.l2 = "cold";
  s.clock_mhz_before = 1980;
  s.clock_mhz_after = 1755;
  s.throttled = true;
  s.power_w = 612.5;
  s.power_limit_w = 700;
  return s;
}

std::vector<std::string> Names(const Params& p) {
  std::vector<std::string> out;
  for (const auto& [k, _] : p.items()) out.push_back(k);
  return out;
}

std::vector<std::string> Names(const std::vector<ColumnSpec>& cols) {
  std::vector<std::string> out;
  for (const auto& c : cols) out.push_back(c.name);
  return out;
}

const Params kGemmKey{{"k", std::int64_t{4096}},  // deliberately out of table order
                      {"gemm_dtype", std::string("bfloat16")},
                      {"n", std::int64_t{8192}},
                      {"m", std::int64_t{16}},
                      {"algo", std::int64_t{23}}};  // not a key column: ignored

TEST(MakeRowTest, ColumnsInTableOrderWithValues) {
  const TableSpec& gemm = *FindTableSpec("gemm_perf");
  Params row = MakeRow(gemm, Runtime(), "gemm", "cublaslt:algo=23", kGemmKey, Stats(), false);
  EXPECT_EQ(Names(row), Names(gemm.AllColumns(false)));
  EXPECT_EQ(row.Str("framework"), "cuda");
  EXPECT_EQ(row.Str("version"), "13.0-cublaslt13.1");
  EXPECT_EQ(row.Str("device"), "NVIDIA H200");
  EXPECT_EQ(row.Str("op_name"), "gemm");
  EXPECT_EQ(row.Str("kernel_source"), "cublaslt:algo=23");
  EXPECT_EQ(row.Str("gemm_dtype"), "bfloat16");
  EXPECT_EQ(row.Int("m"), 16);
  EXPECT_EQ(row.Int("n"), 8192);
  EXPECT_EQ(row.Int("k"), 4096);
  EXPECT_FALSE(row.Has("algo"));
  EXPECT_DOUBLE_EQ(row.Num("latency"), 1.5);
  EXPECT_DOUBLE_EQ(row.Num("latency_p10"), 1.25);
  EXPECT_DOUBLE_EQ(row.Num("latency_p90"), 2.0);
  EXPECT_EQ(row.Int("samples"), 12);
  EXPECT_DOUBLE_EQ(row.Num("rsd"), 0.004);
  EXPECT_EQ(row.Str("timing"), "graph");
  EXPECT_EQ(row.Str("l2"), "cold");
  EXPECT_DOUBLE_EQ(row.Num("clock_mhz_before"), 1980);
  EXPECT_DOUBLE_EQ(row.Num("clock_mhz_after"), 1755);
  EXPECT_EQ(row.Int("throttled"), 1);
  // Every cell has its column's type.
  for (const auto& col : gemm.AllColumns(false)) EXPECT_EQ(TypeOf(row.Get(col.name)), col.type) << col.name;
}

TEST(MakeRowTest, PowerColumnsOnlyWhenMeasured) {
  const TableSpec& gemm = *FindTableSpec("gemm_perf");
  Params row = MakeRow(gemm, Runtime(), "gemm", "k", kGemmKey, Stats(), true);
  EXPECT_EQ(Names(row), Names(gemm.AllColumns(true)));
  EXPECT_DOUBLE_EQ(row.Num("power"), 612.5);
  EXPECT_DOUBLE_EQ(row.Num("power_limit"), 700);
  TimingStats cool = Stats();
  cool.throttled = false;
  EXPECT_EQ(MakeRow(gemm, Runtime(), "gemm", "k", kGemmKey, cool, false).Int("throttled"), 0);
}

TEST(MakeRowTest, KeyColumnOfTheWrongTypeIsAnError) {
  const TableSpec& gemm = *FindTableSpec("gemm_perf");
  Params key = kGemmKey;
  key.Set("m", std::string("16"));
  std::string msg = ThrownMessage<Error>([&] { MakeRow(gemm, Runtime(), "gemm", "k", key, Stats(), false); });
  EXPECT_TRUE(HasText(msg, "gemm_perf: key column 'm' expects int64, got string '16'"));
  key.Set("m", 16.0);
  msg = ThrownMessage<Error>([&] { MakeRow(gemm, Runtime(), "gemm", "k", key, Stats(), false); });
  EXPECT_TRUE(HasText(msg, "key column 'm' expects int64, got double"));
}

TEST(MakeRowTest, MissingKeyColumnIsAnError) {
  const TableSpec& gemm = *FindTableSpec("gemm_perf");
  Params key{{"gemm_dtype", std::string("bfloat16")}, {"m", std::int64_t{1}}, {"n", std::int64_t{1}}};
  std::string msg = ThrownMessage<Error>([&] { MakeRow(gemm, Runtime(), "gemm", "k", key, Stats(), false); });
  EXPECT_TRUE(HasText(msg, "missing parameter 'k'"));
}

TEST(MakeRowTest, IntegerKeyWidensForADoubleKeyColumn) {
  TableSpec spec;
  spec.name = "ratio_perf";
  spec.family = "test";
  spec.key_columns = {{"ratio", ValueType::kDouble}, {"tag", ValueType::kString}};
  Params row =
      MakeRow(spec, Runtime(), "r", "k", Params{{"tag", std::string("t")}, {"ratio", std::int64_t{2}}}, Stats(), false);
  EXPECT_EQ(Names(row), Names(spec.AllColumns(false)));
  EXPECT_EQ(TypeOf(row.Get("ratio")), ValueType::kDouble);
  EXPECT_DOUBLE_EQ(row.Num("ratio"), 2.0);
}

}  // namespace
}  // namespace servecast::collect
