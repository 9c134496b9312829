// The real binary end to end: a CPU smoke collection of the moe op gives a
// moe_perf table that `servecast check` accepts.
#include <filesystem>

#include "e2e_common.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;

TEST(MoeE2E, SmokeCollectThenCheckPasses) {
  std::string dir = MakeTempDir("sc_moe_");
  auto r =
      RunProcess(CollectArgs(kBin, {"--ops", "moe", "--smoke", "--out", dir + "/data", "--run-dir", dir + "/run"}));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  auto tables = FindTables(dir + "/data");
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_EQ(fs::path(tables[0]).filename(), "moe_perf.csv");
  Table t = Table::ReadCsv(tables[0]);
  EXPECT_EQ(t.num_rows(), 4u);  // --smoke: 4 cases per op
  for (const char* col : {"moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
                          "moe_ep_size", "distribution"})
    EXPECT_NO_THROW(t.ColumnIndex(col)) << col;
  for (std::size_t i = 0; i < t.num_rows(); ++i) {
    EXPECT_GT(t.GetDouble(i, t.ColumnIndex("latency")), 0);
    EXPECT_EQ(ToString(t.Get(i, t.ColumnIndex("kernel_source"))), "servecast_cpu_moe");
  }
  auto summary = ReadJson(dir + "/run/collection_summary_cpu.json");
  EXPECT_EQ(summary["ops"]["moe"]["cases"]["passed"], 4);
  auto c = RunProcess({kBin, "check", dir + "/data", "--systems", kSystems});
  EXPECT_EQ(c.exit_code, 0) << Describe(c);
  EXPECT_NE(c.out.find("moe_perf.csv"), std::string::npos) << c.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servecast::testing
