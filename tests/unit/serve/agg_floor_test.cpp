// The host scheduling floor of in-flight batching steps (AggProfile::step_ms_per_request).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "model/model_config.h"
#include "model/ops.h"
#include "serve/agg.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "system/system_spec.h"

namespace servecast::serve {
namespace {

const std::string kSrc = SERVECAST_SOURCE_DIR;

TEST(AggHostFloor, StepsTakeAtLeastThePerRequestTimeAndOtherwiseAreUnchanged) {
  const systems::SystemSpec spec = systems::LoadSystemByName(kSrc + "/systems", "h200_sxm");
  const model::ModelConfig m = model::LoadModel("meta-llama/Meta-Llama-3.1-8B", kSrc + "/models");
  DatabaseOptions o;
  o.mode = perfdb::DatabaseMode::kSol;
  auto db = Database::Open(spec, o, {});
  model::ParallelConfig par;
  par.tp = 8;
  model::OpListOptions oo;
  oo.engine = model::Engine::kSglang;
  const model::OpList ops = model::BuildOpList(m, par, oo);
  EngineProfile engine = LoadEngineProfileByName(kSrc + "/engines", model::Engine::kSglang);
  AggInputs in;
  in.batch = 512;
  in.isl = 1000;
  in.osl = 2000;
  in.ctx_tokens = 8000;

  engine.agg.step_ms_per_request = 0;
  const AggEstimate gpu = RunAgg(m, par, ops, *db, engine, in);
  ASSERT_GT(gpu.decode_steps, 0);
  // A floor below every step changes nothing.
  engine.agg.step_ms_per_request = 1e-9;
  const AggEstimate tiny = RunAgg(m, par, ops, *db, engine, in);
  EXPECT_DOUBLE_EQ(tiny.tpot_ms, gpu.tpot_ms);
  EXPECT_DOUBLE_EQ(tiny.ttft_ms, gpu.ttft_ms);
  // A floor above the SOL decode step of 512 requests sets the decode step.
  const double per_request = 2.0 * gpu.decode_step_ms / 512.0;
  engine.agg.step_ms_per_request = per_request;
  const AggEstimate host = RunAgg(m, par, ops, *db, engine, in);
  EXPECT_DOUBLE_EQ(host.decode_step_ms, per_request * 512);
  EXPECT_DOUBLE_EQ(host.mixed_step_ms, std::max(gpu.mixed_step_ms, per_request * 512));
  EXPECT_GT(host.tpot_ms, gpu.tpot_ms);
  EXPECT_LT(host.tokens_per_s, gpu.tokens_per_s);
}

TEST(AggHostFloor, ShippedSglangProfileSetsItAndTheOthersDoNot) {
  EXPECT_DOUBLE_EQ(LoadEngineProfileByName(kSrc + "/engines", model::Engine::kSglang).agg.step_ms_per_request, 0.04);
  EXPECT_DOUBLE_EQ(LoadEngineProfileByName(kSrc + "/engines", model::Engine::kTrtllm).agg.step_ms_per_request, 0);
  EXPECT_DOUBLE_EQ(LoadEngineProfileByName(kSrc + "/engines", model::Engine::kVllm).agg.step_ms_per_request, 0);
  EXPECT_DOUBLE_EQ(
      LoadEngineProfileByName(kSrc + "/engines", model::Engine::kSglang, "aic").agg.step_ms_per_request, 0);
}

}  // namespace
}  // namespace servecast::serve
