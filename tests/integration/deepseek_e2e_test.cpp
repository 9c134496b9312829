// DeepSeek end to end with the real binary: a missing MLA table is an error that
// names the table and the collector op to run (not a crash); and `validate` on
// disaggregated DeepSeek-V3 rows of h200_dev2.csv whose batch fields are removed
// derives each decode rank's batch from silicon_concurrency=N and predicts what
// the original rows predict (AIC's H200 tables in ../shared; skipped without them).

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "process.h"
#include "shared_data.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const std::string kDsBin = SERVECAST_BIN;
const std::string kDsSource = SERVECAST_SOURCE_DIR;

std::string Show(const ProcessResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out + "\n--- stderr\n" + r.err;
}

TEST(DeepSeekE2e, MissingMlaTableNamesTheTableAndTheCollectorOp) {
  // The moe/1 fixture has GEMM, attention and MoE tables but no MLA table.
  const ProcessResult r = RunProcess({kDsBin,        "estimate",
                                      "--model",     "tests/goldens/models/tiny-deepseek",
                                      "--system",    "tiny_gpu",
                                      "--systems",   "tests/goldens/systems",
                                      "--data-root", "tests/goldens/data",
                                      "--data",      "moe/1",
                                      "--backend",   "trtllm",
                                      "--mode",      "static",
                                      "--tp",        "2",
                                      "--moe-ep",    "2",
                                      "--batch",     "2",
                                      "--isl",       "64",
                                      "--osl",       "2"},
                                     120, kDsSource);
  EXPECT_NE(r.exit_code, 0) << Show(r);
  EXPECT_LT(r.exit_code, 128) << Show(r);  // an error, not a signal
  EXPECT_NE(r.err.find("context_mla_perf is not in the data source"), std::string::npos) << Show(r);
  EXPECT_NE(r.err.find("--ops mla_context"), std::string::npos) << Show(r);
}

TEST(DeepSeekE2e, GoldenDataAnswersWithMlaOps) {
  const ProcessResult r = RunProcess({kDsBin,        "estimate",
                                      "--model",     "tests/goldens/models/tiny-deepseek",
                                      "--system",    "tiny_gpu",
                                      "--systems",   "tests/goldens/systems",
                                      "--data-root", "tests/goldens/data",
                                      "--data",      "deepseek/1",
                                      "--backend",   "sglang",
                                      "--mode",      "static",
                                      "--tp",        "2",
                                      "--moe-ep",    "2",
                                      "--batch",     "2",
                                      "--isl",       "64",
                                      "--osl",       "2",
                                      "--json"},
                                     120, kDsSource);
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  const Json doc = Json::parse(r.out);
  EXPECT_EQ(doc["model"]["family"], "deepseek");
  bool bmm = false, mla = false;
  for (const Json& op : doc["generation"]["ops"]) {
    bmm = bmm || op["kind"] == "mla_bmm";
    mla = mla || op["kind"] == "generation_mla";
  }
  EXPECT_TRUE(bmm && mla) << r.out;
}

// A silicon_concurrency that is not a positive integer makes the file malformed
// (exit 2, naming the line and the column); a disagg row with no concurrency at
// all is a bad row.
TEST(DeepSeekE2e, BadSiliconConcurrencyIsAMalformedFile) {
  const std::string dir = MakeTempDir("deepseek-concurrency");
  const std::string head =
      "id,silicon_data_source,backend,model_path,system,mode,isl,osl,batch_size,tp_size,decode_num_workers,"
      "decode_tp_size,decode_moe_ep_size,prefill_tp_size,prefill_moe_ep_size,silicon_ttft_ms,silicon_tpot_ms\n";
  const std::string tail = ",sglang,tests/goldens/models/tiny-deepseek,tiny_gpu,disagg,64,2,,,1,2,2,2,2,0.5,0.1\n";
  WriteText(dir + "/bad.csv", head + "r1,config_id=1; silicon_concurrency=many; x=1" + tail);
  const std::vector<std::string> argv = {
      kDsBin,        "validate",           "--silicon", dir + "/bad.csv", "--systems", "tests/goldens/systems",
      "--data-root", "tests/goldens/data", "--data",    "deepseek/1"};
  const ProcessResult bad = RunProcess(argv, 120, kDsSource);
  EXPECT_EQ(bad.exit_code, 2) << Show(bad);
  EXPECT_NE(bad.err.find(dir + "/bad.csv:2"), std::string::npos) << Show(bad);
  EXPECT_NE(bad.err.find("silicon_data_source"), std::string::npos) << Show(bad);
  WriteText(dir + "/bad.csv", head + "r1,config_id=1" + tail);
  std::vector<std::string> json = argv;
  json.push_back("--json");
  const ProcessResult none = RunProcess(json, 120, kDsSource);
  EXPECT_EQ(none.exit_code, 1) << Show(none);
  const Json doc = Json::parse(none.out);
  ASSERT_EQ(doc["failures"].size(), 1u) << none.out;
  EXPECT_EQ(doc["failures"][0]["kind"], "bad row");
  EXPECT_NE(doc["failures"][0]["reason"].get<std::string>().find("silicon_concurrency"), std::string::npos) << none.out;
  // With the concurrency the same row is predicted, its decode batch derived.
  WriteText(dir + "/good.csv", head + "r1,config_id=1; silicon_concurrency=4" + tail);
  json[3] = dir + "/good.csv";
  const ProcessResult good = RunProcess(json, 120, kDsSource);
  ASSERT_EQ(good.exit_code, 0) << Show(good);
  const Json g = Json::parse(good.out);
  ASSERT_TRUE(g["rows"][0]["predicted"].get<bool>()) << good.out;
  EXPECT_NE(g["rows"][0]["config"].get<std::string>().find(" b4]"), std::string::npos) << good.out;  // 4 / (1 x dp 1)
}

