// The op lists of issue 25's families: Qwen3.5 dense and MoE (Gated DeltaNet
// interleaved with gated attention, src/model/family_qwen3_5.cpp), Nemotron-H
// (Mamba2 / attention / MoE from hybrid_override_pattern,
// src/model/family_nemotron_h.cpp) and DSA (DeepSeek-V3.2, GLM-5: MLA with the
// lightning indexer as one module per layer, src/model/family_deepseek.cpp); their
// KV cache (attention layers only; DSA's indexer keys) and recurrent state.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "model/family.h"
#include "model/model_config.h"
#include "model/ops.h"
#include "op_list_util.h"

namespace servecast::model {
namespace {

using oplist_test::Build;
using oplist_test::Find;
using oplist_test::Has;
using oplist_test::kModels;

// The dense parallel rules (op_builder's ValidateDenseParallel), shared by the dense
// family and dense Qwen3.5: no attention DP, tp divides the FFN width.
TEST(Qwen35Ops, DenseFamiliesRefuseAttentionDpAndATpThatSplitsTheFfn) {
  for (const char* id : {"Qwen/Qwen3.5-27B", "Qwen/Qwen3-32B"}) {
    const ModelConfig m = LoadModel(id, kModels);
    try {
      Build(m, {.tp = 2, .dp = 2});
      ADD_FAILURE() << id << ": dp 2 accepted";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()), "attention data parallelism (dp 2) applies to MoE models; " + m.name +
                                           " is dense (run more replicas instead)");
    }
    ModelConfig odd = m;  // an FFN width tp 2 cannot split, the heads still can
    odd.intermediate_size += 1;
    try {
      Build(odd, {.tp = 2});
      ADD_FAILURE() << id << ": tp 2 accepted for an odd FFN width";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()), "tp 2 does not divide the FFN width " + std::to_string(odd.intermediate_size) +
                                           " of " + m.name);
    }
    EXPECT_NO_THROW(Build(m, {.tp = 2}));
  }
}

TEST(Qwen35Ops, DenseInterleavesGatedDeltaNetWithGatedAttention) {
  const ModelConfig m = LoadModel("Qwen/Qwen3.5-27B", kModels);
  EXPECT_STREQ(FamilyOf(m).Name(), "qwen3_5");
  EXPECT_EQ(m.num_layers, 64);
  EXPECT_EQ(m.attention_layers, 16);  // every 4th layer (layer_types)
  EXPECT_EQ(m.recurrent_layers, 48);
  const OpList l = Build(m, {.tp = 4});
  // Gated attention: q and its gate, k, v; head dim 256, q/k norm; 16 layers.
  const Op& qkv = Find(l.context, "context_qkv_gemm");
  EXPECT_EQ(qkv.n, 2 * 6 * 256 + 2 * 256 * 1);  // 24 / 4 heads, 4 / 4 KV heads
  EXPECT_EQ(qkv.scale, 16);
  const Op& attn = Find(l.context, "context_attention");
  EXPECT_EQ(attn.kind, OpKind::kContextAttention);
  EXPECT_EQ(attn.head_dim, 256);
  EXPECT_TRUE(attn.qk_norm);
  EXPECT_EQ(attn.scale, 16);
  // Gated DeltaNet: in_proj of q, k, v, z, b, a over tp; the table op; out_proj.
  const Op& in = Find(l.context, "context_gdn_in_proj_gemm");
  EXPECT_EQ(in.n, 2 * 4 * 128 + 2 * 12 * 128 + 2 * 12);  // 16 / 4 key heads, 48 / 4 value heads
  EXPECT_EQ(in.k, 5120);
  EXPECT_EQ(in.scale, 48);
  const Op& gdn = Find(l.context, "context_gdn");
  EXPECT_EQ(gdn.kind, OpKind::kTable);
  EXPECT_EQ(gdn.table, "gdn_perf");
  EXPECT_EQ(gdn.scale, 48);
  EXPECT_EQ(gdn.table_key.Str("phase"), "context");
  EXPECT_EQ(gdn.table_key.Num("num_k_heads"), 4);
  EXPECT_EQ(gdn.table_key.Num("num_v_heads"), 12);
  EXPECT_EQ(gdn.table_key.Num("d_conv"), 4);
  EXPECT_FALSE(gdn.table_key.Has("seq_len"));  // the pass gives it
  const Op& dec = Find(l.generation, "generation_gdn");
  EXPECT_EQ(dec.table_key.Str("phase"), "generation");
  EXPECT_EQ(dec.table_key.Num("seq_len"), 1);  // one recurrent step
  EXPECT_EQ(Find(l.context, "context_gdn_out_proj_gemm").k, 12 * 128);
  // Dense FFN in every layer, over tp.
  EXPECT_EQ(Find(l.context, "context_gate_ffn1_gemm").n, 2 * 17408 / 4);
  EXPECT_EQ(Find(l.context, "context_gate_ffn1_gemm").scale, 64);
  EXPECT_TRUE(Has(l.context, "context_ar_1"));
  // tp must divide the key heads.
  EXPECT_THROW(Build(m, {.tp = 32}), UsageError);
  // MTP: the draft layer is a gated attention layer; the GDN layers stay 48.
  const OpList mtp = Build(m, {.tp = 4}, Engine::kTrtllm, 1);
  EXPECT_EQ(Find(mtp.generation, "generation_attention").scale, 17);
  EXPECT_EQ(Find(mtp.generation, "generation_qkv_gemm").scale, 17);
  EXPECT_EQ(Find(mtp.generation, "generation_gdn").scale, 48);
  EXPECT_EQ(Find(mtp.generation, "generation_gate_ffn1_gemm").scale, 65);
  EXPECT_EQ(Find(mtp.context, "context_attention").scale, 16);  // prefill runs no draft layer
  EXPECT_TRUE(FamilyOf(m).Knobs().mtp);
}

