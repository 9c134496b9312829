// A toy model family added the way docs/extending.md says ("Add a model
// family"): one ModelFamily subclass, one registration, a config folder. The
// test then drives it through config reading, parallel rules, the search's
// enumeration, the deployment facade and a static estimate on the golden data,
// so the promise that a family is one file cannot rot.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/family.h"
#include "model/model_config.h"
#include "model/op_builder.h"
#include "model/ops.h"
#include "search/search.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "serve/session.h"
#include "serve/static.h"
#include "system/system_spec.h"

namespace servecast::model {
namespace {

namespace fs = std::filesystem;
const std::string kSource = SERVECAST_SOURCE_DIR;

// GPT-J-style parallel blocks: attention and FFN read the same normalized input,
// so a layer has one norm where the dense family has two. It also reads one
// field of its own (`toy_ffn_groups`) and caps tensor parallelism at 4.
class ToyParallelFamily final : public ModelFamily {
 public:
  const char* Name() const override { return "toy_parallel"; }
  std::vector<Architecture> Architectures() const override {
    return {{"ToyParallelForCausalLM", "toy_parallel", false}};
  }
  void ReadConfig(const ConfigFields& f, ModelConfig& m) const override {
    const std::int64_t groups = f.Required("toy_ffn_groups");
    if (m.intermediate_size % groups != 0)
      f.Fail("toy_ffn_groups", "does not divide intermediate_size", "a divisor of intermediate_size");
  }
  bool HasExperts() const override { return false; }
  void ValidateParallel(const ModelConfig& m, const ParallelConfig& p, Engine e) const override {
    (void)e;
    Require(p.dp == 1, "toy_parallel: no attention data parallelism");
    Require(m.intermediate_size % p.tp == 0, "toy_parallel: tp must divide the FFN");
  }
  SearchKnobs Knobs() const override { return {4, false, false}; }
  std::vector<Op> BuildPhase(const ModelConfig& m, const ParallelConfig& p, const OpListOptions& o, bool context,
                             double phase_scale) const override {
    (void)o;
    const double layers = static_cast<double>(m.num_layers) * phase_scale;
    PhaseBuilder b(context ? "context" : "generation", layers);
    const std::int64_t H = m.hidden_size, I = m.intermediate_size / p.tp;
    AddAttentionBlock(b, m, p, context, phase_scale);
    b.Gemm("gate_ffn1_gemm", 2 * I, H, m.quant.gemm, layers);
    b.Elementwise("act_gate", 2 * I, I, "silu_and_mul", I);
    b.Gemm("ffn2_gemm", H, I, m.quant.gemm, layers);
    if (p.tp > 1) b.AllReduce("ar", p.tp, H, m.quant.comm, layers);  // one reduction for both branches
    AddLogits(b, m, p, context, phase_scale);
    AddTail(b, m, p, phase_scale);
    return b.Take();
  }
  const char* ActivationKey() const override { return "dense"; }
};

// The registration line (in the product: one line in model/family.cpp).
const bool kRegistered = [] {
  AddFamily(std::make_unique<ToyParallelFamily>());
  return true;
}();

// The golden tiny-dense config with the toy architecture and its own field.
std::string WriteToyConfig(const std::string& extra) {
  const fs::path dir = fs::path(testing::TempDir()) / ("toy_parallel" + std::to_string(extra.size()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"architectures": ["ToyParallelForCausalLM"], "num_hidden_layers": 2,
    "hidden_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
    "intermediate_size": 1024, "vocab_size": 1024)"
                                     << extra << "}";
  return dir.string();
}

std::vector<std::string> Names(const std::vector<Op>& ops) {
  std::vector<std::string> out;
  for (const Op& op : ops) out.push_back(op.name);
  return out;
}

TEST(ToyFamily, IsFoundByArchitectureAndReadsItsOwnField) {
  ASSERT_TRUE(kRegistered);
  const ModelConfig m = LoadModel(WriteToyConfig(R"(, "toy_ffn_groups": 4)"), kSource + "/models");
  EXPECT_STREQ(FamilyOf(m).Name(), "toy_parallel");
  EXPECT_EQ(m.architecture, "ToyParallelForCausalLM");
  EXPECT_NE(AcceptedArchitectures().find("ToyParallelForCausalLM"), std::string::npos);
  try {
    LoadModel(WriteToyConfig(""), kSource + "/models");
    FAIL() << "a config without toy_ffn_groups loaded";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("toy_ffn_groups"), std::string::npos) << what;
    EXPECT_NE(what.find("config.json"), std::string::npos) << what;
  }
}

TEST(ToyFamily, BuildsItsOpListAndRulesReachTheSearch) {
  const ModelConfig m = LoadModel(WriteToyConfig(R"(, "toy_ffn_groups": 4)"), kSource + "/models");
  const OpList ops = BuildOpList(m, {.tp = 2}, {});
  EXPECT_EQ(Names(ops.context), (std::vector<std::string>{
                                    "context_embedding", "context_add_norm_1", "context_qkv_gemm", "context_attention",
                                    "context_proj_gemm", "context_gate_ffn1_gemm", "context_act_gate",
                                    "context_ffn2_gemm", "context_ar", "context_logits_gemm", "context_embedding_ar"}));
  EXPECT_DOUBLE_EQ(KvElemsPerToken(m, {.tp = 2}), 1 * 64 * 2 * 2);  // the default GQA rule
  EXPECT_THROW(BuildOpList(m, {.tp = 2, .dp = 2}, {}), UsageError);
  // The search enumerates from the family's knobs: tp <= 4, no dp, no experts.
  std::vector<int> tps;
  for (const ParallelConfig& p : search::EnumerateParallel(m, Engine::kTrtllm, 8)) {
    EXPECT_EQ(p.dp, 1);
    EXPECT_EQ(p.moe_ep, 1);
    tps.push_back(p.tp);
  }
  EXPECT_EQ(tps, (std::vector<int>{1, 2, 4}));
}

// Estimated on the golden tables through the deployment facade: the toy layer is
// the dense layer less its second norm, so its prefill costs the dense prefill
// less that norm's share (same shapes, same tables, same engine).
TEST(ToyFamily, EstimatesThroughTheDeployment) {
  const systems::SystemSpec spec = systems::LoadSystemByName(kSource + "/tests/goldens/systems", "tiny_gpu");
  serve::DatabaseOptions dbo;
  dbo.roots = {kSource + "/tests/goldens/data"};
  dbo.backend = "dense";
  dbo.version = "1";
  const serve::EngineProfile engine = serve::LoadEngineProfileByName(kSource + "/engines", Engine::kTrtllm);
  serve::Workload w;
  w.batch = 2;
  w.isl = 256;
  w.osl = 8;
  const OpListOptions oo = serve::OpOptionsFor(Engine::kTrtllm, spec);
  auto estimate = [&](const std::string& dir) {
    serve::Deployment d(LoadModel(dir, kSource + "/models"), spec);
    d.OpenData(dbo, d.Needs({ParallelConfig{}}, oo));
    return serve::RunStatic(d.model(), {}, d.Ops({}, oo), d.db(), engine, w);
  };
  const serve::StaticEstimate toy = estimate(WriteToyConfig(R"(, "toy_ffn_groups": 4)"));
  const serve::StaticEstimate dense = estimate(kSource + "/tests/goldens/models/tiny-dense");
  ASSERT_GT(toy.ttft_ms, 0);
  double norm_2 = 0;
  for (const serve::OpLine& op : dense.context.ops)
    if (op.name == "context_add_norm_2") norm_2 = op.latency_ms;
  ASSERT_GT(norm_2, 0);
  EXPECT_NEAR(toy.context.latency_ms, dense.context.latency_ms - norm_2, 1e-9 * dense.context.latency_ms);
  EXPECT_EQ(toy.context.ops.size() + 1, dense.context.ops.size());
}

TEST(FamilyRegistry, RefusesTakenNamesAndArchitectures) {
  class Copy final : public ModelFamily {
   public:
    explicit Copy(const char* name, const char* arch) : name_(name), arch_(arch) {}
    const char* Name() const override { return name_; }
    std::vector<Architecture> Architectures() const override { return {{arch_, "", false}}; }
    void ReadConfig(const ConfigFields&, ModelConfig&) const override {}
    bool HasExperts() const override { return false; }
    void ValidateParallel(const ModelConfig&, const ParallelConfig&, Engine) const override {}
    SearchKnobs Knobs() const override { return {}; }
    std::vector<Op> BuildPhase(const ModelConfig&, const ParallelConfig&, const OpListOptions&, bool,
                               double) const override {
      return {};
    }
    const char* ActivationKey() const override { return "dense"; }

   private:
    const char* name_;
    const char* arch_;
  };
  EXPECT_THROW(AddFamily(std::make_unique<Copy>("dense", "SomethingNewForCausalLM")), Error);
  EXPECT_THROW(AddFamily(std::make_unique<Copy>("another", "LlamaForCausalLM")), Error);
  EXPECT_THROW(FindFamily("no_such_family"), Error);
  for (const char* name : {"dense", "moe", "deepseek"}) EXPECT_STREQ(FindFamily(name).Name(), name);
}

}  // namespace
}  // namespace servecast::model
