// The invocations AIC users type (issue 29 items 3 and 4), run as the real
// binary: --model-path, mode names in any case, --backend auto, default
// --target-request-rate without --total-gpus, each engine reading its own data
// in a tree with several sources, grouped skip reasons, generate --backend auto, and
// generate's benchmark scripts and report. SOL mode on the fixture model needs no data; the data
// choice and the skip groups read the shared AIC tree and the bundled H200 data.

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "process.h"
#include "shared_data.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const std::string kHabBin = SERVECAST_BIN;
const std::string kHabSrc = SERVECAST_SOURCE_DIR;
const std::string kAicRoot = kHabSrc + "/../shared/reference/aic-parquet";

std::vector<std::string> Tiny(const std::string& cmd, std::vector<std::string> extra,
                              const std::string& model_flag = "--model", const std::string& mode = "sol") {
  std::vector<std::string> a = {
      kHabBin,           cmd,        model_flag,  kHabSrc + "/tests/goldens/models/tiny-dense",
      "--system",        "tiny_gpu", "--systems", kHabSrc + "/tests/goldens/systems",
      "--database-mode", mode,       "--isl",     "512",
      "--osl",           "64",       "--ttft",    "1000",
      "--tpot",          "5"};
  if (cmd == "estimate") a.resize(14);  // estimate takes no latency limits (isl and osl kept)
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// `args` with the value after `flag` replaced.
std::vector<std::string> With(std::vector<std::string> args, const std::string& flag, const std::string& value) {
  for (std::size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == flag) args[i + 1] = value;
  return args;
}

std::size_t Count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(AicHabitsE2E, ModelPathIsModel) {
  const ProcessResult a = RunProcess(Tiny("default", {"--total-gpus", "4", "--json"}), 600);
  const ProcessResult b = RunProcess(Tiny("default", {"--total-gpus", "4", "--json"}, "--model-path"), 600);
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  EXPECT_EQ(Json::parse(a.out)["chosen"], Json::parse(b.out)["chosen"]);
  for (const char* cmd : {"estimate", "recommend", "support", "generate"}) {
    std::vector<std::string> extra;
    if (std::string(cmd) == "recommend") extra = {"--target-request-rate", "10"};
    if (std::string(cmd) == "generate") extra = {"--total-gpus", "2", "--save-dir", MakeTempDir("servecast_mp")};
    if (std::string(cmd) == "support") {
      // support has no --database-mode: give the flags it takes.
      const ProcessResult r =
          RunProcess({kHabBin, "support", "--model-path", kHabSrc + "/tests/goldens/models/tiny-dense", "--system",
                      "tiny_gpu", "--systems", kHabSrc + "/tests/goldens/systems", "--json"},
                     600);
      EXPECT_NE(r.exit_code, 2) << cmd << ": " << r.err;
      continue;
    }
    const ProcessResult r = RunProcess(Tiny(cmd, extra, "--model-path"), 600);
    EXPECT_EQ(r.exit_code, 0) << cmd << ": " << r.out << r.err;
  }
  const ProcessResult help = RunProcess({kHabBin, "default", "--help"}, 60);
  EXPECT_NE(help.out.find("--model,--model-path"), std::string::npos) << help.out;
}

TEST(AicHabitsE2E, DatabaseModeInAnyCase) {
  const ProcessResult lower = RunProcess(Tiny("default", {"--total-gpus", "2", "--json"}), 600);
  const ProcessResult upper = RunProcess(Tiny("default", {"--total-gpus", "2", "--json"}, "--model", "SOL"), 600);
  ASSERT_EQ(upper.exit_code, 0) << upper.err;
  EXPECT_EQ(Json::parse(upper.out)["database_mode"], "sol");
  EXPECT_EQ(Json::parse(upper.out)["chosen"], Json::parse(lower.out)["chosen"]);
  const ProcessResult mixed = RunProcess(Tiny("estimate", {}, "--model", "Sol"), 600);
  EXPECT_EQ(mixed.exit_code, 0) << mixed.err;
  const ProcessResult bad = RunProcess(Tiny("default", {"--total-gpus", "2"}, "--model", "SILICONX"), 600);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unknown database mode 'SILICONX'"), std::string::npos) << bad.err;
}

TEST(AicHabitsE2E, BackendAutoComparesEveryEngine) {
  const ProcessResult r = RunProcess(Tiny("default", {"--total-gpus", "4", "--backend", "auto", "--json"}), 600);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["backend"], "auto");
  ASSERT_EQ(j["engines"].size(), 3u);
  const std::string pick = j["pick"].get<std::string>();
  double best = 0, picked = -1;
  for (const Json& e : j["engines"]) {
    ASSERT_FALSE(e["chosen"].is_null()) << e.dump();
    const double v = e["chosen"]["tokens_per_s_gpu"].get<double>();
    if (e["meets_sla"].get<bool>()) best = std::max(best, v);
    if (e["engine"] == pick) picked = v;
  }
  EXPECT_EQ(picked, best);
  // Each engine's row is that engine's own search.
  for (const Json& e : j["engines"]) {
    const ProcessResult one =
        RunProcess(Tiny("default", {"--total-gpus", "4", "--backend", e["engine"].get<std::string>(), "--json"}), 600);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    EXPECT_EQ(Json::parse(one.out)["chosen"], e["chosen"]) << e["engine"];
  }
  const ProcessResult t = RunProcess(Tiny("default", {"--total-gpus", "4", "--backend", "auto"}), 600);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("backend auto: the best deployment of each engine on 4 GPUs"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("pick: " + pick), std::string::npos) << t.out;
  for (const char* e : {"\n  trtllm ", "\n  vllm ", "\n  sglang "}) EXPECT_NE(t.out.find(e), std::string::npos) << e;
}

