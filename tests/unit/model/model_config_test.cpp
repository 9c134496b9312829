#include "model/model_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "model/family.h"
#include "shared_data.h"

namespace servecast::model {
namespace {

namespace fs = std::filesystem;

const std::string kModelsDir = std::string(SERVECAST_SOURCE_DIR) + "/models";

// A minimal dense config; the error tests break one thing in it at a time.
const std::string kLlamaLike = R"({
  "architectures": ["LlamaForCausalLM"],
  "hidden_size": 1024,
  "intermediate_size": 4096,
  "num_attention_heads": 16,
  "num_hidden_layers": 4,
  "num_key_value_heads": 4,
  "vocab_size": 32000
})";

// Expects `fn` to throw E whose message contains every one of `parts`.
template <typename E, typename Fn>
void ExpectThrowWith(Fn fn, const std::vector<std::string>& parts) {
  try {
    fn();
    FAIL() << "no exception";
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// The config text with `key`'s line replaced by `line` (or removed when empty).
std::string Replace(const std::string& text, const std::string& key, const std::string& line) {
  const std::size_t at = text.find("\"" + key + "\"");
  EXPECT_NE(at, std::string::npos) << key;
  const std::size_t end = text.find('\n', at);
  std::string out = text.substr(0, at) + line + text.substr(end);
  return out;
}

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("servecast_model_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  void Write(const std::string& name, const std::string& text) const { std::ofstream(path_ / name) << text; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// ---- bundled models ----

TEST(BundledModels, ListsEveryReferenceConfig) {
  const std::vector<std::string> ids = BundledModels(kModelsDir);
  // The 23 reference configs plus the two Llama-3.1-8B Instruct checkpoints of the
  // dev serving set (same architecture as the 8B base; models/README.md), and the
  // seven hybrid and sparse-attention models of issue 25, and Kimi-K2.5.
  ASSERT_EQ(ids.size(), 33u);
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  for (const char* id : {"meta-llama/Meta-Llama-3.1-8B", "Qwen/Qwen3-32B", "Qwen/Qwen3-30B-A3B", "openai/gpt-oss-120b",
                         "deepseek-ai/DeepSeek-V3", "nvidia/Llama-3.1-70B-Instruct-FP8", "mistralai/Mixtral-8x7B-v0.1",
                         "moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2.5"})
    EXPECT_NE(std::find(ids.begin(), ids.end(), id), ids.end()) << id;
}

TEST(BundledModels, EveryOneLoadsWithAFamilyAndConsistentShapes) {
  for (const std::string& id : BundledModels(kModelsDir)) {
    SCOPED_TRACE(id);
    const ModelConfig m = LoadModel(id, kModelsDir);
    EXPECT_EQ(m.name, id);
    EXPECT_GT(m.num_layers, 0);
    EXPECT_GT(m.head_dim, 0);
    EXPECT_EQ(m.num_heads % m.num_kv_heads, 0);
    EXPECT_EQ(static_cast<std::int64_t>(m.layer_windows.size()), m.num_layers);
    EXPECT_FALSE(m.quant_notes.empty());
    const bool moe_like = FamilyOf(m).HasExperts();
    EXPECT_EQ(m.num_experts > 0, moe_like);
    EXPECT_EQ(m.experts_per_token > 0, moe_like);
    const std::string expected_family =
        id.find("DeepSeek-V3.2") != std::string::npos || id.find("GLM-5") != std::string::npos ? "deepseek_dsa"
        : id.find("Qwen3.5") != std::string::npos ? (id.find("-A") != std::string::npos ? "qwen3_5_moe" : "qwen3_5")
        : id.find("Nemotron-3") != std::string::npos ? "nemotron_h"
        : id.find("DeepSeek") != std::string::npos || id.find("Kimi") != std::string::npos ? "deepseek"
        : (id.find("A22B") != std::string::npos || id.find("A3B") != std::string::npos ||
           id.find("A35B") != std::string::npos || id.find("MiniMax") != std::string::npos ||
           id.find("Llama-4") != std::string::npos || id.find("Mixtral") != std::string::npos ||
           id.find("gpt-oss") != std::string::npos)
            ? "moe"
            : "dense";
    EXPECT_STREQ(FamilyOf(m).Name(), expected_family.c_str());
  }
}

// Every bundled value equals the published config it was taken from (the
// reference copies in the shared tree), key by key; only fields are dropped.
TEST(BundledModels, ValuesMatchTheReferenceConfigs) {
  const fs::path ref_dir = fs::path(SERVECAST_SHARED_DIR) / "reference" / "hf-configs";
  SERVECAST_NEED_SHARED(fs::is_directory(ref_dir), "no reference configs at " + ref_dir.string());
  int files = 0, derived = 0;
  for (const auto& entry : fs::directory_iterator(kModelsDir)) {
    if (!entry.is_directory()) continue;
    const std::string dir = entry.path().filename().string();
    for (const auto& [mine, suffix] : {std::pair<std::string, std::string>{"config.json", "_config.json"},
                                       {"hf_quant_config.json", "_hf_quant_config.json"}}) {
      const fs::path p = entry.path() / mine;
      if (!fs::exists(p)) continue;
      SCOPED_TRACE(p.string());
      if (!fs::exists(ref_dir / (dir + suffix))) {
        // Derived from a reference config (documented in models/README.md as such).
        const std::string readme = ReadFile(kModelsDir + "/README.md");
        EXPECT_NE(readme.find("`" + dir + "`"), std::string::npos) << dir << " is not documented";
        EXPECT_NE(readme.find("same architecture as"), std::string::npos);
        ++derived;
        continue;
      }
      const auto bundled = nlohmann::json::parse(ReadFile(p.string()));
      const auto reference = nlohmann::json::parse(ReadFile((ref_dir / (dir + suffix)).string()));
      // Objects (text_config, quantization_config) are compared key by key too:
      // fields may be dropped at any depth, never changed.
      std::function<void(const nlohmann::json&, const nlohmann::json&, const std::string&)> subset =
          [&](const nlohmann::json& mine_j, const nlohmann::json& ref_j, const std::string& path) {
            for (const auto& [key, value] : mine_j.items()) {
              ASSERT_TRUE(ref_j.contains(key)) << path + key;
              if (value.is_object() && ref_j.at(key).is_object())
                subset(value, ref_j.at(key), path + key + ".");
              else
                EXPECT_EQ(ref_j.at(key), value) << path + key;
            }
          };
      subset(bundled, reference, "");
      EXPECT_TRUE(bundled.contains("architectures") || bundled.contains("quantization"));
      ++files;
    }
  }
  EXPECT_EQ(files, 32);
  EXPECT_EQ(derived, 3);  // two config.json files and one hf_quant_config.json
}

TEST(LoadModel, Llama31_8B) {
  const ModelConfig m = LoadModel("meta-llama/Meta-Llama-3.1-8B", kModelsDir);
  EXPECT_EQ(m.architecture, "LlamaForCausalLM");
  EXPECT_STREQ(FamilyOf(m).Name(), "dense");
  EXPECT_EQ(m.num_layers, 32);
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.num_heads, 32);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);  // H / n: no head_dim in the file
  EXPECT_EQ(m.intermediate_size, 14336);
  EXPECT_EQ(m.vocab_size, 128256);
  EXPECT_EQ(m.max_position_embeddings, 131072);
  EXPECT_FALSE(m.qk_norm);
  EXPECT_EQ(m.layer_windows, std::vector<std::int64_t>(32, 0));
  EXPECT_EQ(m.num_experts, 0);
  EXPECT_EQ(m.quant_algo, "");
  EXPECT_EQ(m.quant, QuantConfig{});
  EXPECT_NE(m.config_path.find("meta-llama--Meta-Llama-3.1-8B/config.json"), std::string::npos);
}

TEST(LoadModel, Llama31_405B) {
  const ModelConfig m = LoadModel("meta-llama--Meta-Llama-3.1-405B", kModelsDir);
  EXPECT_EQ(m.num_layers, 126);
  EXPECT_EQ(m.hidden_size, 16384);
  EXPECT_EQ(m.num_heads, 128);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.intermediate_size, 53248);
}

