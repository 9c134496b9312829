// The real binary end to end on the CPU backend: smoke collect then check, plan
// counts, sharding, resume binding.
#include <filesystem>

#include "e2e_common.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;

TEST(CollectE2E, SmokeGemmThenCheckPasses) {
  std::string dir = MakeTempDir("sc_smoke_");
  auto r = RunProcess(CollectArgs(kBin, {"--ops", "gemm", "--smoke", "--out", dir + "/data", "--run-dir", dir + "/run"}));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  auto tables = FindTables(dir + "/data");
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_EQ(fs::path(tables[0]).filename(), "gemm_perf.csv");
  Table t = Table::ReadCsv(tables[0]);
  EXPECT_EQ(t.num_rows(), 4u);  // --smoke: 4 cases per op
  for (std::size_t i = 0; i < t.num_rows(); ++i) EXPECT_GT(t.GetDouble(i, t.ColumnIndex("latency")), 0);
  auto summary = ReadJson(dir + "/run/collection_summary_cpu.json");
  EXPECT_EQ(summary["ops"]["gemm"]["cases"]["passed"], 4);
  // bfloat16 cases are not_supported (with evidence) where OpenBLAS lacks sbgemm, never silently dropped.
  auto c = RunProcess({kBin, "check", dir + "/data", "--systems", kSystems});
  EXPECT_EQ(c.exit_code, 0) << Describe(c);
  EXPECT_NE(c.out.find("gemm_perf.csv"), std::string::npos);
  fs::remove_all(dir);
}

TEST(CollectE2E, PlanOnlyPrintsStageCountsAndRunsNothing) {
  std::string dir = MakeTempDir("sc_plan_");
  auto r = RunProcess(CollectArgs(kBin, {"--plan-only", "--out", dir + "/data"}));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (const char* op : {"gemm", "attention_context", "attention_generation", "rmsnorm", "silu_and_mul"})
    EXPECT_NE(r.out.find(op), std::string::npos) << op;
  EXPECT_NE(r.out.find("supported"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir + "/data"));
  auto l = RunProcess(CollectArgs(kBin, {"--plan-only", "--list", "--ops", "rmsnorm", "--model", "qwen3-1.7b"}));
  // rmsnorm has no model shapes: model selection leaves nothing, and says so.
  EXPECT_EQ(l.exit_code, 0) << Describe(l);
  EXPECT_NE(l.out.find("total cases to run: 0"), std::string::npos) << l.out;
  auto m = RunProcess(CollectArgs(kBin, {"--plan-only", "--list", "--ops", "attention_context", "--model", "qwen3-1.7b",
                                         "--case-filter", "batch_size=1"}));
  ASSERT_EQ(m.exit_code, 0) << Describe(m);
  EXPECT_NE(m.out.find("attention_context:batch_size=1,isl=16,num_heads=16,num_key_value_heads=8"), std::string::npos)
      << m.out;
  EXPECT_EQ(m.out.find("batch_size=2,"), std::string::npos);
  fs::remove_all(dir);
}

TEST(CollectE2E, ShardsMergeIntoTheUnshardedTable) {
  std::string dir = MakeTempDir("sc_shard_");
  std::vector<std::string> common = {"--ops", "rmsnorm", "silu_and_mul", "--timing-budget-s", "0.02"};
  auto full = CollectArgs(kBin, common);
  full.insert(full.end(), {"--out", dir + "/full", "--run-dir", dir + "/run_full"});
  auto r = RunProcess(full);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (int i = 0; i < 3; ++i) {
    auto a = CollectArgs(kBin, common);
    std::string s = std::to_string(i);
    a.insert(a.end(), {"--shard", s + "/3", "--out", dir + "/shard" + s, "--run-dir", dir + "/run" + s});
    auto rs = RunProcess(a);
    ASSERT_EQ(rs.exit_code, 0) << Describe(rs);
  }
  auto fin = RunProcess({kBin, "finalize", "--run-dir", dir + "/run0", "--run-dir", dir + "/run1", "--run-dir",
                         dir + "/run2", "--out", dir + "/merged"});
  ASSERT_EQ(fin.exit_code, 0) << Describe(fin);
  auto full_tables = FindTables(dir + "/full");
  auto merged_tables = FindTables(dir + "/merged");
  ASSERT_EQ(full_tables.size(), 1u);  // both ops write elementwise_perf
  ASSERT_EQ(merged_tables.size(), 1u);
  auto a = RowKeys(full_tables[0]), b = RowKeys(merged_tables[0]);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 30u);
  auto c = RunProcess({kBin, "check", dir + "/merged", "--systems", kSystems});
  EXPECT_EQ(c.exit_code, 0) << Describe(c);
  // A shard alone is incomplete, and check says so.
  auto one = RunProcess({kBin, "check", dir + "/shard0", "--systems", kSystems});
  EXPECT_EQ(one.exit_code, 1) << Describe(one);
  fs::remove_all(dir);
}

TEST(CollectE2E, ResumeRefusesAnotherPlan) {
  std::string dir = MakeTempDir("sc_bind_");
  auto r = RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--limit", "2", "--timing-budget-s", "0.02", "--out",
                                         dir + "/data", "--run-dir", dir + "/run"}));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  // A different op set is a different plan.
  auto other = RunProcess(CollectArgs(kBin, {"--ops", "silu_and_mul", "--resume", "--out", dir + "/data",
                                             "--run-dir", dir + "/run"}));
  EXPECT_EQ(other.exit_code, 3) << Describe(other);
  EXPECT_NE(other.err.find("plan"), std::string::npos) << other.err;
  // Starting over in a run dir that holds a journal needs --resume.
  auto again = RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--out", dir + "/data", "--run-dir", dir + "/run"}));
  EXPECT_EQ(again.exit_code, 2) << Describe(again);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servecast::testing
