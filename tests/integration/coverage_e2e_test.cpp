// The coverage gate, end to end on the real binary and the shipped H200 tables
// (issue 24 item 6): `servecast check systems/data/h200_sxm --coverage` lists
// every lookup of every bundled model x engine x one-node configuration that the
// tables miss; it fails on a miss the gaps file does not declare and on a
// declared gap that no longer misses; a bad gaps file names its file and line.

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "process.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;
const std::string kBinary = SERVECAST_BIN;
const std::string kSrc = SERVECAST_SOURCE_DIR;

std::string Describe(const ProcessResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out.substr(0, 4000) + "\n--- stderr\n" + r.err;
}

ProcessResult Gate(const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {kBinary, "check", "systems/data/h200_sxm", "--coverage"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return RunProcess(argv, 300, kSrc);
}

TEST(CoverageE2E, ShippedTablesPassWithEveryMissDeclared) {
  const ProcessResult r = Gate({"--json"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["system"], "h200_sxm");
  EXPECT_EQ(doc["gpus"], 8);
  EXPECT_TRUE(doc["pass"].get<bool>());
  EXPECT_EQ(doc["undeclared"], 0);
  EXPECT_TRUE(doc["stale_gaps"].empty());
  EXPECT_GE(doc["models"].get<int>(), 22);
  // Every bundled model's every lookup on one node finds measured rows: the last
  // gaps (DeepSeek-V3.2's and GLM-5's DSA modules) were collected on 2026-12-03
  // (run h200-dsa), so nothing is missing and nothing is declared.
  EXPECT_TRUE(doc["misses"].empty()) << doc["misses"].dump().substr(0, 4000);
}

// Without the sparse_attention tables, the three DSA models miss both module tables
// at every local head count the search's one-node configurations look up
// (DeepSeek-V3.2: 128, 64, 32, 16; GLM-5 and GLM-5-FP8: 64, 32, 16, 8).
constexpr int kDsaMissesPerTable = 4;

TEST(CoverageE2E, UndeclaredMissFails) {
  const std::string dir = MakeTempDir("sc_coverage_");
  const std::string data = CopyH200TablesWithout(kSrc, dir, "sparse_attention");
  WriteText(dir + "/gaps.yaml", "gaps: []\n");
  const ProcessResult r = RunProcess({kBinary, "check", data, "--coverage", "--gaps", dir + "/gaps.yaml"}, 300, kSrc);
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_NE(r.out.find("UNDECLARED"), std::string::npos) << Describe(r);
  EXPECT_NE(r.out.find("dsa_context_module_perf {op_name=dsa_context_module, architecture=DeepseekV32ForCausalLM"),
            std::string::npos)
      << Describe(r);
  EXPECT_NE(r.out.find("coverage: FAIL (" + std::to_string(3 * 2 * kDsaMissesPerTable) +
                       " undeclared misses, 0 stale gaps)"),
            std::string::npos)
      << Describe(r);
  // A declared gap covers its misses only: DeepSeek-V3.2's context module declared,
  // the other five (model, table) pairs still fail.
  WriteText(dir + "/gaps.yaml",
            "gaps:\n  - model: deepseek-ai/DeepSeek-V3.2\n    table: dsa_context_module_perf\n    issue: 25\n"
            "    reason: sparse_attention left out of this copy\n");
  const ProcessResult d =
      RunProcess({kBinary, "check", data, "--coverage", "--gaps", dir + "/gaps.yaml", "--json"}, 300, kSrc);
  EXPECT_EQ(d.exit_code, 1) << Describe(d);
  const auto doc = nlohmann::json::parse(d.out);
  EXPECT_EQ(doc["undeclared"], 5 * kDsaMissesPerTable);
  std::set<std::string> dsa_engines;
  int declared = 0;
  for (const auto& m : doc["misses"]) {
    const bool ds_context = m["model"] == "deepseek-ai/DeepSeek-V3.2" && m["table"] == "dsa_context_module_perf";
    EXPECT_EQ(m["declared"].is_null(), !ds_context) << m.dump();
    EXPECT_EQ(std::string(m["table"]).rfind("dsa_", 0), 0u) << m.dump();  // nothing else misses
    if (ds_context) {
      ++declared;
      EXPECT_EQ(m["key"]["architecture"], "DeepseekV32ForCausalLM");
      EXPECT_EQ(m["declared"]["issue"], 25);
      for (const auto& e : m["engines"]) dsa_engines.insert(e.get<std::string>());
    }
  }
  EXPECT_EQ(declared, kDsaMissesPerTable);
  EXPECT_EQ(dsa_engines, (std::set<std::string>{"sglang", "trtllm", "vllm"}));
  fs::remove_all(dir);
}

TEST(CoverageE2E, GapThatNoLongerMissesFails) {
  const std::string dir = MakeTempDir("sc_coverage_");
  WriteText(dir + "/gaps.yaml", "gaps:\n"
                                "  - model: Qwen/Qwen3-32B\n    table: gemm_perf\n    key: {gemm_dtype: bfloat16}\n"
                                    "    reason: covered long ago\n");
  const ProcessResult r = Gate({"--gaps", dir + "/gaps.yaml"});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_NE(r.out.find("stale gaps (declared, no longer missing):\n  Qwen/Qwen3-32B gemm_perf {gemm_dtype=bfloat16}: "
                       "covered long ago (" +
                       dir + "/gaps.yaml line "),
            std::string::npos)
      << Describe(r);
  EXPECT_NE(r.out.find("coverage: FAIL (0 undeclared misses, 1 stale gap)"), std::string::npos) << Describe(r);
  fs::remove_all(dir);
}

TEST(CoverageE2E, BadGapsFileNamesFileAndLine) {
  const std::string dir = MakeTempDir("sc_coverage_");
  const std::string file = dir + "/gaps.yaml";
  struct Case {
    std::string text;
    std::string words;
  };
  const std::vector<Case> cases = {
      {"gaps:\n  - model: openai/gpt-oss-120b\n    table: moe_perf\n    key: {moe_dtyp: w4a16_mxfp4}\n    issue: 24\n",
       file + ":4: key 'gaps[0].key.moe_dtyp': 'moe_dtyp' is not a key column of moe_perf"},
      {"gaps:\n  - model: openai/gpt-oss-120b\n    table: moe_perf\n    isue: 24\n", file + ":4"},
      {"gaps:\n  - model: acme/None\n    unsupported: true\n    issue: 1\n", "'acme/None' is not a bundled model"},
      {"gaps:\n  - model: openai/gpt-oss-120b\n    table: moe_perf\n", "neither issue nor reason"},
      {"gaps:\n  - model: openai/gpt-oss-120b\n    issue: 24\n", "neither table nor unsupported"},
      {"gaps:\n  - model: openai/gpt-oss-120b\n    table: moe_perf\n    engines: [trtllm, tensorrt]\n    issue: 24\n",
       "unknown engine 'tensorrt'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    WriteText(file, c.text);
    const ProcessResult r = Gate({"--gaps", file});
    EXPECT_EQ(r.exit_code, 2) << Describe(r);
    EXPECT_NE(r.err.find(c.words), std::string::npos) << Describe(r);
  }
  // --coverage is a system folder's gate: a version folder is refused.
  const ProcessResult v = RunProcess(
      {kBinary, "check", "systems/data/h200_sxm/gemm/cuda/13.0-cublaslt13.1-cudnn9.14-nccl2.28", "--coverage"}, 60,
      kSrc);
  EXPECT_EQ(v.exit_code, 2) << Describe(v);
  EXPECT_NE(v.err.find("is not a system folder"), std::string::npos) << Describe(v);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servecast::testing
