// The shipped DSA module case plans (cases/base_ops/dsa_{context,generation}_module.yaml)
// against the cuda ops' declarations: their counts, that both phases cover the same
// (architecture, gemm, KV dtype, local heads) for each bundled DSA model at tp 1..16
// (the keys the estimator reads), and the decode plan's cache-size limit.

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "collect/plan.h"
#include "collect_test_util.h"
#include "core/fs.h"
#include "tables/table_spec.h"

namespace servecast::collect {
namespace {

using namespace servecast::collect::testing;

// A cuda DSA op's declaration (parameters, table), without its kernels.
class DsaTestOp : public Op {
 public:
  explicit DsaTestOp(std::string phase) : phase_(std::move(phase)) {}
  std::string name() const override { return "dsa_" + phase_ + "_module"; }
  const TableSpec& table() const override { return *FindTableSpec("dsa_" + phase_ + "_module_perf"); }
  std::vector<std::string> required_params() const override {
    return {"model", "architecture", "mla_dtype", "kv_cache_dtype", "gemm_type", "num_heads",
            "batch_size", "isl", "tp_size", "step"};
  }
  CaseResult Run(const Case&, const RunContext&) override {
    return CaseResult::Failure(Disposition::kFailed, FailureClass::kCollectorBug, "TestOp", "test ops do not run");
  }

 private:
  std::string phase_;
};

using Slice = std::tuple<std::string, std::string, std::string, std::string, std::int64_t>;

std::vector<Case> PlanOf(const std::string& phase) {
  CasesDir cases;
  const std::string file = "dsa_" + phase + "_module.yaml";
  cases.BaseOp(file, ReadFile(SERVECAST_SOURCE_DIR "/cases/base_ops/" + file));
  Registry registry;
  registry.AddBackend(std::make_unique<TestBackend>("cuda"));
  registry.AddOp("cuda", std::make_unique<DsaTestOp>(phase));
  PlanOptions opt = Options(cases, {"dsa_" + phase + "_module"});
  opt.backend = "cuda";
  return BuildPlan(registry, opt, TestRuntime()).cases;
}

std::set<Slice> SlicesOf(const std::vector<Case>& plan) {
  std::set<Slice> s;
  for (const Case& c : plan) {
    // num_heads is the local count of the model's heads (128 or 64) at tp_size.
    const std::int64_t total = c.params.Str("architecture") == "DeepseekV32ForCausalLM" ? 128 : 64;
    EXPECT_EQ(c.params.Int("num_heads") * c.params.Int("tp_size"), total) << c.id;
    s.insert({c.params.Str("model"), c.params.Str("architecture"), c.params.Str("gemm_type"),
              c.params.Str("kv_cache_dtype"), c.params.Int("num_heads")});
  }
  return s;
}

TEST(DsaPlan, BothPhasesCoverTheBundledModelsAtEveryTpOfTwoNodes) {
  const std::vector<Case> context = PlanOf("context"), generation = PlanOf("generation");
  EXPECT_EQ(context.size(), 90u);
  EXPECT_EQ(generation.size(), 225u);
  std::set<Slice> want;
  for (const std::int64_t tp : {1, 2, 4, 8, 16}) {
    want.insert({"deepseek-ai/DeepSeek-V3.2", "DeepseekV32ForCausalLM", "fp8_block", "fp8", 128 / tp});
    want.insert({"zai-org/GLM-5", "GlmMoeDsaForCausalLM", "bfloat16", "bfloat16", 64 / tp});
    want.insert({"zai-org/GLM-5-FP8", "GlmMoeDsaForCausalLM", "fp8_block", "fp8", 64 / tp});
  }
  EXPECT_EQ(SlicesOf(context), want);
  EXPECT_EQ(SlicesOf(generation), want);
  for (const Case& c : context) {
    EXPECT_EQ(c.params.Int("step"), 0) << c.id;  // prefill from an empty cache, as the estimator reads it
    EXPECT_EQ(c.params.Str("mla_dtype"), "bfloat16") << c.id;
  }
  std::map<Slice, int> per_slice;
  for (const Case& c : generation) {
    const Params& p = c.params;
    EXPECT_EQ(p.Int("isl"), 1) << c.id;
    EXPECT_GE(p.Int("step"), 1) << c.id;
    EXPECT_LE(p.Int("batch_size") * (p.Int("step") + 1), std::int64_t{4194304}) << c.id;
    ++per_slice[{p.Str("model"), p.Str("architecture"), p.Str("gemm_type"), p.Str("kv_cache_dtype"),
                 p.Int("num_heads")}];
  }
  for (const auto& [slice, n] : per_slice) EXPECT_EQ(n, 15) << std::get<0>(slice) << " " << std::get<4>(slice);
}

}  // namespace
}  // namespace servecast::collect
