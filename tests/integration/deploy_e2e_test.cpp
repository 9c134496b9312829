// Issue 29, the deployment side, run as the real binary: --data-root by the name
// of an installed aiconfigurator, the "current" version of an AIC systems
// folder, MTP enumerated in `default`, --decode-system, `servecast exp`, and the
// launch files of `generate` checked flag by flag against the engines' parsers
// at the versions named (tests/goldens/engine_flags/, read from their sources).

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "process.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const std::string kDepBin = SERVECAST_BIN;
const std::string kDepSrc = SERVECAST_SOURCE_DIR;

std::string Show(const ProcessResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out.substr(0, 4000) + "\n--- stderr\n" + r.err;
}

std::vector<std::string> Model(const std::string& cmd, const std::string& model, std::vector<std::string> extra) {
  std::vector<std::string> a = {kDepBin,    cmd,        "--model",   kDepSrc + "/tests/goldens/models/" + model,
                                "--system", "tiny_gpu", "--systems", kDepSrc + "/tests/goldens/systems",
                                "--isl",    "512",      "--osl",     "64",
                                "--ttft",   "1000",     "--tpot",    "5"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// `env VAR=value ... argv`: the environment of one run.
std::vector<std::string> WithEnv(const std::vector<std::string>& env, std::vector<std::string> argv) {
  std::vector<std::string> a = {"/usr/bin/env", "-i"};
  a.insert(a.end(), env.begin(), env.end());
  a.insert(a.end(), argv.begin(), argv.end());
  return a;
}

// The folders pip makes for aiconfigurator (site-packages, the package's data folder,
// its dist-info naming the version), with the golden data tree linked where the
// package keeps its own: what the name lookup reads, without PyPI. The same lookup on
// a real `pip install aiconfigurator` runs in DataRootFindsARealAiconfiguratorInstall.
std::string AicPipLayout(const std::string& root, const std::string& version) {
  const fs::path site = fs::path(root) / "lib" / "python3.11" / "site-packages";
  fs::create_directories(site / "aiconfigurator_core" / "systems");
  fs::create_directories(site / ("aiconfigurator_core-" + version + ".dist-info"));
  fs::create_directory_symlink(kDepSrc + "/tests/goldens/data", site / "aiconfigurator_core" / "systems" / "data");
  return (site / "aiconfigurator_core" / "systems" / "data").string();
}

TEST(DeployE2E, DataRootFindsAnInstalledAiconfiguratorByName) {
  const std::string tmp = MakeTempDir("servecast_aicroot");
  const std::string venv = tmp + "/venv";
  const std::string data = AicPipLayout(venv, "0.12.0");
  const auto args = Model("default", "tiny-dense", {"--total-gpus", "2", "--data", "dense/1", "--json"});
  auto with_root = [&](const std::string& root) {
    auto a = args;
    a.insert(a.end(), {"--data-root", root});
    return a;
  };
  const ProcessResult direct = RunProcess(with_root(kDepSrc + "/tests/goldens/data"), 600);
  ASSERT_EQ(direct.exit_code, 0) << Show(direct);
  // Through $VIRTUAL_ENV.
  const ProcessResult named = RunProcess(
      WithEnv({"VIRTUAL_ENV=" + venv, "PATH=/nonexistent", "HOME=" + tmp}, with_root("aiconfigurator")), 600);
  ASSERT_EQ(named.exit_code, 0) << Show(named);
  EXPECT_EQ(Json::parse(named.out)["chosen"], Json::parse(direct.out)["chosen"]);
  EXPECT_NE(named.err.find("note: --data-root aiconfigurator: " + data + " (aiconfigurator 0.12.0)"), std::string::npos)
      << named.err;
  // Through the interpreter named by the aiconfigurator script on $PATH (any case of the name).
  const std::string venv2 = tmp + "/venv2";
  AicPipLayout(venv2, "0.12.0");
  fs::create_directories(tmp + "/bin");
  {
    std::ofstream script(tmp + "/bin/aiconfigurator");
    script << "#!" << venv2 << "/bin/python3\nimport sys\n";
  }
  const ProcessResult by_path =
      RunProcess(WithEnv({"PATH=" + tmp + "/bin", "HOME=" + tmp}, with_root("AIConfigurator")), 600);
  ASSERT_EQ(by_path.exit_code, 0) << Show(by_path);
  EXPECT_NE(by_path.err.find(venv2 + "/lib/python3.11/site-packages/aiconfigurator_core/systems/data"),
            std::string::npos)
      << by_path.err;
  // None installed: a usage error saying where it looked.
  const ProcessResult none =
      RunProcess(WithEnv({"PATH=/nonexistent", "HOME=" + tmp + "/nohome"}, with_root("aiconfigurator")), 600);
  EXPECT_EQ(none.exit_code, 2) << Show(none);
  EXPECT_NE(none.err.find("--data-root aiconfigurator: no installed aiconfigurator data tree"), std::string::npos)
      << none.err;
}

// The same lookup on a real install: SERVECAST_AIC_VENV names a virtual environment
// made by `python3 -m venv V && V/bin/pip install aiconfigurator==0.12.0` (needs PyPI,
// so it is not made here; skipped when unset).
TEST(DeployE2E, DataRootFindsARealAiconfiguratorInstall) {
  const char* venv = std::getenv("SERVECAST_AIC_VENV");
  if (venv == nullptr || *venv == 0) GTEST_SKIP() << "SERVECAST_AIC_VENV is not set";
  const ProcessResult r = RunProcess(
      WithEnv({std::string("VIRTUAL_ENV=") + venv, "PATH=/nonexistent", "HOME=/nonexistent"},
              {kDepBin, "default", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--total-gpus", "8",
               "--data-root", "aiconfigurator", "--json"}),
      600, kDepSrc);
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  EXPECT_NE(r.err.find("note: --data-root aiconfigurator: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/site-packages/aiconfigurator_core/systems/data (aiconfigurator 0.12.0)"), std::string::npos)
      << r.err;
  EXPECT_FALSE(Json::parse(r.out)["chosen"].is_null()) << r.out.substr(0, 2000);
}

// An AIC systems folder's query_versions.yaml names the "current" version of a
// backend; it is the default over a newer one, as AIC picks it.
TEST(DeployE2E, CurrentVersionOfAnAicSystemsFolder) {
  const std::string tmp = MakeTempDir("servecast_current");
  const fs::path data = fs::path(tmp) / "systems" / "data";
  // dense/1 of the golden tree twice: as version 1 and as version 2.
  for (const auto& family : fs::directory_iterator(kDepSrc + "/tests/goldens/data/tiny_gpu")) {
    const fs::path src = family.path() / "dense" / "1";
    if (!fs::is_directory(src)) continue;
    if (fs::is_directory(family.path() / "nccl")) {  // the system-wide collectives, as they are
      fs::create_directories(data / "tiny_gpu" / family.path().filename());
      fs::create_directory_symlink(family.path() / "nccl", data / "tiny_gpu" / family.path().filename() / "nccl");
    }
    for (const char* v : {"1", "2"}) {
      fs::create_directories(data / "tiny_gpu" / family.path().filename() / "dense");
      fs::create_directory_symlink(src, data / "tiny_gpu" / family.path().filename() / "dense" / v);
    }
  }
  const auto args =
      Model("default", "tiny-dense", {"--total-gpus", "2", "--data", "dense", "--data-root", data.string(), "--json"});
  const ProcessResult newest = RunProcess(args, 600);
  ASSERT_EQ(newest.exit_code, 0) << Show(newest);
  EXPECT_EQ(Json::parse(newest.out)["data"], "dense/2");
  {
    std::ofstream q(fs::path(tmp) / "systems" / "query_versions.yaml");
    q << "schema_version: 1\ndefaults:\n  dense: {current: \"1\", previous: null}\n";
  }
  const ProcessResult current = RunProcess(args, 600);
  ASSERT_EQ(current.exit_code, 0) << Show(current);
  EXPECT_EQ(Json::parse(current.out)["data"], "dense/1");
  EXPECT_NE(current.err.find("dense 1, the current version"), std::string::npos) << current.err;
  EXPECT_NE(current.err.find("query_versions.yaml"), std::string::npos) << current.err;
  // A per-system override wins over the defaults; --data with a version always decides.
  {
    std::ofstream q(fs::path(tmp) / "systems" / "query_versions.yaml");
    q << "defaults:\n  dense: {current: \"1\"}\noverrides:\n  tiny_gpu:\n    dense: {current: \"2\"}\n";
  }
  const ProcessResult over = RunProcess(args, 600);
  EXPECT_EQ(Json::parse(over.out)["data"], "dense/2") << Show(over);
  auto pinned = args;
  for (std::size_t i = 0; i + 1 < pinned.size(); ++i)
    if (pinned[i] == "--data") pinned[i + 1] = "dense/1";
  EXPECT_EQ(Json::parse(RunProcess(pinned, 600).out)["data"], "dense/1");
}

// Every point the JSON lists, frontier and top-N of both modes.
std::set<int> NextnSeen(const Json& j) {
  std::set<int> seen;
  for (const auto& [mode, m] : j["modes"].items())
    for (const char* list : {"frontier", "best"})
      for (const Json& p : m[list]) seen.insert(p.contains("nextn") ? p["nextn"].get<int>() : 0);
  return seen;
}

TEST(DeployE2E, MtpEnumeratedInDefault) {
  const auto base = Model("default", "tiny-deepseek", {"--database-mode", "sol", "--total-gpus", "4", "--json"});
  // Without MTP flags: searched without, and a note says how to search with it.
  const ProcessResult plain = RunProcess(base, 600);
  ASSERT_EQ(plain.exit_code, 0) << Show(plain);
  EXPECT_EQ(NextnSeen(Json::parse(plain.out)), std::set<int>{0});
  EXPECT_NE(plain.err.find("ships MTP (num_nextn_predict_layers=1) and is searched without it"), std::string::npos)
      << plain.err;
  // AIC's per-position rates: depths 1 and 2 (mean accepted 0.8 and 0.8 + 0.8 x 0.5) and none, one pool.
  auto rates = base;
  const std::string out = MakeTempDir("servecast_mtp");
  rates.insert(rates.end(), {"--mtp-accept-rates", "0.8,0.5", "--save-dir", out});
  const ProcessResult r = RunProcess(rates, 600);
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  const Json j = Json::parse(r.out);
  EXPECT_EQ(r.err.find("searched without it"), std::string::npos) << r.err;
  // Every point of the search (pareto.csv) at each depth: none, mtp1 and mtp2.
  for (const char* mode : {"agg", "disagg"}) {
    // The one report folder --save-dir made under `out`.
    std::string saved;
    for (const auto& d : fs::directory_iterator(out)) saved = d.path().string();
    std::ifstream csv(saved + "/" + mode + "/pareto.csv");
    std::string line;
    std::map<std::string, int> depth;
    while (std::getline(csv, line)) {
      const std::string par = line.substr(line.find(',') + 1, line.find(',', line.find(',') + 1) - line.find(',') - 1);
      if (par == "parallel") continue;
      ++depth[par.find(" mtp2") != std::string::npos   ? "mtp2"
              : par.find(" mtp1") != std::string::npos ? "mtp1"
                                                       : "none"];
    }
    EXPECT_GT(depth["none"], 0) << mode;
    EXPECT_GT(depth["mtp1"], 0) << mode;
    EXPECT_GT(depth["mtp2"], 0) << mode;
  }
  for (const auto& [mode, m] : j["modes"].items())
    for (const Json& p : m["frontier"])
      if (p.contains("nextn")) {
        EXPECT_DOUBLE_EQ(p["mtp_accepted"].get<double>(), p["nextn"] == 1 ? 0.8 : 1.2) << p.dump();
        EXPECT_NE(p["parallel"].get<std::string>().find(" mtp"), std::string::npos);
      }
  // The same as --nextn 1 --mtp-accepted 0.8 where only depth 1 is asked.
  auto one = base;
  one.insert(one.end(), {"--mtp-accept-rates", "0.8"});
  auto fixed = base;
  fixed.insert(fixed.end(), {"--nextn", "1", "--mtp-accepted", "0.8"});
  const ProcessResult a = RunProcess(one, 600), b = RunProcess(fixed, 600);
  ASSERT_EQ(a.exit_code, 0) << Show(a);
  EXPECT_EQ(Json::parse(a.out)["chosen"], Json::parse(b.out)["chosen"]);
  // --nextn auto takes the checkpoint's depth and needs the acceptance, as AIC does.
  auto autod = base;
  autod.insert(autod.end(), {"--nextn", "auto"});
  const ProcessResult no_acc = RunProcess(autod, 600);
  EXPECT_EQ(no_acc.exit_code, 2) << Show(no_acc);
  EXPECT_NE(no_acc.err.find("needs --mtp-accepted"), std::string::npos) << no_acc.err;
  autod.insert(autod.end(), {"--mtp-accepted", "0.8"});
  const ProcessResult with_acc = RunProcess(autod, 600);
  ASSERT_EQ(with_acc.exit_code, 0) << Show(with_acc);
  EXPECT_EQ(Json::parse(with_acc.out)["chosen"], Json::parse(b.out)["chosen"]);
  // Both spellings at once: a usage error.
  auto both = base;
  both.insert(both.end(), {"--nextn", "1", "--mtp-accept-rates", "0.8"});
  EXPECT_EQ(RunProcess(both, 60).exit_code, 2);
}

// A systems folder with tiny_gpu and tiny_fast: a second made-up GPU with twice the
// memory bandwidth, its own device name ("Tiny Fast GPU") and 4 GPUs per node.
std::string TwoSystems(const std::string& name) {
  const std::string sys = MakeTempDir(name);
  fs::copy_file(kDepSrc + "/tests/goldens/systems/tiny_gpu.yaml", sys + "/tiny_gpu.yaml");
  std::ifstream in(kDepSrc + "/tests/goldens/systems/tiny_gpu.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"mem_bw_bytes_per_s: 1e12", "mem_bw_bytes_per_s: 2e12"},
           {"device_name: Tiny Golden GPU", "device_name: Tiny Fast GPU"},
           {"device_name_aliases: [Tiny Golden GPU]", "device_name_aliases: [Tiny Fast GPU]"},
           {"gpus_per_node: 8", "gpus_per_node: 4"}}) {
    const auto at = text.find(from);
    if (at == std::string::npos)
      ADD_FAILURE() << from << " is not in tiny_gpu.yaml";
    else
      text.replace(at, from.size(), to);
  }
  std::ofstream(sys + "/tiny_fast.yaml") << text;
  return sys;
}

TEST(DeployE2E, DecodeOnAnotherSystem) {
  const std::string sys = TwoSystems("servecast_decsys");
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = {
        kDepBin,           "default",  "--model",      kDepSrc + "/tests/goldens/models/tiny-dense",
        "--system",        "tiny_gpu", "--systems",    sys,
        "--database-mode", "sol",      "--isl",        "512",
        "--osl",           "64",       "--ttft",       "1000",
        "--tpot",          "5",        "--total-gpus", "4",
        "--json"};
    a.insert(a.end(), extra.begin(), extra.end());
    return RunProcess(a, 600);
  };
  const ProcessResult same = run({"--modes", "disagg"});
  const ProcessResult self = run({"--decode-system", "tiny_gpu"});
  const ProcessResult fast = run({"--decode-system", "tiny_fast"});
  ASSERT_EQ(same.exit_code, 0) << Show(same);
  ASSERT_EQ(self.exit_code, 0) << Show(self);
  ASSERT_EQ(fast.exit_code, 0) << Show(fast);
  const Json js = Json::parse(same.out), jself = Json::parse(self.out), jf = Json::parse(fast.out);
  // Decode on the same system is the ordinary disaggregated search.
  EXPECT_EQ(jself["chosen"], js["chosen"]);
  EXPECT_EQ(jf["system"], "tiny_gpu");
  EXPECT_EQ(jf["decode_system"], "tiny_fast");
  EXPECT_FALSE(jf["modes"].contains("agg"));
  // Faster decode GPUs: the fastest decode step of the frontier is faster.
  auto min_tpot = [](const Json& j) {
    double v = 1e18;
    for (const Json& p : j["modes"]["disagg"]["frontier"]) v = std::min(v, p["tpot_ms"].get<double>());
    return v;
  };
  EXPECT_LT(min_tpot(jf), 0.9 * min_tpot(js)) << jf["modes"]["disagg"]["frontier"].dump();
  // agg alone cannot be split.
  const ProcessResult agg = run({"--decode-system", "tiny_fast", "--modes", "agg"});
  EXPECT_EQ(agg.exit_code, 2) << Show(agg);
  EXPECT_NE(agg.err.find("--decode-system searches disaggregated serving"), std::string::npos) << agg.err;
}

