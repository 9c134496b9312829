// The mode wiring of src/serve/evaluate.cpp for collectives and elementwise ops
// (docs/perfdb.md, "Database modes"): HYBRID falls back to util-empirical on a
// collective table miss; EMPIRICAL and HYBRID answer elementwise ops from
// elementwise_perf (util-empirical / table first), the formula without a table.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "model/ops.h"
#include "perfdb/elementwise.h"
#include "serve/database.h"
#include "serve/evaluate.h"
#include "system/system_spec.h"
#include "tables/cost_model.h"

namespace servecast::serve {
namespace {

const std::string kSource = SERVECAST_SOURCE_DIR;

bool Has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

systems::SystemSpec TinyGpu() {
  return systems::LoadSystemByName(kSource + "/tests/goldens/systems", "tiny_gpu");
}

std::unique_ptr<Database> OpenElementwise(perfdb::DatabaseMode mode) {
  DatabaseOptions o;
  o.roots = {kSource + "/tests/goldens/data"};
  o.backend = "dense_ew";
  o.version = "1";
  o.mode = mode;
  return Database::Open(TinyGpu(), o, {TableNeed::kElementwise});
}

// rmsnorm_residual at width 512 (tests/goldens/data/.../dense_ew/1): tokens 2 ->
// 0.0012 ms, tokens 128 -> 0.0030 ms.
model::Op AddNorm() {
  model::Op op;
  op.name = "context_add_norm_1";
  op.kind = model::OpKind::kElementwise;
  op.dim_in = 512;
  op.dim_out = 512;
  op.measured_op = "rmsnorm_residual";
  op.measured_width = 512;
  return op;
}

PassShape Tokens(std::int64_t seq) {
  PassShape s;
  s.context = true;
  s.batch = 1;
  s.seq = seq;
  return s;
}

TEST(EvaluateModesTest, ElementwiseEmpiricalIsUtilOverTheSlice) {
  const auto db = OpenElementwise(perfdb::DatabaseMode::kEmpirical);
  auto sol = [&](double t) {
    return db->sol().MemMs(tables::ElementwiseCost("rmsnorm_residual", "bfloat16", t, 512).bytes);
  };
  // On a sample: its latency.
  OpCost c = EvaluateOp(AddNorm(), *db, Tokens(128));
  EXPECT_NEAR(c.latency_ms, 0.0030, 1e-15);
  EXPECT_EQ(c.source, "empirical");
  EXPECT_TRUE(Has(c.detail, "util-empirical over elementwise_perf rmsnorm_residual")) << c.detail;
  // tokens 64: normalised (ln 64 - ln 2) / (ln 128 - ln 2) = 5/6; distances 1/6
  // (to 128) and 5/6 (to 2): util = (6 u128 + 1.2 u2) / 7.2.
  const double u2 = sol(2) / 0.0012, u128 = sol(128) / 0.0030;
  const double util = (6 * u128 + 1.2 * u2) / 7.2;
  c = EvaluateOp(AddNorm(), *db, Tokens(64));
  EXPECT_NEAR(c.latency_ms, sol(64) / util, 1e-15);
  // HYBRID and SILICON: the table first (raw lerp on tokens: 0.0012 + 0.0018 x 62/126).
  for (auto mode : {perfdb::DatabaseMode::kHybrid, perfdb::DatabaseMode::kSilicon}) {
    const auto h = OpenElementwise(mode);
    c = EvaluateOp(AddNorm(), *h, Tokens(64));
    EXPECT_NEAR(c.latency_ms, 0.0012 + 0.0018 * 62.0 / 126.0, 1e-15);
    EXPECT_EQ(c.source, "interpolated");
  }
  // An op without a slice (silu_and_mul) keeps the AIC memory formula in EMPIRICAL.
  model::Op act = AddNorm();
  act.measured_op = "silu_and_mul";
  c = EvaluateOp(act, *db, Tokens(64));
  EXPECT_NEAR(c.latency_ms, MemoryOpMs(*db, 2.0 * (512 + 512) * 64), 1e-15);
  EXPECT_TRUE(Has(c.detail, "memory formula")) << c.detail;
}

// A custom all-reduce table with one row (1024 elements, 0.005 ms). Above it the
// table's curve holds the row's utilization (extrapolated), and util-empirical
// reads the same sample: with the SOL linear in the size both answer
// 0.005 x 4096 / 1024 = 0.02 ms. A 0 ms row, which once made the curve miss and
// HYBRID fall back, is refused when the table loads (file, line, column).
class CommFallback : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("servecast_evaluate_modes_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
             std::to_string(reinterpret_cast<std::uintptr_t>(this)));
    const auto dir = root_ / "tiny_gpu" / "comm" / "x" / "1";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "custom_allreduce_perf.csv") << "allreduce_dtype,num_gpus,message_size,latency\n"
                                                        "half,2,1024,0.005\n";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::unique_ptr<Database> Open(perfdb::DatabaseMode mode) const {
    DatabaseOptions o;
    o.roots = {root_.string()};
    o.backend = "x";
    o.version = "1";
    o.mode = mode;
    return Database::Open(TinyGpu(), o, {TableNeed::kCustomAllReduce});
  }
  static model::Op AllReduce() {
    model::Op op;
    op.name = "context_ar";
    op.kind = model::OpKind::kCustomAllReduce;
    op.collective = "all_reduce";
    op.gpus = 2;
    op.elems_per_token = 4096;
    op.comm_dtype = "half";
    return op;
  }
  std::filesystem::path root_;
};

TEST_F(CommFallback, OneRowExtrapolatesInTheTableAndEmpiricalAgrees) {
  const PassShape one = Tokens(1);  // message = 1 x 4096 elements
  for (auto mode : {perfdb::DatabaseMode::kHybrid, perfdb::DatabaseMode::kSilicon}) {
    const auto db = Open(mode);
    const OpCost h = EvaluateOp(AllReduce(), *db, one);
    EXPECT_NEAR(h.latency_ms, 0.02, 1e-12);
    EXPECT_EQ(h.source, "extrapolated");
  }
  const auto empirical = Open(perfdb::DatabaseMode::kEmpirical);
  const OpCost e = EvaluateOp(AllReduce(), *empirical, one);
  EXPECT_NEAR(e.latency_ms, 0.02, 1e-12);
  EXPECT_EQ(e.source, "empirical");
  // At 1024 exactly HYBRID reads the row (silicon).
  model::Op small = AllReduce();
  small.elems_per_token = 1024;
  const auto hybrid = Open(perfdb::DatabaseMode::kHybrid);
  const OpCost t = EvaluateOp(small, *hybrid, one);
  EXPECT_NEAR(t.latency_ms, 0.005, 1e-15);
  EXPECT_EQ(t.source, "silicon");
}

TEST_F(CommFallback, AZeroLatencyRowIsRefusedWhenTheTableLoads) {
  std::ofstream(root_ / "tiny_gpu" / "comm" / "x" / "1" / "custom_allreduce_perf.csv", std::ios::app)
      << "half,2,2048,0\n";
  for (auto mode : {perfdb::DatabaseMode::kHybrid, perfdb::DatabaseMode::kSilicon, perfdb::DatabaseMode::kEmpirical}) {
    try {
      Open(mode);
      ADD_FAILURE() << "a 0 ms row was accepted";
    } catch (const DataError& e) {
      EXPECT_TRUE(Has(e.what(), "custom_allreduce_perf.csv:3: column 'latency' is 0")) << e.what();
      EXPECT_TRUE(Has(e.what(), "expected a finite latency > 0 (ms)")) << e.what();
    }
  }
}

}  // namespace
}  // namespace servecast::serve
