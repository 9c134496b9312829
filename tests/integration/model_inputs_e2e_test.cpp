// Bad model configs and engine profiles, end to end on the real binary
// (issue 28 item 6): each is refused with exit 2 and a message naming the file
// and the key, where before it was read silently (a repeated key kept its last
// value, an empty hf_quant_config.json meant bf16, a 10^12 hidden size
// overflowed, a block size the tables do not have was ignored, a profile for
// another engine or without a tp-1 bucket was used).

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/fs.h"
#include "process.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;
const std::string kBinary = SERVECAST_BIN;
const std::string kSrc = SERVECAST_SOURCE_DIR;

std::string Describe(const ProcessResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out + "\n--- stderr\n" + r.err;
}

// The golden tiny dense model with `body` spliced into its config.json (after
// the opening brace), and `hf_quant` as hf_quant_config.json when given.
std::string TinyModel(const std::string& dir, const std::string& body, const std::string* hf_quant = nullptr) {
  fs::create_directories(dir);
  WriteText(dir + "/config.json", "{" + body + R"("architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2,
  "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 1024,
  "vocab_size": 1024})");
  if (hf_quant) WriteText(dir + "/hf_quant_config.json", *hf_quant);
  return dir;
}

ProcessResult Estimate(const std::string& model, const std::string& engines = "engines") {
  return RunProcess(
      {kBinary, "estimate", "--model", model, "--system", "tiny_gpu", "--systems", "tests/goldens/systems", "--engines",
       engines, "--data-root", "tests/goldens/data", "--data", "dense/1", "--isl", "64", "--osl", "8"},
      120, kSrc);
}

void ExpectRefused(const ProcessResult& r, const std::vector<std::string>& words) {
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  for (const std::string& w : words) EXPECT_NE(r.err.find(w), std::string::npos) << "no '" << w << "' in: " << r.err;
}

TEST(ModelInputsE2E, TheGoodTinyModelEstimates) {
  const std::string dir = MakeTempDir("sc_model_ok_");
  const ProcessResult r = Estimate(TinyModel(dir + "/m", R"("hidden_size": 512, )"));
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  fs::remove_all(dir);
}

TEST(ModelInputsE2E, RepeatedJsonKeyIsRefused) {
  const std::string dir = MakeTempDir("sc_model_dup_");
  ExpectRefused(Estimate(TinyModel(dir + "/m", R"("hidden_size": 512, "hidden_size": 4096, )")),
                {"config.json", "hidden_size", "more than once"});
  fs::remove_all(dir);
}

TEST(ModelInputsE2E, AbsurdSizeIsRefusedNotOverflowed) {
  const std::string dir = MakeTempDir("sc_model_big_");
  ExpectRefused(Estimate(TinyModel(dir + "/m", R"("hidden_size": 1000000000000, )")),
                {"config.json", "hidden_size", "implausibly large"});
  fs::remove_all(dir);
}

// A number beyond a double's range was an "internal error" (exit 1) before; found
// by the fuzz run (FuzzE2E.ModelConfigJson).
TEST(ModelInputsE2E, ANumberBeyondADoubleIsRefusedWithItsLine) {
  const std::string dir = MakeTempDir("sc_model_huge_");
  const ProcessResult r = Estimate(TinyModel(dir + "/m", "\n\"hidden_size\": 1e99999, "));
  ExpectRefused(r, {dir + "/m/config.json:2: number overflow parsing '1e99999'; expected numbers within a double's range"});
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

TEST(ModelInputsE2E, UnknownWeightDtypeIsRefused) {
  const std::string dir = MakeTempDir("sc_model_dtype_");
  ExpectRefused(Estimate(TinyModel(dir + "/m", R"("hidden_size": 512, "torch_dtype": "int3", )")),
                {"config.json", "torch_dtype", "int3"});
  fs::remove_all(dir);
}

TEST(ModelInputsE2E, EmptyOrIncompleteHfQuantConfigIsRefused) {
  const std::string dir = MakeTempDir("sc_model_hfq_");
  const std::string empty = "\n";
  ExpectRefused(Estimate(TinyModel(dir + "/empty", R"("hidden_size": 512, )", &empty)),
                {"hf_quant_config.json", "empty file"});
  const std::string nothing = R"({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": null}})";
  ExpectRefused(Estimate(TinyModel(dir + "/nothing", R"("hidden_size": 512, )", &nothing)),
                {"hf_quant_config.json", "quantization", "names no quantization"});
  fs::remove_all(dir);
}

TEST(ModelInputsE2E, UnsupportedBlockSizeIsRefused) {
  const std::string dir = MakeTempDir("sc_model_block_");
  const std::string qc =
      R"("hidden_size": 512, "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic",
      "weight_block_size": [64, 64]}, )";
  ExpectRefused(Estimate(TinyModel(dir + "/m", qc)), {"config.json", "weight_block_size", "[128, 128]"});
  fs::remove_all(dir);
}

// A copy of engines/ with trtllm.yaml edited.
std::string Engines(const std::string& dir, const std::string& from, const std::string& to) {
  fs::create_directories(dir);
  for (const char* e : {"trtllm", "vllm", "sglang"})
    fs::copy_file(kSrc + "/engines/" + e + ".yaml", dir + "/" + e + ".yaml");
  std::string text = ReadFile(dir + "/trtllm.yaml");
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  WriteText(dir + "/trtllm.yaml", text);
  return dir;
}

TEST(ModelInputsE2E, BadEngineProfilesAreRefused) {
  const std::string dir = MakeTempDir("sc_engines_");
  const std::string model = "tests/goldens/models/tiny-dense";
  ExpectRefused(Estimate(model, Engines(dir + "/other", "engine: trtllm", "engine: vllm")),
                {"trtllm.yaml", "the profile is for vllm"});
  ExpectRefused(Estimate(model, Engines(dir + "/bucket", "dense: {1: 11, ", "dense: {")),
                {"trtllm.yaml", "activation_coefficients.dense", "no tp bucket 1"});
  ExpectRefused(Estimate(model, Engines(dir + "/dup", "  activation_factor: 1.0\n",
                                        "  activation_factor: 1.0\n  activation_factor: 2.0\n")),
                {"trtllm.yaml", "memory.activation_factor", "more than once"});
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servecast::testing
