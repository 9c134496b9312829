#include "search/support.h"

#include <gtest/gtest.h>

#include "model/model_config.h"
#include "serve/database.h"
#include "system/system_spec.h"

namespace servecast::search {
namespace {

const std::string kSrc = SERVECAST_SOURCE_DIR;

SupportConfig Config(int tp, std::vector<SupportMiss> silicon, std::vector<SupportMiss> hybrid) {
  SupportConfig c;
  c.par.tp = tp;
  c.silicon_misses = std::move(silicon);
  c.hybrid_misses = std::move(hybrid);
  return c;
}

TEST(SupportJudge, PassWhenOneConfigIsAnsweredByTables) {
  const SupportReport r = Judge(model::Engine::kVllm, {Config(1, {{"context_moe", "no moe"}}, {}), Config(2, {}, {})});
  EXPECT_EQ(r.verdict, SupportVerdict::kPass);
  EXPECT_EQ(r.config, "tp2 pp1 dp1 moe_tp1 moe_ep1");
  EXPECT_EQ(r.configs, 2u);
  EXPECT_EQ(r.configs_pass, 1u);
  EXPECT_EQ(r.configs_partial, 1u);
  EXPECT_TRUE(r.reason.empty());
}

TEST(SupportJudge, PartialNamesWhatFallsBack) {
  const SupportReport r =
      Judge(model::Engine::kSglang,
            {Config(1, {{"a", "x"}, {"b", "y"}}, {}), Config(2, {{"context_attention", "no fp8 slice"}}, {}),
             Config(4, {{"a", "x"}}, {{"a", "x"}})});
  EXPECT_EQ(r.verdict, SupportVerdict::kPartial);
  EXPECT_EQ(r.config, "tp2 pp1 dp1 moe_tp1 moe_ep1");  // the fewest fallbacks
  ASSERT_EQ(r.fallbacks.size(), 1u);
  EXPECT_EQ(r.fallbacks[0], "context_attention: no fp8 slice");
  EXPECT_NE(r.reason.find("1 op(s) fall back"), std::string::npos);
}

TEST(SupportJudge, FailGivesTheMisses) {
  const SupportReport r = Judge(model::Engine::kTrtllm, {Config(1, {{"context_moe", "moe_perf is not in the database"}},
                                                                {{"context_moe", "moe_perf is not in the database"}})});
  EXPECT_EQ(r.verdict, SupportVerdict::kFail);
  EXPECT_EQ(r.reason, "context_moe: moe_perf is not in the database");
  SupportConfig bad;
  bad.invalid = "DeepSeek is not yet supported";
  const SupportReport r2 = Judge(model::Engine::kTrtllm, {bad});
  EXPECT_EQ(r2.verdict, SupportVerdict::kFail);
  EXPECT_EQ(r2.reason, "DeepSeek is not yet supported");
  EXPECT_EQ(r2.configs, 0u);
}

// Fixture data: tiny-dense at tp 1 on dense/1 (the golden static cases' shapes) is
// answered by the tables; tiny-moe on the same data lacks moe_perf.
TEST(SupportFixture, TablesAnswerOrMissNamingTheTable) {
  const auto spec = systems::LoadSystemByName(kSrc + "/tests/goldens/systems", "tiny_gpu");
  serve::DatabaseOptions o;
  o.roots = {kSrc + "/tests/goldens/data"};
  o.backend = "dense";
  o.version = "1";
  auto silicon = serve::Database::Open(spec, o, {serve::TableNeed::kGemm, serve::TableNeed::kContextAttention,
                                                 serve::TableNeed::kGenerationAttention, serve::TableNeed::kMoe,
                                                 serve::TableNeed::kCustomAllReduce});
  SupportWorkload w;
  w.isl = 64;
  w.osl = 2;
  w.batches = {2};
  model::OpListOptions oo;
  oo.gpus_per_node = spec.node.gpus_per_node;
  const auto dense = model::LoadModel(kSrc + "/tests/goldens/models/tiny-dense", kSrc + "/models");
  const SupportConfig ok = CheckConfig(dense, model::ParallelConfig{}, oo, *silicon, nullptr, w);
  EXPECT_TRUE(ok.invalid.empty());
  EXPECT_TRUE(ok.silicon_misses.empty()) << ok.silicon_misses.front().op << ": " << ok.silicon_misses.front().reason;

  const auto moe = model::LoadModel(kSrc + "/tests/goldens/models/tiny-moe", kSrc + "/models");
  const SupportConfig miss = CheckConfig(moe, model::ParallelConfig{}, oo, *silicon, nullptr, w);
  ASSERT_FALSE(miss.silicon_misses.empty());
  bool moe_named = false;
  for (const auto& m : miss.silicon_misses)
    if (m.op.find("moe") != std::string::npos && m.reason.find("moe") != std::string::npos) moe_named = true;
  EXPECT_TRUE(moe_named);
  const SupportReport r = Judge(model::Engine::kTrtllm, {miss});
  EXPECT_EQ(r.verdict, SupportVerdict::kFail);  // no HYBRID database given
}

}  // namespace
}  // namespace servecast::search