TEST(LoadModel, Qwen3_32B) {
  const ModelConfig m = LoadModel("Qwen/Qwen3-32B", kModelsDir);
  EXPECT_EQ(m.architecture, "Qwen3ForCausalLM");
  EXPECT_STREQ(FamilyOf(m).Name(), "dense");
  EXPECT_EQ(m.num_layers, 64);
  EXPECT_EQ(m.hidden_size, 5120);
  EXPECT_EQ(m.num_heads, 64);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);  // explicit head_dim; H / n would be 80
  EXPECT_EQ(m.intermediate_size, 25600);
  EXPECT_EQ(m.vocab_size, 151936);
  EXPECT_EQ(m.max_position_embeddings, 40960);
  EXPECT_TRUE(m.qk_norm);
  // sliding_window null and use_sliding_window false: full attention everywhere.
  EXPECT_EQ(m.layer_windows, std::vector<std::int64_t>(64, 0));
  EXPECT_EQ(m.quant, QuantConfig{});
}

TEST(LoadModel, Qwen3_30B_A3B) {
  const ModelConfig m = LoadModel("qwen/qwen3-30b-a3b", kModelsDir);  // case-insensitive id
  EXPECT_EQ(m.name, "Qwen/Qwen3-30B-A3B");
  EXPECT_EQ(m.architecture, "Qwen3MoeForCausalLM");
  EXPECT_STREQ(FamilyOf(m).Name(), "moe");
  EXPECT_EQ(m.num_layers, 48);
  EXPECT_EQ(m.hidden_size, 2048);
  EXPECT_EQ(m.num_heads, 32);
  EXPECT_EQ(m.num_kv_heads, 4);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.intermediate_size, 6144);
  EXPECT_EQ(m.num_experts, 128);
  EXPECT_EQ(m.experts_per_token, 8);
  EXPECT_EQ(m.moe_intermediate_size, 768);
  EXPECT_EQ(m.num_shared_experts, 0);
  EXPECT_EQ(m.shared_expert_intermediate_size, 0);
  EXPECT_TRUE(m.qk_norm);
  EXPECT_EQ(m.layer_windows, std::vector<std::int64_t>(48, 0));
}

TEST(LoadModel, Qwen3_235B_A22B) {
  const ModelConfig m = LoadModel("Qwen/Qwen3-235B-A22B", kModelsDir);
  EXPECT_EQ(m.num_layers, 94);
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.num_heads, 64);
  EXPECT_EQ(m.num_kv_heads, 4);
  EXPECT_EQ(m.num_experts, 128);
  EXPECT_EQ(m.experts_per_token, 8);
  EXPECT_EQ(m.moe_intermediate_size, 1536);
}

TEST(LoadModel, Mixtral8x7B) {
  const ModelConfig m = LoadModel("mistralai/Mixtral-8x7B-v0.1", kModelsDir);
  EXPECT_EQ(m.architecture, "MixtralForCausalLM");
  EXPECT_STREQ(FamilyOf(m).Name(), "moe");
  EXPECT_EQ(m.num_layers, 32);
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.num_heads, 32);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.vocab_size, 32000);
  EXPECT_EQ(m.max_position_embeddings, 32768);
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_EQ(m.experts_per_token, 2);
  EXPECT_EQ(m.moe_intermediate_size, 14336);  // no moe_intermediate_size: I
  EXPECT_FALSE(m.qk_norm);
  EXPECT_EQ(m.layer_windows, std::vector<std::int64_t>(32, 0));  // sliding_window null
}

TEST(LoadModel, Mixtral8x22B) {
  const ModelConfig m = LoadModel("mistralai/Mixtral-8x22B-v0.1", kModelsDir);
  EXPECT_EQ(m.num_layers, 56);
  EXPECT_EQ(m.hidden_size, 6144);
  EXPECT_EQ(m.num_heads, 48);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.moe_intermediate_size, 16384);
}

TEST(LoadModel, GptOss120b) {
  const ModelConfig m = LoadModel("openai/gpt-oss-120b", kModelsDir);
  EXPECT_EQ(m.architecture, "GptOssForCausalLM");
  EXPECT_STREQ(FamilyOf(m).Name(), "moe");
  EXPECT_EQ(m.num_layers, 36);
  EXPECT_EQ(m.hidden_size, 2880);
  EXPECT_EQ(m.num_heads, 64);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.vocab_size, 201088);
  EXPECT_EQ(m.num_experts, 128);
  EXPECT_EQ(m.experts_per_token, 4);
  EXPECT_EQ(m.moe_intermediate_size, 2880);
  ASSERT_EQ(m.layer_windows.size(), 36u);
  for (std::size_t i = 0; i < 36; ++i) EXPECT_EQ(m.layer_windows[i], i % 2 == 0 ? 128 : 0) << i;
  EXPECT_EQ(m.quant_algo, "mxfp4");
  EXPECT_EQ(m.quant.gemm, "bfloat16");
  EXPECT_EQ(m.quant.moe, "w4a16_mxfp4");
  EXPECT_EQ(m.quant.kv, "bfloat16");
  EXPECT_EQ(m.quant.fmha, "bfloat16");
  EXPECT_EQ(m.quant.comm, "half");
}