// --decode-system in recommend and generate: the same search as default's.
TEST(DeployE2E, DecodeSystemInRecommendAndGenerate) {
  const std::string sys = TwoSystems("servecast_decsys2");
  auto args = [&](const std::string& cmd, std::vector<std::string> extra) {
    std::vector<std::string> a = {
        kDepBin,           cmd,        "--model",   kDepSrc + "/tests/goldens/models/tiny-dense",
        "--system",        "tiny_gpu", "--systems", sys,
        "--database-mode", "sol",      "--isl",     "512",
        "--osl",           "64",       "--ttft",    "1000"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  // default on 4 GPUs: the fastest decode step of each frontier.
  auto min_tpot = [](const Json& j) {
    double v = 1e18;
    for (const Json& p : j["modes"]["disagg"]["frontier"]) v = std::min(v, p["tpot_ms"].get<double>());
    return v;
  };
  const ProcessResult same =
      RunProcess(args("default", {"--tpot", "5", "--total-gpus", "4", "--modes", "disagg", "--json"}), 600);
  const ProcessResult fast =
      RunProcess(args("default", {"--tpot", "5", "--total-gpus", "4", "--decode-system", "tiny_fast", "--json"}), 600);
  ASSERT_EQ(same.exit_code, 0) << Show(same);
  ASSERT_EQ(fast.exit_code, 0) << Show(fast);
  const Json js = Json::parse(same.out), jf = Json::parse(fast.out);
  const double tpot_same = min_tpot(js), tpot_fast = min_tpot(jf);
  ASSERT_LT(tpot_fast, 0.9 * tpot_same);

  // recommend: a TPOT limit between the two that only decode on tiny_fast meets
  // (up to 4 GPUs every count's configurations are among those of 4).
  char limit[32];
  std::snprintf(limit, sizeof limit, "%.6f", 0.5 * (tpot_same + tpot_fast));
  const auto rec = [&](std::vector<std::string> extra, const std::string& tpot = "") {
    std::vector<std::string> e = {
        "--tpot", tpot.empty() ? std::string(limit) : tpot, "--target-request-rate", "0.001", "--max-gpus", "4",
        "--json"};
    e.insert(e.end(), extra.begin(), extra.end());
    return RunProcess(args("recommend", e), 600);
  };
  const ProcessResult rsame = rec({"--modes", "disagg"});
  EXPECT_EQ(rsame.exit_code, 1) << Show(rsame);
  const ProcessResult rfast = rec({"--decode-system", "tiny_fast"});
  ASSERT_EQ(rfast.exit_code, 0) << Show(rfast);
  const Json jr = Json::parse(rfast.out);
  EXPECT_EQ(jr["system"], "tiny_gpu");
  EXPECT_EQ(jr["decode_system"], "tiny_fast");
  EXPECT_EQ(jr["deployment"]["mode"], "disagg");
  EXPECT_LT(jr["deployment"]["tpot_ms"].get<double>(), std::stod(limit));
  // Decode on --system's own name is the ordinary disaggregated walk.
  const ProcessResult rself = rec({"--decode-system", "tiny_gpu"}, "5");
  const ProcessResult rdis = rec({"--modes", "disagg"}, "5");
  ASSERT_EQ(rself.exit_code, 0) << Show(rself);
  ASSERT_EQ(rdis.exit_code, 0) << Show(rdis);
  EXPECT_EQ(Json::parse(rself.out)["deployment"], Json::parse(rdis.out)["deployment"]);
  const ProcessResult ragg = rec({"--decode-system", "tiny_fast", "--modes", "agg"});
  EXPECT_EQ(ragg.exit_code, 2) << Show(ragg);
  EXPECT_NE(ragg.err.find("--decode-system searches disaggregated serving"), std::string::npos) << ragg.err;

  // generate: the disaggregated files of default's pick, each role's pods on its system's GPU.
  const std::string dir = MakeTempDir("servecast_gen_decsys") + "/out";
  const ProcessResult g = RunProcess(args("generate", {"--tpot", "5", "--total-gpus", "4", "--decode-system",
                                                       "tiny_fast", "--backend", "vllm", "--save-dir", dir, "--json"}),
                                     600);
  ASSERT_EQ(g.exit_code, 0) << Show(g);
  const Json jg = Json::parse(g.out);
  EXPECT_TRUE(jg["agg"].is_null());
  EXPECT_EQ(jg["decode_system"], "tiny_fast");
  const ProcessResult dv = RunProcess(args("default", {"--tpot", "5", "--total-gpus", "4", "--decode-system",
                                                       "tiny_fast", "--backend", "vllm", "--json"}),
                                      600);
  ASSERT_EQ(dv.exit_code, 0) << Show(dv);
  const Json best = Json::parse(dv.out)["modes"]["disagg"]["best"][0];
  EXPECT_EQ(jg["disagg"]["parallel"], best["parallel"]);
  EXPECT_DOUBLE_EQ(jg["disagg"]["tpot_ms"].get<double>(), best["tpot_ms"].get<double>());
  std::set<std::string> names;
  for (const Json& f : jg["files"]) names.insert(fs::path(f.get<std::string>()).filename().string());
  EXPECT_FALSE(names.count("run_single_node.sh")) << "two systems are never one node";
  EXPECT_TRUE(names.count("prefill_launch.sh"));
  EXPECT_TRUE(names.count("decode_launch.sh"));
  EXPECT_NE(ReadText(dir + "/disagg/decode_launch.sh").find("Run it on a tiny_fast node"), std::string::npos);
  EXPECT_NE(ReadText(dir + "/disagg/prefill_launch.sh").find("Run it on a tiny_gpu node"), std::string::npos);
  const YAML::Node dgd = YAML::LoadAll(ReadText(dir + "/disagg/k8s_deploy.yaml")).back();
  const YAML::Node pw = dgd["spec"]["services"]["PrefillWorker"], dw = dgd["spec"]["services"]["DecodeWorker"];
  EXPECT_EQ(pw["extraPodSpec"]["nodeSelector"]["nvidia.com/gpu.product"].as<std::string>(), "Tiny-Golden-GPU");
  EXPECT_EQ(dw["extraPodSpec"]["nodeSelector"]["nvidia.com/gpu.product"].as<std::string>(), "Tiny-Fast-GPU");
  // Each role's pods are sized by its own system's node (tiny_fast: 4 GPUs per node).
  const int dgpus = best["decode"]["parallel"]["tp"].get<int>() * best["decode"]["parallel"]["pp"].get<int>() *
                    best["decode"]["parallel"]["dp"].get<int>();
  EXPECT_EQ(std::stoi(dw["resources"]["limits"]["gpu"].as<std::string>()), std::min(dgpus, 4));
  // Without the search nothing can be written for two systems: the weights-fit rule is agg on one.
  const ProcessResult gagg = RunProcess(args("generate", {"--tpot", "5", "--total-gpus", "4", "--decode-system",
                                                          "tiny_fast", "--modes", "agg", "--save-dir", dir + "2"}),
                                        600);
  EXPECT_EQ(gagg.exit_code, 2) << Show(gagg);
  fs::remove_all(sys);
}

TEST(DeployE2E, ExperimentFileRunsEachSearchAndCompares) {
  const std::string dir = MakeTempDir("servecast_exp");
  const std::string file = dir + "/exp.yaml";
  std::ofstream(file) << "defaults:\n"
                         "  model: "
                      << kDepSrc
                      << "/tests/goldens/models/tiny-dense\n"
                         "  system: tiny_gpu\n"
                         "  systems: "
                      << kDepSrc
                      << "/tests/goldens/systems\n"
                         "  database_mode: SOL\n"
                         "  isl: 512\n  osl: 64\n  ttft: 1000\n  tpot: 5\n"
                         "experiments:\n"
                         "  - name: trt4\n    backend: trtllm\n    total-gpus: 4\n"
                         "  - name: vllm2\n    backend: vllm\n    total_gpus: 2\n    modes: agg\n";
  const ProcessResult r = RunProcess({kDepBin, "exp", file, "--json", "--save-dir", dir + "/out"}, 600);
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  const Json j = Json::parse(r.out);
  ASSERT_EQ(j["experiments"].size(), 2u);
  double best = -1;
  std::string best_name;
  for (const Json& e : j["experiments"]) {
    // Each experiment's report is `default --json` with the same flags.
    const bool trt = e["name"] == "trt4";
    const ProcessResult one =
        RunProcess(Model("default", "tiny-dense",
                         trt ? std::vector<std::string>{"--database-mode", "sol", "--backend", "trtllm", "--total-gpus",
                                                        "4", "--json"}
                             : std::vector<std::string>{"--database-mode", "sol", "--backend", "vllm", "--total-gpus",
                                                        "2", "--modes", "agg", "--json"}),
                   600);
    ASSERT_EQ(one.exit_code, 0) << Show(one);
    EXPECT_EQ(e["report"]["chosen"], Json::parse(one.out)["chosen"]) << e["name"];
    EXPECT_TRUE(fs::exists(e["report"]["saved"].get<std::string>() + "/report.html")) << e.dump().substr(0, 500);
    EXPECT_EQ(fs::path(e["report"]["saved"].get<std::string>()).parent_path().filename(), e["name"].get<std::string>());
    const double v = e["report"]["chosen"]["tokens_per_s_gpu"].get<double>();
    if (e["report"]["chosen"]["meets_sla"].get<bool>() && v > best) best = v, best_name = e["name"];
  }
  EXPECT_EQ(j["best"], best_name);
  // The terminal form: each report, then the comparison.
  const ProcessResult t = RunProcess({kDepBin, "exp", file}, 600);
  ASSERT_EQ(t.exit_code, 0) << Show(t);
  EXPECT_NE(t.out.find("== experiment trt4 (" + file + ":"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("== experiment vllm2"), std::string::npos);
  EXPECT_NE(t.out.find("the chosen deployment of each"), std::string::npos);
  EXPECT_NE(t.out.find("best: " + best_name), std::string::npos) << t.out;
  // A key that is no flag of default: exit 2 naming the file, the line and the key.
  std::ofstream(dir + "/bad.yaml") << "experiments:\n  - name: x\n    model: m\n    total-gpu: 4\n";
  const ProcessResult bad = RunProcess({kDepBin, "exp", dir + "/bad.yaml"}, 60);
  EXPECT_EQ(bad.exit_code, 2) << Show(bad);
  EXPECT_NE(bad.err.find(dir + "/bad.yaml:4"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("unknown key 'total-gpu'"), std::string::npos) << bad.err;
}

// ---- generate: each file against the engine's parser at the version named ----

std::set<std::string> FlagList(const std::string& file) {
  std::ifstream in(kDepSrc + "/tests/goldens/engine_flags/" + file);
  std::set<std::string> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') out.insert(line);
  EXPECT_GT(out.size(), 10u) << file;
  return out;
}

std::set<std::string> DynamoFlags(const std::string& module) {
  std::set<std::string> out;
  for (const std::string& line : FlagList("dynamo-1.3.txt")) {
    const auto sp = line.find(' ');
    if (line.substr(0, sp) == module) out.insert(line.substr(sp + 1));
  }
  return out;
}

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The "--flag" words of a shell script's command lines (comments left out).
std::vector<std::string> ScriptFlags(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream words(line);
    std::string w;
    bool quoted = false;
    while (words >> w) {
      if (!quoted && w.rfind("--", 0) == 0) out.push_back(w.substr(0, w.find('=')));
      for (char ch : w)
        if (ch == '\'') quoted = !quoted;
    }
  }
  return out;
}

// The key paths of a YAML mapping ("kv_cache_config.dtype").
void KeyPaths(const YAML::Node& n, const std::string& prefix, std::vector<std::string>& out) {
  if (!n.IsMap()) return;
  for (const auto& kv : n) {
    const std::string key = prefix + kv.first.as<std::string>();
    out.push_back(key);
    KeyPaths(kv.second, key + ".", out);
  }
}

struct EngineCase {
  std::string engine, flags_file, entry, module;
};

TEST(DeployE2E, GeneratedFilesParseAsTheEnginesAtTheVersionsNamed) {
  const std::set<std::string> llm_api = FlagList("trtllm-llm-api-1.3.0rc23.txt");
  for (const EngineCase& e : {EngineCase{"vllm", "vllm-0.24.0.txt", "vllm serve ", "dynamo.vllm"},
                              EngineCase{"sglang", "sglang-0.5.16.txt", "sglang serve", "dynamo.sglang"},
                              EngineCase{"trtllm", "trtllm-serve.txt", "trtllm-serve ", "dynamo.trtllm"}}) {
    SCOPED_TRACE(e.engine);
    const std::set<std::string> engine_flags = FlagList(e.flags_file);
    std::set<std::string> worker_flags = DynamoFlags(e.module);
    if (e.engine != "trtllm") worker_flags.insert(engine_flags.begin(), engine_flags.end());
    const std::string dir = MakeTempDir("servecast_gen_" + e.engine) + "/out";
    // The MoE fixture on 8 GPUs: expert and attention-DP flags appear.
    const ProcessResult r = RunProcess(
        Model("generate", "tiny-moe",
              {"--database-mode", "sol", "--backend", e.engine, "--total-gpus", "8", "--save-dir", dir, "--json"}),
        600);
    ASSERT_EQ(r.exit_code, 0) << Show(r);
    const Json j = Json::parse(r.out);
    ASSERT_FALSE(j["agg"].is_null());
    ASSERT_FALSE(j["disagg"].is_null());
    int scripts = 0, manifests = 0;
    for (const Json& f : j["files"]) {
      const fs::path path = f.get<std::string>();
      const std::string name = path.filename().string(), text = Read(path);
      SCOPED_TRACE(path.string());
      EXPECT_EQ(text.find("${DYNAMO_IMAGE}"), std::string::npos);
      if (name.find("launch.sh") != std::string::npos) {
        ++scripts;
        EXPECT_NE(text.find(e.entry), std::string::npos);
        for (const std::string& flag : ScriptFlags(text))
          EXPECT_TRUE(engine_flags.count(flag)) << flag << " is no flag of " << e.flags_file;
      }
      if (name == "run_single_node.sh") {
        for (const std::string& flag : ScriptFlags(text))
          EXPECT_TRUE(worker_flags.count(flag) || flag == "--http-port") << flag << " is no flag of " << e.module;
      }
      if (name.find("extra_llm_api_config.yaml") != std::string::npos) {
        std::vector<std::string> keys;
        KeyPaths(YAML::Load(text), "", keys);
        for (const std::string& k : keys) EXPECT_TRUE(llm_api.count(k)) << k << " is no TRT-LLM LLM-API option";
        if (name.rfind("prefill", 0) == 0) {
          const YAML::Node y = YAML::Load(text);
          EXPECT_TRUE(y["disable_overlap_scheduler"].as<bool>());
          EXPECT_FALSE(y["enable_chunked_prefill"].as<bool>());
          EXPECT_GE(y["max_num_tokens"].as<long>(), y["max_seq_len"].as<long>());
        }
      }
      if (name == "k8s_deploy.yaml") {
        ++manifests;
        std::vector<YAML::Node> docs = YAML::LoadAll(text);
        std::set<std::string> config_files;
        std::string config_map;
        for (const YAML::Node& d : docs)
          if (d["kind"].as<std::string>() == "ConfigMap") {
            config_map = d["metadata"]["name"].as<std::string>();
            for (const auto& kv : d["data"]) {
              config_files.insert(kv.first.as<std::string>());
              YAML::Load(kv.second.as<std::string>());  // each mounted file is YAML itself
            }
          }
        const YAML::Node& dgd = docs.back();
        ASSERT_EQ(dgd["kind"].as<std::string>(), "DynamoGraphDeployment");
        int workers = 0;
        for (const auto& kv : dgd["spec"]["services"]) {
          const YAML::Node svc = kv.second;
          const YAML::Node main = svc["extraPodSpec"]["mainContainer"];
          EXPECT_EQ(main["image"].as<std::string>().rfind("nvcr.io/nvidia/ai-dynamo/", 0), 0u);
          if (svc["componentType"].as<std::string>() != "worker") continue;
          ++workers;
          EXPECT_EQ(svc["envFromSecret"].as<std::string>(), "hf-token-secret");
          EXPECT_GE(std::stoi(svc["resources"]["limits"]["gpu"].as<std::string>()), 1);
          EXPECT_EQ(main["command"][2].as<std::string>(), e.module);
          std::vector<std::string> args;
          for (const YAML::Node& a : main["args"]) args.push_back(a.as<std::string>());
          for (std::size_t i = 0; i < args.size(); ++i) {
            if (args[i].rfind("--", 0) == 0) {
              EXPECT_TRUE(worker_flags.count(args[i])) << args[i] << " is no flag of " << e.module;
            }
            if (args[i].rfind("/config/", 0) == 0) {
              // Every file a worker names is in the ConfigMap, mounted where it is named.
              EXPECT_TRUE(config_files.count(args[i].substr(8))) << args[i];
              EXPECT_EQ(main["volumeMounts"][0]["mountPath"].as<std::string>(), "/config");
              EXPECT_EQ(svc["extraPodSpec"]["volumes"][0]["configMap"]["name"].as<std::string>(), config_map);
            }
          }
          if (svc["subComponentType"]) {
            const std::string role = svc["subComponentType"].as<std::string>();
            bool has_role = false;
            for (std::size_t i = 0; i + 1 < args.size(); ++i)
              has_role |= args[i] == "--disaggregation-mode" && args[i + 1] == role;
            EXPECT_TRUE(has_role) << role;
          }
        }
        EXPECT_GE(workers, 1);
        if (e.engine == "trtllm") {
          EXPECT_FALSE(config_files.empty());
        }
      }
    }
    EXPECT_EQ(scripts, 3);  // agg/launch.sh, disagg/prefill_launch.sh, disagg/decode_launch.sh
    EXPECT_EQ(manifests, 2);
  }
}

}  // namespace
}  // namespace servecast::testing
