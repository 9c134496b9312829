// --model as users type it, end to end on the real binary (issue 24 item 5): a
// current HF id or its -Instruct variant resolves to the bundled architecture
// with a note on stderr (never silently); an id in a local Hugging Face cache
// and a path to a config.json are read; an unknown id exits 2 with the closest
// bundled ids.

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "process.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;
const std::string kBinary = SERVECAST_BIN;
const std::string kSrc = SERVECAST_SOURCE_DIR;

std::string Describe(const ProcessResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out + "\n--- stderr\n" + r.err;
}

// A SOL-mode static estimate (no data needed) of `model`, as JSON; `env` is
// prepended through env(1) ("HF_HUB_CACHE=...").
ProcessResult Estimate(const std::string& model, const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv;
  if (!env.empty()) {
    argv.push_back("/usr/bin/env");
    argv.insert(argv.end(), env.begin(), env.end());
  }
  for (const std::string& a : {kBinary, std::string("estimate"), std::string("--model"), model, std::string("--system"),
                               std::string("h200_sxm"), std::string("--database-mode"), std::string("sol"),
                               std::string("--isl"), std::string("128"), std::string("--osl"), std::string("8"),
                               std::string("--tp"), std::string("8"), std::string("--json")})
    argv.push_back(a);
  return RunProcess(argv, 120, kSrc);
}

TEST(ModelIdsE2E, InstructIdResolvesToTheBundledArchitectureWithANote) {
  const ProcessResult r = Estimate("meta-llama/Llama-3.1-70B-Instruct");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.err.find("note: --model meta-llama/Llama-3.1-70B-Instruct is bundled meta-llama/Meta-Llama-3.1-70B ("),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("aliases.yaml line "), std::string::npos) << r.err;
  const auto doc = nlohmann::json::parse(r.out);  // stdout stays one JSON document
  EXPECT_EQ(doc["model"]["name"], "meta-llama/Meta-Llama-3.1-70B");
  // The bundled id itself prints no note, and the same numbers.
  const ProcessResult b = Estimate("meta-llama/Meta-Llama-3.1-70B");
  ASSERT_EQ(b.exit_code, 0) << Describe(b);
  EXPECT_EQ(b.err, "");
  EXPECT_EQ(nlohmann::json::parse(b.out)["ttft_ms"], doc["ttft_ms"]);
}

TEST(ModelIdsE2E, HuggingFaceCacheAndConfigPath) {
  const std::string dir = MakeTempDir("sc_model_ids_");
  const std::string snapshot = dir + "/hub/models--acme--Wide-8B/snapshots/0123abcd";
  WriteText(dir + "/hub/models--acme--Wide-8B/refs/main", "0123abcd");
  WriteText(snapshot + "/config.json", R"({"architectures": ["MistralForCausalLM"], "hidden_size": 4096,
  "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "vocab_size": 32768, "torch_dtype": "bfloat16"})");
  const ProcessResult r = Estimate("acme/Wide-8B", {"HF_HUB_CACHE=" + dir + "/hub"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.err.find("note: --model acme/Wide-8B: read from the Hugging Face cache, " + snapshot + "/config.json"),
            std::string::npos)
      << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["model"]["architecture"], "MistralForCausalLM");
  EXPECT_EQ(doc["model"]["family"], "dense");
  // The same file given as a path: no note, the same estimate.
  const ProcessResult p = Estimate(snapshot + "/config.json");
  ASSERT_EQ(p.exit_code, 0) << Describe(p);
  EXPECT_EQ(p.err, "");
  EXPECT_EQ(nlohmann::json::parse(p.out)["ttft_ms"], doc["ttft_ms"]);
  // HF_HOME/hub is searched when HF_HUB_CACHE is not set.
  const ProcessResult h = Estimate("acme/Wide-8B", {"-u", "HF_HUB_CACHE", "HF_HOME=" + dir});
  EXPECT_EQ(h.exit_code, 0) << Describe(h);
  fs::remove_all(dir);
}

// validate resolves a silicon row's model_path the same way and keeps the note
// with the row (here the row then misses data: the golden tables are tiny).
TEST(ModelIdsE2E, ValidateRowsCarryTheResolutionNote) {
  const std::string dir = MakeTempDir("sc_model_ids_");
  WriteText(dir + "/silicon.csv",
            "backend,model_path,system,mode,isl,osl,batch_size,tp_size,silicon_ttft_ms,silicon_tpot_ms\n"
            "trtllm,meta-llama/Llama-3.1-8B,tiny_gpu,agg,64,8,4,1,0.5,0.1\n");
  const ProcessResult r =
      RunProcess({kBinary, "validate", "--silicon", dir + "/silicon.csv", "--systems", "tests/goldens/systems",
                  "--data-root", "tests/goldens/data", "--data-map", "trtllm=dense/1", "--json"},
                 120, kSrc);
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["rows"].size(), 1u) << Describe(r);
  const auto& row = doc["rows"][0];
  ASSERT_TRUE(row.contains("notes")) << row.dump();
  bool noted = false;
  for (const auto& n : row["notes"])
    noted = noted || n.get<std::string>().find("meta-llama/Llama-3.1-8B is bundled meta-llama/Meta-Llama-3.1-8B") !=
                         std::string::npos;
  EXPECT_TRUE(noted) << row.dump();
  fs::remove_all(dir);
}

TEST(ModelIdsE2E, UnknownIdGetsTheClosestBundledIds) {
  const std::string dir = MakeTempDir("sc_model_ids_");
  const ProcessResult r = Estimate("Qwen/Qwen3-32B-Instruct", {"HF_HUB_CACHE=" + dir});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_NE(r.err.find("unknown model 'Qwen/Qwen3-32B-Instruct'; did you mean Qwen/Qwen3-32B,"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("Hugging Face cache (" + dir + ")"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servecast::testing