TEST(LoadModel, GptOss20b) {
  const ModelConfig m = LoadModel("openai/gpt-oss-20b", kModelsDir);
  EXPECT_EQ(m.num_layers, 24);
  EXPECT_EQ(m.num_experts, 32);
  EXPECT_EQ(m.layer_windows[0], 128);
  EXPECT_EQ(m.layer_windows[23], 0);
}

TEST(LoadModel, DeepSeekV3) {
  const ModelConfig m = LoadModel("deepseek-ai/DeepSeek-V3", kModelsDir);
  EXPECT_EQ(m.architecture, "DeepseekV3ForCausalLM");
  EXPECT_STREQ(FamilyOf(m).Name(), "deepseek");
  EXPECT_EQ(m.num_layers, 61);
  EXPECT_EQ(m.hidden_size, 7168);
  EXPECT_EQ(m.num_heads, 128);
  EXPECT_EQ(m.num_kv_heads, 128);
  EXPECT_EQ(m.intermediate_size, 18432);
  EXPECT_EQ(m.vocab_size, 129280);
  EXPECT_EQ(m.max_position_embeddings, 163840);
  EXPECT_EQ(m.num_experts, 256);
  EXPECT_EQ(m.experts_per_token, 8);
  EXPECT_EQ(m.moe_intermediate_size, 2048);
  EXPECT_EQ(m.num_shared_experts, 1);
  EXPECT_EQ(m.shared_expert_intermediate_size, 2048);
  EXPECT_EQ(m.q_lora_rank, 1536);
  EXPECT_EQ(m.kv_lora_rank, 512);
  EXPECT_EQ(m.qk_nope_head_dim, 128);
  EXPECT_EQ(m.qk_rope_head_dim, 64);
  EXPECT_EQ(m.v_head_dim, 128);
  EXPECT_EQ(m.first_k_dense_replace, 3);
  EXPECT_EQ(m.num_nextn_predict_layers, 1);
  EXPECT_EQ(m.quant_algo, "fp8_block");
  EXPECT_TRUE(m.dynamic_activations);
  EXPECT_EQ(m.quant.gemm, "fp8_block");
  EXPECT_EQ(m.quant.moe, "fp8_block");
  EXPECT_EQ(m.quant.fmha, "fp8");
  EXPECT_EQ(m.quant.kv, "fp8");
}

TEST(LoadModel, Qwen3_32B_Fp8) {
  const ModelConfig m = LoadModel("Qwen/Qwen3-32B-FP8", kModelsDir);
  EXPECT_EQ(m.num_layers, 64);
  EXPECT_EQ(m.quant_algo, "fp8_block");  // quant_method fp8 + weight_block_size
  EXPECT_TRUE(m.dynamic_activations);
  EXPECT_EQ(m.quant.gemm, "fp8_block");
  EXPECT_EQ(m.quant.moe, "fp8_block");
  EXPECT_EQ(m.quant.kv, "fp8");
  EXPECT_EQ(m.quant.fmha, "fp8");
  EXPECT_EQ(m.quant.comm, "half");
  ASSERT_FALSE(m.quant_notes.empty());
  EXPECT_NE(m.quant_notes[0].find("weight_block_size"), std::string::npos) << m.quant_notes[0];
}

TEST(LoadModel, Qwen3_30B_A3B_Fp8) {
  const ModelConfig m = LoadModel("Qwen/Qwen3-30B-A3B-FP8", kModelsDir);
  EXPECT_EQ(m.num_experts, 128);
  EXPECT_EQ(m.quant.gemm, "fp8_block");
  EXPECT_EQ(m.quant.moe, "fp8_block");
}

TEST(LoadModel, NvidiaLlama70bFp8FromHfQuantConfig) {
  const ModelConfig m = LoadModel("nvidia/Llama-3.1-70B-Instruct-FP8", kModelsDir);
  EXPECT_EQ(m.num_layers, 80);
  EXPECT_EQ(m.hidden_size, 8192);
  EXPECT_EQ(m.num_heads, 64);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.intermediate_size, 28672);
  EXPECT_EQ(m.quant_algo, "fp8");
  EXPECT_FALSE(m.dynamic_activations);
  EXPECT_EQ(m.quant.gemm, "fp8_static");  // static scales (ModelOpt)
  EXPECT_EQ(m.quant.moe, "fp8");
  EXPECT_EQ(m.quant.kv, "fp8");  // kv_cache_quant_algo FP8
  EXPECT_EQ(m.quant.fmha, "fp8");
  bool kv_note = false;
  for (const auto& n : m.quant_notes) kv_note |= n.find("kv_cache_quant_algo") != std::string::npos;
  EXPECT_TRUE(kv_note);
}

TEST(LoadModel, ByDirectoryPath) {
  const std::string dir = kModelsDir + "/Qwen--Qwen3-8B";
  const ModelConfig m = LoadModel(dir, "/nonexistent");
  EXPECT_EQ(m.name, dir);
  EXPECT_EQ(m.num_layers, 36);
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.intermediate_size, 12288);
}

TEST(LoadModel, DirectoryWithHfQuantConfig) {
  TempDir d;
  d.Write("config.json", kLlamaLike);
  d.Write("hf_quant_config.json", R"({"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": null}})");
  const ModelConfig m = LoadModel(d.path().string(), kModelsDir);
  EXPECT_EQ(m.quant_algo, "nvfp4");
  EXPECT_EQ(m.quant.gemm, "nvfp4");
  EXPECT_EQ(m.quant.moe, "nvfp4");
  EXPECT_EQ(m.quant.fmha, "fp8");
  EXPECT_EQ(m.quant.kv, "fp8");
}

TEST(LoadModel, UnknownListsBundled) {
  ExpectThrowWith<UsageError>([] { LoadModel("acme/NoSuchModel-7B", kModelsDir); },
                              {"acme/NoSuchModel-7B", "Qwen/Qwen3-32B", "meta-llama/Meta-Llama-3.1-8B"});
}

// ---- ids as users type them (models/aliases.yaml, the HF cache, config.json paths) ----

