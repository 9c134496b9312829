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
const std::string kGaps = kSrc + "/systems/data/h200_sxm/COVERAGE_GAPS.yaml";

std::string Describe(const ProcessResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out.substr(0, 4000) + "\n--- stderr\n" + r.err;
}

ProcessResult Gate(const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {kBinary, "check", "systems/data/h200_sxm", "--coverage"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return RunProcess(argv, 300, kSrc);
}

// The shipped gaps file without the entry of `entry_model` on `entry_table`, written to `path`.
void WithoutEntry(const std::string& path, const std::string& entry_model, const std::string& entry_table) {
  const std::string text = ReadText(kGaps);
  const std::string head = "  - model: " + entry_model + "\n    table: " + entry_table + "\n";
  const std::size_t at = text.find(head);
  ASSERT_NE(at, std::string::npos) << head;
  const std::size_t next = text.find("\n  - model:", at + 1);
  WriteText(path, text.substr(0, at) + (next == std::string::npos ? "" : text.substr(next + 1)));
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
  // The known gaps are listed, each with its declaration: DeepSeek-V3.2's DSA
  // modules, which no collector op measures yet (issue 25).
  bool dsa = false;
  std::set<std::string> dsa_engines;
  for (const auto& m : doc["misses"]) {
    ASSERT_FALSE(m["declared"].is_null()) << m.dump();
    if (m["model"] == "deepseek-ai/DeepSeek-V3.2" && m["table"] == "dsa_context_module_perf") {
      EXPECT_EQ(m["key"]["architecture"], "DeepseekV32ForCausalLM");
      EXPECT_EQ(m["declared"]["issue"], 25);
      for (const auto& e : m["engines"]) dsa_engines.insert(e.get<std::string>());
      dsa = true;
    }
    // Models the tables cover have no miss at all (DeepSeek-V3 and R1 through the
    // MLA tables).
    EXPECT_NE(m["model"], "Qwen/Qwen3-32B");
    EXPECT_NE(m["model"], "meta-llama/Meta-Llama-3.1-8B");
    EXPECT_NE(m["model"], "deepseek-ai/DeepSeek-V3");
    EXPECT_NE(m["model"], "deepseek-ai/DeepSeek-R1");
    // gpt-oss through its weight-only mxfp4 experts and head-dim-64 attention (h200-w4b,
    // h200-gptoss-attn); the experts of MiniMax-M2.5, Qwen3-Coder, Llama-4, Kimi-K2 and
    // Kimi-K2.5 (h200-moe3/4/5) and Llama-4's window-8192 attention (h200-l4attn).
    EXPECT_NE(m["model"], "openai/gpt-oss-120b");
    EXPECT_NE(m["model"], "openai/gpt-oss-20b");
    EXPECT_NE(m["model"], "MiniMaxAI/MiniMax-M2.5");
    EXPECT_NE(m["model"], "Qwen/Qwen3-Coder-480B-A35B-Instruct");
    EXPECT_NE(m["model"], "moonshotai/Kimi-K2-Instruct");
    EXPECT_NE(m["model"], "moonshotai/Kimi-K2.5");
    EXPECT_NE(m["model"], "meta-llama/Llama-4-Scout-17B-16E-Instruct");
    EXPECT_NE(m["model"], "meta-llama/Llama-4-Maverick-17B-128E-Instruct");
    // Qwen3.5 through gdn_perf, its head-dim-256 attention and its experts (h200-gdn,
    // h200-q35attn, h200-moe7); GLM-5's experts (h200-moe8: only its DSA misses).
    EXPECT_NE(m["model"], "Qwen/Qwen3.5-397B-A17B");
    EXPECT_NE(m["model"], "Qwen/Qwen3.5-35B-A3B");
    EXPECT_NE(m["model"], "Qwen/Qwen3.5-27B");
    // Nemotron-3-Nano through mamba2_perf and its relu2 experts (h200-mamba2b, h200-moe9).
    EXPECT_NE(m["model"], "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16");
    if (m["model"] == "zai-org/GLM-5" || m["model"] == "zai-org/GLM-5-FP8") {
      EXPECT_NE(m["table"], "moe_perf") << m.dump();
    }
  }
  EXPECT_TRUE(dsa) << r.out.substr(0, 4000);
  EXPECT_EQ(dsa_engines, (std::set<std::string>{"sglang", "trtllm", "vllm"}));
}

// DeepSeek-V3.2's context DSA module keys that the search's one-node configurations
// look up: one per local head count (128, 64, 32, 16).
constexpr int kDsaContextMisses = 4;

TEST(CoverageE2E, UndeclaredMissFails) {
  const std::string dir = MakeTempDir("sc_coverage_");
  WithoutEntry(dir + "/gaps.yaml", "deepseek-ai/DeepSeek-V3.2", "dsa_context_module_perf");
  const ProcessResult r = Gate({"--gaps", dir + "/gaps.yaml"});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_NE(r.out.find("UNDECLARED"), std::string::npos) << Describe(r);
  EXPECT_NE(r.out.find("dsa_context_module_perf {op_name=dsa_context_module, architecture=DeepseekV32ForCausalLM"),
            std::string::npos)
      << Describe(r);
  EXPECT_NE(r.out.find("coverage: FAIL (" + std::to_string(kDsaContextMisses) + " undeclared misses, 0 stale gaps)"),
            std::string::npos)
      << Describe(r);
  fs::remove_all(dir);
}

TEST(CoverageE2E, GapThatNoLongerMissesFails) {
  const std::string dir = MakeTempDir("sc_coverage_");
  WriteText(dir + "/gaps.yaml", ReadText(kGaps) +
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
