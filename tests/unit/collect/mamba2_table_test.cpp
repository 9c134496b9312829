// The shipped Mamba2 case plan (cases/base_ops/mamba2.yaml) against the cuda op's
// declaration: its counts, num_tokens = batch x seq_len, AIC's element limit, and
// exactly AIC's (batch, seq_len) pairs for the shapes AIC's H200 TensorRT-LLM
// mamba2_perf table has (the plan adds Nemotron-3-Nano at tp 2, 4, 8).

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
#include "core/table_file.h"
#include "shared_data.h"
#include "tables/table_spec.h"

namespace servecast::collect {
namespace {

using namespace servecast::collect::testing;

// The cuda op's declaration (parameters, table), without its kernels.
class Mamba2TestOp : public Op {
 public:
  std::string name() const override { return "mamba2"; }
  const TableSpec& table() const override { return *FindTableSpec("mamba2_perf"); }
  std::vector<std::string> required_params() const override {
    return {"phase",  "batch_size", "seq_len",  "num_tokens", "d_model",    "d_state",
            "d_conv", "nheads",     "head_dim", "n_groups",   "chunk_size", "model_name"};
  }
  CaseResult Run(const Case&, const RunContext&) override {
    return CaseResult::Failure(Disposition::kFailed, FailureClass::kCollectorBug, "TestOp", "test ops do not run");
  }
};

TEST(Mamba2Table, TheShippedPlanIsAicsGridForItsShapes) {
  CasesDir cases;
  cases.BaseOp("mamba2.yaml", ReadFile(SERVECAST_SOURCE_DIR "/cases/base_ops/mamba2.yaml"));
  Registry registry;
  registry.AddBackend(std::make_unique<TestBackend>("cuda"));
  registry.AddOp("cuda", std::make_unique<Mamba2TestOp>());
  PlanOptions opt = Options(cases, {"mamba2"});
  opt.backend = "cuda";
  const Plan plan = BuildPlan(registry, opt, TestRuntime());
  using Key = std::tuple<std::string, std::string, std::int64_t, std::int64_t, std::int64_t, std::int64_t>;
  std::set<Key> ours;
  std::map<std::string, int> by_phase;
  for (const Case& c : plan.cases) {
    const Params& p = c.params;
    ++by_phase[p.Str("phase")];
    EXPECT_EQ(p.Int("num_tokens"), p.Int("batch_size") * p.Int("seq_len")) << c.id;
    const std::int64_t C = p.Int("nheads") * p.Int("head_dim") + 2 * p.Int("n_groups") * p.Int("d_state");
    EXPECT_LT(p.Int("num_tokens") * C, std::int64_t{1} << 31) << c.id;
    EXPECT_EQ(p.Int("nheads") % p.Int("n_groups"), 0) << c.id;
    ours.insert({p.Str("model_name"), p.Str("phase"), p.Int("nheads"), p.Int("d_state"), p.Int("batch_size"),
                 p.Int("seq_len")});
  }
  EXPECT_EQ(by_phase["context"], 951);
  EXPECT_EQ(by_phase["generation"], 99);

  const std::string aic =
      SERVECAST_SHARED_DIR "/reference/aic-h200-more/h200_sxm/linear_attention/trtllm/1.3.0rc20/mamba2_perf.parquet";
  SERVECAST_NEED_SHARED(PathExists(aic), "AIC's TensorRT-LLM mamba2_perf table is not in ../shared");
  const Table t = ReadTableFile(aic);
  std::set<Key> theirs;
  std::set<std::tuple<std::string, std::int64_t>> their_shapes;
  for (std::size_t r = 0; r < t.num_rows(); ++r) {
    const std::string model = t.GetString(r, t.ColumnIndex("model_name"));
    const std::int64_t nh = t.GetInt(r, t.ColumnIndex("nheads"));
    their_shapes.insert({model, nh});
    theirs.insert({model, t.GetString(r, t.ColumnIndex("phase")), nh, t.GetInt(r, t.ColumnIndex("d_state")),
                   t.GetInt(r, t.ColumnIndex("batch_size")), t.GetInt(r, t.ColumnIndex("seq_len"))});
  }
  std::set<Key> ours_on_their_shapes;
  for (const Key& k : ours)
    if (their_shapes.count({std::get<0>(k), std::get<2>(k)})) ours_on_their_shapes.insert(k);
  EXPECT_EQ(theirs.size(), 685u);
  EXPECT_EQ(ours_on_their_shapes, theirs);
}

}  // namespace
}  // namespace servecast::collect
