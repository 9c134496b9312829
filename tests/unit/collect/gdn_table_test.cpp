// gdn_perf as the cuda `gdn` op writes it (backends/cuda/gdn_ops.h): one case, two
// rows, kernel_source naming the convolution and the scan. Finalize keeps them apart
// (the table's rows are parts of one op: TableSpec::RowIdentityColumns), `check`
// passes on them (no duplicate keys, no planned case missing), and the estimator's
// declared-table loader reads the file back as the sum of the two kernels. And the
// shipped case plan (cases/base_ops/gdn.yaml): its counts, and AIC's grid exactly.

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "collect/check.h"
#include "collect/finalize.h"
#include "collect/journal.h"
#include "collect_test_util.h"
#include "core/fs.h"
#include "core/table_file.h"
#include "perfdb/declared.h"
#include "perfdb/sol.h"
#include "shared_data.h"
#include "system/system_spec.h"
#include "tables/table_spec.h"

namespace servecast::collect {
namespace {

using namespace servecast::collect::testing;

// The cuda op's declaration (parameters, table), without its kernels.
class GdnTestOp : public Op {
 public:
  std::string name() const override { return "gdn"; }
  const TableSpec& table() const override { return *FindTableSpec("gdn_perf"); }
  std::vector<std::string> required_params() const override {
    return {"phase",       "batch_size",  "seq_len",    "num_tokens", "d_model",   "d_conv",
            "num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim", "model_name"};
  }
  CaseResult Run(const Case&, const RunContext&) override {
    return CaseResult::Failure(Disposition::kFailed, FailureClass::kCollectorBug, "TestOp", "test ops do not run");
  }
};

std::unique_ptr<Registry> GdnRegistry(const std::string& backend) {
  auto reg = std::make_unique<Registry>();
  reg->AddBackend(std::make_unique<TestBackend>(backend));
  reg->AddOp(backend, std::make_unique<GdnTestOp>());
  return reg;
}

const char* kSmallPlan = R"(op: gdn
sweeps:
  - backends: [test]
    axes:
      batch_size: [1, 2]
      seq_len: [64, 128]
      num_tokens: [64, 128, 256]
    profiles:
      - {model_name: Qwen/Qwen3.5-35B-A3B, d_model: 2048, num_k_heads: 2, num_v_heads: 4}
    fixed: {phase: context, d_conv: 4, head_k_dim: 128, head_v_dim: 128}
    where:
      - num_tokens == batch_size * seq_len
)";

// The two kernels' latencies of a case: conv 0.001 ms per token, scan 0.01.
double ConvMs(const Params& p) { return 0.001 * static_cast<double>(p.Int("num_tokens")); }
double ScanMs(const Params& p) { return 0.01 * static_cast<double>(p.Int("num_tokens")); }

TimingStats Stats(double ms) {
  TimingStats st;
  st.median_ms = ms;
  st.p10_ms = ms * 0.9;
  st.p90_ms = ms * 1.1;
  st.samples = 10;
  st.rsd = 0.005;
  st.method = "graph";
  st.l2 = "cold";
  return st;
}

TEST(GdnTable, TwoRowsPerCaseAreKeptCheckedAndReadAsTheirSum) {
  CasesDir cases;
  cases.BaseOp("gdn.yaml", kSmallPlan);
  const auto registry = GdnRegistry("test");
  const RuntimeInfo rt = TestRuntime();
  const PlanOptions opt = Options(cases);
  const Plan plan = BuildPlan(*registry, opt, rt);
  ASSERT_EQ(plan.cases.size(), 4u);

  TempDir runs, out;
  const std::string run = runs.path() + "/run";
  MakeDirs(run);
  JournalHeader h;
  h.backend = "test";
  h.version = rt.version;
  h.device = rt.device_name;
  h.arch = rt.arch;
  h.sm = rt.sm;
  h.system = "h200_sxm";
  h.plan_hash = plan.plan_hash;
  {
    JournalWriter w = JournalWriter::Create(run + "/journal.jsonl", h);
    for (const Case& c : plan.supported) {
      JournalRecord r;
      r.id = c.id;
      r.op = c.op;
      r.params = c.params;
      r.status = Disposition::kPassed;
      const TableSpec& spec = *FindTableSpec("gdn_perf");
      r.rows.push_back(MakeRow(spec, rt, "gdn", "servecast_causal_conv1d:silu,k=4", c.params, Stats(ConvMs(c.params)),
                               false));
      r.rows.push_back(MakeRow(spec, rt, "gdn", "servecast_gdn_chunk64:fp32", c.params, Stats(ScanMs(c.params)),
                               false));
      w.Add(r);
    }
    w.Commit();
  }
  WritePlanFile(run + "/plan.jsonl", *registry, plan, opt, plan.supported);

  for (int pass = 0; pass < 2; ++pass) {  // a second finalize merges onto the first: still one row per kernel
    const FinalizeResult res = Finalize({run}, out.path());
    const TableOutcome& o = res.tables.at("gdn_perf");
    EXPECT_EQ(o.rows_after, 8u) << "pass " << pass;
    EXPECT_EQ(o.planned, 4u);
    EXPECT_EQ(o.missing, 0u);
    EXPECT_EQ(o.status, "complete");
  }
  const std::string dir = out.path() + "/h200_sxm/linear_attention/test/" + rt.version;
  const Table t = ReadTableFile(dir + "/gdn_perf.csv");
  ASSERT_EQ(t.num_rows(), 8u);
  std::set<std::string> sources;
  for (std::size_t r = 0; r < t.num_rows(); ++r) sources.insert(t.GetString(r, t.ColumnIndex("kernel_source")));
  EXPECT_EQ(sources.size(), 2u);
  EXPECT_EQ(YAML::LoadFile(dir + "/collection_meta.yaml")["tables"]["gdn_perf"]["status"].as<std::string>(),
            "complete");

  // check: no duplicate keys, every planned case has its rows.
  CheckOptions copt;
  copt.data_dir = out.path();
  copt.plan_run_dir = run;
  copt.systems_dir = SERVECAST_SOURCE_DIR "/systems";
  copt.json = true;
  ::testing::internal::CaptureStdout();
  const int rc = Check(copt);
  const std::string report = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0) << report;
  EXPECT_EQ(report.find("duplicate"), std::string::npos) << report;