// The CSV header and the disagg DeepSeek-V3 rows of h200_dev2.csv (first `n`).
std::vector<std::string> DevRows(const std::string& path, std::string& header, std::size_t n) {
  std::ifstream in(path);
  std::getline(in, header);
  std::vector<std::string> rows;
  std::string line;
  while (rows.size() < n && std::getline(in, line))
    if (line.find("deepseek-ai/DeepSeek-V3") != std::string::npos && line.find(",disagg,") != std::string::npos)
      rows.push_back(line);
  return rows;
}

std::vector<std::string> Split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string f;
  while (std::getline(ss, f, ',')) out.push_back(f);
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}

std::string Join(const std::vector<std::string>& f) {
  std::string s;
  for (std::size_t i = 0; i < f.size(); ++i) s += (i ? "," : "") + f[i];
  return s;
}

TEST(DeepSeekE2e, DisaggRowsWithOnlyTheConcurrencyDeriveTheDecodeBatch) {
  const std::string shared = kDsSource + "/../shared/reference";
  const std::string dev = shared + "/silicon/h200_dev2.csv";
  SERVECAST_NEED_SHARED(fs::exists(dev) && fs::exists(shared + "/aic-h200-more"), "no ../shared reference data");
  std::string header;
  const std::vector<std::string> rows = DevRows(dev, header, 4);
  ASSERT_EQ(rows.size(), 4u);
  const std::vector<std::string> cols = Split(header);
  auto col = [&](const std::string& name) {
    for (std::size_t i = 0; i < cols.size(); ++i)
      if (cols[i] == name) return i;
    ADD_FAILURE() << "no column " << name;
    return std::size_t{0};
  };
  // The rows as measured, then copies without decode_batch_size.
  std::string text = header + "\n";
  for (const std::string& row : rows) text += row + "\n";
  // Copies 0 and 1: no batch field at all (silicon_concurrency=N only); copies 2
  // and 3: the concurrency as batch_size.
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::vector<std::string> f = Split(rows[i]);
    f[col("id")] += "_nobatch";
    f[col("decode_batch_size")] = "";
    f[col("batch_size")] = "";
    if (i >= 2) {
      const std::string& source = f[col("silicon_data_source")];
      const std::string key = "silicon_concurrency=";
      const std::size_t at = source.find(key) + key.size();
      f[col("batch_size")] = source.substr(at, source.find(';', at) - at);
    }
    text += Join(f) + "\n";
  }
  const std::string dir = MakeTempDir("deepseek-validate");
  WriteText(dir + "/rows.csv", text);
  const ProcessResult r = RunProcess(
      {kDsBin, "validate", "--silicon", dir + "/rows.csv", "--data-root", shared + "/aic-parquet", "--data-root",
       shared + "/aic-h200-more", "--data", "trtllm/1.3.0rc20", "--database-mode", "hybrid", "--json"},
      300, kDsSource);
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  const Json doc = Json::parse(r.out);
  ASSERT_EQ(doc["rows"].size(), 8u) << r.out;
  for (std::size_t i = 0; i < 4; ++i) {
    const Json& orig = doc["rows"][i];
    const Json& copy = doc["rows"][i + 4];
    ASSERT_TRUE(orig["predicted"].get<bool>()) << orig.dump();
    ASSERT_TRUE(copy["predicted"].get<bool>()) << copy.dump();
    // decode_batch_size of these rows is concurrency / (decode workers x dp), so the
    // derived batch is the same and so is every prediction.
    EXPECT_DOUBLE_EQ(copy["prediction"]["tpot_ms"].get<double>(), orig["prediction"]["tpot_ms"].get<double>())
        << copy.dump();
    EXPECT_DOUBLE_EQ(copy["prediction"]["ttft_ms"].get<double>(), orig["prediction"]["ttft_ms"].get<double>())
        << copy.dump();
    const std::string from = i >= 2 ? "(batch_size)" : "(silicon_concurrency)";
    bool noted = false;
    for (const Json& n : copy["notes"]) {
      const std::string note = n.get<std::string>();
      noted = noted || (note.find("decode batch derived: concurrency") != std::string::npos &&
                        note.find(from) != std::string::npos);
    }
    EXPECT_TRUE(noted) << copy.dump();
  }
}

}  // namespace
}  // namespace servecast::testing