// recommend --backend auto: each engine walked, the answer the engine needing the
// fewest GPUs (ties: search::RanksAbove, the rule of default --backend auto).
TEST(AicHabitsE2E, RecommendBackendAutoPicksTheFewestGpus) {
  // 20000 requests/s: every engine needs 2 GPUs (the tie-break decides); 14000: trtllm
  // serves it on 1, so the later walks stop at 1.
  for (const char* rate : {"20000", "14000"}) {
    SCOPED_TRACE(rate);
    const auto rec = [&](const std::string& backend, bool json) {
      std::vector<std::string> e = {"--target-request-rate", rate, "--max-gpus", "16", "--backend", backend};
      if (json) e.push_back("--json");
      return RunProcess(Tiny("recommend", e), 600);
    };
    const ProcessResult r = rec("auto", true);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const Json j = Json::parse(r.out);
    EXPECT_EQ(j["backend"], "auto");
    ASSERT_EQ(j["engines"].size(), 3u);
    // Each engine on its own, walked to --max-gpus: the expected pick by the rule.
    std::string expect;
    Json best;
    std::map<std::string, Json> alone;
    for (const char* name : {"trtllm", "vllm", "sglang"}) {
      const ProcessResult one = rec(name, true);
      ASSERT_TRUE(one.exit_code == 0 || one.exit_code == 1) << one.out << one.err;
      const Json k = Json::parse(one.out);
      alone[name] = k;
      if (!k["found"].get<bool>()) continue;
      const Json& d = k["deployment"];
      const bool better =
          expect.empty() || k["gpus"] < best["gpus"] ||
          (k["gpus"] == best["gpus"] && (d["tokens_per_s_gpu"] > best["deployment"]["tokens_per_s_gpu"] ||
                                         (d["tokens_per_s_gpu"] == best["deployment"]["tokens_per_s_gpu"] &&
                                          d["tokens_per_s_user"] > best["deployment"]["tokens_per_s_user"])));
      if (better) expect = name, best = k;
    }
    ASSERT_FALSE(expect.empty());
    EXPECT_EQ(j["pick"], expect);
    for (const Json& e : j["engines"]) {
      const std::string name = e["engine"].get<std::string>();
      // A walk stops at the fewest GPUs found before it; what it found up to there is the engine's own answer.
      if (alone[name]["found"].get<bool>() && alone[name]["gpus"].get<int>() <= e["max_gpus"].get<int>()) {
        EXPECT_EQ(e["gpus"], alone[name]["gpus"]) << name;
        EXPECT_EQ(e["deployment"], alone[name]["deployment"]) << name;
      } else {
        EXPECT_FALSE(e["found"].get<bool>()) << name;
      }
      if (name == expect) {
        EXPECT_EQ(e["deployment"], best["deployment"]);
      }
    }
    const ProcessResult t = rec("auto", false);
    ASSERT_EQ(t.exit_code, 0) << t.err;
    EXPECT_NE(t.out.find("backend auto: the fewest GPUs of each engine"), std::string::npos) << t.out;
    EXPECT_NE(t.out.find("pick: " + expect + ", the fewest GPUs"), std::string::npos) << t.out;
    EXPECT_NE(t.out.find("minimum: " + std::to_string(best["gpus"].get<int>()) + " GPU(s)"), std::string::npos)
        << t.out;
  }
  // No engine reaches the target: exit 1, every engine listed.
  const ProcessResult none =
      RunProcess(Tiny("recommend", {"--target-request-rate", "1e8", "--max-gpus", "4", "--backend", "auto"}), 600);
  EXPECT_EQ(none.exit_code, 1) << none.out << none.err;
  EXPECT_NE(none.out.find("pick: none"), std::string::npos) << none.out;
}

