// The toy op of docs/extending.md ("Add a table", "Add a collector op"), end to
// end: its table declaration, its op (phases through the driver), its case grid
// and its one registration line (tests/support/toy_op.*) are all it takes for the
// real pipeline to plan, run, check, time and write its table, and for `check`
// (key validation, the physics gate from the declared cost) and `db inspect` to
// read it. Its declaration's estimator read is all `db query` needs to answer the
// table from the rows the op collected (silicon, interpolated, sol).

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/table.h"
#include "e2e_common.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;

TEST(ToyOpE2E, ANewOpOnANewTableRunsThroughThePipeline) {
  const std::string dir = MakeTempDir("sc_toy_op_");
  // The op's case grid.
  fs::create_directories(dir + "/cases/base_ops");
  WriteText(dir + "/cases/skips.yaml", "skips: []\n");
  WriteText(dir + "/cases/base_ops/toy_axpy.yaml", R"(op: toy_axpy
sweeps:
  - backends: [cpu]
    axes:
      dtype: [float32]
      n: [1024, 65536, 1048576]
)");
  auto r = RunProcess(CollectArgs(kTestBin,
                                  {"--ops", "toy_axpy", "--system", "cpu_host", "--timing-budget-s", "0.02", "--out",
                                   dir + "/data", "--run-dir", dir + "/run"},
                                  dir + "/cases"));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const std::vector<std::string> tables = FindTables(dir + "/data");
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_EQ(fs::path(tables[0]).filename(), "toy_axpy_perf.csv");
  EXPECT_EQ(fs::path(tables[0]).parent_path().parent_path().parent_path().filename(), "toy");  // the family folder
  const Table t = Table::ReadCsv(tables[0]);
  ASSERT_EQ(t.num_rows(), 3u);
  for (std::size_t i = 0; i < t.num_rows(); ++i) {
    EXPECT_EQ(t.GetString(i, t.ColumnIndex("kernel_source")), "test:toy_axpy");
    EXPECT_GT(t.GetDouble(i, t.ColumnIndex("latency")), 0);
  }

  auto check = RunProcess({kTestBin, "check", dir + "/data", "--systems", kSystems});
  EXPECT_EQ(check.exit_code, 0) << Describe(check);
  auto inspect = RunProcess({kTestBin, "db", "inspect", dir + "/data", "--json"});
  ASSERT_EQ(inspect.exit_code, 0) << Describe(inspect);
  const auto doc = nlohmann::json::parse(inspect.out);
  EXPECT_EQ(doc["dirs"][0]["tables"][0]["table"], "toy_axpy_perf");
  EXPECT_EQ(doc["dirs"][0]["tables"][0]["rows"], 3);

  // The declaration's estimator read reaches `db query`: the collected row at
  // n = 65536 verbatim (silicon), a blend between rows (interpolated), and the
  // declared roofline without reading a row (sol).
  const std::string backend = fs::path(tables[0]).parent_path().parent_path().filename().string();
  auto query = [&](const std::string& n, const std::string& mode) {
    auto q = RunProcess(
        {kTestBin,        "db",    "query",     "--systems-path",  dir + "/data", "--system",      "cpu_host",
         "--backend",     backend, "--systems", kSystems,          "--op",        "toy_axpy_perf", "--key",
         "dtype=float32", "--key", "n=" + n,    "--database-mode", mode,          "--json"});
    EXPECT_EQ(q.exit_code, 0) << Describe(q);
    return q.exit_code == 0 ? nlohmann::json::parse(q.out) : nlohmann::json::object();
  };
  double row_ms = 0, lo_ms = 0, hi_ms = 0;
  for (std::size_t i = 0; i < t.num_rows(); ++i) {
    const std::int64_t n = t.GetInt(i, t.ColumnIndex("n"));
    const double ms = t.GetDouble(i, t.ColumnIndex("latency"));
    (n == 65536 ? row_ms : n == 1024 ? lo_ms : hi_ms) = ms;
  }
  const auto silicon = query("65536", "silicon");
  EXPECT_EQ(silicon.value("source", ""), "silicon");
  EXPECT_EQ(silicon.value("latency_ms", 0.0), row_ms);
  const auto between = query("300000", "silicon");
  EXPECT_EQ(between.value("source", ""), "interpolated");
  // The linear blend of the two rows around n (to rounding: the reader may order the
  // arithmetic differently).
  const double blend = row_ms + (hi_ms - row_ms) * (300000.0 - 65536.0) / (1048576.0 - 65536.0);
  EXPECT_NEAR(between.value("latency_ms", 0.0), blend, 1e-12 * blend);
  const auto sol = query("65536", "sol");
  EXPECT_EQ(sol.value("source", ""), "sol");
  EXPECT_GT(sol.value("latency_ms", 0.0), 0);
  EXPECT_NEAR(sol.value("latency_ms", 0.0), silicon.value("sol_ms", -1.0), 1e-12 * sol.value("latency_ms", 1.0));
  auto unkeyed =
      RunProcess({kTestBin, "db", "query", "--systems-path", dir + "/data", "--system", "cpu_host", "--backend",
                  backend, "--systems", kSystems, "--op", "toy_axpy_perf", "--key", "dtype=float32"});
  EXPECT_EQ(unkeyed.exit_code, 2) << Describe(unkeyed);
  EXPECT_NE(unkeyed.err.find("needs --key for n"), std::string::npos) << Describe(unkeyed);

  // The declaration's key rules reach `check`: a row with n = 0 is refused.
  std::string text = ReadText(tables[0]);
  const std::size_t at = text.find(",65536,");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 7, ",0,");
  WriteText(tables[0], text);
  auto refused = RunProcess({kTestBin, "check", dir + "/data", "--systems", kSystems});
  EXPECT_EQ(refused.exit_code, 1) << Describe(refused);
  EXPECT_NE(refused.out.find("column 'n' is 0; expected an integer >= 1"), std::string::npos) << Describe(refused);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servecast::testing
