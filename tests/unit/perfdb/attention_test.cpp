#include "perfdb/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "system/system_spec.h"

namespace servecast::perfdb {
namespace {

std::shared_ptr<const Sol> H200() {
  return std::make_shared<const Sol>(systems::LoadSystemByName(SERVECAST_SOURCE_DIR "/systems", "h200_sxm"));
}

TEST(AttentionTest, ContextSlicesUseTheMhaSentinelAndSqrtOnSeq) {
  const Table t = Table::ParseCsv(
      "batch_size,isl,num_heads,num_key_value_heads,head_dim,attn_dtype,kv_cache_dtype,latency\n"
      "1,1,4,4,128,bfloat16,bfloat16,1\n"
      "1,4,4,4,128,bfloat16,bfloat16,4\n"
      "1,1,4,1,128,bfloat16,bfloat16,10\n"
      "1,4,4,1,128,bfloat16,bfloat16,40\n",
      "ctx.csv");
  const ContextAttentionTable ctx(t, H200());
  ASSERT_EQ(ctx.slices().size(), 2u);
  EXPECT_EQ(ctx.slices().begin()->first.n_kv_lookup, 0);  // MHA sentinel sorts first
  EXPECT_EQ(ctx.slices().begin()->first.window_size, 0);  // optional column default
  ContextAttentionQuery q;
  q.num_heads = 4;
  q.num_kv_heads = 4;
  q.seq = 4;
  Estimate e = ctx.Query(q);
  EXPECT_EQ(e.latency_ms, 4);
  EXPECT_EQ(e.source, EstimateSource::kSilicon);
  EXPECT_DOUBLE_EQ(e.sol_fraction, ctx.SolMs(q) / 4);
  q.seq = 2;  // sqrt: (1 + (2 - 1) / 3)^2
  EXPECT_DOUBLE_EQ(ctx.Query(q).latency_ms, 16.0 / 9.0);
  q.num_kv_heads = 1;  // the GQA slice: (sqrt 10 + (sqrt 40 - sqrt 10) / 3)^2 = 160 / 9
  EXPECT_NEAR(ctx.Query(q).latency_ms, 160.0 / 9.0, 1e-12);
  q.head_dim = 64;
  try {
    ctx.Query(q);
    ADD_FAILURE() << "expected a miss";
  } catch (const InterpolationMissError& err) {
    const std::string m = err.what();
    EXPECT_NE(m.find("head_dim=64"), std::string::npos) << m;
    EXPECT_NE(m.find("no slice"), std::string::npos) << m;
    EXPECT_NE(m.find("head_dim=128"), std::string::npos) << m;
  }
}

TEST(AttentionTest, GenerationSeqIsIslPlusStepAndQueryAveragesFiveSamples) {
  std::string csv =
      "batch_size,isl,num_heads,num_key_value_heads,head_dim,window_size,attn_dtype,kv_cache_dtype,step,latency\n";
  for (int s = 2; s <= 20; ++s) {
    // Half the rows carry their seq in `step`.
    const int step = s % 2 ? 1 : 0;
    csv += "1," + std::to_string(s - step) + ",4,4,128,0,bfloat16,bfloat16," + std::to_string(step) + "," +
           std::to_string(s) + "\n";
  }
  const GenerationAttentionTable gen(Table::ParseCsv(csv, "gen.csv"), H200(), "generation_attention_perf",
                                     /*clamp_to_sol=*/false);
  ASSERT_EQ(gen.slices().size(), 1u);
  GenerationAttentionQuery q;
  q.num_heads = 4;
  q.num_kv_heads = 4;
  q.seq = 7;
  EXPECT_EQ(gen.QueryPoint(q).latency_ms, 7);
  EXPECT_EQ(gen.QueryPoint(q).source, EstimateSource::kSilicon);
  // s = 7: [6, 7] -> samples 6, 6, 6, 6, 7.
  EXPECT_DOUBLE_EQ(gen.Query(q).latency_ms, 6.2);
  EXPECT_EQ(gen.Query(q).source, EstimateSource::kSilicon);
  // s = 10: [9, 11] -> 9, 9, 10, 10, 11.
  q.seq = 10;
  EXPECT_DOUBLE_EQ(gen.Query(q).latency_ms, 9.8);
  EXPECT_DOUBLE_EQ(gen.Query(q).sol_fraction, gen.SolMs(q) / 9.8);

  // The load-time clamp lifts leaves below SOL.
  const GenerationAttentionTable clamped(Table::ParseCsv(csv, "gen.csv"), H200());
  const Grid& g = clamped.slices().begin()->second;
  for (const auto& p : g.points()) EXPECT_GE(p.latency_ms, g.Sol(p.coords));
}

// Power of the 5-sample query: mean energy / mean latency, so that power x
// latency is the mean of the samples' energies (AIC's goldens).
TEST(AttentionTest, GenerationQueryPowerIsMeanEnergyOverMeanLatency) {
  std::string csv =
      "batch_size,isl,num_heads,num_key_value_heads,head_dim,window_size,attn_dtype,kv_cache_dtype,step,latency,"
      "power\n";
  for (int s = 2; s <= 20; ++s)
    csv += "1," + std::to_string(s) + ",4,4,128,0,bfloat16,bfloat16,0," + std::to_string(s) + "," +
           std::to_string(10 * s) + "\n";
  const GenerationAttentionTable gen(Table::ParseCsv(csv, "gen.csv"), H200(), "generation_attention_perf",
                                     /*clamp_to_sol=*/false);
  GenerationAttentionQuery q;
  q.num_heads = 4;
  q.num_kv_heads = 4;
  q.seq = 10;  // samples 9, 9, 10, 10, 11: energies 810, 810, 1000, 1000, 1210
  const Estimate e = gen.Query(q);
  EXPECT_DOUBLE_EQ(e.latency_ms, 9.8);
  ASSERT_TRUE(e.power_w.has_value());
  EXPECT_NEAR(*e.power_w * e.latency_ms, 966.0, 1e-9);
  EXPECT_NEAR(*e.power_w, 966.0 / 9.8, 1e-9);
}

struct LooStats {
  std::size_t n = 0, holds = 0;
  double median = 0, p90 = 0;
};

// Leave-one-out over a deterministic stride sample of interior leaves.
template <typename Slices>
LooStats LeaveOneOut(const Slices& slices, std::size_t target) {
  std::vector<std::pair<const Grid*, std::size_t>> interior;
  for (const auto& [key, grid] : slices)
    for (std::size_t i = 0; i < grid.points().size(); ++i)
      if (grid.IsInterior(i)) interior.emplace_back(&grid, i);
  const std::size_t stride = std::max<std::size_t>(1, interior.size() / target);
  std::vector<double> err;
  LooStats s;
  for (std::size_t j = 0; j < interior.size(); j += stride) {
    const auto [grid, i] = interior[j];
    const GridPoint& truth = grid->points()[i];
    const Estimate e = grid->Without(i).Query(truth.coords);
    if (e.source == EstimateSource::kExtrapolated) ++s.holds;
    err.push_back(std::abs(e.latency_ms - truth.latency_ms) / truth.latency_ms);
  }
  std::sort(err.begin(), err.end());
  s.n = err.size();
  if (!err.empty()) {
    s.median = err[err.size() / 2];
    s.p90 = err[std::min(err.size() - 1, err.size() * 9 / 10)];
  }
  return s;
}

TEST(AttentionTest, LeaveOneOutOnAicH200Tables) {
  const auto start = std::chrono::steady_clock::now();
  const PerfDatabase db =
      PerfDatabase::Open({SERVECAST_SHARED_DIR "/reference/aic-parquet"}, "h200_sxm", "trtllm", "1.3.0rc20");
  const auto sol = H200();
  const ContextAttentionTable ctx = ContextAttentionTable::FromLoaded(db.Table("context_attention_perf"), sol);
  const GenerationAttentionTable gen = GenerationAttentionTable::FromLoaded(db.Table("generation_attention_perf"), sol);
  const LooStats c = LeaveOneOut(ctx.slices(), 2000);
  const LooStats g = LeaveOneOut(gen.slices(), 2000);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("context_attention LOO: n=%zu holds=%zu median=%.2f%% p90=%.2f%%\n", c.n, c.holds, 100 * c.median,
              100 * c.p90);
  std::printf("generation_attention LOO: n=%zu holds=%zu median=%.2f%% p90=%.2f%%\n", g.n, g.holds, 100 * g.median,
              100 * g.p90);
  std::printf("slices: context %zu, generation %zu; %.2f s\n", ctx.slices().size(), gen.slices().size(), secs);
  EXPECT_GE(c.n, 1500u);
  EXPECT_GE(g.n, 1500u);
  EXPECT_LT(c.median, 0.10);
  EXPECT_LT(g.median, 0.10);
  EXPECT_EQ(c.holds, 0u);  // interior points always find a bracket
  EXPECT_EQ(g.holds, 0u);

  // A real query of each kind resolves with a sane SOL fraction.
  ContextAttentionQuery cq;
  cq.batch = 3;
  cq.seq = 3000;
  cq.num_heads = 32;
  cq.num_kv_heads = 8;
  const Estimate ce = ctx.Query(cq);
  EXPECT_GT(ce.sol_fraction, 0.01);
  EXPECT_LT(ce.sol_fraction, 1.5);
  GenerationAttentionQuery gq;
  gq.batch = 37;
  gq.seq = 3000;
  gq.num_heads = 32;
  gq.num_kv_heads = 8;
  const Estimate ge = gen.Query(gq);
  EXPECT_GT(ge.sol_fraction, 0.01);
  EXPECT_LT(ge.sol_fraction, 1.5);
}

}  // namespace
}  // namespace servecast::perfdb