TEST(Qwen35Ops, KvCacheOnlyForAttentionAndStatePerSequence) {
  const ModelConfig m = LoadModel("Qwen/Qwen3.5-27B", kModels);
  const ParallelConfig p{.tp = 4};
  // 16 attention layers x ceil(4 / 4) KV heads x 256 x 2 (K and V).
  EXPECT_EQ(KvElemsPerToken(m, p), 16.0 * 1 * 256 * 2);
  // 48 layers x (12 x 128 x 128 float32 + (2 x 4 x 128 + 12 x 128) x 3 x 2 B).
  EXPECT_EQ(FamilyOf(m).StateBytesPerSequence(m, p), 48.0 * (12 * 128 * 128 * 4 + (1024 + 1536) * 3 * 2));
}

TEST(Qwen35Ops, MoeRoutesEveryLayersFfn) {
  const ModelConfig m = LoadModel("Qwen/Qwen3.5-397B-A17B", kModels);
  EXPECT_STREQ(FamilyOf(m).Name(), "qwen3_5_moe");
  EXPECT_EQ(m.num_experts, 512);
  EXPECT_EQ(m.experts_per_token, 10);
  EXPECT_EQ(m.moe_intermediate_size, 1024);
  EXPECT_EQ(m.intermediate_size, 1024);  // no dense FFN key: the expert width
  EXPECT_EQ(m.shared_expert_intermediate_size, 1024);
  EXPECT_EQ(m.attention_layers, 15);
  EXPECT_EQ(m.recurrent_layers, 45);
  const OpList l = Build(m, {.tp = 8, .moe_ep = 8});
  const Op& moe = Find(l.context, "context_moe");
  EXPECT_EQ(moe.experts, 512);
  EXPECT_EQ(moe.topk, 10);
  EXPECT_EQ(moe.scale, 60);
  EXPECT_EQ(Find(l.generation, "generation_gdn").table_key.Num("num_v_heads"), 8);
  EXPECT_EQ(Find(l.context, "context_shared_gate_ffn1_gemm").n, 2 * 1024 / 8);
  EXPECT_FALSE(Has(l.context, "context_ar_1"));  // the dispatch carries the reduction
  const ModelConfig small = LoadModel("Qwen/Qwen3.5-35B-A3B", kModels);
  EXPECT_EQ(small.attention_layers, 10);
  EXPECT_EQ(Find(Build(small, {.tp = 2, .moe_ep = 2}).context, "context_gdn").table_key.Num("num_k_heads"), 8);
}