TEST(LoadModel, AliasResolvesToTheBundledArchitectureWithANote) {
  for (const char* id :
       {"meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-70B-Instruct", "META-LLAMA/llama-3.1-70b-instruct"}) {
    SCOPED_TRACE(id);
    const ModelConfig m = LoadModel(id, kModelsDir);
    EXPECT_EQ(m.name, "meta-llama/Meta-Llama-3.1-70B");
    EXPECT_EQ(m.num_layers, 80);
    EXPECT_NE(m.resolution_note.find(id), std::string::npos) << m.resolution_note;
    EXPECT_NE(m.resolution_note.find("is bundled meta-llama/Meta-Llama-3.1-70B"), std::string::npos);
    EXPECT_NE(m.resolution_note.find("aliases.yaml line "), std::string::npos) << m.resolution_note;
  }
  // A bundled id needs no note.
  EXPECT_EQ(LoadModel("meta-llama/Meta-Llama-3.1-70B", kModelsDir).resolution_note, "");
}

// Every alias of the shipped table loads its bundled model; the strict loader
// accepts the file (targets bundled, no id twice, none naming a folder).
TEST(LoadModel, EveryShippedAliasLoads) {
  const std::vector<ModelAlias> aliases = LoadModelAliases(kModelsDir);
  EXPECT_GE(aliases.size(), 15u);
  for (const ModelAlias& a : aliases) {
    SCOPED_TRACE(a.id);
    const ModelConfig m = LoadModel(a.id, kModelsDir);
    EXPECT_EQ(m.name, a.model);
    EXPECT_NE(m.resolution_note.find(a.reason), std::string::npos);
  }
}

// The aliases file's problems name the file and the entry's line.
TEST(LoadModelAliases, StrictWithFileAndLine) {
  TempDir d;
  fs::create_directories(d.path() / "acme--Base-7B");
  d.Write("acme--Base-7B/config.json", kLlamaLike);
  const std::string file = (d.path() / "aliases.yaml").string();
  const std::string head = "aliases:\n  - id: acme/Base-7B-Chat\n    model: acme/Base-7B\n    reason: chat tune\n";
  struct Case {
    std::string text;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {head + "  - id: acme/Other\n    model: acme/Base-7B\n    reason: r\n    reasn: typo\n", {":8", "reasn"}},
      {head + "  - id: acme/Other\n    model: acme/Base-7B\n", {":5", "reason", "missing key"}},
      {head + "  - id: acme/base-7b-chat\n    model: acme/Base-7B\n    reason: r\n", {":5", "listed already (line 2)"}},
      {head + "  - id: acme/Base-7B\n    model: acme/Base-7B\n    reason: r\n", {":5", "is a bundled model itself"}},
      {head + "  - id: acme/Other\n    model: acme/Missing-7B\n    reason: r\n",
       {":6", "'acme/Missing-7B' is not bundled"}},
      {head + "  - id: Other\n    model: acme/Base-7B\n    reason: r\n", {":5", "not an HF id", "ORG/NAME"}},
      {head + "  - id: acme/Other\n    model: acme/Base-7B\n    reason: ''\n", {":7", "empty"}},
      {"alias: []\n", {"alias"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    d.Write("aliases.yaml", c.text);
    std::vector<std::string> words = c.words;
    words.push_back(file);
    ExpectThrowWith<ConfigError>([&] { LoadModelAliases(d.path().string()); }, words);
  }
  d.Write("aliases.yaml", head);
  const ModelConfig m = LoadModel("acme/Base-7B-Chat", d.path().string());
  EXPECT_EQ(m.name, "acme/Base-7B");
  EXPECT_NE(m.resolution_note.find("line 2: chat tune"), std::string::npos) << m.resolution_note;
}

// Sets an environment variable for one test and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(LoadModel, HfCacheSnapshotOfRefsMain) {
  TempDir d;
  const fs::path repo = d.path() / "hub" / "models--acme--Tiny-1B";
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "snapshots" / "aaa");
  fs::create_directories(repo / "snapshots" / "bbb");
  std::ofstream(repo / "refs" / "main") << "bbb\n";
  std::ofstream(repo / "snapshots" / "aaa" / "config.json")
      << Replace(kLlamaLike, "num_hidden_layers", "\"num_hidden_layers\": 2,");
  std::ofstream(repo / "snapshots" / "bbb" / "config.json") << kLlamaLike;
  {
    ScopedEnv env("HF_HUB_CACHE", (d.path() / "hub").string());
    EXPECT_EQ(HfHubCacheDir(), (d.path() / "hub").string());
    const ModelConfig m = LoadModel("acme/Tiny-1B", kModelsDir);
    EXPECT_EQ(m.name, "acme/Tiny-1B");
    EXPECT_EQ(m.num_layers, 4);  // refs/main's snapshot, not the other one
    EXPECT_NE(m.resolution_note.find("Hugging Face cache"), std::string::npos);
    EXPECT_NE(m.resolution_note.find((repo / "snapshots" / "bbb" / "config.json").string()), std::string::npos);
    // Without refs/main, two snapshots are ambiguous: the error lists both.
    fs::remove(repo / "refs" / "main");
    ExpectThrowWith<UsageError>([] { LoadModel("acme/Tiny-1B", kModelsDir); },
                                {"2 snapshots", "aaa/config.json", "bbb/config.json"});
  }
  {
    // HF_HOME/hub when HF_HUB_CACHE is unset.
    ScopedEnv home("HF_HOME", d.path().string());
    ScopedEnv none("HF_HUB_CACHE", "");
    EXPECT_EQ(HfHubCacheDir(), (d.path() / "hub").string());
    fs::remove_all(repo / "snapshots" / "aaa");
    EXPECT_EQ(LoadModel("acme/Tiny-1B", kModelsDir).num_layers, 4);  // the only snapshot
  }
}

TEST(LoadModel, PathToAConfigJsonFile) {
  TempDir d;
  d.Write("config.json", kLlamaLike);
  d.Write("hf_quant_config.json", R"({"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": null}})");
  const ModelConfig m = LoadModel((d.path() / "config.json").string(), kModelsDir);
  EXPECT_EQ(m.num_layers, 4);
  EXPECT_EQ(m.quant_algo, "nvfp4");  // the folder's hf_quant_config.json is read too
  EXPECT_EQ(m.resolution_note, "");
}

