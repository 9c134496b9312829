// The DeepSeek family's op lists (src/model/family_deepseek.cpp): MLA shapes per
// tp, the dense first layers, attention DP with expert parallelism, the decode
// overlap of the shared expert, MTP draft layers, the latent KV cache, Kimi-K2
// through the same family and Kimi-K2.5's refusal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "model/family.h"
#include "model/model_config.h"
#include "op_list_util.h"
#include "model/ops.h"
#include "shared_data.h"

namespace servecast::model {
namespace {

namespace fs = std::filesystem;
using oplist_test::Build;
using oplist_test::Find;
using oplist_test::Has;
using oplist_test::kModels;

class DeepSeekTp : public ::testing::TestWithParam<int> {};

TEST_P(DeepSeekTp, MlaShapesFollowTp) {
  const ModelConfig m = LoadModel("deepseek-ai/DeepSeek-V3", kModels);
  const int tp = GetParam();
  const OpList l = Build(m, {.tp = tp, .moe_ep = tp});
  const std::int64_t heads = 128 / tp;
  // The latent projections are replicated; q_b, kv_b and o are split by heads.
  const Op& down = Find(l.context, "context_downscale_gemm");
  EXPECT_EQ(down.n, 1536 + 512 + 64);
  EXPECT_EQ(down.k, 7168);
  EXPECT_EQ(down.scale, 61);
  EXPECT_EQ(down.quant, "fp8_block");
  EXPECT_EQ(Find(l.context, "context_q_b_proj_gemm").n, heads * 192);
  EXPECT_EQ(Find(l.context, "context_q_b_proj_gemm").k, 1536);
  EXPECT_EQ(Find(l.context, "context_kv_b_proj_gemm").n, heads * 256);
  EXPECT_EQ(Find(l.context, "context_kv_b_proj_gemm").k, 512);
  const Op& attn = Find(l.context, "context_attention");
  EXPECT_EQ(attn.kind, OpKind::kContextMla);
  EXPECT_EQ(attn.heads, heads);
  EXPECT_EQ(attn.kv_quant, "fp8");
  const Op& proj = Find(l.context, "context_proj_gemm");
  EXPECT_EQ(proj.n, 7168);
  EXPECT_EQ(proj.k, heads * 128);
  // Decode: absorbed; no kv_b projection, the two BMMs around the latent attention.
  EXPECT_FALSE(Has(l.generation, "generation_kv_b_proj_gemm"));
  const Op& pre = Find(l.generation, "generation_bmm_pre");
  EXPECT_EQ(pre.kind, OpKind::kMlaBmm);
  EXPECT_EQ(pre.measured_op, "mla_gen_pre");
  EXPECT_EQ(pre.heads, heads);
  EXPECT_EQ(pre.quant, "fp8");
  EXPECT_EQ(Find(l.generation, "generation_attention").kind, OpKind::kGenerationMla);
  EXPECT_EQ(Find(l.generation, "generation_attention").heads, heads);
  EXPECT_EQ(Find(l.generation, "generation_bmm_post").measured_op, "mla_gen_post");
  // Dense FFN of the first 3 layers, split by tp, with their all-reduces.
  const Op& dense = Find(l.context, "context_dense_gate_ffn1_gemm");
  EXPECT_EQ(dense.n, 2 * 18432 / tp);
  EXPECT_EQ(dense.scale, 3);
  EXPECT_EQ(Find(l.context, "context_dense_ffn2_gemm").k, 18432 / tp);
  EXPECT_EQ(Has(l.context, "context_dense_ar_1"), tp > 1);
  // 58 MoE layers; experts sliced by ep, the shared expert by tp.
  const Op& moe = Find(l.context, "context_moe");
  EXPECT_EQ(moe.scale, 58);
  EXPECT_EQ(moe.experts, 256);
  EXPECT_EQ(moe.moe_ep, tp);
  EXPECT_EQ(moe.distribution, "power_law_1.01");
  EXPECT_EQ(Find(l.context, "context_router_gemm").scale, 58);
  EXPECT_EQ(Find(l.context, "context_shared_gate_ffn1_gemm").n, 2 * 2048 / tp);
  if (tp > 1) {
    EXPECT_EQ(Find(l.context, "context_moe_pre_dispatch").scale, 58);
  }
  // Vocabulary split by tp; the context computes each request's last token.
  EXPECT_EQ(Find(l.context, "context_logits_gemm").n, (129280 + tp - 1) / tp);
  EXPECT_EQ(Find(l.context, "context_logits_gemm").tokens, TokenRule::kPerRequest);
  // The latent cache is the same on every GPU: L x (512 + 64).
  EXPECT_DOUBLE_EQ(KvElemsPerToken(m, {.tp = tp, .moe_ep = tp}), 61.0 * 576);
}

INSTANTIATE_TEST_SUITE_P(Tp, DeepSeekTp, ::testing::Values(1, 2, 4, 8));

TEST(DeepSeekOps, DecodeOverlapsTheSharedExpertWithTheRoutedPath) {
  const ModelConfig m = LoadModel("deepseek-ai/DeepSeek-V3", kModels);
  const OpList l = Build(m, {.tp = 8, .moe_ep = 8});
  for (const char* shared :
       {"generation_shared_gate_ffn1_gemm", "generation_shared_act_gate", "generation_shared_ffn2_gemm"})
    EXPECT_EQ(Find(l.generation, shared).overlap, 2) << shared;
  for (const char* routed :
       {"generation_router_gemm", "generation_moe_pre_dispatch", "generation_moe", "generation_moe_post_dispatch"})
    EXPECT_EQ(Find(l.generation, routed).overlap, 1) << routed;
  for (const Op& op : l.context) EXPECT_EQ(op.overlap, 0) << op.name;  // prefill runs one stream
  EXPECT_EQ(Find(l.generation, "generation_attention").overlap, 0);
}

TEST(DeepSeekOps, AttentionDpWithExpertParallelism) {
  const ModelConfig m = LoadModel("deepseek-ai/DeepSeek-V3", kModels);
  // TRT-LLM: dp 8, tp 1 -> full heads per rank, experts over 8 GPUs fed by 8 ranks,
  // all-gather before and reduce-scatter after the experts (no attention all-reduce).
  const OpList t = Build(m, {.tp = 1, .dp = 8, .moe_ep = 8});
  EXPECT_EQ(Find(t.context, "context_attention").heads, 128);
  EXPECT_EQ(Find(t.context, "context_moe").token_multiplier, 8);
  EXPECT_EQ(Find(t.context, "context_moe_pre_dispatch").collective, "all_gather");
  EXPECT_EQ(Find(t.context, "context_moe_pre_dispatch").volume_factor, 8);
  EXPECT_EQ(Find(t.context, "context_moe_post_dispatch").collective, "reduce_scatter");
  EXPECT_FALSE(Has(t.context, "context_dense_ar_1"));  // dense layers run on the rank's own tokens
  EXPECT_EQ(Find(t.context, "context_dense_gate_ffn1_gemm").n, 2 * 18432);
  // SGLang: tp 2 x dp 4 over moe_tp 1 x moe_ep 8: reduce-scatter over the attention
  // group then all-gather over all GPUs before the experts.
  const OpList s = Build(m, {.tp = 2, .dp = 4, .moe_ep = 8}, Engine::kSglang);
  EXPECT_EQ(Find(s.context, "context_attention").heads, 64);
  EXPECT_EQ(Find(s.context, "context_moe_pre_dispatch_rs").gpus, 2);
  EXPECT_EQ(Find(s.context, "context_moe_pre_dispatch_ag").gpus, 8);
  EXPECT_EQ(Find(s.context, "context_moe_pre_dispatch_ag").volume_factor, 4);
  // vLLM shares the MLA op list (its MLA backends absorb decode too).
  const OpList v = Build(m, {.tp = 8, .moe_ep = 8}, Engine::kVllm);
  EXPECT_EQ(Find(v.generation, "generation_attention").kind, OpKind::kGenerationMla);
  EXPECT_TRUE(Has(v.generation, "generation_bmm_pre"));
}

TEST(DeepSeekOps, MtpAddsDraftMoeLayersToDecode) {
  const ModelConfig m = LoadModel("deepseek-ai/DeepSeek-V3", kModels);
  const OpList l = Build(m, {.tp = 8, .moe_ep = 8}, Engine::kTrtllm, 1);
  EXPECT_DOUBLE_EQ(Find(l.generation, "generation_attention").scale, 62);
  EXPECT_DOUBLE_EQ(Find(l.generation, "generation_moe").scale, 59);
  EXPECT_DOUBLE_EQ(Find(l.generation, "generation_dense_gate_ffn1_gemm").scale, 3);
  EXPECT_DOUBLE_EQ(Find(l.context, "context_moe").scale, 58);  // prefill runs no draft layer
}

TEST(DeepSeekOps, KimiK2UsesTheSameFamily) {
  const ModelConfig m = LoadModel("moonshotai/Kimi-K2-Instruct", kModels);
  EXPECT_STREQ(FamilyOf(m).Name(), "deepseek");
  const OpList l = Build(m, {.tp = 8, .moe_ep = 8});
  EXPECT_EQ(Find(l.context, "context_attention").heads, 8);  // 64 heads / tp 8
  EXPECT_EQ(Find(l.context, "context_q_b_proj_gemm").n, 8 * 192);
  EXPECT_EQ(Find(l.context, "context_moe").experts, 384);
  EXPECT_EQ(Find(l.context, "context_moe").scale, 60);  // one dense layer
  EXPECT_EQ(Find(l.context, "context_dense_gate_ffn1_gemm").scale, 1);
  EXPECT_EQ(Find(l.context, "context_logits_gemm").n, 163840 / 8);
}

// Kimi-K2.5 (bundled): a DeepSeek-V3 text model whose routed experts are int4
// weight-only; its MoE ops read moe_perf rows of int4_wo, its GEMMs stay bf16.
TEST(DeepSeekOps, KimiK25ReadsTheInt4WeightOnlyExperts) {
  const ModelConfig m = LoadModel("moonshotai/Kimi-K2.5", kModels);
  EXPECT_STREQ(FamilyOf(m).Name(), "deepseek");
  EXPECT_EQ(m.quant.moe, "int4_wo");
  EXPECT_EQ(m.quant.gemm, "bfloat16");
  EXPECT_EQ(m.num_experts, 384);
  const OpList l = Build(m, {.tp = 8, .moe_ep = 8});
  EXPECT_EQ(Find(l.context, "context_moe").quant, "int4_wo");
  EXPECT_EQ(Find(l.generation, "generation_moe").quant, "int4_wo");
  EXPECT_EQ(Find(l.context, "context_q_b_proj_gemm").quant, "bfloat16");
}

}  // namespace
}  // namespace servecast::model