TEST(NemotronHOps, PatternGivesMambaAttentionAndExpertLayers) {
  const ModelConfig m = LoadModel("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", kModels);
  EXPECT_STREQ(FamilyOf(m).Name(), "nemotron_h");
  // MEMEM*EMEMEM*... : 23 Mamba2, 6 attention, 23 MoE layers.
  EXPECT_EQ(m.recurrent_layers, 23);
  EXPECT_EQ(m.attention_layers, 6);
  EXPECT_EQ(m.moe_layers, 23);
  EXPECT_EQ(m.mlp_layers, 0);
  EXPECT_EQ(m.recurrent_layers + m.attention_layers + m.moe_layers, m.num_layers);
  const OpList l = Build(m, {.tp = 2, .moe_ep = 2});
  // in_proj: z and x (2 x 32 heads x 64), B and C (2 x 4 groups x 128), dt (32).
  const Op& in = Find(l.context, "context_mamba_in_proj_gemm");
  EXPECT_EQ(in.n, 2 * 32 * 64 + 2 * 4 * 128 + 32);
  EXPECT_EQ(in.k, 2688);
  EXPECT_EQ(in.scale, 23);
  const Op& s = Find(l.context, "context_mamba2");
  EXPECT_EQ(s.table, "mamba2_perf");
  EXPECT_EQ(s.table_key.Num("nheads"), 32);
  EXPECT_EQ(s.table_key.Num("n_groups"), 4);
  EXPECT_EQ(s.table_key.Num("d_state"), 128);
  EXPECT_EQ(s.table_key.Num("chunk_size"), 128);
  EXPECT_EQ(Find(l.generation, "generation_mamba2").table_key.Num("seq_len"), 1);
  EXPECT_EQ(Find(l.context, "context_attention").scale, 6);
  EXPECT_EQ(Find(l.context, "context_attention").kv_heads, 1);
  const Op& moe = Find(l.context, "context_moe");
  EXPECT_EQ(moe.scale, 23);
  EXPECT_EQ(moe.experts, 128);
  EXPECT_EQ(moe.topk, 6);
  EXPECT_EQ(moe.inter, 1856);
  EXPECT_EQ(Find(l.context, "context_moe_pre_dispatch").scale, 23);
  // The shared expert is relu2 (not gated): up 3712 / tp, down.
  EXPECT_EQ(Find(l.context, "context_shared_ffn1_gemm").n, 3712 / 2);
  // KV for the 6 attention layers only; the Mamba2 state per sequence.
  const ParallelConfig p{.tp = 2, .moe_ep = 2};
  EXPECT_EQ(KvElemsPerToken(m, p), 6.0 * 1 * 128 * 2);
  EXPECT_EQ(FamilyOf(m).StateBytesPerSequence(m, p), 23.0 * (32 * 64 * 128 * 4 + (32 * 64 + 2 * 4 * 128) * 3 * 2));
}

TEST(DsaOps, AttentionIsOneModuleWithTheIndexersCache) {
  for (const char* id : {"deepseek-ai/DeepSeek-V3.2", "zai-org/GLM-5", "zai-org/GLM-5-FP8"}) {
    SCOPED_TRACE(id);
    const ModelConfig m = LoadModel(id, kModels);
    EXPECT_STREQ(FamilyOf(m).Name(), "deepseek_dsa");
    EXPECT_EQ(m.index_topk, 2048);
    EXPECT_EQ(m.index_head_dim, 128);
    const OpList l = Build(m, {.tp = 8, .moe_ep = 8});
    const Op& c = Find(l.context, "context_dsa_attention");
    EXPECT_EQ(c.kind, OpKind::kTable);
    EXPECT_EQ(c.table, "dsa_context_module_perf");
    EXPECT_EQ(c.table_key.Str("architecture"), m.architecture);
    EXPECT_EQ(c.table_key.Num("num_heads"), m.num_heads / 8);
    EXPECT_EQ(c.table_key.Num("step"), 0);
    EXPECT_EQ(c.table_key.Str("gemm_type"), m.quant.gemm);
    EXPECT_EQ(c.scale, m.num_layers);
    const Op& g = Find(l.generation, "generation_dsa_attention");
    EXPECT_EQ(g.table, "dsa_generation_module_perf");
    EXPECT_EQ(g.table_key.Num("isl"), 1);
    // The module replaces MLA's projections and attention ops.
    EXPECT_FALSE(Has(l.context, "context_q_b_proj_gemm"));
    EXPECT_FALSE(Has(l.generation, "generation_bmm_pre"));
    EXPECT_TRUE(Has(l.context, "context_moe"));
    // Its weights are the module's projections at the GEMM quant.
    EXPECT_EQ(c.quant, m.quant.gemm);
    EXPECT_GT(c.weight_elems, 0);
    // The latent cache (as DeepSeek) plus the indexer's fp8 keys and scales.
    const ParallelConfig p{.tp = 8, .moe_ep = 8};
    EXPECT_EQ(KvElemsPerToken(m, p), static_cast<double>(m.num_layers) * 576);
    EXPECT_EQ(FamilyOf(m).SideCacheBytesPerToken(m, p), static_cast<double>(m.num_layers) * (128 + 4));
  }
  const ModelConfig glm = LoadModel("zai-org/GLM-5", kModels);
  EXPECT_EQ(glm.qk_nope_head_dim, 192);
  EXPECT_EQ(glm.v_head_dim, 256);
  EXPECT_EQ(glm.quant.gemm, "bfloat16");
  EXPECT_EQ(LoadModel("zai-org/GLM-5-FP8", kModels).quant.gemm, "fp8_block");
}

}  // namespace
}  // namespace servecast::model
