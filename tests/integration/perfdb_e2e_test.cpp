// Parquet tables end to end: collect with --format parquet, check them, convert
// them with `servecast db convert`, and list a data tree with `servecast db inspect`.
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "core/table_file.h"
#include "e2e_common.h"
#include "shared_data.h"
#include "tables/table_spec.h"

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

  // Parquet -> CSV -> Parquet keeps every value and type. The files keep the
  // table's name, so the CSV is read with the declared column types (a clock of
  // exactly 2600 MHz stays a double, not an integer column).
  fs::create_directories(dir + "/csv");
  fs::create_directories(dir + "/back");
  const std::string csv = dir + "/csv/elementwise_perf.csv", back_file = dir + "/back/elementwise_perf.parquet";
  auto conv = RunProcess({kBin, "db", "convert", table, csv});
  ASSERT_EQ(conv.exit_code, 0) << Describe(conv);
  auto back = RunProcess({kBin, "db", "convert", csv, back_file, "--codec", "snappy"});
  ASSERT_EQ(back.exit_code, 0) << Describe(back);
  Table a = ReadTableFile(table), b = ReadTableFile(back_file);
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

  // Key coverage: the elementwise table has no slice model yet, and says so.
  auto slices = RunProcess({kBin, "db", "inspect", dir + "/pq", "--slices", "cpu_host", "--backend", "cpu", "--systems",
                            kSystems});
  ASSERT_EQ(slices.exit_code, 0) << Describe(slices);
  EXPECT_NE(slices.out.find("elementwise_perf"), std::string::npos) << slices.out;

  auto bad = RunProcess({kBin, "db", "convert", csv, dir + "/t.txt"});
  EXPECT_EQ(bad.exit_code, 2) << Describe(bad);
  fs::remove_all(dir);
}

// A table converted inside its data folder keeps its provenance: the meta entry
// names the new file and records the conversion; collecting into the folder
// afterwards keeps the table's format (--format auto) and the entry is the
// collection's again. Converting onto itself or into a folder is refused.
TEST(PerfdbE2E, ConvertInPlaceMovesProvenanceAndCollectKeepsTheFormat) {
  std::string dir = MakeTempDir("sc_convert_");
  std::vector<std::string> common = {"--ops", "rmsnorm", "--limit", "3", "--timing-budget-s", "0.02"};
  auto first = CollectArgs(kBin, common);
  first.insert(first.end(), {"--out", dir + "/data", "--run-dir", dir + "/run1"});
  auto r = RunProcess(first);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  std::string csv;
  for (const auto& e : fs::recursive_directory_iterator(dir + "/data"))
    if (e.path().extension() == ".csv") csv = e.path().string();
  ASSERT_FALSE(csv.empty()) << "a new table is CSV under --format auto";
  const std::string folder = fs::path(csv).parent_path().string();
  const std::string parquet = folder + "/elementwise_perf.parquet";

  auto same = RunProcess({kBin, "db", "convert", csv, csv});
  EXPECT_EQ(same.exit_code, 2) << Describe(same);
  EXPECT_NE(same.err.find("input and output are the same file"), std::string::npos) << same.err;
  auto to_dir = RunProcess({kBin, "db", "convert", csv, folder});
  EXPECT_EQ(to_dir.exit_code, 2) << Describe(to_dir);
  EXPECT_NE(to_dir.err.find("must end in .csv or .parquet"), std::string::npos) << to_dir.err;
  fs::create_directories(dir + "/x.parquet");
  auto into_dir = RunProcess({kBin, "db", "convert", csv, dir + "/x.parquet"});
  EXPECT_EQ(into_dir.exit_code, 2) << Describe(into_dir);
  EXPECT_NE(into_dir.err.find("is a folder"), std::string::npos) << into_dir.err;

  // In place without --replace would leave the folder holding the table twice.
  auto twice = RunProcess({kBin, "db", "convert", csv, parquet});
  EXPECT_EQ(twice.exit_code, 2) << Describe(twice);
  EXPECT_NE(twice.err.find("convert in place with --replace"), std::string::npos) << twice.err;
  EXPECT_FALSE(fs::exists(parquet));

  // The CSV as the table's declaration types it (what the conversion writes).
  const Table before = ReadTableFile(csv, tables::FindTableSpec("elementwise_perf")->AllColumns(true));
  auto conv = RunProcess({kBin, "db", "convert", "--replace", csv, parquet});
  ASSERT_EQ(conv.exit_code, 0) << Describe(conv);
  EXPECT_FALSE(fs::exists(csv));
  const Table after = ReadTableFile(parquet);
  ASSERT_EQ(after.num_rows(), before.num_rows());
  for (std::size_t i = 0; i < after.num_rows(); ++i) EXPECT_EQ(after.Row(i), before.Row(i));
  YAML::Node meta = YAML::LoadFile(folder + "/collection_meta.yaml");
  EXPECT_EQ(meta["tables"]["elementwise_perf"]["file"].as<std::string>(), "elementwise_perf.parquet");
  EXPECT_EQ(meta["tables"]["elementwise_perf"]["converted"]["from"].as<std::string>(), "elementwise_perf.csv");
  EXPECT_EQ(meta["tables"]["elementwise_perf"]["converted"]["rows"].as<int>(), 3);
  EXPECT_EQ(meta["tables"]["elementwise_perf"]["converted"]["sha256"].as<std::string>().rfind("sha256:", 0), 0u);
  auto c = RunProcess({kBin, "check", dir + "/data", "--systems", kSystems});
  EXPECT_EQ(c.exit_code, 0) << Describe(c);

  auto second = CollectArgs(kBin, {"--ops", "rmsnorm", "--limit", "5", "--timing-budget-s", "0.02"});
  second.insert(second.end(), {"--out", dir + "/data", "--run-dir", dir + "/run2"});
  auto r2 = RunProcess(second);
  ASSERT_EQ(r2.exit_code, 0) << Describe(r2);
  EXPECT_FALSE(fs::exists(csv));
  EXPECT_EQ(ReadTableFile(parquet).num_rows(), 5u);
  meta = YAML::LoadFile(folder + "/collection_meta.yaml");
  EXPECT_EQ(meta["tables"]["elementwise_perf"]["file"].as<std::string>(), "elementwise_perf.parquet");
  EXPECT_FALSE(meta["tables"]["elementwise_perf"]["converted"]);
  fs::remove_all(dir);
}

