// Memory model (src/serve/memory.h; AIC §3.5) and the quantization post-steps
// (src/serve/session.h), on the golden fixtures (tests/goldens).
#include "serve/memory.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "model/model_config.h"
#include "model/ops.h"
#include "serve/engine_profile.h"
#include "serve/session.h"
#include "system/system_spec.h"

namespace servecast::serve {
namespace {

const std::string kSource = SERVECAST_SOURCE_DIR;

struct Fixture {
  systems::SystemSpec spec = systems::LoadSystemByName(kSource + "/tests/goldens/systems", "tiny_gpu");
  model::ModelConfig dense = model::LoadModel(kSource + "/tests/goldens/models/tiny-dense", kSource + "/models");
};

TEST(Memory, DenseTp2HandNumbers) {
  Fixture f;
  const model::ParallelConfig p{.tp = 2};
  const model::OpList ops = model::BuildOpList(f.dense, p, {});
  const EngineProfile e = LoadEngineProfileByName(kSource + "/engines", model::Engine::kTrtllm);
  MemoryInputs in{.batch = 4, .tokens = 4 * 100, .seq_len = 150, .nextn = 0};
  const MemoryBreakdown m = EstimateMemory(f.dense, p, ops, f.spec, e, in);
  // weights: embedding 512x512 + 2 x (384x512 + 512x256 + 1024x512 + 512x512) + logits 512x512, x 2 B
  EXPECT_DOUBLE_EQ(m.weights, 5505024);
  EXPECT_DOUBLE_EQ(m.kv_bytes_per_token, 1 * 64 * 2 * 2 * 2);
  EXPECT_DOUBLE_EQ(m.kv_cache, 4 * 150 * 512);
  EXPECT_DOUBLE_EQ(m.activations, 73400320);  // 2 x 400 x 512 x 6.5 = 2662400 < floor
  EXPECT_DOUBLE_EQ(m.nccl, 1e8);
  EXPECT_DOUBLE_EQ(m.other, 1e9);
  EXPECT_DOUBLE_EQ(m.total, 5505024 + 73400320 + 307200 + 1e8 + 1e9);
  const double budget = (1e10 - (5505024 + 73400320 + 1e8 + 1e9)) * 0.9 * 0.985 * 0.98;
  EXPECT_NEAR(m.kv_budget, budget, 1e-3);
  EXPECT_EQ(m.max_batch, static_cast<std::int64_t>(budget / (150 * 512)));
  EXPECT_FALSE(m.oom);
  EXPECT_FALSE(m.kv_oom);
}

TEST(Memory, ActivationsAboveFloorScaleWithMtpAndEngine) {
  Fixture f;
  const model::ParallelConfig p{.tp = 1};
  const model::OpList ops = model::BuildOpList(f.dense, p, {});
  const EngineProfile sg = LoadEngineProfileByName(kSource + "/engines", model::Engine::kSglang);
  // 2 x 20000 tokens x (8 x 64) x 14 = 286720000 > the 90 MiB floor; x 1.15; x (nextn + 1) = 2.
  MemoryInputs in{.batch = 1, .tokens = 20000, .seq_len = 100, .nextn = 1};
  const MemoryBreakdown m = EstimateMemory(f.dense, p, ops, f.spec, sg, in);
  EXPECT_DOUBLE_EQ(m.activations, 2.0 * 20000 * 512 * 14 * 2 * 1.15);
  EXPECT_DOUBLE_EQ(m.other, 1.2e9);
  // of_total: capacity x 0.88 x 0.98 - non-KV
  EXPECT_NEAR(m.kv_budget, 1e10 * 0.88 * 0.98 - (m.weights + m.activations + m.nccl + m.other), 1e-3);
}

TEST(Memory, OomWhenKvDoesNotFit) {
  Fixture f;
  const model::ParallelConfig p{.tp = 1};
  const model::OpList ops = model::BuildOpList(f.dense, p, {});
  const EngineProfile e = LoadEngineProfileByName(kSource + "/engines", model::Engine::kVllm);
  // 1024 bytes/token: 10 GB of KV needs ~9.8M tokens.
  MemoryInputs in{.batch = 1000, .tokens = 1000, .seq_len = 10000, .nextn = 0};
  const MemoryBreakdown m = EstimateMemory(f.dense, p, ops, f.spec, e, in);
  EXPECT_DOUBLE_EQ(m.kv_cache, 1000.0 * 10000 * 1024);
  EXPECT_TRUE(m.oom);
  EXPECT_TRUE(m.kv_oom);
  EXPECT_LT(m.max_batch, 1000);
}

TEST(Session, DeploymentAnswersFp4OnHopperWithWhatRunsThere) {
  Fixture f;
  model::ModelConfig m = f.dense;
  m.quant.gemm = "nvfp4";
  m.quant.moe = "nvfp4";
  const Deployment d(m, f.spec);
  EXPECT_EQ(d.model().quant.gemm, "bfloat16");
  EXPECT_EQ(d.model().quant.moe, "w4a16_mxfp4");
  ASSERT_EQ(d.system_notes().size(), 2u);
  EXPECT_NE(d.system_notes()[0].find("gemm nvfp4 -> bfloat16: sm 90 has no FP4 tensor cores"), std::string::npos)
      << d.system_notes()[0];
  EXPECT_NE(d.system_notes()[1].find("moe nvfp4 -> w4a16_mxfp4"), std::string::npos) << d.system_notes()[1];
  EXPECT_EQ(d.model().quant_notes.size(), f.dense.quant_notes.size() + 2);
  for (const model::Op& op : d.Ops({}, {}).context) {
    if (op.kind == model::OpKind::kGemm) {
      EXPECT_EQ(op.quant, "bfloat16") << op.name;
    }
  }

  // A flag asking for fp4 is answered the same way, with both notes (the override's and the system's).
  model::QuantOverrides ov;
  ov.gemm = "nvfp4";
  ov.moe = "w4a8_mxfp4_mxfp8";
  const Deployment o(f.dense, f.spec, ov);
  EXPECT_EQ(o.model().quant.gemm, "bfloat16");
  EXPECT_EQ(o.model().quant.moe, "w4a16_mxfp4");
  EXPECT_EQ(o.model().quant_notes.size(), f.dense.quant_notes.size() + 4);
  ASSERT_EQ(o.system_notes().size(), 2u);
  EXPECT_NE(o.system_notes()[1].find("moe w4a8_mxfp4_mxfp8 -> w4a16_mxfp4"), std::string::npos);

  // Weight-only fp4 and other modes run on Hopper: untouched, no note.
  model::QuantOverrides wo;
  wo.gemm = "nvfp4_wo";
  wo.moe = "w4a16_nvfp4";
  const Deployment w(f.dense, f.spec, wo);
  EXPECT_EQ(w.model().quant.gemm, "nvfp4_wo");
  EXPECT_EQ(w.model().quant.moe, "w4a16_nvfp4");
  EXPECT_TRUE(w.system_notes().empty());

  systems::SystemSpec blackwell = f.spec;
  blackwell.gpu.sm_version = 100;
  const Deployment b(m, blackwell);
  EXPECT_EQ(b.model().quant.gemm, "nvfp4");
  EXPECT_EQ(b.model().quant.moe, "nvfp4");
  EXPECT_TRUE(b.system_notes().empty());

  model::QuantOverrides bad;
  bad.gemm = "fp9";
  EXPECT_THROW(Deployment(f.dense, f.spec, bad), UsageError);
}

TEST(Session, DeploymentDropsFp8FmhaWithoutFp8Slice) {
  Fixture f;
  model::ModelConfig m = f.dense;
  m.quant.fmha = "fp8";
  DatabaseOptions o;
  o.roots = {kSource + "/tests/goldens/data"};
  o.backend = "dense";
  o.version = "1";
  Deployment d(m, f.spec);
  EXPECT_THROW(d.db(), Error);                            // no data yet
  EXPECT_EQ(d.Ops({}, {}).context[3].fmha_quant, "fp8");  // before the data: as inferred
  d.OpenData(o, d.Needs({model::ParallelConfig{}}, {}));
  EXPECT_EQ(d.model().quant.fmha, "bfloat16");  // the fixture's context_attention_perf is bf16 only
  const model::OpList ops = d.Ops({}, {});
  ASSERT_EQ(ops.context[3].kind, model::OpKind::kContextAttention);
  EXPECT_EQ(ops.context[3].fmha_quant, "bfloat16");  // op lists built after the data follow it

  model::QuantOverrides ov;
  ov.fmha = "fp8";
  Deployment kept(f.dense, f.spec, ov);
  kept.UseData(d.db());
  EXPECT_EQ(kept.model().quant.fmha, "fp8");
}

TEST(Session, NeedsOfListsTheTablesOfTheOps) {
  Fixture f;
  const auto needs = NeedsOf(model::BuildOpList(f.dense, {.tp = 2}, {}));
  EXPECT_TRUE(needs.count(TableNeed::kGemm));
  EXPECT_TRUE(needs.count(TableNeed::kContextAttention));
  EXPECT_TRUE(needs.count(TableNeed::kGenerationAttention));
  EXPECT_TRUE(needs.count(TableNeed::kCustomAllReduce));
  EXPECT_TRUE(needs.count(TableNeed::kElementwise));
  EXPECT_FALSE(needs.count(TableNeed::kMoe));
  EXPECT_FALSE(needs.count(TableNeed::kNccl));
  EXPECT_FALSE(needs.count(TableNeed::kQuantize));
}

}  // namespace
}  // namespace servecast::serve
