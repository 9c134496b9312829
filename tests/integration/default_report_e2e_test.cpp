// `servecast default --save-dir`: the real binary writes the report folder
// (docs/search.md, "Reports"); the files exist, parse, and agree with --json.

#include <gtest/gtest.h>

#include <algorithm>
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

const std::string kReportBin = SERVECAST_BIN;
const std::string kReportSource = SERVECAST_SOURCE_DIR;

std::size_t CsvRows(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::size_t n = 0, cols = 0;
  while (std::getline(in, line)) {
    // No field of these tables holds a comma, so a plain split counts the columns.
    const std::size_t c = static_cast<std::size_t>(std::count(line.begin(), line.end(), ',')) + 1;
    if (n == 0) cols = c;
    EXPECT_EQ(c, cols) << path << " line " << n + 1;
    ++n;
  }
  return n;
}

std::vector<fs::path> Folders(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Checks one saved folder against the --json document of the same search.
void CheckFolder(const fs::path& d, const Json& doc) {
  ASSERT_TRUE(fs::is_regular_file(d / "summary.json"));
  const Json summary = Json::parse(ReadText((d / "summary.json").string()));
  // The same document (timings differ between runs).
  Json a = summary, b = doc;
  for (Json* j : {&a, &b}) j->erase("search_seconds"), j->erase("load_seconds");
  EXPECT_EQ(a, b);
  for (const auto& [mode, m] : summary["modes"].items()) {
    const fs::path md = d / mode;
    EXPECT_EQ(CsvRows((md / "pareto.csv").string()), m["feasible_points"].get<std::size_t>() + 1) << mode;
    EXPECT_EQ(CsvRows((md / "frontier.csv").string()), m["frontier"].size() + 1) << mode;
    EXPECT_EQ(CsvRows((md / "best_config_topn.csv").string()), m["best"].size() + 1) << mode;
  }
  const std::string html = ReadText((d / "report.html").string());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  for (const auto& [mode, m] : summary["modes"].items())
    if (!m["frontier"].empty()) {
      EXPECT_NE(html.find("frontier-" + mode), std::string::npos) << mode;
    }
  if (!summary["chosen"].is_null()) {
    EXPECT_NE(html.find("class=\"chosen\""), std::string::npos);
  }
}

void RunAndCheck(const std::vector<std::string>& search_args, const std::string& expect_name) {
  const std::string dir = MakeTempDir("servecast_report_e2e");
  std::vector<std::string> argv = {kReportBin, "default"};
  argv.insert(argv.end(), search_args.begin(), search_args.end());
  argv.insert(argv.end(), {"--save-dir", dir});

  // --json: stdout is one JSON document and nothing else.
  std::vector<std::string> json_argv = argv;
  json_argv.push_back("--json");
  const ProcessResult j = RunProcess(json_argv, 600);
  ASSERT_EQ(j.exit_code, 0) << j.out << j.err;
  const Json doc = Json::parse(j.out);
  auto folders = Folders(dir);
  ASSERT_EQ(folders.size(), 1u);
  EXPECT_EQ(folders[0].filename().string(), expect_name);
  CheckFolder(folders[0], doc);

  // Terminal: the folder path ends the report; a second save gets the "-2" suffix.
  const ProcessResult t = RunProcess(argv, 600);
  ASSERT_EQ(t.exit_code, 0) << t.out << t.err;
  folders = Folders(dir);
  ASSERT_EQ(folders.size(), 2u);
  EXPECT_EQ(folders[1].filename().string(), expect_name + "-2");
  EXPECT_NE(t.out.find("report saved to " + folders[1].string() + "/"), std::string::npos) << t.out;
  CheckFolder(folders[1], doc);
  fs::remove_all(dir);
}

// Fixture model and GPU in SOL mode: no perf tables needed.
TEST(DefaultReportE2E, TinyDenseSol) {
  RunAndCheck({"--model", kReportSource + "/tests/goldens/models/tiny-dense", "--system", "tiny_gpu", "--systems",
               kReportSource + "/tests/goldens/systems", "--total-gpus", "4", "--database-mode", "sol", "--isl", "512",
               "--osl", "64", "--ttft", "1000", "--tpot", "5"},
              "tiny-dense_tiny_gpu_trtllm_isl512_osl64_ttft1000_tpot5");
}

// A real model on real data (the shared AIC tables), when they are present.
TEST(DefaultReportE2E, Qwen3OnH200) {
  const std::string root = kReportSource + "/../shared/reference/aic-parquet";
  SERVECAST_NEED_SHARED(fs::exists(root + "/h200_sxm"), "no AIC reference data at " + root);
  RunAndCheck({"--model", "Qwen/Qwen3-1.7B", "--system", "h200_sxm", "--total-gpus", "2", "--data-root", root, "--data",
               "trtllm/1.3.0rc20", "--isl", "2000", "--osl", "500"},
              "Qwen_Qwen3-1.7B_h200_sxm_trtllm_isl2000_osl500_ttft2000_tpot30");
}

// The chosen point says where its op costs came from when not from measured or
// interpolated rows: SOL mode names every op "sol".
TEST(DefaultReportE2E, DataNotesNameSolCosts) {
  const ProcessResult j = RunProcess({kReportBin, "default", "--model", kReportSource + "/tests/goldens/models/tiny-dense",
                                      "--system", "tiny_gpu", "--systems", kReportSource + "/tests/goldens/systems",
                                      "--total-gpus", "4", "--database-mode", "sol", "--isl", "512", "--osl", "64",
                                      "--ttft", "1000", "--tpot", "5", "--json"},
                                     600);
  ASSERT_EQ(j.exit_code, 0) << j.out << j.err;
  const Json doc = Json::parse(j.out);
  ASSERT_TRUE(doc.contains("chosen_data_notes"));
  ASSERT_FALSE(doc["chosen_data_notes"].empty());
  for (const auto& n : doc["chosen_data_notes"]) EXPECT_EQ(n.get<std::string>().rfind("sol: ", 0), 0u) << n;
}

// --simulate: every frontier point within the limits and every best point carries
// its simulated figures; the closed form's ranking is unchanged.
TEST(DefaultReportE2E, SimulateAddsSimulatedFiguresToTheCandidates) {
  const std::vector<std::string> base = {kReportBin, "default", "--model",
                                         kReportSource + "/tests/goldens/models/tiny-dense", "--system", "tiny_gpu",
                                         "--systems", kReportSource + "/tests/goldens/systems", "--total-gpus", "4",
                                         "--database-mode", "sol", "--isl", "512", "--osl", "64", "--ttft", "1000",
                                         "--tpot", "5", "--json"};
  std::vector<std::string> sim = base;
  sim.push_back("--simulate");
  const ProcessResult plain = RunProcess(base, 600), j = RunProcess(sim, 600);
  ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  ASSERT_EQ(j.exit_code, 0) << j.out << j.err;
  const Json a = Json::parse(plain.out), doc = Json::parse(j.out);
  EXPECT_EQ(a["chosen"]["parallel"], doc["chosen"]["parallel"]);
  EXPECT_FALSE(a["chosen"].contains("simulation"));
  ASSERT_TRUE(doc["chosen"].contains("simulation")) << doc["chosen"].dump();
  int simulated = 0;
  for (const char* mode : {"agg", "disagg"}) {
    for (const auto& p : doc["modes"][mode]["best"]) {
      ASSERT_TRUE(p.contains("simulation")) << p.dump();
      const Json& s = p["simulation"];
      ASSERT_TRUE(s.contains("ttft_ms")) << s.dump();
      EXPECT_GT(s["ttft_ms"].get<double>(), 0);
      EXPECT_GT(s["tpot_ms"].get<double>(), 0);
      EXPECT_GT(s["tokens_per_s_gpu"].get<double>(), 0);
      EXPECT_EQ(s["meets_sla"].get<bool>(), s["ttft_ms"].get<double>() <= 1000 && s["tpot_ms"].get<double>() <= 5);
      EXPECT_EQ(std::string(mode) == "disagg", s.contains("prefill_utilization"));
      ++simulated;
    }
    for (const auto& p : doc["modes"][mode]["frontier"]) {
      if (p["meets_sla"].get<bool>()) {
        EXPECT_TRUE(p.contains("simulation")) << p.dump();
      }
    }
  }
  EXPECT_GT(simulated, 0);
  std::vector<std::string> text = sim;
  text.pop_back();
  text.pop_back();
  text.push_back("--simulate");
  const ProcessResult t = RunProcess(text, 600);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("    simulated    TTFT "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("sim TTFT"), std::string::npos) << t.out;
}

// On the bundled H200 tables (collectives measured on 2 GPUs only), a chosen
// deployment with tp > 2 reports its all-reduces as borrowed from 2 GPUs, and
// one with tp <= 2 does not.
TEST(DefaultReportE2E, BundledH200DataNotesNameBorrowedCollectives) {
  const ProcessResult j = RunProcess({kReportBin, "default", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm",
                                      "--total-gpus", "8", "--json"},
                                     600);
  ASSERT_EQ(j.exit_code, 0) << j.out << j.err;
  const Json doc = Json::parse(j.out);
  ASSERT_TRUE(doc["chosen"].is_object()) << j.out;
  std::string notes;
  for (const auto& n : doc["chosen_data_notes"]) notes += n.get<std::string>() + "\n";
  const std::string par = doc["chosen"]["parallel"].get<std::string>();
  const bool wide = par.rfind("tp4", 0) == 0 || par.rfind("tp8", 0) == 0;
  if (wide) {
    EXPECT_NE(notes.find("extrapolated: "), std::string::npos) << par << "\n" << notes;
    EXPECT_NE(notes.find("borrowed from 2 GPUs"), std::string::npos) << par << "\n" << notes;
  } else {
    EXPECT_EQ(notes.find("borrowed from"), std::string::npos) << par << "\n" << notes;
  }
}

}  // namespace
}  // namespace servecast::testing