// --detail source marks the rows a table read took from another version or
// source (issue 28 item 10): AIC's vllm 0.22.0 on H200 borrows from 0.24.0
// through reuse.yaml. Without --detail source nothing of it is printed.
TEST(PerfdbE2E, DetailSourceNamesRowsMergedFromOtherVersions) {
  const std::string root = kSource + "/../shared/reference/aic-parquet";
  SERVECAST_NEED_SHARED(fs::exists(root + "/h200_sxm"), "no reference tree at " + root);
  std::vector<std::string> argv = {kBin,        "estimate",    "--model", "Qwen/Qwen3-32B", "--system",
                                   "h200_sxm",  "--backend",   "vllm",    "--data",         "vllm/0.22.0",
                                   "--data-root", root,        "--systems", kSystems,       "--mode",
                                   "static"};
  const ProcessResult plain = RunProcess(argv);
  ASSERT_EQ(plain.exit_code, 0) << Describe(plain);
  EXPECT_EQ(plain.out.find("rows merged from other versions"), std::string::npos) << plain.out;
  argv.insert(argv.end(), {"--detail", "source"});
  const ProcessResult r = RunProcess(argv);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const std::size_t head = r.out.find("\nrows merged from other versions or sources (data vllm/0.22.0):\n");
  ASSERT_NE(head, std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" rows from vllm/0.24.0 (reuse: ", head), std::string::npos) << r.out.substr(head);
}