TEST(LoadModel, UnknownIdSuggestsTheClosest) {
  ExpectThrowWith<UsageError>(
      [] { LoadModel("meta-llama/Llama-3.1-70B-Instrct", kModelsDir); },
      {"did you mean meta-llama/Llama-3.1-70B-Instruct,", "aliases.yaml", "Hugging Face cache"});
  // Without an organization the names are compared.
  ExpectThrowWith<UsageError>([] { LoadModel("Qwen3-32B", kModelsDir); }, {"did you mean Qwen/Qwen3-32B,"});
  ExpectThrowWith<UsageError>([] { LoadModel("/no/such/dir/config.json", kModelsDir); },
                              {"'/no/such/dir/config.json' (no file or folder of that name"});
}

TEST(ParseHfConfig, ArchitectureAliasesMapOntoFamilies) {
  // Mistral is a Llama-shaped dense model (a global sliding window applies to every layer).
  std::string mistral = Replace(kLlamaLike, "architectures", "\"architectures\": [\"MistralForCausalLM\"],");
  mistral = Replace(mistral, "vocab_size", "\"vocab_size\": 32000, \"sliding_window\": 4096");
  const ModelConfig m = ParseHfConfig(mistral, "", "mistral/config.json");
  EXPECT_STREQ(FamilyOf(m).Name(), "dense");
  EXPECT_EQ(m.architecture, "MistralForCausalLM");
  EXPECT_EQ(m.layer_windows, std::vector<std::int64_t>(4, 4096));
}

// Every architecture of the dense and MoE families reads a Llama-shaped config
// (plus the expert keys for MoE) into its family, with its q/k norm.
TEST(ParseHfConfig, EveryFamilyArchitectureReadsALlamaShapedConfig) {
  int archs = 0;
  for (const char* family : {"dense", "moe"}) {
    const ModelFamily& fam = FindFamily(family);
    for (const Architecture& a : fam.Architectures()) {
      SCOPED_TRACE(a.name);
      std::string c = Replace(kLlamaLike, "architectures", "\"architectures\": [\"" + a.name + "\"],");
      if (fam.HasExperts())
        c = Replace(c, "vocab_size", "\"vocab_size\": 32000, \"num_local_experts\": 8, \"num_experts_per_tok\": 2");
      const ModelConfig m = ParseHfConfig(c, "", "a/config.json");
      EXPECT_EQ(m.architecture, a.name);
      EXPECT_EQ(&FamilyOf(m), &fam);
      EXPECT_EQ(m.qk_norm, a.qk_norm);
      EXPECT_EQ(m.num_shared_experts, a.implicit_shared_experts);
      ++archs;
    }
  }
  EXPECT_GE(archs, 14);
}

TEST(LoadModel, MiniMaxM25) {
  const ModelConfig m = LoadModel("MiniMaxAI/MiniMax-M2.5", kModelsDir);
  EXPECT_EQ(m.architecture, "MiniMaxM2ForCausalLM");
  EXPECT_STREQ(FamilyOf(m).Name(), "moe");
  EXPECT_TRUE(m.qk_norm);
  EXPECT_EQ(m.num_layers, 62);
  EXPECT_EQ(m.hidden_size, 3072);
  EXPECT_EQ(m.num_heads, 48);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.num_experts, 256);
  EXPECT_EQ(m.experts_per_token, 8);
  EXPECT_EQ(m.moe_intermediate_size, 1536);  // intermediate_size is the expert width
  EXPECT_EQ(m.shared_expert_intermediate_size, 0);
  EXPECT_EQ(m.vocab_size, 200064);
  EXPECT_EQ(m.layer_windows, std::vector<std::int64_t>(62, 0));
  EXPECT_EQ(m.quant.gemm, "fp8_block");
  EXPECT_EQ(m.quant.moe, "fp8_block");
}

TEST(LoadModel, Qwen3Coder480B) {
  const ModelConfig m = LoadModel("Qwen/Qwen3-Coder-480B-A35B-Instruct", kModelsDir);
  EXPECT_EQ(m.architecture, "Qwen3MoeForCausalLM");
  EXPECT_TRUE(m.qk_norm);
  EXPECT_EQ(m.num_layers, 62);
  EXPECT_EQ(m.hidden_size, 6144);
  EXPECT_EQ(m.num_heads, 96);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.num_experts, 160);
  EXPECT_EQ(m.experts_per_token, 8);
  EXPECT_EQ(m.moe_intermediate_size, 2560);
  EXPECT_EQ(m.vocab_size, 151936);
  EXPECT_EQ(m.quant.gemm, "bfloat16");
  EXPECT_EQ(m.quant.moe, "bfloat16");
}

// Llama-4 Scout: a multimodal wrapper read from text_config; one implicit shared
// expert; chunked-local attention on the RoPE layers (every 4th layer is global).
TEST(LoadModel, Llama4Scout) {
  const ModelConfig m = LoadModel("meta-llama/Llama-4-Scout-17B-16E-Instruct", kModelsDir);
  EXPECT_EQ(m.architecture, "Llama4ForConditionalGeneration");
  EXPECT_STREQ(FamilyOf(m).Name(), "moe");
  EXPECT_EQ(FamilyOf(m).Unsupported(m), "");
  EXPECT_TRUE(m.qk_norm);  // use_qk_norm: true
  EXPECT_EQ(m.num_layers, 48);
  EXPECT_EQ(m.hidden_size, 5120);
  EXPECT_EQ(m.num_heads, 40);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.num_experts, 16);
  EXPECT_EQ(m.experts_per_token, 1);
  EXPECT_EQ(m.moe_intermediate_size, 8192);
  EXPECT_EQ(m.num_shared_experts, 1);
  EXPECT_EQ(m.shared_expert_intermediate_size, 8192);
  EXPECT_EQ(m.moe_layer_interval, 1);
  EXPECT_EQ(m.attention_chunk, 8192);
  ASSERT_EQ(m.layer_windows.size(), 48u);
  for (std::size_t i = 0; i < 48; ++i) EXPECT_EQ(m.layer_windows[i], (i + 1) % 4 == 0 ? 0 : 8192) << i;
}

// Maverick alternates dense and MoE layers: the dense FFN is intermediate_size_mlp,
// the experts intermediate_size.
TEST(LoadModel, Llama4Maverick) {
  const ModelConfig m = LoadModel("meta-llama/Llama-4-Maverick-17B-128E-Instruct", kModelsDir);
  EXPECT_EQ(FamilyOf(m).Unsupported(m), "");
  EXPECT_FALSE(m.qk_norm);  // use_qk_norm: false
  EXPECT_EQ(m.num_experts, 128);
  EXPECT_EQ(m.moe_layer_interval, 2);
  EXPECT_EQ(m.intermediate_size, 16384);
  EXPECT_EQ(m.moe_intermediate_size, 8192);
  EXPECT_EQ(m.shared_expert_intermediate_size, 8192);
}