// support --backend auto: every engine, the same verdicts as no --backend.
TEST(AicHabitsE2E, SupportBackendAutoChecksEveryEngine) {
  const auto support = [](std::vector<std::string> extra) {
    std::vector<std::string> a = {kHabBin,    "support",  "--model",   kHabSrc + "/tests/goldens/models/tiny-dense",
                                  "--system", "tiny_gpu", "--systems", kHabSrc + "/tests/goldens/systems",
                                  "--data-root", kHabSrc + "/tests/goldens/data", "--data", "dense/1",
                                  "--isl", "64", "--osl", "2", "--json"};
    a.insert(a.end(), extra.begin(), extra.end());
    return RunProcess(a, 600);
  };
  const ProcessResult all = support({});
  const ProcessResult au = support({"--backend", "auto"});
  ASSERT_EQ(all.exit_code, 0) << all.out << all.err;
  ASSERT_EQ(au.exit_code, 0) << au.out << au.err;
  const Json j = Json::parse(au.out);
  ASSERT_EQ(j["engines"].size(), 3u) << j.dump();
  EXPECT_EQ(j, Json::parse(all.out));
  const ProcessResult bad = support({"--backend", "autox"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
}

TEST(AicHabitsE2E, TargetRateFindsTheGpuCount) {
  const ProcessResult rec = RunProcess(Tiny("recommend", {"--target-request-rate", "20000", "--json"}), 600);
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  const int gpus = Json::parse(rec.out)["gpus"].get<int>();
  ASSERT_GT(gpus, 1);  // so that the ladder had counts that fell short
  const ProcessResult r = RunProcess(Tiny("default", {"--target-request-rate", "20000", "--json"}), 600);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["target"]["gpus"].get<int>(), gpus);
  EXPECT_EQ(j["total_gpus"].get<int>(), gpus);
  EXPECT_GE(j["target"]["deployment"]["seq_per_s_replica"].get<double>() *
                j["target"]["deployment"]["replicas"].get<double>(),
            20000.0);
  EXPECT_TRUE(j["chosen"]["meets_sla"].get<bool>());
  for (const Json& st : j["target"]["steps"]) {
    if (st["gpus"].get<int>() < gpus) {
      EXPECT_FALSE(st["meets_target"].get<bool>());
    }
  }
  // The search at that count is the search --total-gpus gives.
  const ProcessResult fixed = RunProcess(Tiny("default", {"--total-gpus", std::to_string(gpus), "--json"}), 600);
  EXPECT_EQ(Json::parse(fixed.out)["chosen"], j["chosen"]);
  // Unreachable within the limit: exit 1 and the table of counts.
  const ProcessResult far = RunProcess(Tiny("default", {"--target-request-rate", "1e8", "--max-gpus", "8"}), 600);
  EXPECT_EQ(far.exit_code, 1) << far.out;
  EXPECT_NE(far.err.find("up to 8 (--max-gpus)"), std::string::npos) << far.err;
  // Neither flag, or both: usage errors.
  EXPECT_EQ(RunProcess(Tiny("default", {}), 60).exit_code, 2);
  EXPECT_EQ(RunProcess(Tiny("default", {"--total-gpus", "4", "--target-request-rate", "5"}), 60).exit_code, 2);
}

TEST(AicHabitsE2E, EachEngineReadsItsOwnData) {
  SERVECAST_NEED_SHARED(fs::exists(kAicRoot + "/h200_sxm"), "no AIC reference data at " + kAicRoot);
  for (const std::string engine : {"trtllm", "vllm", "sglang"}) {
    const ProcessResult r = RunProcess({kHabBin, "default", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm",
                                        "--total-gpus", "8", "--data-root", kAicRoot, "--backend", engine, "--json"},
                                       600);
    ASSERT_EQ(r.exit_code, 0) << engine << ": " << r.err;
    EXPECT_EQ(Json::parse(r.out)["data"].get<std::string>().rfind(engine + "/", 0), 0u) << r.out.substr(0, 300);
  }
  // --data still decides.
  const ProcessResult over =
      RunProcess({kHabBin, "default", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--total-gpus", "8",
                  "--data-root", kAicRoot, "--backend", "vllm", "--data", "trtllm", "--json"},
                 600);
  ASSERT_EQ(over.exit_code, 0) << over.err;
  EXPECT_EQ(Json::parse(over.out)["data"].get<std::string>().rfind("trtllm/", 0), 0u);
  // h100 has vLLM data only: trtllm reads it, and says so.
  const ProcessResult h100 = RunProcess({kHabBin, "estimate", "--model", "Qwen/Qwen3-32B", "--system", "h100_sxm",
                                         "--data-root", kAicRoot, "--backend", "trtllm", "--mode", "static"},
                                        600);
  EXPECT_NE(h100.err.find("note: engine trtllm reads vllm data, the only source for h100_sxm"), std::string::npos)
      << h100.out << h100.err;
}

TEST(AicHabitsE2E, SkipReasonsGroupedByClassAndTable) {
  const std::vector<std::string> args = {kHabBin,    "default",  "--model",      "deepseek-ai/DeepSeek-V3",
                                         "--system", "h200_sxm", "--total-gpus", "16"};
  const ProcessResult t = RunProcess(args, 600);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  std::vector<std::string> json_args = args;
  json_args.push_back("--json");
  const ProcessResult j = RunProcess(json_args, 600);
  ASSERT_EQ(j.exit_code, 0) << j.err;
  std::size_t moe_keys = 0;
  const Json doc = Json::parse(j.out);
  for (const auto& [mode, m] : doc["modes"].items())
    for (const auto& [why, n] : m["skipped"].items())
      if (why.find(": moe {") != std::string::npos) ++moe_keys;
  ASSERT_GT(moe_keys, 4u);  // the JSON keeps every key
  // The terminal: at most one line per (class, table) and mode, with the key count and one example.
  std::size_t lines = 0;
  for (std::size_t at = t.out.find("  skipped "); at != std::string::npos; at = t.out.find("  skipped ", at + 1)) {
    const std::string line = t.out.substr(at, t.out.find('\n', at) - at);
    if (line.find(": moe") != std::string::npos) {
      ++lines;
      EXPECT_EQ(line.find(" {"), std::string::npos) << line;
      EXPECT_NE(line.find(" keys, each in --json), e.g."), std::string::npos) << line;
    }
  }
  EXPECT_GE(lines, 1u);
  EXPECT_LE(lines, 4u);  // missing data / (prefill) / (decode), per mode
  EXPECT_GE(Count(t.out, "      moe {"), lines);
}

TEST(AicHabitsE2E, GenerateBackendAutoWritesThePickedEnginesFiles) {
  const std::string dir = MakeTempDir("servecast_generate_auto");
  const ProcessResult r = RunProcess(
      Tiny("generate", {"--total-gpus", "4", "--backend", "auto", "--save-dir", dir + "/auto", "--json"}), 600);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const Json j = Json::parse(r.out);
  ASSERT_EQ(j["backend_auto"].size(), 3u) << j.dump();
  // The pick: the most tokens/s per GPU among the engines meeting the limits.
  std::string best_engine;
  double best = -1;
  int picked = 0;
  for (const Json& e : j["backend_auto"]) {
    ASSERT_TRUE(e.contains("deployment")) << e.dump();
    const double v = e["deployment"]["tokens_per_s_gpu"].get<double>();
    if (e["meets_limits"].get<bool>() && v > best) best = v, best_engine = e["engine"].get<std::string>();
    if (e["picked"].get<bool>()) {
      ++picked;
      EXPECT_EQ(e["engine"], j["engine"]) << e.dump();
    }
  }
  EXPECT_EQ(picked, 1);
  EXPECT_EQ(j["engine"], best_engine);
  // The files are the ones that engine's own generate writes.
  const ProcessResult one = RunProcess(
      Tiny("generate", {"--total-gpus", "4", "--backend", best_engine, "--save-dir", dir + "/one", "--json"}), 600);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const Json k = Json::parse(one.out);
  EXPECT_EQ(k["agg"], j["agg"]);
  EXPECT_EQ(k["disagg"], j["disagg"]);
  for (const char* f : {"agg/launch.sh", "agg/k8s_deploy.yaml", "disagg/prefill_launch.sh", "disagg/decode_launch.sh"})
    EXPECT_EQ(ReadText(dir + "/auto/" + f), ReadText(dir + "/one/" + f)) << f;
  // No engine meets the limits: refused, nothing written, each engine's reason given.
  const std::vector<std::string> none = {kHabBin,   "generate", "--model", kHabSrc + "/tests/goldens/models/tiny-dense",
                                         "--system", "tiny_gpu", "--systems", kHabSrc + "/tests/goldens/systems",
                                         "--database-mode", "sol", "--isl", "512", "--osl", "64", "--ttft", "0.001",
                                         "--total-gpus", "4", "--backend", "auto", "--save-dir", dir + "/none"};
  const ProcessResult n = RunProcess(none, 600);
  EXPECT_EQ(n.exit_code, 2) << n.out << n.err;
  EXPECT_NE(n.err.find("--backend auto: no engine's best deployment on 4 GPUs meets the limits"), std::string::npos)
      << n.err;
  for (const char* e : {"\n  trtllm: ", "\n  vllm: ", "\n  sglang: "}) EXPECT_NE(n.err.find(e), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir + "/none"));
  fs::remove_all(dir);
}

