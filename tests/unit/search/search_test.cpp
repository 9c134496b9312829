#include "search/search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "model/model_config.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "system/system_spec.h"

namespace servecast::search {
namespace {

const std::string kSrc = SERVECAST_SOURCE_DIR;

model::ModelConfig Model(const std::string& id) { return model::LoadModel(id, kSrc + "/models"); }

TEST(SearchLists, AggBatchesAreAicsFortyFour) {
  const auto b = AggBatches();
  ASSERT_EQ(b.size(), 44u);
  EXPECT_EQ(b.front(), 1);
  EXPECT_EQ(b[14], 15);
  EXPECT_EQ(b[15], 16);
  EXPECT_EQ(b[18], 28);
  EXPECT_EQ(b[19], 32);
  EXPECT_EQ(b.back(), 512);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
}

TEST(SearchLists, DecodeBatchesAreNinetySix) {
  const auto b = DecodeBatches();
  ASSERT_EQ(b.size(), 96u);
  EXPECT_EQ(b[15], 16);
  EXPECT_EQ(b[16], 18);
  EXPECT_EQ(b[23], 32);
  EXPECT_EQ(b.back(), 512);
  EXPECT_EQ(std::set<std::int64_t>(b.begin(), b.end()).size(), b.size());
}

TEST(SearchLists, PrefillBudgetsAreWholeRequests) {
  EXPECT_EQ(CtxTokenBudgets(4000), (std::vector<std::int64_t>{4000, 8000}));
  EXPECT_EQ(CtxTokenBudgets(1024), (std::vector<std::int64_t>{1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192}));
  // Long inputs: one and two requests (max budget 2 x isl).
  EXPECT_EQ(CtxTokenBudgets(16384), (std::vector<std::int64_t>{16384, 32768}));
  for (std::int64_t c : CtxTokenBudgets(300)) EXPECT_EQ(c % 300, 0) << c;
}

TEST(SearchEnumerate, DenseIsTensorParallelUpToEight) {
  const auto m = Model("Qwen/Qwen3-32B");
  const auto configs = EnumerateParallel(m, model::Engine::kTrtllm, 32);
  std::vector<int> tps;
  for (const auto& p : configs) {
    tps.push_back(p.tp);
    EXPECT_EQ(p.pp, 1);
    EXPECT_EQ(p.dp, 1);
  }
  EXPECT_EQ(tps, (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(EnumerateParallel(m, model::Engine::kTrtllm, 2).size(), 2u);
}

TEST(SearchEnumerate, MoeFollowsEngineRules) {
  const auto m = Model("Qwen/Qwen3-30B-A3B");
  for (auto e : {model::Engine::kTrtllm, model::Engine::kVllm, model::Engine::kSglang}) {
    const auto configs = EnumerateParallel(m, e, 16);
    ASSERT_FALSE(configs.empty());
    for (const auto& p : configs) {
      EXPECT_EQ(p.tp * p.dp, p.moe_tp * p.moe_ep) << p.ToString();
      EXPECT_LE(p.tp * p.dp, 16);
      if (e == model::Engine::kTrtllm) {
        EXPECT_FALSE(p.dp > 1 && p.tp > 1) << p.ToString();
      }
      if (e == model::Engine::kVllm) {
        EXPECT_FALSE(p.moe_tp > 1 && p.moe_ep > 1) << p.ToString();
      }
    }
  }
  // trtllm on 16 GPUs: (tp, dp) with tp*dp in {1,2,4,8,16} and tp or dp 1, times the
  // (moe_tp, moe_ep) splits of that width: 1 + 2*2 + 2*3 + 2*4 + 2*5 = 29 (AIC's count).
  std::map<std::string, std::size_t> rejected;
  const auto trt = EnumerateParallel(m, model::Engine::kTrtllm, 16, &rejected);
  std::size_t total = trt.size();
  for (const auto& [why, n] : rejected) total += n;
  EXPECT_EQ(total, 29u);
  // Qwen3-30B-A3B has 32 heads and 4 KV heads: every config with tp <= 16 divides the
  // heads, and moe_tp must divide the expert width 768 (16 does not: 768/16 = 48 ok).
  EXPECT_EQ(trt.size(), 29u);
}

TEST(SearchPareto, KeepsOnlyNonDominatedPoints) {
  std::vector<Point> pts(5);
  auto set = [&](std::size_t i, double user, double gpu) {
    pts[i].tokens_per_s_user = user;
    pts[i].tokens_per_s_gpu_cluster = gpu;
  };
  set(0, 10, 100);  // frontier
  set(1, 20, 80);   // frontier
  set(2, 15, 70);   // dominated by 1
  set(3, 30, 20);   // frontier
  set(4, 5, 90);    // dominated by 0
  const auto f = ParetoFrontier(pts);
  EXPECT_EQ(f, (std::vector<std::size_t>{0, 1, 3}));
}

// A whole search on rooflines (no tables): every best row meets the limits and
// lies on or under the frontier; the modes rank by tokens/s/GPU.
TEST(SearchRun, SolModeFindsFeasibleDeployments) {
  systems::SystemSpec spec = systems::LoadSystemByName(kSrc + "/systems", "h200_sxm");
  auto m = Model("meta-llama/Meta-Llama-3.1-8B");
  serve::DatabaseOptions o;
  o.mode = perfdb::DatabaseMode::kSol;
  auto db = serve::Database::Open(spec, o, {});
  const auto engine = serve::LoadEngineProfileByName(kSrc + "/engines", model::Engine::kTrtllm);
  SearchInputs in;
  in.total_gpus = 8;
  in.isl = 1024;
  in.osl = 256;
  in.ttft_ms = 500;
  in.tpot_ms = 20;
  const SearchResult r = RunSearch(m, *db, engine, in);
  ASSERT_EQ(r.modes.size(), 2u);
  ASSERT_GE(r.chosen, 0);
  for (const ModeResult& mr : r.modes) {
    EXPECT_GT(mr.evaluated, 0u);
    ASSERT_FALSE(mr.best.empty()) << ModeName(mr.mode);
    EXPECT_TRUE(mr.best_meets_sla);
    for (std::size_t i : mr.best) {
      const Point& p = mr.points[i];
      EXPECT_LE(p.ttft_ms, in.ttft_ms);
      EXPECT_LE(p.tpot_ms, in.tpot_ms);
      EXPECT_EQ(p.replicas, in.total_gpus / p.gpus_per_replica);
      EXPECT_NEAR(p.tokens_per_s_user, 1000.0 / p.tpot_ms, 1e-9);
    }
    // No feasible point dominates a frontier point (faster per user and better per GPU).
    for (std::size_t f : mr.frontier) {
      const Point& fp = mr.points[f];
      for (const Point& q : mr.points)
        EXPECT_FALSE(q.tokens_per_s_user > fp.tokens_per_s_user &&
                     q.tokens_per_s_gpu_cluster > fp.tokens_per_s_gpu_cluster);
    }
    for (std::size_t k = 1; k < mr.best.size(); ++k)
      EXPECT_GE(mr.points[mr.best[k - 1]].tokens_per_s_gpu_cluster, mr.points[mr.best[k]].tokens_per_s_gpu_cluster);
    // Frontier: sorted by tokens/s/user with tokens/s/GPU falling.
    for (std::size_t k = 1; k < mr.frontier.size(); ++k) {
      EXPECT_LT(mr.points[mr.frontier[k - 1]].tokens_per_s_user, mr.points[mr.frontier[k]].tokens_per_s_user);
      EXPECT_GT(mr.points[mr.frontier[k - 1]].tokens_per_s_gpu_cluster,
                mr.points[mr.frontier[k]].tokens_per_s_gpu_cluster);
    }
  }
  const double a = r.modes[0].points[r.modes[0].best[0]].tokens_per_s_gpu_cluster;
  const double d = r.modes[1].points[r.modes[1].best[0]].tokens_per_s_gpu_cluster;
  EXPECT_EQ(r.chosen, a >= d ? 0 : 1);
  EXPECT_NEAR(r.chosen_ratio, std::max(a, d) / std::min(a, d), 1e-9);
}

TEST(SearchRun, ImpossibleLimitsShowTheNearestFlagged) {
  systems::SystemSpec spec = systems::LoadSystemByName(kSrc + "/systems", "h200_sxm");
  auto m = Model("meta-llama/Meta-Llama-3.1-8B");
  serve::DatabaseOptions o;
  o.mode = perfdb::DatabaseMode::kSol;
  auto db = serve::Database::Open(spec, o, {});
  const auto engine = serve::LoadEngineProfileByName(kSrc + "/engines", model::Engine::kVllm);
  SearchInputs in;
  in.engine = model::Engine::kVllm;
  in.total_gpus = 4;
  in.isl = 1024;
  in.osl = 128;
  in.ttft_ms = 10000;
  in.tpot_ms = 0.01;  // no GPU decodes a token in 10 µs
  in.disagg = false;
  const SearchResult r = RunSearch(m, *db, engine, in);
  ASSERT_EQ(r.modes.size(), 1u);
  const ModeResult& mr = r.modes[0];
  EXPECT_FALSE(mr.best_meets_sla);
  ASSERT_FALSE(mr.best.empty());
  for (std::size_t i : mr.best) EXPECT_FALSE(mr.points[i].meets_sla);
}

}  // namespace
}  // namespace servecast::search
