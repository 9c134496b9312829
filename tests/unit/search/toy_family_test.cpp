// A toy model family added the way docs/extending.md says ("Add a model
// family"): one ModelFamily subclass, one registration, a config folder. The
// test then drives it through config reading, parallel rules, the search's
// enumeration, the deployment facade and a static estimate on the golden data,
// so the promise that a family is one file cannot rot. Its layer also reads the
// toy table (tests/support/toy_op.cpp) through the generic declared-table path:
// one op of kind kTable, and the declaration, are all that takes ("Add a table").

#include <gtest/gtest.h>

#include <algorithm>
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
#include "perfdb/perf_database.h"
#include "perfdb/sol.h"
#include "search/search.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "serve/session.h"
#include "serve/static.h"
#include "system/system_spec.h"
#include "tables/table_spec.h"
#include "toy_op.h"

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
    // A residual y = a x + y over the layer's hidden state, costed from the toy
    // table's rows: n = tokens x hidden (the declared axis n reads the tokens).
    Op& axpy = b.Add("residual_axpy", OpKind::kTable, layers);
    axpy.table = "toy_axpy_perf";
    axpy.table_key = {{"dtype", std::string("float32")}};
    axpy.table_axis_scale = static_cast<double>(H);
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
  servecast::testing::MakeToyAxpyOp();  // declares toy_axpy_perf (the toy op's registration does the same)
  return true;
}();