  // The estimator's loader: the slice's two kernels, summed.
  const auto sol = std::make_shared<const perfdb::Sol>(
      systems::LoadSystemByName(SERVECAST_SOURCE_DIR "/systems", "h200_sxm"));
  const perfdb::DeclaredTable table(t, tables::GetTableSpec("gdn_perf"), sol);
  const Params key{{"phase", std::string("context")}, {"d_conv", std::int64_t{4}},
                   {"num_k_heads", std::int64_t{2}},   {"head_k_dim", std::int64_t{128}},
                   {"num_v_heads", std::int64_t{4}},   {"head_v_dim", std::int64_t{128}},
                   {"batch_size", std::int64_t{2}},    {"seq_len", std::int64_t{128}}};
  const Params tokens{{"num_tokens", std::int64_t{256}}};
  EXPECT_DOUBLE_EQ(table.Query(key).latency_ms, ConvMs(tokens) + ScanMs(tokens));
}

// The shipped plan: 12 local head shapes (three checkpoints at tp 1, 2, 4, 8), 1,284
// prefill cases and 132 decode cases, num_tokens = batch x seq_len, and exactly AIC's
// (batch, seq_len) pairs for those shapes in its SGLang gdn_perf table.
TEST(GdnTable, TheShippedPlanIsAicsGridForTheBundledShapes) {
  CasesDir cases;
  cases.BaseOp("gdn.yaml", ReadFile(SERVECAST_SOURCE_DIR "/cases/base_ops/gdn.yaml"));
  const auto registry = GdnRegistry("cuda");
  PlanOptions opt = Options(cases, {"gdn"});
  opt.backend = "cuda";
  const Plan plan = BuildPlan(*registry, opt, TestRuntime());
  using Key = std::tuple<std::string, std::string, std::int64_t, std::int64_t, std::int64_t, std::int64_t>;
  std::set<Key> ours;
  std::map<std::string, int> by_phase;
  for (const Case& c : plan.cases) {
    const Params& p = c.params;
    ++by_phase[p.Str("phase")];
    EXPECT_EQ(p.Int("num_tokens"), p.Int("batch_size") * p.Int("seq_len")) << c.id;
    const std::int64_t C = 2 * p.Int("num_k_heads") * 128 + p.Int("num_v_heads") * 128;
    EXPECT_LT(p.Int("num_tokens") * C, std::int64_t{1} << 31) << c.id;
    ours.insert({p.Str("model_name"), p.Str("phase"), p.Int("num_k_heads"), p.Int("num_v_heads"), p.Int("batch_size"),
                 p.Int("seq_len")});
  }
  EXPECT_EQ(plan.cases.size(), 1416u);
  EXPECT_EQ(by_phase["context"], 1284);
  EXPECT_EQ(by_phase["generation"], 132);

  const std::string aic =
      SERVECAST_SHARED_DIR "/reference/aic-h200-more/h200_sxm/linear_attention/sglang/0.5.14/gdn_perf.parquet";
  SERVECAST_NEED_SHARED(PathExists(aic), "AIC's SGLang gdn_perf table is not in ../shared");
  const Table t = ReadTableFile(aic);
  const std::set<std::string> bundled = {"Qwen/Qwen3.5-27B", "Qwen/Qwen3.5-35B-A3B", "Qwen/Qwen3.5-397B-A17B"};
  std::set<Key> theirs;
  for (std::size_t r = 0; r < t.num_rows(); ++r) {
    const std::string model = t.GetString(r, t.ColumnIndex("model_name"));
    const std::int64_t hk = t.GetInt(r, t.ColumnIndex("num_k_heads"));
    if (!bundled.count(model) || hk < 2) continue;  // tp 16 (one key head) is not in the plan
    theirs.insert({model, t.GetString(r, t.ColumnIndex("phase")), hk, t.GetInt(r, t.ColumnIndex("num_v_heads")),
                   t.GetInt(r, t.ColumnIndex("batch_size")), t.GetInt(r, t.ColumnIndex("seq_len"))});
  }
  EXPECT_EQ(theirs.size(), 1416u);
  EXPECT_EQ(ours, theirs);
}

}  // namespace
}  // namespace servecast::collect