TEST(ParseHfConfig, ChunkedAttentionLayers) {
  // no_rope_layers (1 = RoPE = chunked) wins over the interval rule.
  std::string c = Replace(kLlamaLike, "vocab_size",
                          "\"vocab_size\": 32000, \"attention_chunk_size\": 256, \"no_rope_layers\": [0, 1, 1, 0]");
  EXPECT_EQ(ParseHfConfig(c, "", "c/config.json").layer_windows, (std::vector<std::int64_t>{0, 256, 256, 0}));
  c = Replace(kLlamaLike, "vocab_size",
              "\"vocab_size\": 32000, \"attention_chunk_size\": 256, \"no_rope_layer_interval\": 2");
  EXPECT_EQ(ParseHfConfig(c, "", "c/config.json").layer_windows, (std::vector<std::int64_t>{256, 0, 256, 0}));
  c = Replace(kLlamaLike, "vocab_size",
              "\"vocab_size\": 32000, \"attention_chunk_size\": 256, \"no_rope_layers\": [1, 1]");
  ExpectThrowWith<ConfigError>([&] { ParseHfConfig(c, "", "c/config.json"); },
                               {"c/config.json", "no_rope_layers", "has 2 entries", "num_hidden_layers = 4"});
  c = Replace(kLlamaLike, "vocab_size", "\"vocab_size\": 32000, \"use_qk_norm\": \"yes\"");
  ExpectThrowWith<ConfigError>([&] { ParseHfConfig(c, "", "c/config.json"); }, {"use_qk_norm", "true or false"});
}

TEST(LoadModel, DirectoryWithoutConfig) {
  TempDir d;
  ExpectThrowWith<UsageError>([&] { LoadModel(d.path().string(), kModelsDir); }, {"no config.json"});
}

// ---- parsing ----

TEST(ParseHfConfig, NumKvHeadsDefaultsToHeads) {
  for (const char* line : {"", "\"num_key_value_heads\": null,"}) {
    const ModelConfig m = ParseHfConfig(Replace(kLlamaLike, "num_key_value_heads", line), "", "t.json");
    EXPECT_EQ(m.num_kv_heads, 16);
    EXPECT_EQ(m.head_dim, 64);
  }
}

TEST(ParseHfConfig, HeadDimFallbacks) {
  const ModelConfig a =
      ParseHfConfig(Replace(kLlamaLike, "vocab_size", "\"vocab_size\": 32000, \"attention_head_dim\": 96"), "", "t");
  EXPECT_EQ(a.head_dim, 96);
  const ModelConfig b = ParseHfConfig(
      Replace(kLlamaLike, "vocab_size", "\"vocab_size\": 32000, \"head_dim\": 128, \"attention_head_dim\": 96"), "",
      "t");
  EXPECT_EQ(b.head_dim, 128);
}

TEST(ParseHfConfig, MultimodalReadsTextConfig) {
  const std::string cfg = R"({
    "architectures": ["SomeVisionForConditionalGeneration"],
    "vision_config": {"hidden_size": 1152},
    "text_config": {"model_type": "qwen3", "hidden_size": 2048, "intermediate_size": 6144,
                    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
                    "head_dim": 128, "vocab_size": 151936}
  })";
  const ModelConfig m = ParseHfConfig(cfg, "", "mm.json");
  EXPECT_EQ(m.architecture, "Qwen3ForCausalLM");
  EXPECT_STREQ(FamilyOf(m).Name(), "dense");
  EXPECT_TRUE(m.qk_norm);
  EXPECT_EQ(m.num_layers, 28);
  EXPECT_EQ(m.hidden_size, 2048);
  // A missing field is named with its text_config path.
  ExpectThrowWith<ConfigError>([&] { ParseHfConfig(Replace(cfg, "vocab_size", "\"x\": 1}"), "", "mm.json"); },
                               {"mm.json", "text_config.vocab_size", "missing"});
}

TEST(ParseHfConfig, Qwen2MoeSharedExpertWidth) {
  const std::string cfg = R"({
    "architectures": ["Qwen2MoeForCausalLM"], "hidden_size": 2048, "intermediate_size": 5632,
    "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632, "num_experts": 60,
    "num_experts_per_tok": 4, "num_attention_heads": 16, "num_hidden_layers": 24,
    "num_key_value_heads": 16, "vocab_size": 151936, "sliding_window": 32768, "use_sliding_window": false
  })";
  const ModelConfig m = ParseHfConfig(cfg, "", "q2.json");
  EXPECT_STREQ(FamilyOf(m).Name(), "moe");
  EXPECT_EQ(m.num_experts, 60);
  EXPECT_EQ(m.experts_per_token, 4);
  EXPECT_EQ(m.moe_intermediate_size, 1408);
  EXPECT_EQ(m.shared_expert_intermediate_size, 5632);
  EXPECT_EQ(m.num_shared_experts, 4);
  EXPECT_FALSE(m.qk_norm);
  EXPECT_EQ(m.layer_windows, std::vector<std::int64_t>(24, 0));  // use_sliding_window false
}

TEST(ParseHfConfig, GlobalSlidingWindow) {
  // No use_sliding_window key: the window applies to every layer (Mistral style).
  const ModelConfig a =
      ParseHfConfig(Replace(kLlamaLike, "vocab_size", "\"vocab_size\": 32000, \"sliding_window\": 4096"), "", "t");
  EXPECT_EQ(a.layer_windows, std::vector<std::int64_t>(4, 4096));
  // use_sliding_window true with max_window_layers 2: layers from 2 on slide (Qwen2 style).
  const ModelConfig b = ParseHfConfig(
      Replace(
          kLlamaLike, "vocab_size",
          "\"vocab_size\": 32000, \"sliding_window\": 4096, \"use_sliding_window\": true, \"max_window_layers\": 2"),
      "", "t");
  EXPECT_EQ(b.layer_windows, (std::vector<std::int64_t>{0, 0, 4096, 4096}));
}

