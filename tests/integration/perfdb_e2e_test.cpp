// Parquet tables end to end: collect with --format parquet, check them, convert
// them with `servecast db convert`, and list a data tree with `servecast db inspect`.
#include <filesystem>

#include "core/table_file.h"
#include "e2e_common.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;

TEST(PerfdbE2E, ParquetCollectionChecksConvertsAndInspects) {
  std::string dir = MakeTempDir("sc_parquet_");
  std::vector<std::string> common = {"--ops", "rmsnorm", "--limit", "4", "--timing-budget-s", "0.02"};
  auto pq = CollectArgs(kBin, common);
  pq.insert(pq.end(), {"--format", "parquet", "--out", dir + "/pq", "--run-dir", dir + "/run_pq"});
  auto r = RunProcess(pq);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  std::string table;
  for (const auto& e : fs::recursive_directory_iterator(dir + "/pq"))
    if (e.path().extension() == ".parquet") table = e.path().string();
  ASSERT_FALSE(table.empty());
  auto c = RunProcess({kBin, "check", dir + "/pq", "--systems", kSystems});
  EXPECT_EQ(c.exit_code, 0) << Describe(c);

  // Parquet -> CSV -> Parquet keeps every value.
  auto conv = RunProcess({kBin, "db", "convert", table, dir + "/t.csv"});
  ASSERT_EQ(conv.exit_code, 0) << Describe(conv);
  auto back = RunProcess({kBin, "db", "convert", dir + "/t.csv", dir + "/t.parquet", "--codec", "snappy"});
  ASSERT_EQ(back.exit_code, 0) << Describe(back);
  Table a = ReadTableFile(table), b = ReadTableFile(dir + "/t.parquet");
  ASSERT_EQ(a.num_rows(), 4u);
  ASSERT_EQ(a.num_rows(), b.num_rows());
  ASSERT_EQ(a.columns(), b.columns());
  for (std::size_t i = 0; i < a.num_rows(); ++i) EXPECT_EQ(a.Row(i), b.Row(i));

  // The same run dir cannot switch formats under one table.
  auto mixed = CollectArgs(kBin, common);
  mixed.insert(mixed.end(), {"--format", "csv", "--out", dir + "/pq", "--run-dir", dir + "/run_csv"});
  auto m = RunProcess(mixed);
  EXPECT_EQ(m.exit_code, 2) << Describe(m);
  EXPECT_NE(m.err.find("another format"), std::string::npos) << m.err;

  auto inspect = RunProcess({kBin, "db", "inspect", dir + "/pq", "--json"});
  ASSERT_EQ(inspect.exit_code, 0) << Describe(inspect);
  auto doc = nlohmann::json::parse(inspect.out);
  ASSERT_EQ(doc["dirs"].size(), 1u);
  EXPECT_EQ(doc["dirs"][0]["system"], "cpu_host");
  EXPECT_EQ(doc["dirs"][0]["tables"][0]["table"], "elementwise_perf");
  EXPECT_EQ(doc["dirs"][0]["tables"][0]["rows"], 4);

  auto bad = RunProcess({kBin, "db", "convert", dir + "/t.csv", dir + "/t.txt"});
  EXPECT_EQ(bad.exit_code, 2) << Describe(bad);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servecast::testing