TEST(AicHabitsE2E, GenerateWritesBenchmarksAndAReportLinkingTheFiles) {
  const std::string dir = MakeTempDir("servecast_generate_bench");
  const std::string save = dir + "/out";
  const ProcessResult r =
      RunProcess(Tiny("generate", {"--total-gpus", "4", "--backend", "sglang", "--save-dir", save, "--json"}), 600);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const Json j = Json::parse(r.out);
  for (const char* mode : {"agg", "disagg"}) {
    ASSERT_FALSE(j[mode].is_null()) << mode;
    const std::string bench = ReadText(save + "/" + mode + "/bench.sh");
    const long long conc = j[mode]["concurrency_replica"].get<long long>() * j[mode]["replicas"].get<long long>();
    EXPECT_NE(bench.find("vllm bench serve"), std::string::npos) << bench;
    EXPECT_NE(bench.find("--max-concurrency " + std::to_string(conc) + " "), std::string::npos) << bench;
    EXPECT_NE(bench.find("--num-prompts " + std::to_string(std::max(100LL, 10 * conc))), std::string::npos) << bench;
    EXPECT_NE(bench.find("--random-input-len 512 "), std::string::npos);
    EXPECT_NE(bench.find("--random-output-len 64 "), std::string::npos);
    EXPECT_NE(bench.find("TPOT " + std::string(j[mode]["tpot_ms"].dump()).substr(0, 3)), std::string::npos) << bench;
    EXPECT_TRUE(fs::status(save + "/" + mode + "/bench.sh").permissions() != fs::perms::none);
  }
  const std::string html = ReadText(save + "/report.html");
  for (const char* f : {"agg/launch.sh", "agg/bench.sh", "disagg/prefill_launch.sh", "disagg/k8s_deploy.yaml"})
    EXPECT_NE(html.find("<a href=\"" + std::string(f) + "\">"), std::string::npos) << f;
  fs::remove_all(dir);
}