TEST(ParseHfConfig, LayerTypesErrors) {
  ExpectThrowWith<ConfigError>(
      [] {
        ParseHfConfig(Replace(kLlamaLike, "vocab_size",
                              "\"vocab_size\": 32000, \"sliding_window\": 128, \"layer_types\": "
                              "[\"sliding_attention\", \"full_attention\"]"),
                      "", "w.json");
      },
      {"w.json", "layer_types", "2 entries", "num_hidden_layers = 4"});
  ExpectThrowWith<ConfigError>(
      [] {
        ParseHfConfig(Replace(kLlamaLike, "vocab_size",
                              "\"vocab_size\": 32000, \"layer_types\": "
                              "[\"sliding_attention\", \"full_attention\", \"full_attention\", \"full_attention\"]"),
                      "", "w.json");
      },
      {"w.json", "sliding_window", "missing"});
}

// ---- errors ----

TEST(ParseHfConfigErrors, MalformedJsonNamesLineAndPosition) {
  const std::string bad = "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"hidden_size\": 4096,,\n}";
  ExpectThrowWith<ConfigError>(
      [&] { ParseHfConfig(bad, "", "broken/config.json"); },
      {"broken/config.json:3", "malformed JSON at line 3, column 23 (byte 66)", "unexpected ','", "byte"});
}

TEST(ParseHfConfigErrors, MalformedHfQuantConfigNamesThatFile) {
  ExpectThrowWith<ConfigError>([] { ParseHfConfig(kLlamaLike, "{\"quantization\": ", "m/config.json"); },
                               {"m/hf_quant_config.json", "malformed JSON at line 1"});
}

TEST(ParseHfConfigErrors, MissingHiddenSizeNamesTheField) {
  ExpectThrowWith<ConfigError>([] { ParseHfConfig(Replace(kLlamaLike, "hidden_size", ""), "", "m/config.json"); },
                               {"m/config.json", "key 'hidden_size'", "missing key", "positive integer"});
}

TEST(ParseHfConfigErrors, WrongTypeAndNonPositive) {
  ExpectThrowWith<ConfigError>(
      [] { ParseHfConfig(Replace(kLlamaLike, "num_hidden_layers", "\"num_hidden_layers\": \"32\","), "", "c.json"); },
      {"c.json", "num_hidden_layers", "wrong type: string", "an integer"});
  ExpectThrowWith<ConfigError>(
      [] { ParseHfConfig(Replace(kLlamaLike, "intermediate_size", "\"intermediate_size\": 0,"), "", "c.json"); },
      {"c.json", "intermediate_size", "not positive"});
  ExpectThrowWith<ConfigError>(
      [] { ParseHfConfig(Replace(kLlamaLike, "num_key_value_heads", "\"num_key_value_heads\": 3,"), "", "c.json"); },
      {"c.json", "num_key_value_heads", "does not divide"});
  ExpectThrowWith<ConfigError>([] { ParseHfConfig("[1, 2]", "", "c.json"); }, {"c.json", "a JSON object"});
}

TEST(ParseHfConfigErrors, UnknownArchitectureListsSupported) {
  ExpectThrowWith<ConfigError>(
      [] {
        ParseHfConfig(Replace(kLlamaLike, "architectures", "\"architectures\": [\"FancyNetForCausalLM\"],"), "",
                      "f/config.json");
      },
      {"f/config.json", "architectures", "FancyNetForCausalLM", "LlamaForCausalLM", "Qwen3MoeForCausalLM",
       "GptOssForCausalLM", "DeepseekV3ForCausalLM"});
  ExpectThrowWith<ConfigError>([] { ParseHfConfig(Replace(kLlamaLike, "architectures", ""), "", "f.json"); },
                               {"f.json", "architectures", "missing"});
}

TEST(ParseHfConfigErrors, MoeWithoutExperts) {
  ExpectThrowWith<ConfigError>(
      [] {
        ParseHfConfig(Replace(kLlamaLike, "architectures", "\"architectures\": [\"MixtralForCausalLM\"],"), "",
                      "x.json");
      },
      {"x.json", "num_local_experts", "n_routed_experts"});
}

// ---- quantization ----

ModelConfig WithQuant(const std::string& qc, const std::string& arch = "LlamaForCausalLM",
                      const std::string& extra = "") {
  std::string cfg = Replace(kLlamaLike, "architectures", "\"architectures\": [\"" + arch + "\"],");
  cfg = Replace(cfg, "vocab_size", "\"vocab_size\": 32000, \"quantization_config\": " + qc + extra);
  return ParseHfConfig(cfg, "", "q/config.json");
}

TEST(QuantInference, Fp8DynamicAndStatic) {
  const ModelConfig d = WithQuant(R"({"quant_method": "fp8", "activation_scheme": "dynamic"})");
  EXPECT_EQ(d.quant_algo, "fp8");
  EXPECT_TRUE(d.dynamic_activations);
  EXPECT_EQ(d.quant, (QuantConfig{"fp8", "fp8", "fp8", "fp8", "half"}));
  const ModelConfig s = WithQuant(R"({"quant_method": "fp8", "activation_scheme": "static"})");
  EXPECT_FALSE(s.dynamic_activations);
  EXPECT_EQ(s.quant, (QuantConfig{"fp8_static", "fp8", "fp8", "fp8", "half"}));
}

TEST(QuantInference, KvOnlyFp8SetsFmha) {
  const ModelConfig m = ParseHfConfig(
      kLlamaLike, R"({"quantization": {"quant_algo": null, "kv_cache_quant_algo": "FP8"}})", "k/config.json");
  EXPECT_EQ(m.quant_algo, "");
  EXPECT_EQ(m.quant, (QuantConfig{"bfloat16", "bfloat16", "fp8", "fp8", "half"}));
}

TEST(QuantInference, HfQuantConfigWinsOverQuantizationConfig) {
  std::string cfg = Replace(kLlamaLike, "vocab_size",
                            "\"vocab_size\": 32000, \"quantization_config\": {\"quant_method\": \"mxfp4\"}");
  const ModelConfig m = ParseHfConfig(cfg, R"({"quantization": {"quant_algo": "FP8"}})", "h/config.json");
  EXPECT_EQ(m.quant_algo, "fp8");
  EXPECT_EQ(m.quant.gemm, "fp8_static");
}

TEST(QuantInference, CompressedTensorsFp8) {
  const std::string qc = R"({"quant_method": "compressed-tensors", "format": "float-quantized",
      "config_groups": {"group_0": {"targets": ["Linear"],
        "weights": {"type": "float", "num_bits": 8, "strategy": "channel", "dynamic": false},
        "input_activations": {"type": "float", "num_bits": 8, "strategy": "token", "dynamic": true}}},
      "ignore": ["lm_head", "re:.*mlp.gate$"]})";
  const ModelConfig m = WithQuant(qc, "Qwen3MoeForCausalLM",
                                  ", \"num_experts\": 8, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 512");
  EXPECT_EQ(m.quant_algo, "fp8");
  EXPECT_TRUE(m.dynamic_activations);
  EXPECT_EQ(m.quant, (QuantConfig{"fp8", "fp8", "fp8", "fp8", "half"}));
}