TEST(PerfdbE2E, QueryAnswersFromAicTablesWithItsSource) {
  const std::string root = kSource + "/../shared/reference/aic-parquet";
  std::vector<std::string> base = {kBin, "db", "query", "--systems-path", root, "--system", "h200_sxm", "--backend",
                                   "trtllm", "--version", "1.3.0rc20", "--systems", kSystems, "--json"};
  // A collected point comes back verbatim: AIC's bf16 8192^3 row is 1.3637... ms.
  auto exact = base;
  exact.insert(exact.end(), {"--op", "gemm", "--quant", "bfloat16", "--m", "8192", "--n", "8192", "--k", "8192"});
  auto r = RunProcess(exact);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["source"], "silicon");
  EXPECT_NEAR(doc["latency_ms"].get<double>(), 1.3637, 1e-3);
  EXPECT_GT(doc["sol_fraction"].get<double>(), 0.5);
  EXPECT_LT(doc["sol_fraction"].get<double>(), 1.0);
  // Between token counts: interpolated, and between its neighbours.
  auto mid = base;
  mid.insert(mid.end(), {"--op", "context_attention", "--batch", "2", "--seq", "3000", "--heads", "32", "--kv-heads", "8"});
  auto c = RunProcess(mid);
  ASSERT_EQ(c.exit_code, 0) << Describe(c);
  EXPECT_EQ(nlohmann::json::parse(c.out)["source"], "interpolated");
  // Far from every collected site: a miss that says what the data covers.
  auto far = base;
  far.insert(far.end(), {"--op", "gemm", "--quant", "bfloat16", "--m", "8", "--n", "100000", "--k", "1"});
  auto miss = RunProcess(far);
  EXPECT_EQ(miss.exit_code, 1) << Describe(miss);
  EXPECT_NE(miss.err.find("nearest sites"), std::string::npos) << miss.err;
  // The same miss in the other database modes: hybrid and empirical estimate from
  // the slice's utilization, sol is the roofline.
  for (const auto& [mode, source] : std::vector<std::pair<std::string, std::string>>{
           {"hybrid", "empirical"}, {"empirical", "empirical"}, {"sol", "sol"}}) {
    auto q = far;
    q.insert(q.end(), {"--database-mode", mode});
    auto res = RunProcess(q);
    ASSERT_EQ(res.exit_code, 0) << mode << Describe(res);
    auto j = nlohmann::json::parse(res.out);
    EXPECT_EQ(j["source"], source) << mode;
    EXPECT_GT(j["latency_ms"].get<double>(), 0) << mode;
    if (mode == "sol") {
      EXPECT_DOUBLE_EQ(j["sol_fraction"].get<double>(), 1.0);
    }
  }
  // Key coverage of AIC's GEMM table: three dtypes with their sites and ranges.
  auto cov = RunProcess({kBin, "db", "inspect", root, "--slices", "h200_sxm", "--backend", "trtllm", "--version",
                         "1.3.0rc20", "--systems", kSystems});
  ASSERT_EQ(cov.exit_code, 0) << Describe(cov);
  EXPECT_NE(cov.out.find("gemm_dtype=fp8_block: "), std::string::npos) << cov.out;
  EXPECT_NE(cov.out.find("m 1..32768"), std::string::npos) << cov.out;
  // A collective from the system-wide NCCL tables, exactly as measured.
  auto nccl = base;
  nccl.insert(nccl.end(), {"--op", "nccl", "--collective", "all_reduce", "--gpus", "8", "--size", "1048576"});
  auto n = RunProcess(nccl);
  ASSERT_EQ(n.exit_code, 0) << Describe(n);
  EXPECT_EQ(nlohmann::json::parse(n.out)["source"], "silicon");
}

// A declared table's --key values the declaration refuses (an op_name or a dtype the
// roofline does not know) are the user's mistake: exit 2 naming them, in every mode,
// never "internal error" (exit 1), and never a miss.
TEST(PerfdbE2E, QueryOfADeclaredTableRefusesAKeyItsRooflineDoesNotKnow) {
  const std::vector<std::string> base = {kBin, "db", "query", "--systems-path", kSystems + "/data", "--system",
                                         "h200_sxm", "--backend", "cuda", "--systems", kSystems,
                                         "--op", "mla_bmm_perf", "--key", "num_heads=16", "--key", "num_tokens=64"};
  for (const std::string mode : {"silicon", "sol"}) {
    auto bad = base;
    bad.insert(bad.end(), {"--key", "op_name=mla_gen_mid", "--key", "bmm_dtype=fp8", "--database-mode", mode});
    auto r = RunProcess(bad);
    EXPECT_EQ(r.exit_code, 2) << mode << Describe(r);
    EXPECT_NE(r.err.find("unknown op_name 'mla_gen_mid'"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
  }
  auto dtype = base;
  dtype.insert(dtype.end(), {"--key", "op_name=mla_gen_pre", "--key", "bmm_dtype=fp4"});
  auto r = RunProcess(dtype);
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_NE(r.err.find("'fp4'"), std::string::npos) << r.err;
  // A known key answers from the shipped H200 row.
  auto good = base;
  good.insert(good.end(), {"--key", "op_name=mla_gen_pre", "--key", "bmm_dtype=fp8", "--json"});
  auto ok = RunProcess(good);
  ASSERT_EQ(ok.exit_code, 0) << Describe(ok);
  EXPECT_EQ(nlohmann::json::parse(ok.out)["source"], "silicon");
}

}  // namespace
}  // namespace servecast::testing
