// The search over a DeepSeek model (src/search/search.cpp with the DeepSeek
// family's knobs): attention DP and expert parallelism are enumerated, and with
// --nextn every point is tried with and without MTP.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "model/family.h"
#include "model/model_config.h"
#include "model/ops.h"
#include "search/search.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "serve/session.h"
#include "system/system_spec.h"

namespace servecast::search {
namespace {

const std::string kSource = SERVECAST_SOURCE_DIR;

bool HasConfig(const std::vector<model::ParallelConfig>& c, int tp, int dp, int moe_tp, int moe_ep) {
  return std::any_of(c.begin(), c.end(), [&](const model::ParallelConfig& p) {
    return p.tp == tp && p.dp == dp && p.moe_tp == moe_tp && p.moe_ep == moe_ep;
  });
}

TEST(DeepSeekSearch, EnumeratesAttentionDpAndExpertParallelism) {
  const model::ModelConfig m = model::LoadModel("deepseek-ai/DeepSeek-V3", kSource + "/models");
  const auto trt = EnumerateParallel(m, model::Engine::kTrtllm, 8);
  EXPECT_TRUE(HasConfig(trt, 1, 8, 1, 8));
  EXPECT_TRUE(HasConfig(trt, 8, 1, 1, 8));
  EXPECT_TRUE(HasConfig(trt, 8, 1, 8, 1));
  EXPECT_FALSE(HasConfig(trt, 2, 4, 1, 8));  // trtllm: dp > 1 needs tp 1
  const auto sgl = EnumerateParallel(m, model::Engine::kSglang, 8);
  EXPECT_TRUE(HasConfig(sgl, 2, 4, 1, 8));
  for (const auto& p : sgl) EXPECT_EQ(p.tp * p.dp, p.moe_tp * p.moe_ep) << p.ToString();
}

SearchResult Search(int nextn, double accepted) {
  const systems::SystemSpec spec = systems::LoadSystemByName(kSource + "/tests/goldens/systems", "tiny_gpu");
  serve::Deployment d(model::LoadModel(kSource + "/tests/goldens/models/tiny-deepseek", kSource + "/models"), spec);
  SearchInputs in;
  in.engine = model::Engine::kTrtllm;
  in.total_gpus = 2;
  in.isl = 64;
  in.osl = 8;
  in.ttft_ms = 1000;
  in.tpot_ms = 1000;
  in.nextn = nextn;
  in.mtp_accepted = accepted;
  serve::DatabaseOptions dbo;
  dbo.roots = {kSource + "/tests/goldens/data"};
  dbo.backend = "deepseek";
  dbo.version = "1";
  d.OpenData(dbo, SearchNeeds(d, in));
  const serve::EngineProfile engine = serve::LoadEngineProfileByName(kSource + "/engines", in.engine);
  return RunSearch(d.model(), d.db(), engine, in);
}

TEST(DeepSeekSearch, TriesEveryPointWithAndWithoutMtp) {
  const SearchResult with = Search(1, 0.9);
  ASSERT_FALSE(with.modes.empty());
  std::set<int> seen;
  for (const ModeResult& r : with.modes)
    for (const Point& p : r.points) {
      seen.insert(p.nextn);
      EXPECT_EQ(p.Parallel().find(" mtp1") != std::string::npos, p.nextn == 1) << p.Parallel();
    }
  EXPECT_EQ(seen, (std::set<int>{0, 1}));
  const SearchResult without = Search(0, 0);
  std::size_t plain = 0, doubled = 0;
  for (const ModeResult& r : without.modes) {
    plain += r.points.size();
    for (const Point& p : r.points) EXPECT_EQ(p.nextn, 0);
  }
  for (const ModeResult& r : with.modes) doubled += r.points.size();
  EXPECT_GT(plain, 0u);
  EXPECT_GT(doubled, plain);  // the MTP points come on top of the plain ones
}

}  // namespace
}  // namespace servecast::search