TEST(AicHabitsE2E, HtmlDataNoteSpansTheRow) {
  const std::string dir = MakeTempDir("servecast_html_fit");
  const ProcessResult r = RunProcess(Tiny("default", {"--total-gpus", "4", "--save-dir", dir}), 600);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string html;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename() == "report.html") html = ReadText(e.path().string());
  ASSERT_FALSE(html.empty());
  EXPECT_NE(html.find("<div class=\"wide\"><dt>Data</dt>"), std::string::npos);
  EXPECT_NE(html.find(".facts div.wide { grid-column: 1 / -1; }"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"par\">"), std::string::npos);
  fs::remove_all(dir);
}

TEST(AicHabitsE2E, StrictSlaKeepsOnlyPointsWithinTheLimits) {
  // TPOT 0.2 ms: the pick meets it, and the loose frontier holds points that do not.
  const ProcessResult loose = RunProcess(With(Tiny("default", {"--total-gpus", "4", "--json"}), "--tpot", "0.2"), 600);
  const ProcessResult strict =
      RunProcess(With(Tiny("default", {"--total-gpus", "4", "--strict-sla", "--json"}), "--tpot", "0.2"), 600);
  ASSERT_EQ(loose.exit_code, 0) << loose.err;
  ASSERT_EQ(strict.exit_code, 0) << strict.err;
  const Json l = Json::parse(loose.out), s = Json::parse(strict.out);
  ASSERT_TRUE(l["chosen"]["meets_sla"].get<bool>());
  EXPECT_EQ(s["chosen"], l["chosen"]);  // the pick already met the limits
  std::size_t dropped = 0, loose_missing = 0;
  for (const auto& [mode, m] : s["modes"].items()) {
    for (const Json& p : m["frontier"]) EXPECT_TRUE(p["meets_sla"].get<bool>()) << p.dump();
    if (m["skipped"].contains("TPOT over the limit (--strict-sla)"))
      dropped += m["skipped"]["TPOT over the limit (--strict-sla)"].get<std::size_t>();
  }
  for (const auto& [mode, m] : l["modes"].items())
    for (const Json& p : m["frontier"]) loose_missing += p["meets_sla"].get<bool>() ? 0 : 1;
  EXPECT_GT(loose_missing, 0u);  // without it the frontier shows points over the limit
  EXPECT_GT(dropped, 0u);
  // Limits nothing meets: the nearest miss without it, exit 1 with it.
  const ProcessResult miss = RunProcess(With(Tiny("default", {"--total-gpus", "4"}), "--tpot", "0.001"), 600);
  EXPECT_EQ(miss.exit_code, 0);
  EXPECT_NE(miss.out.find("MISSES the limits"), std::string::npos) << miss.out;
  const ProcessResult none =
      RunProcess(With(Tiny("default", {"--total-gpus", "4", "--strict-sla"}), "--tpot", "0.001"), 600);
  EXPECT_EQ(none.exit_code, 1) << none.out;
  EXPECT_NE(none.out.find("TPOT over the limit (--strict-sla)"), std::string::npos) << none.out;
  EXPECT_NE(none.out.find("no deployment meets the limits (--strict-sla"), std::string::npos) << none.out;
}