// The running test's name: each test writes its own files (ctest runs the tests
// of this binary in parallel processes).
std::string TestName() {
  return ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

// The golden tiny-dense config with the toy architecture and its own field.
std::string WriteToyConfig(const std::string& extra) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("toy_parallel" + std::to_string(extra.size()) + "_" + TestName());
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
  EXPECT_EQ(
      Names(ops.context),
      (std::vector<std::string>{"context_embedding", "context_add_norm_1", "context_qkv_gemm", "context_attention",
                                "context_proj_gemm", "context_gate_ffn1_gemm", "context_act_gate", "context_ffn2_gemm",
                                "context_residual_axpy", "context_ar", "context_logits_gemm", "context_embedding_ar"}));
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

// A fixture toy_axpy_perf (as the toy op writes it: the declaration's columns)
// in a data root of its own, beside the golden tables: tiny_gpu/toy/dense/1.
std::string WriteToyTableRoot() {
  const fs::path root = fs::path(::testing::TempDir()) / ("toy_axpy_root_" + TestName());
  const fs::path dir = root / "tiny_gpu" / "toy" / "dense" / "1";
  fs::create_directories(dir);
  std::string header;
  for (const auto& c : tables::GetTableSpec("toy_axpy_perf").AllColumns(false))
    header += (header.empty() ? "" : ",") + c.name;
  std::ofstream out(dir / "toy_axpy_perf.csv");
  out << header << "\n";
  for (const auto& [n, ms] : std::vector<std::pair<int, double>>{{1024, 0.001}, {65536, 0.01}, {1048576, 0.1}})
    out << "servecast,0.1,tiny,toy_axpy,test:toy_axpy,float32," << n << "," << ms << "," << ms << "," << ms
        << ",10,0.01,cpu_steady,warm,0,0,0\n";
  return root.string();
}

const serve::OpLine* FindOp(const serve::PhaseEstimate& phase, const std::string& name) {
  for (const serve::OpLine& op : phase.ops)
    if (op.name == name) return &op;
  return nullptr;
}

struct ToyEstimate {
  systems::SystemSpec spec = systems::LoadSystemByName(kSource + "/tests/goldens/systems", "tiny_gpu");
  serve::EngineProfile engine = serve::LoadEngineProfileByName(kSource + "/engines", Engine::kTrtllm);
  serve::Workload w;
  ToyEstimate() {
    w.batch = 2;
    w.isl = 256;
    w.osl = 8;
  }
  serve::StaticEstimate Run(const std::string& dir, const std::vector<std::string>& roots,
                            perfdb::DatabaseMode mode = perfdb::DatabaseMode::kSilicon) const {
    serve::DatabaseOptions dbo;
    dbo.roots = roots;
    dbo.backend = "dense";
    dbo.version = "1";
    dbo.mode = mode;
    const OpListOptions oo = serve::OpOptionsFor(Engine::kTrtllm, spec);
    serve::Deployment d(LoadModel(dir, kSource + "/models"), spec);
    d.OpenData(dbo, d.Needs({ParallelConfig{}}, oo));
    return serve::RunStatic(d.model(), {}, d.Ops({}, oo), d.db(), engine, w);
  }
};

// Estimated on the golden tables through the deployment facade: the toy layer is
// the dense layer less its second norm plus the residual axpy, so its prefill
// costs the dense prefill less that norm's share plus the axpy's, read from the
// toy table's rows (same shapes, same tables, same engine).
TEST(ToyFamily, EstimatesThroughTheDeployment) {
  const ToyEstimate e;
  const std::string golden = kSource + "/tests/goldens/data";
  const serve::StaticEstimate toy = e.Run(WriteToyConfig(R"(, "toy_ffn_groups": 4)"), {golden, WriteToyTableRoot()});
  const serve::StaticEstimate dense = e.Run(kSource + "/tests/goldens/models/tiny-dense", {golden});
  ASSERT_GT(toy.ttft_ms, 0);
  const serve::OpLine* norm_2 = FindOp(dense.context, "context_add_norm_2");
  const serve::OpLine* axpy = FindOp(toy.context, "context_residual_axpy");
  ASSERT_NE(norm_2, nullptr);
  ASSERT_NE(axpy, nullptr);
  ASSERT_GT(norm_2->latency_ms, 0);
  // n = 2 x 256 tokens x 512 = 262144, a fifth of the way from the 65536 row
  // (0.01 ms) to the 1048576 row (0.1 ms): 0.028 ms per layer, 2 layers.
  EXPECT_EQ(axpy->kind, OpKind::kTable);
  EXPECT_EQ(axpy->source, "interpolated");
  EXPECT_NEAR(axpy->latency_ms, 2 * 0.028, 1e-12);
  EXPECT_NE(axpy->detail.find("toy_axpy_perf: {dtype=float32, n=262144}"), std::string::npos) << axpy->detail;
  EXPECT_NEAR(toy.context.latency_ms, dense.context.latency_ms - norm_2->latency_ms + axpy->latency_ms,
              1e-9 * dense.context.latency_ms);
  EXPECT_EQ(toy.context.ops.size(), dense.context.ops.size());
  // Decode: 2 rows x 512 = 1024 elements, the measured row itself.
  const serve::OpLine* gen = FindOp(toy.generation, "generation_residual_axpy");
  ASSERT_NE(gen, nullptr);
  EXPECT_EQ(gen->source, "silicon");
}

// SOL mode reads no table: the declared roofline (the toy's cost, 12 bytes per
// element on tiny_gpu's memory bandwidth) at the same key.
TEST(ToyFamily, SolModeCostsTheDeclaredRoofline) {
  const ToyEstimate e;
  const serve::StaticEstimate toy = e.Run(WriteToyConfig(R"(, "toy_ffn_groups": 4)"), {}, perfdb::DatabaseMode::kSol);
  const serve::OpLine* axpy = FindOp(toy.context, "context_residual_axpy");
  ASSERT_NE(axpy, nullptr);
  EXPECT_EQ(axpy->source, "sol");
  const double n = 2 * 256 * 512;
  const double math_ms = 1e3 * 2 * n / e.spec.gpu.peak_flops_per_s.at("float32");
  const double mem_ms = 1e3 * 12 * n / e.spec.gpu.mem_bw_bytes_per_s;
  EXPECT_DOUBLE_EQ(axpy->latency_ms, 2 * std::max(math_ms, mem_ms));
  EXPECT_DOUBLE_EQ(axpy->sol_ms, axpy->latency_ms);
}

// Without the toy table, SILICON names the table the op needs; HYBRID cannot
// fall back on a table that is absent either.
TEST(ToyFamily, SiliconWithoutTheTableNamesIt) {
  const ToyEstimate e;
  const std::string dir = WriteToyConfig(R"(, "toy_ffn_groups": 4)");
  try {
    e.Run(dir, {kSource + "/tests/goldens/data"});
    FAIL() << "estimated without toy_axpy_perf";
  } catch (const perfdb::MissingDataError& miss) {
    EXPECT_NE(std::string(miss.what()).find("toy_axpy_perf is not in the data source"), std::string::npos)
        << miss.what();
  }
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
