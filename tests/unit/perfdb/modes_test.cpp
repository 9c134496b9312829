#include "perfdb/modes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/table.h"
#include "perfdb/perf_database.h"
#include "system/system_spec.h"

namespace servecast::perfdb {
namespace {

bool Has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// GEMM SOL is hand-computable: bf16 at 2e12 FLOP/s, memory that never binds:
// SOL(m, n, k) = m * n * k * 1e-9 ms.
Sol TestSol() {
  systems::SystemSpec spec;
  spec.name = "modes_test";
  spec.kind = "gpu";
  spec.gpu.mem_bw_bytes_per_s = 1e18;
  spec.gpu.peak_flops_per_s["bfloat16"] = 2e12;
  return Sol(spec);
}
double S(double m, double n, double k) {
  return m * n * k * 1e-9;
}

// Samples (m, n, k) -> util:
//   A (1, 1000, 1000)   0.2   latency 0.005      normalised (0, 0, 0)
//   B (16, 1000, 1000)  0.4   latency 0.04       normalised (1, 0, 0)
//   C (1, 16000, 16000) 0.5   latency 0.512      normalised (0, 1, 1)
Table GemmTable() {
  return Table::ParseCsv(
      "gemm_dtype,m,n,k,latency\n"
      "bfloat16,1,1000,1000,0.005\n"
      "bfloat16,16,1000,1000,0.04\n"
      "bfloat16,1,16000,16000,0.512\n",
      "gemm.csv");
}

struct GemmFixture {
  Sol sol = TestSol();
  Table table = GemmTable();
  GemmPerf gemm{table, sol};
  OpEstimator Make(DatabaseMode mode) const { return OpEstimator(sol, mode, &gemm, nullptr, nullptr); }
};

TEST(DatabaseModeTest, ParsesTheFourAndRejectsTheRest) {
  EXPECT_EQ(ParseDatabaseMode("silicon"), DatabaseMode::kSilicon);
  EXPECT_EQ(ParseDatabaseMode("hybrid"), DatabaseMode::kHybrid);
  EXPECT_EQ(ParseDatabaseMode("empirical"), DatabaseMode::kEmpirical);
  EXPECT_EQ(ParseDatabaseMode("sol"), DatabaseMode::kSol);
  for (auto m : {DatabaseMode::kSilicon, DatabaseMode::kHybrid, DatabaseMode::kEmpirical, DatabaseMode::kSol})
    EXPECT_EQ(ParseDatabaseMode(DatabaseModeName(m)), m);
  try {
    ParseDatabaseMode("SILICON2");
    ADD_FAILURE();
  } catch (const UsageError& e) {
    EXPECT_TRUE(Has(e.what(), "silicon, hybrid, empirical, sol")) << e.what();
  }
  try {
    ParseDatabaseMode("sol_full");
    ADD_FAILURE();
  } catch (const UsageError& e) {
    EXPECT_TRUE(Has(e.what(), "retired")) << e.what();
  }
}

TEST(DatabaseModeTest, GemmSiliconTagsAndRaisesTypedMiss) {
  GemmFixture f;
  const OpEstimator est = f.Make(DatabaseMode::kSilicon);
  OpEstimate e = est.Gemm("bfloat16", 16, 1000, 1000);
  EXPECT_DOUBLE_EQ(e.latency_ms, 0.04);
  EXPECT_EQ(e.source, "silicon");
  EXPECT_DOUBLE_EQ(e.sol_ms, S(16, 1000, 1000));
  EXPECT_DOUBLE_EQ(e.sol_fraction, 0.4);
  // m = 2: lerp between m = 1 and 16 on the site.
  e = est.Gemm("bfloat16", 2, 1000, 1000);
  EXPECT_NEAR(e.latency_ms, 0.005 + 0.035 / 15, 1e-15);
  EXPECT_EQ(e.source, "interpolated");
  // (64000, 64000) is 2.83 octaves from the nearest site: the gate misses.
  try {
    est.Gemm("bfloat16", 4, 64000, 64000);
    ADD_FAILURE() << "expected OpMissError";
  } catch (const OpMissError& err) {
    EXPECT_EQ(err.op(), "gemm");
    EXPECT_EQ(err.key(), "quant=bfloat16, m=4, n=64000, k=64000");
    EXPECT_EQ(err.mode(), DatabaseMode::kSilicon);
    EXPECT_TRUE(Has(err.what(), "gate")) << err.what();
    EXPECT_TRUE(Has(err.what(), "nearest sites: (n=1000, k=1000")) << err.what();  // what it saw
  }
  // A dtype with no rows names what is present.
  try {
    est.Gemm("fp8", 4, 1000, 1000);
    ADD_FAILURE();
  } catch (const MissingDataError& err) {
    EXPECT_TRUE(Has(err.what(), "present: bfloat16")) << err.what();
  }
}

TEST(DatabaseModeTest, GemmEmpiricalIsUtilIdw) {
  GemmFixture f;
  const OpEstimator est = f.Make(DatabaseMode::kEmpirical);
  // m = 2 -> (0.25, 0, 0): d(A) = 0.25, d(B) = 0.75 -> util (0.2*4 + 0.4*4/3) / (16/3) = 0.25.
  OpEstimate e = est.Gemm("bfloat16", 2, 1000, 1000);
  EXPECT_EQ(e.source, "empirical");
  EXPECT_NEAR(e.sol_fraction, 0.25, 1e-15);
  EXPECT_NEAR(e.latency_ms, S(2, 1000, 1000) / 0.25, 1e-15);
  EXPECT_DOUBLE_EQ(e.sol_ms, S(2, 1000, 1000));
  EXPECT_TRUE(Has(e.detail, "IDW")) << e.detail;
  // On a sample: its util, so its latency.
  e = est.Gemm("bfloat16", 16, 1000, 1000);
  EXPECT_NEAR(e.latency_ms, 0.04, 1e-15);
  EXPECT_EQ(e.source, "empirical");
  EXPECT_TRUE(Has(e.detail, "exact sample")) << e.detail;
  EXPECT_EQ(est.GemmUtilGrid("bfloat16").samples().size(), 3u);
  EXPECT_EQ(&est.GemmUtilGrid("bfloat16"), &est.GemmUtilGrid("bfloat16"));  // cached
  // No slice for the quant: typed miss (transfers not built).
  EXPECT_THROW(est.Gemm("fp8", 4, 1000, 1000), OpMissError);
}

TEST(DatabaseModeTest, GemmHybridFallsBackOnGateMiss) {
  GemmFixture f;
  const OpEstimator est = f.Make(DatabaseMode::kHybrid);
  EXPECT_EQ(est.Gemm("bfloat16", 16, 1000, 1000).source, "silicon");
  EXPECT_EQ(est.Gemm("bfloat16", 2, 1000, 1000).source, "interpolated");
  // (4, 64000, 64000) -> (0.5, 1, 1) clamped: d(C) = 0.5, d(A) = d(B) = 1.5 (A first):
  // util = (0.5 * 2 + 0.2 / 1.5) / (2 + 1 / 1.5) = 0.425.
  const OpEstimate e = est.Gemm("bfloat16", 4, 64000, 64000);
  EXPECT_EQ(e.source, "empirical");
  EXPECT_NEAR(e.sol_fraction, 0.425, 1e-15);
  EXPECT_NEAR(e.latency_ms, S(4, 64000, 64000) / 0.425, 1e-12);
  EXPECT_TRUE(Has(e.detail, "silicon miss")) << e.detail;
  // Both fail: one typed error with both reasons.
  try {
    est.Gemm("fp8", 4, 1000, 1000);
    ADD_FAILURE();
  } catch (const OpMissError& err) {
    EXPECT_EQ(err.mode(), DatabaseMode::kHybrid);
    EXPECT_TRUE(Has(err.what(), "silicon:") && Has(err.what(), "empirical:")) << err.what();
  }
}

TEST(DatabaseModeTest, SolIsTheRooflineWithOrWithoutTables) {
  GemmFixture f;
  const OpEstimator with = f.Make(DatabaseMode::kSol);
  const OpEstimator without(f.sol, DatabaseMode::kSol, nullptr, nullptr, nullptr);
  for (const OpEstimator* est : {&with, &without}) {
    const OpEstimate e = est->Gemm("bfloat16", 4, 64000, 64000);
    EXPECT_EQ(e.source, "sol");
    EXPECT_DOUBLE_EQ(e.latency_ms, f.sol.GemmMs("bfloat16", 4, 64000, 64000));
    EXPECT_DOUBLE_EQ(e.latency_ms, S(4, 64000, 64000));
    EXPECT_EQ(e.sol_ms, e.latency_ms);
    EXPECT_EQ(e.sol_fraction, 1.0);
  }
  // Absent tables in the other modes are typed misses naming the table.
  for (auto mode : {DatabaseMode::kSilicon, DatabaseMode::kHybrid, DatabaseMode::kEmpirical}) {
    const OpEstimator none(f.sol, mode, nullptr, nullptr, nullptr);
    try {
      none.Gemm("bfloat16", 4, 1000, 1000);
      ADD_FAILURE();
    } catch (const OpMissError& err) {
      EXPECT_TRUE(Has(err.what(), "gemm_perf is not in the database")) << err.what();
    }
    EXPECT_THROW(none.ContextAttention(ContextAttentionQuery{}), OpMissError);
    EXPECT_THROW(none.GenerationAttention(GenerationAttentionQuery{}), OpMissError);
  }
}

// ---------------------------------------------------------------- attention

std::shared_ptr<const Sol> H200() {
  return std::make_shared<const Sol>(systems::LoadSystemByName(SERVECAST_SOURCE_DIR "/systems", "h200_sxm"));
}

// One MHA slice (heads 4, head_dim 128) over seq {1, 4}.
Table ContextTable() {
  return Table::ParseCsv(
      "batch_size,isl,num_heads,num_key_value_heads,head_dim,attn_dtype,kv_cache_dtype,latency\n"
      "1,1,4,4,128,bfloat16,bfloat16,1\n"
      "1,4,4,4,128,bfloat16,bfloat16,4\n",
      "ctx.csv");
}

TEST(DatabaseModeTest, ContextAttentionModes) {
  const auto sol = H200();
  const Table t = ContextTable();
  const ContextAttentionTable ctx(t, sol);
  const Grid& g = ctx.slices().begin()->second;
  const double s1[3] = {4, 1, 1}, s4[3] = {4, 4, 1};
  const double u1 = g.Sol(s1) / 1, u4 = g.Sol(s4) / 4;
  ContextAttentionQuery q;
  q.num_heads = 4;
  q.num_kv_heads = 4;
  q.seq = 2;  // normalised ln 2 / ln 4 = 0.5: equidistant -> mean util
  const double x[3] = {4, 2, 1};

  const OpEstimator silicon(*sol, DatabaseMode::kSilicon, nullptr, &ctx, nullptr);
  OpEstimate e = silicon.ContextAttention(q);
  EXPECT_EQ(e.source, "interpolated");
  EXPECT_DOUBLE_EQ(e.latency_ms, 16.0 / 9.0);
  EXPECT_DOUBLE_EQ(e.sol_ms, ctx.SolMs(q));

  const OpEstimator empirical(*sol, DatabaseMode::kEmpirical, nullptr, &ctx, nullptr);
  e = empirical.ContextAttention(q);
  EXPECT_EQ(e.source, "empirical");
  EXPECT_NEAR(e.sol_fraction, (u1 + u4) / 2, 1e-15);
  EXPECT_NEAR(e.latency_ms, g.Sol(x) / ((u1 + u4) / 2), 1e-12);

  const OpEstimator sol_mode(*sol, DatabaseMode::kSol, nullptr, &ctx, nullptr);
  e = sol_mode.ContextAttention(q);
  EXPECT_EQ(e.source, "sol");
  EXPECT_DOUBLE_EQ(e.latency_ms, ctx.SolMs(q));
  EXPECT_EQ(e.sol_fraction, 1.0);

  // A GQA key (kv heads 1) has no slice: SILICON names the key and the slices present;
  // HYBRID falls back to the MHA sibling's utils with the query's own SOL.
  q.num_kv_heads = 1;
  try {
    silicon.ContextAttention(q);
    ADD_FAILURE();
  } catch (const OpMissError& err) {
    EXPECT_EQ(err.op(), "context_attention");
    EXPECT_TRUE(Has(err.what(), "num_kv_heads=1")) << err.what();
    EXPECT_TRUE(Has(err.what(), "no slice")) << err.what();
    EXPECT_TRUE(Has(err.what(), "n_kv=0")) << err.what();  // what the data covers
  }
  const OpEstimator hybrid(*sol, DatabaseMode::kHybrid, nullptr, &ctx, nullptr);
  e = hybrid.ContextAttention(q);
  EXPECT_EQ(e.source, "empirical");
  EXPECT_NEAR(e.sol_fraction, (u1 + u4) / 2, 1e-15);
  EXPECT_NEAR(e.latency_ms, sol->ContextAttentionMs(1, 2, 0, 4, 1, 128, 0, "bfloat16", "bfloat16") / ((u1 + u4) / 2),
              1e-12);
  EXPECT_TRUE(Has(e.detail, "xshape")) << e.detail;
  // A head_dim with no sibling: typed miss in every table mode.
  q.head_dim = 64;
  EXPECT_THROW(hybrid.ContextAttention(q), OpMissError);
  EXPECT_THROW(empirical.ContextAttention(q), OpMissError);
}

TEST(DatabaseModeTest, GenerationAttentionModes) {
  std::string csv = "batch_size,isl,num_heads,num_key_value_heads,head_dim,attn_dtype,kv_cache_dtype,step,latency\n";
  for (int s : {100, 1000, 10000}) csv += "1," + std::to_string(s) + ",8,8,128,bfloat16,bfloat16,0,5\n";
  const auto sol = H200();
  const Table t = Table::ParseCsv(csv, "gen.csv");
  const GenerationAttentionTable gen(t, sol);
  GenerationAttentionQuery q;
  q.num_heads = 8;
  q.num_kv_heads = 8;
  q.seq = 1000;
  const OpEstimator silicon(*sol, DatabaseMode::kSilicon, nullptr, nullptr, &gen);
  OpEstimate e = silicon.GenerationAttention(q);
  EXPECT_EQ(e.source, "interpolated");  // the 5-sample mean around seq
  EXPECT_DOUBLE_EQ(e.sol_ms, gen.SolMs(q));
  const OpEstimator empirical(*sol, DatabaseMode::kEmpirical, nullptr, nullptr, &gen);
  e = empirical.GenerationAttention(q);  // on a leaf: its latency (clamped to SOL at load)
  EXPECT_EQ(e.source, "empirical");
  EXPECT_NEAR(e.latency_ms, std::max(5.0, gen.SolMs(q)), 1e-12);
  const OpEstimator sol_mode(*sol, DatabaseMode::kSol, nullptr, nullptr, &gen);
  EXPECT_DOUBLE_EQ(sol_mode.GenerationAttention(q).latency_ms, gen.SolMs(q));
  q.head_dim = 64;
  EXPECT_THROW(silicon.GenerationAttention(q), OpMissError);
}

// ---------------------------------------------------------------- real data

TEST(DatabaseModeTest, EmpiricalVsSiliconOnAicH200Gemm) {
  const std::string root = SERVECAST_SHARED_DIR "/reference/aic-parquet";
  if (!std::filesystem::exists(root + "/h200_sxm")) GTEST_SKIP() << "no reference tree";
  const PerfDatabase db = PerfDatabase::Open({root}, "h200_sxm", "trtllm", "1.3.0rc20");
  const Sol sol(systems::LoadSystemByName(SERVECAST_SOURCE_DIR "/systems", "h200_sxm"));
  const GemmPerf gemm(db.Table("gemm_perf").table, sol);
  const OpEstimator silicon(sol, DatabaseMode::kSilicon, &gemm, nullptr, nullptr);
  const OpEstimator empirical(sol, DatabaseMode::kEmpirical, &gemm, nullptr, nullptr);

  // Deterministic off-grid points: per draw a dtype, a site and an m gap; the
  // query is the geometric midpoint of the gap at that site (odd draws), or at
  // (n of this site, k of another site) when that pair was not collected.
  std::vector<std::string> dtypes;
  for (const auto& d : gemm.gemm_dtypes()) {
    try {
      gemm.Slice(d);
      dtypes.push_back(d);
    } catch (const Error&) {
    }
  }
  ASSERT_FALSE(dtypes.empty());
  std::uint64_t state = 12345;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  std::vector<double> ape;
  std::size_t misses = 0;
  for (int draw = 0; draw < 2000 && ape.size() < 500; ++draw) {
    const std::string& d = dtypes[next() % dtypes.size()];
    const GemmSlice& slice = gemm.Slice(d);
    const GemmSite& s = slice.sites()[next() % slice.sites().size()];
    if (s.m.size() < 2) continue;
    const std::size_t j = next() % (s.m.size() - 1);
    const auto m = static_cast<std::int64_t>(std::llround(std::sqrt(double(s.m[j]) * double(s.m[j + 1]))));
    if (m == s.m[j] || m == s.m[j + 1]) continue;
    std::int64_t n = s.n, k = s.k;
    if (draw % 2) {
      k = slice.sites()[next() % slice.sites().size()].k;
      if (slice.FindSite(n, k) >= 0) continue;
    }
    OpEstimate truth;
    try {
      truth = silicon.Gemm(d, m, n, k);
    } catch (const OpMissError&) {
      ++misses;
      continue;
    }
    const OpEstimate e = empirical.Gemm(d, m, n, k);
    ape.push_back(std::abs(e.latency_ms - truth.latency_ms) / truth.latency_ms);
  }
  ASSERT_GE(ape.size(), 300u);
  double mean = 0;
  for (double a : ape) mean += a;
  mean /= static_cast<double>(ape.size());
  std::sort(ape.begin(), ape.end());
  const double median = ape[ape.size() / 2], p90 = ape[ape.size() * 9 / 10];
  std::printf(
      "[empirical vs silicon, H200 trtllm 1.3.0rc20 gemm] n=%zu (silicon misses skipped %zu) mean %.2f%% "
      "median %.2f%% p90 %.2f%% (AIC B200/SGLang: 1.88%% / 1.05%% / 4.99%%)\n",
      ape.size(), misses, 100 * mean, 100 * median, 100 * p90);
  EXPECT_LT(median, 0.25);
}

}  // namespace
}  // namespace servecast::perfdb