TEST(AicHabitsE2E, RecommendOverEveryGpuCount) {
  const ProcessResult ladder = RunProcess(Tiny("recommend", {"--target-request-rate", "40000", "--json"}), 600);
  const ProcessResult every = RunProcess(
      Tiny("recommend", {"--target-request-rate", "40000", "--every-gpu-count", "--max-gpus", "16", "--json"}), 600);
  ASSERT_EQ(ladder.exit_code, 0) << ladder.err;
  ASSERT_EQ(every.exit_code, 0) << every.err;
  const Json l = Json::parse(ladder.out), e = Json::parse(every.out);
  const int gpus = e["gpus"].get<int>();
  // One GPU serves about 14,000 requests/s here: 3 GPUs serve 40,000, off the ladder (which answers 4).
  EXPECT_EQ(l["gpus"].get<int>(), 4);
  EXPECT_EQ(gpus, 3);
  ASSERT_EQ(e["steps"].size(), static_cast<std::size_t>(gpus));  // 1, 2, ..., gpus, each tried
  for (int i = 0; i < gpus; ++i) EXPECT_EQ(e["steps"][static_cast<std::size_t>(i)]["gpus"].get<int>(), i + 1);
  EXPECT_GE(e["request_rate"].get<double>(), 40000.0);
}