TEST(QuantInference, CompressedTensorsIgnoredExpertsAndKvScheme) {
  const std::string qc = R"({"quant_method": "compressed-tensors",
      "config_groups": {"g": {"weights": {"type": "float", "num_bits": 8, "strategy": "block",
                                          "block_structure": [128, 128]},
                              "input_activations": {"type": "float", "num_bits": 8, "dynamic": true}}},
      "ignore": ["re:.*mlp.experts.*"], "kv_cache_scheme": {"type": "float", "num_bits": 8}})";
  const ModelConfig m = WithQuant(qc, "MixtralForCausalLM", ", \"num_local_experts\": 8, \"num_experts_per_tok\": 2");
  EXPECT_EQ(m.quant_algo, "fp8_block");
  EXPECT_EQ(m.quant.gemm, "fp8_block");
  EXPECT_EQ(m.quant.moe, "bfloat16");
  EXPECT_EQ(m.quant.kv, "fp8");
  EXPECT_EQ(m.quant.fmha, "fp8");
}

TEST(QuantInference, CompressedTensorsInt4WeightOnly) {
  const ModelConfig m = WithQuant(R"({"quant_method": "compressed-tensors",
      "config_groups": {"g": {"weights": {"type": "int", "num_bits": 4, "strategy": "group"}}}})");
  EXPECT_EQ(m.quant_algo, "int4_wo");
  EXPECT_EQ(m.quant, (QuantConfig{"int4_wo", "int4_wo", "bfloat16", "bfloat16", "half"}));
}

// Kimi-K2.5's checkpoint: int4 group-32 weights on every Linear except the ones its
// ignore list names (attention, shared experts, the dense layers' MLP): the routed
// experts are int4 weight-only, every GEMM bf16. Without the shared experts in the
// list the GEMM class stays quantized.
TEST(QuantInference, CompressedTensorsInt4RoutedExpertsOnly) {
  const std::string extra = ", \"num_experts\": 8, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 512";
  const std::string scheme = R"("config_groups": {"g": {"weights": {"type": "int", "num_bits": 4, "strategy": "group",
      "group_size": 32, "symmetric": true}}})";
  const ModelConfig m = WithQuant(R"({"quant_method": "compressed-tensors", )" + scheme +
                                      R"(, "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                                         "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"]})",
                                  "Qwen3MoeForCausalLM", extra);
  EXPECT_EQ(m.quant_algo, "int4_wo");
  EXPECT_EQ(m.quant.gemm, "bfloat16");
  EXPECT_EQ(m.quant.moe, "int4_wo");
  const ModelConfig partial = WithQuant(R"({"quant_method": "compressed-tensors", )" + scheme +
                                            R"(, "ignore": ["re:.*self_attn.*", "re:.*mlp\\.down_proj.*"]})",
                                        "Qwen3MoeForCausalLM", extra);
  EXPECT_EQ(partial.quant.gemm, "int4_wo");
  EXPECT_EQ(partial.quant.moe, "int4_wo");
}

TEST(QuantInference, UnsupportedSchemesNameTheField) {
  ExpectThrowWith<ConfigError>(
      [] {
        WithQuant(R"({"quant_method": "compressed-tensors", "config_groups": {
            "a": {"weights": {"type": "int", "num_bits": 4}}, "b": {"weights": {"type": "int", "num_bits": 8}}}})");
      },
      {"q/config.json", "quantization_config.config_groups", "2 config groups", "not supported"});
  ExpectThrowWith<ConfigError>(
      [] { WithQuant(R"({"quant_method": "gptq", "bits": 4})"); },
      {"q/config.json", "quantization_config.quant_method", "'gptq'", "not supported", "mxfp4"});
  ExpectThrowWith<ConfigError>(
      [] { ParseHfConfig(kLlamaLike, R"({"quantization": {"quant_algo": "W4A8_AWQ"}})", "m/config.json"); },
      {"m/hf_quant_config.json", "quantization.quant_algo", "'w4a8_awq'", "not supported"});
  ExpectThrowWith<ConfigError>(
      [] { ParseHfConfig(kLlamaLike, R"({"quantization": {"kv_cache_quant_algo": "NVFP4"}})", "m/config.json"); },
      {"m/hf_quant_config.json", "kv_cache_quant_algo", "not supported"});
}

TEST(QuantOverrides, SetAndNoted) {
  ModelConfig m = LoadModel("Qwen/Qwen3-32B-FP8", kModelsDir);
  QuantOverrides o;
  o.gemm = "fp8";
  o.kv = "bfloat16";
  o.comm = "fp8";
  ApplyQuantOverrides(m, o);
  EXPECT_EQ(m.quant, (QuantConfig{"fp8", "fp8_block", "bfloat16", "fp8", "fp8"}));
  ASSERT_GE(m.quant_notes.size(), 3u);
  EXPECT_NE(m.quant_notes[m.quant_notes.size() - 3].find("gemm fp8: user override (--gemm-quant, inferred fp8_block)"),
            std::string::npos)
      << m.quant_notes[m.quant_notes.size() - 3];
}

TEST(QuantOverrides, BadNameListsValidOnesAndChangesNothing) {
  ModelConfig m = LoadModel("meta-llama/Meta-Llama-3.1-8B", kModelsDir);
  QuantOverrides o;
  o.gemm = "fp8";
  o.moe = "int8_wo";  // not a MoE mode
  ExpectThrowWith<UsageError>([&] { ApplyQuantOverrides(m, o); },
                              {"--moe-quant", "'int8_wo'", "w4a16_mxfp4", "fp8_block", "bfloat16"});
  EXPECT_EQ(m.quant.gemm, "bfloat16");
  QuantOverrides k;
  k.kv = "fp4";
  ExpectThrowWith<UsageError>([&] { ApplyQuantOverrides(m, k); }, {"--kv-quant", "bfloat16, fp8, int8"});
  QuantOverrides f;
  f.fmha = "nvfp4";
  ExpectThrowWith<UsageError>([&] { ApplyQuantOverrides(m, f); }, {"--fmha-quant", "bfloat16, fp8, fp8_block"});
}

}  // namespace
}  // namespace servecast::model