// recommend and generate take default's workload flags (--prefix, --moe-distribution,
// --calibration; one definition in plan_common): a 3,000-token cached prefix lets
// Qwen3-32B meet 5 requests/s on fewer H200s, a prefix as long as the input is
// refused naming the flag, an unknown calibration is refused by both commands, and
// generate's summary records the prefix its deployment was planned for.
TEST(AicHabitsE2E, RecommendAndGenerateTakeTheWorkloadFlags) {
  const std::vector<std::string> rec = {kHabBin,    "recommend", "--model",               "Qwen/Qwen3-32B",
                                        "--system", "h200_sxm",  "--target-request-rate", "5",
                                        "--json"};
  const auto gpus = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> argv = rec;
    argv.insert(argv.end(), extra.begin(), extra.end());
    const ProcessResult r = RunProcess(argv, 300, kHabSrc);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? Json::parse(r.out)["gpus"].get<int>() : -1;
  };
  const int plain = gpus({}), cached = gpus({"--prefix", "3000"});
  EXPECT_GT(plain, 0);
  EXPECT_GT(cached, 0);
  EXPECT_LT(cached, plain);
  std::vector<std::string> too_long = rec;
  too_long.insert(too_long.end(), {"--prefix", "4000"});
  const ProcessResult tl = RunProcess(too_long, 120, kHabSrc);
  EXPECT_EQ(tl.exit_code, 2) << tl.err;
  EXPECT_NE(tl.err.find("--prefix must lie in [0, isl)"), std::string::npos) << tl.err;

  const std::string dir = MakeTempDir("sc_gen_workload_");
  const std::vector<std::string> gen = {kHabBin,    "generate", "--model",      "Qwen/Qwen3-32B",
                                        "--system", "h200_sxm", "--total-gpus", "8"};
  for (const std::vector<std::string>& base : {rec, gen}) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), {"--calibration", "nosuch", "--save-dir", dir + "/nosuch"});
    if (argv[1] == "recommend") argv.resize(argv.size() - 2);
    const ProcessResult r = RunProcess(argv, 120, kHabSrc);
    EXPECT_EQ(r.exit_code, 2) << argv[1] << ": " << r.err;
    EXPECT_NE(r.err.find("--calibration 'nosuch': no such calibration"), std::string::npos) << r.err;
  }
  std::vector<std::string> with_prefix = gen, without = gen;
  with_prefix.insert(with_prefix.end(), {"--prefix", "3000", "--save-dir", dir + "/prefix"});
  without.insert(without.end(), {"--save-dir", dir + "/none"});
  for (const auto* argv : {&with_prefix, &without}) {
    const ProcessResult r = RunProcess(*argv, 300, kHabSrc);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  const Json p = Json::parse(ReadText(dir + "/prefix/summary.json")), n = Json::parse(ReadText(dir + "/none/summary.json"));
  EXPECT_EQ(p["limits"]["prefix"], 3000);
  EXPECT_EQ(n["limits"]["prefix"], 0);
  ASSERT_TRUE(p["agg"].is_object() && n["agg"].is_object()) << p.dump() << n.dump();
  EXPECT_GT(p["agg"]["tokens_per_s_gpu"].get<double>(), n["agg"]["tokens_per_s_gpu"].get<double>());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servecast::testing
