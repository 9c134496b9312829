// Op lists per phase under a parallel config and engine (src/model/ops.h; AIC §2.2-2.6).
#include "model/ops.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "model/model_config.h"
#include "op_list_util.h"

namespace servecast::model {
namespace {

using oplist_test::Build;
using oplist_test::Find;
using oplist_test::Has;
using oplist_test::kModels;

class Llama8B : public ::testing::TestWithParam<int> {};

TEST_P(Llama8B, DenseShapesFollowTp) {
  const ModelConfig m = LoadModel("meta-llama/Meta-Llama-3.1-8B", kModels);
  const int tp = GetParam();
  const OpList l = Build(m, {.tp = tp});
  const std::int64_t kvg = (8 + tp - 1) / tp;
  const Op& qkv = Find(l.context, "context_qkv_gemm");
  EXPECT_EQ(qkv.n, 4096 / tp + 2 * 128 * kvg);
  EXPECT_EQ(qkv.k, 4096);
  EXPECT_EQ(qkv.scale, 32);
  const Op& attn = Find(l.context, "context_attention");
  EXPECT_EQ(attn.kind, OpKind::kContextAttention);
  EXPECT_EQ(attn.heads, 32 / tp);
  EXPECT_EQ(attn.kv_heads, kvg);
  EXPECT_EQ(attn.head_dim, 128);
  const Op& proj = Find(l.context, "context_proj_gemm");
  EXPECT_EQ(proj.n, 4096);
  EXPECT_EQ(proj.k, 4096 / tp);
  EXPECT_TRUE(proj.low_precision_input);
  EXPECT_EQ(Find(l.context, "context_gate_ffn1_gemm").n, 2 * 14336 / tp);
  EXPECT_EQ(Find(l.context, "context_ffn2_gemm").k, 14336 / tp);
  const Op& act = Find(l.context, "context_act_gate");
  EXPECT_EQ(act.dim_in, 2 * 14336 / tp);
  EXPECT_EQ(act.dim_out, 14336 / tp);
  const Op& logits = Find(l.context, "context_logits_gemm");
  EXPECT_EQ(logits.n, (128256 + tp - 1) / tp);
  EXPECT_EQ(logits.tokens, TokenRule::kPerRequest);
  EXPECT_EQ(logits.scale, 1);
  EXPECT_EQ(Find(l.generation, "generation_logits_gemm").tokens, TokenRule::kAllTokens);
  EXPECT_EQ(Find(l.context, "context_embedding").weight_elems, static_cast<double>((128256 + tp - 1) / tp) * 4096);
  // All-reduces exist only with tp > 1: two per layer plus the embedding's.
  EXPECT_EQ(Has(l.context, "context_ar_1"), tp > 1);
  EXPECT_EQ(Has(l.generation, "generation_ar_2"), tp > 1);
  EXPECT_EQ(Has(l.context, "context_embedding_ar"), tp > 1);
  if (tp > 1) {
    EXPECT_EQ(Find(l.context, "context_ar_1").gpus, tp);
    EXPECT_EQ(Find(l.context, "context_ar_1").scale, 32);
    EXPECT_EQ(Find(l.context, "context_embedding_ar").scale, 1);
  }
  EXPECT_EQ(KvElemsPerToken(m, {.tp = tp}), static_cast<double>(kvg * 128 * 32 * 2));
}

INSTANTIATE_TEST_SUITE_P(Tp, Llama8B, ::testing::Values(1, 2, 8));

TEST(Ops, PipelineAddsP2pAndKeepsLayers) {
  const ModelConfig m = LoadModel("meta-llama/Meta-Llama-3.1-8B", kModels);
  const OpList l = Build(m, {.tp = 1, .pp = 4});
  EXPECT_EQ(Find(l.context, "context_p2p").scale, 3);
  EXPECT_EQ(Find(l.context, "context_qkv_gemm").scale, 32);
}

TEST(Ops, MtpScalesEveryDecodeOp) {
  const ModelConfig m = LoadModel("meta-llama/Meta-Llama-3.1-8B", kModels);
  const OpList l = Build(m, {.tp = 2}, Engine::kTrtllm, 1);
  const double s = 33.0 / 32.0;
  EXPECT_DOUBLE_EQ(Find(l.generation, "generation_qkv_gemm").scale, 32 * s);
  EXPECT_DOUBLE_EQ(Find(l.generation, "generation_attention").scale, 32 * s);
  EXPECT_DOUBLE_EQ(Find(l.generation, "generation_embedding").scale, s);
  EXPECT_DOUBLE_EQ(Find(l.generation, "generation_logits_gemm").scale, s);
  EXPECT_DOUBLE_EQ(Find(l.generation, "generation_embedding_ar").scale, s);
  EXPECT_DOUBLE_EQ(Find(l.context, "context_qkv_gemm").scale, 32);  // context unchanged
  EXPECT_DOUBLE_EQ(Find(l.context, "context_embedding").scale, 1);
}

// Qwen3-30B-A3B: 48 layers, H 2048, 32 heads, 4 KV heads, d 128, 128 experts, top-8, I_moe 768.
class Qwen3Moe : public ::testing::Test {
 protected:
  ModelConfig m = LoadModel("Qwen/Qwen3-30B-A3B", kModels);
};

TEST_F(Qwen3Moe, Tp4Ep4Trtllm) {
  const OpList l = Build(m, {.tp = 4, .moe_ep = 4});
  EXPECT_FALSE(Has(l.context, "context_logits_gemm"));  // MoE context: no logits GEMM
  EXPECT_TRUE(Has(l.generation, "generation_logits_gemm"));
  EXPECT_FALSE(Has(l.context, "context_ar_1"));
  const Op& router = Find(l.context, "context_router_gemm");
  EXPECT_EQ(router.n, 128);
  EXPECT_EQ(router.k, 2048);
  EXPECT_EQ(router.quant, "bfloat16");
  const Op& pre = Find(l.context, "context_moe_pre_dispatch");
  EXPECT_EQ(pre.kind, OpKind::kCustomAllReduce);
  EXPECT_EQ(pre.gpus, 4);
  EXPECT_EQ(Find(l.context, "context_moe_post_dispatch").kind, OpKind::kCustomAllReduce);
  const Op& moe = Find(l.context, "context_moe");
  EXPECT_EQ(moe.hidden, 2048);
  EXPECT_EQ(moe.inter, 768);
  EXPECT_EQ(moe.topk, 8);
  EXPECT_EQ(moe.experts, 128);
  EXPECT_EQ(moe.moe_ep, 4);
  EXPECT_EQ(moe.moe_tp, 1);
  EXPECT_EQ(moe.token_multiplier, 1);
  EXPECT_EQ(moe.distribution, "power_law_1.2");
  EXPECT_DOUBLE_EQ(moe.weight_elems, 2048.0 * 768 * 128 * 3 / 4);
  EXPECT_TRUE(Find(l.context, "context_attention").qk_norm);
  EXPECT_EQ(Find(l.context, "context_attention").heads, 8);
  EXPECT_EQ(Find(l.context, "context_attention").kv_heads, 1);
}

TEST_F(Qwen3Moe, Tp4Ep4VllmAndSglangUseAllReduce) {
  for (Engine e : {Engine::kVllm, Engine::kSglang}) {
    const OpList l = Build(m, {.tp = 4, .moe_ep = 4}, e);
    EXPECT_EQ(Find(l.context, "context_moe_pre_dispatch").kind, OpKind::kCustomAllReduce) << EngineName(e);
    EXPECT_EQ(Find(l.generation, "generation_moe_post_dispatch").gpus, 4) << EngineName(e);
  }
}

TEST_F(Qwen3Moe, AttentionDpTrtllmGathers) {
  const OpList l = Build(m, {.tp = 1, .dp = 4, .moe_ep = 4});
  const Op& pre = Find(l.context, "context_moe_pre_dispatch");
  EXPECT_EQ(pre.kind, OpKind::kNccl);
  EXPECT_EQ(pre.collective, "all_gather");
  EXPECT_EQ(pre.gpus, 4);
  EXPECT_EQ(pre.volume_factor, 4);
  EXPECT_EQ(Find(l.context, "context_moe_post_dispatch").collective, "reduce_scatter");
  EXPECT_EQ(Find(l.context, "context_moe").token_multiplier, 4);
  EXPECT_FALSE(Has(l.context, "context_embedding_ar"));
}

TEST_F(Qwen3Moe, VllmTpAndDpDoesBoth) {
  const OpList l = Build(m, {.tp = 2, .dp = 2, .moe_ep = 4}, Engine::kVllm);
  EXPECT_EQ(Find(l.context, "context_moe_pre_dispatch_ar").kind, OpKind::kCustomAllReduce);
  const Op& ag = Find(l.context, "context_moe_pre_dispatch_nccl");
  EXPECT_EQ(ag.collective, "all_gather");
  EXPECT_EQ(ag.volume_factor, 2);
  EXPECT_EQ(Find(l.context, "context_moe_post_dispatch_nccl").collective, "reduce_scatter");
}

TEST_F(Qwen3Moe, SglangTpAndDpReduceScattersThenGathers) {
  const OpList l = Build(m, {.tp = 2, .dp = 2, .moe_ep = 4}, Engine::kSglang);
  const Op& rs = Find(l.context, "context_moe_pre_dispatch_rs");
  EXPECT_EQ(rs.collective, "reduce_scatter");
  EXPECT_EQ(rs.gpus, 2);  // attn_tp = 4 / 2
  const Op& ag = Find(l.context, "context_moe_pre_dispatch_ag");
  EXPECT_EQ(ag.gpus, 4);
  EXPECT_EQ(ag.volume_factor, 2);
  EXPECT_EQ(Find(l.context, "context_moe_post_dispatch_rs").gpus, 4);
  EXPECT_EQ(Find(l.context, "context_moe_post_dispatch_ag").gpus, 2);
}

TEST(Ops, GptOssWindowGroups) {
  const ModelConfig m = LoadModel("openai/gpt-oss-20b", kModels);
  const OpList l = Build(m, {.tp = 1});
  const Op& win = Find(l.context, "context_attention_window128");
  const Op& full = Find(l.context, "context_attention_full");
  EXPECT_EQ(win.window, 128);
  EXPECT_EQ(full.window, 0);
  EXPECT_EQ(win.scale + full.scale, static_cast<double>(m.num_layers));
  EXPECT_EQ(win.scale, full.scale);
  EXPECT_TRUE(Has(l.generation, "generation_attention_window128"));
  bool noted = false;
  for (const auto& n : l.notes) noted = noted || n.find("window") != std::string::npos;
  EXPECT_TRUE(noted);
}

// MiniMax-M2.5 (MiniMaxM2ForCausalLM on the MoE family): 62 layers, H 3072, 48 heads,
// 8 KV heads, d 128, q/k norm, 256 routed experts top-8 of width 1536, no shared
// expert, fp8 128x128 blocks; tp 4 with the experts over 4 GPUs.
TEST(Ops, MiniMaxM25Shapes) {
  const ModelConfig m = LoadModel("MiniMaxAI/MiniMax-M2.5", kModels);
  const OpList l = Build(m, {.tp = 4, .moe_ep = 4});
  const Op& qkv = Find(l.context, "context_qkv_gemm");
  EXPECT_EQ(qkv.n, 48 / 4 * 128 + 2 * 128 * 2);
  EXPECT_EQ(qkv.k, 3072);
  EXPECT_EQ(qkv.quant, "fp8_block");
  EXPECT_EQ(qkv.scale, 62);
  const Op& attn = Find(l.context, "context_attention");
  EXPECT_EQ(attn.heads, 12);
  EXPECT_EQ(attn.kv_heads, 2);
  EXPECT_EQ(attn.head_dim, 128);
  EXPECT_EQ(attn.window, 0);
  EXPECT_TRUE(attn.qk_norm);
  EXPECT_EQ(Find(l.context, "context_proj_gemm").k, 12 * 128);
  const Op& router = Find(l.context, "context_router_gemm");
  EXPECT_EQ(router.n, 256);
  EXPECT_EQ(router.k, 3072);
  EXPECT_EQ(router.quant, "bfloat16");
  EXPECT_FALSE(Has(l.context, "context_shared_gate_ffn1_gemm"));
  const Op& moe = Find(l.context, "context_moe");
  EXPECT_EQ(moe.hidden, 3072);
  EXPECT_EQ(moe.inter, 1536);
  EXPECT_EQ(moe.topk, 8);
  EXPECT_EQ(moe.experts, 256);
  EXPECT_EQ(moe.moe_ep, 4);
  EXPECT_EQ(moe.quant, "fp8_block");
  EXPECT_DOUBLE_EQ(moe.weight_elems, 3072.0 * 1536 * 256 * 3 / 4);
  EXPECT_EQ(Find(l.generation, "generation_logits_gemm").n, 200064 / 4);
  // 8 KV heads over tp 8: one each; 48 heads do not split over tp 32.
  EXPECT_EQ(Find(Build(m, {.tp = 8, .moe_ep = 8}).generation, "generation_attention").kv_heads, 1);
  EXPECT_THROW(ValidateParallel(m, {.tp = 32, .moe_ep = 32}, Engine::kTrtllm), UsageError);
}

// Qwen3-Coder-480B-A35B (Qwen3MoeForCausalLM): 62 layers, H 6144, 96 heads, 8 KV
// heads, d 128, 160 experts top-8 of width 2560, bf16; tp 8 x ep 8 on one node.
TEST(Ops, Qwen3Coder480BShapes) {
  const ModelConfig m = LoadModel("Qwen/Qwen3-Coder-480B-A35B-Instruct", kModels);
  const OpList l = Build(m, {.tp = 8, .moe_ep = 8});
  const Op& qkv = Find(l.context, "context_qkv_gemm");
  EXPECT_EQ(qkv.n, 96 / 8 * 128 + 2 * 128 * 1);
  EXPECT_EQ(qkv.k, 6144);
  const Op& attn = Find(l.generation, "generation_attention");
  EXPECT_EQ(attn.heads, 12);
  EXPECT_EQ(attn.kv_heads, 1);
  EXPECT_TRUE(attn.qk_norm);
  const Op& moe = Find(l.generation, "generation_moe");
  EXPECT_EQ(moe.hidden, 6144);
  EXPECT_EQ(moe.inter, 2560);
  EXPECT_EQ(moe.topk, 8);
  EXPECT_EQ(moe.experts, 160);
  EXPECT_EQ(moe.quant, "bfloat16");
  EXPECT_DOUBLE_EQ(moe.weight_elems, 6144.0 * 2560 * 160 * 3 / 8);
  EXPECT_EQ(Find(l.context, "context_router_gemm").n, 160);
  // 160 experts: ep 32 divides them, ep 64 does not.
  EXPECT_NO_THROW(ValidateParallel(m, {.tp = 32, .moe_ep = 32}, Engine::kTrtllm));
  try {
    ValidateParallel(m, {.tp = 32, .dp = 2, .moe_ep = 64}, Engine::kVllm);
    ADD_FAILURE() << "ep 64 accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("does not divide the 160 experts"), std::string::npos) << e.what();
  }
}

// Llama-4 Scout at tp 4 x ep 4: a shared expert beside 16 routed experts top-1, and
// two attention groups (36 chunked layers as 8192-token windows, 12 global).
TEST(Ops, Llama4ScoutShapes) {
  const ModelConfig m = LoadModel("meta-llama/Llama-4-Scout-17B-16E-Instruct", kModels);
  const OpList l = Build(m, {.tp = 4, .moe_ep = 4});
  EXPECT_EQ(Find(l.context, "context_qkv_gemm").n, 40 / 4 * 128 + 2 * 128 * 2);
  const Op& chunked = Find(l.context, "context_attention_window8192");
  EXPECT_EQ(chunked.window, 8192);
  EXPECT_DOUBLE_EQ(chunked.scale, 36);
  EXPECT_EQ(chunked.heads, 10);
  EXPECT_EQ(chunked.kv_heads, 2);
  EXPECT_TRUE(chunked.qk_norm);
  EXPECT_DOUBLE_EQ(Find(l.generation, "generation_attention_full").scale, 12);
  const Op& shared = Find(l.context, "context_shared_gate_ffn1_gemm");
  EXPECT_EQ(shared.n, 2 * 8192 / 4);
  EXPECT_EQ(shared.k, 5120);
  EXPECT_EQ(Find(l.context, "context_shared_ffn2_gemm").k, 8192 / 4);
  const Op& moe = Find(l.context, "context_moe");
  EXPECT_EQ(moe.experts, 16);
  EXPECT_EQ(moe.topk, 1);
  EXPECT_EQ(moe.inter, 8192);
  EXPECT_EQ(moe.moe_ep, 4);
  EXPECT_EQ(Find(l.context, "context_router_gemm").n, 16);
  bool chunk_note = false;
  for (const std::string& n : l.notes) chunk_note = chunk_note || n.find("chunked-local attention (chunk 8192)") == 0;
  EXPECT_TRUE(chunk_note);
  // 40 heads: tp 8 holds (5 per GPU), tp 16 does not.
  EXPECT_NO_THROW(ValidateParallel(m, {.tp = 8, .moe_ep = 8}, Engine::kTrtllm));
  EXPECT_THROW(ValidateParallel(m, {.tp = 16, .moe_ep = 16}, Engine::kTrtllm), UsageError);
}

// Llama-4 Maverick at tp 8 x ep 8: 24 dense layers (FFN 16384 over tp, with the
// attention and FFN all-reduces) and 24 MoE layers (shared expert + 128 experts
// top-1); the attention block and the tail run for all 48 layers.
TEST(Ops, Llama4MaverickMixesDenseAndMoeLayers) {
  const ModelConfig m = LoadModel("meta-llama/Llama-4-Maverick-17B-128E-Instruct", kModels);
  for (Engine e : {Engine::kTrtllm, Engine::kVllm, Engine::kSglang}) {
    const OpList l = Build(m, {.tp = 8, .moe_ep = 8}, e);
    EXPECT_DOUBLE_EQ(Find(l.context, "context_qkv_gemm").scale, 48);
    const Op& up = Find(l.context, "context_dense_gate_ffn1_gemm");
    EXPECT_EQ(up.n, 2 * 16384 / 8);
    EXPECT_EQ(up.k, 5120);
    EXPECT_DOUBLE_EQ(up.scale, 24);
    EXPECT_EQ(Find(l.context, "context_dense_ffn2_gemm").k, 16384 / 8);
    EXPECT_DOUBLE_EQ(Find(l.context, "context_dense_act_gate").scale, 24);
    EXPECT_EQ(Find(l.context, "context_dense_ar_1").gpus, 8);
    EXPECT_DOUBLE_EQ(Find(l.context, "context_dense_ar_2").scale, 24);
    const Op& moe = Find(l.generation, "generation_moe");
    EXPECT_DOUBLE_EQ(moe.scale, 24);
    EXPECT_EQ(moe.experts, 128);
    EXPECT_EQ(moe.topk, 1);
    EXPECT_DOUBLE_EQ(Find(l.generation, "generation_add_norm_2").scale, 24);
    EXPECT_DOUBLE_EQ(Find(l.generation, "generation_shared_ffn2_gemm").scale, 24);
    EXPECT_DOUBLE_EQ(Find(l.generation, "generation_moe_pre_dispatch").scale, 24);
    EXPECT_DOUBLE_EQ(Find(l.generation, "generation_logits_gemm").scale, 1);
    EXPECT_FALSE(Has(l.context, "context_logits_gemm"));
  }
  // Without tensor parallelism the dense layers have no all-reduce.
  EXPECT_FALSE(Has(Build(m, {.tp = 1}).context, "context_dense_ar_1"));
}

void ExpectUsage(const ModelConfig& m, ParallelConfig p, Engine e, const std::string& fragment) {
  try {
    ValidateParallel(m, p, e);
    ADD_FAILURE() << "expected UsageError containing '" << fragment << "' for " << p.ToString();
  } catch (const UsageError& err) {
    EXPECT_NE(std::string(err.what()).find(fragment), std::string::npos) << err.what();
  }
}

TEST(Ops, ValidationErrors) {
  const ModelConfig llama = LoadModel("meta-llama/Meta-Llama-3.1-8B", kModels);
  ExpectUsage(llama, {.tp = 3}, Engine::kTrtllm, "does not divide the 32 attention heads");
  ExpectUsage(llama, {.tp = 1, .dp = 2}, Engine::kTrtllm, "dense");
  const ModelConfig moe = LoadModel("Qwen/Qwen3-30B-A3B", kModels);
  ExpectUsage(moe, {.tp = 4, .moe_ep = 2}, Engine::kTrtllm, "tp x dp = moe_tp x moe_ep");
  ExpectUsage(moe, {.tp = 4, .moe_tp = 2, .moe_ep = 2}, Engine::kVllm, "vllm: moe_tp and moe_ep cannot both");
  EXPECT_NO_THROW(ValidateParallel(moe, {.tp = 4, .moe_tp = 2, .moe_ep = 2}, Engine::kTrtllm));
  ExpectUsage(moe, {.tp = 2, .dp = 2, .moe_ep = 4}, Engine::kTrtllm, "trtllm: attention dp > 1 needs tp 1");
  const ModelConfig ds = LoadModel("deepseek-ai/DeepSeek-V3", kModels);
  EXPECT_NO_THROW(BuildOpList(ds, {.tp = 8, .moe_ep = 8}, {}));
  ExpectUsage(ds, {.tp = 8, .moe_ep = 4}, Engine::kTrtllm, "tp x dp = moe_tp x moe_ep");
  ExpectUsage(ds, {.tp = 2, .dp = 4, .moe_ep = 8}, Engine::kTrtllm, "trtllm: attention dp > 1 needs tp 1");
}

// Context parallelism (SGLang prefill CP) on Qwen3-30B-A3B at cp 2: every context
// op but the experts, their dispatch and the KV all-gather runs on one rank's
// ceil(x / 2) tokens; decode is not split.
TEST_F(Qwen3Moe, SglangContextParallelSplitsThePrefill) {
  const OpList l = Build(m, {.moe_ep = 2, .cp = 2}, Engine::kSglang);
  for (const char* name : {"context_embedding", "context_add_norm_1", "context_qkv_gemm", "context_attention",
                           "context_proj_gemm", "context_add_norm_2", "context_router_gemm"})
    EXPECT_EQ(Find(l.context, name).seq_split, 2) << name;
  const Op& gather = Find(l.context, "context_cp_kv_all_gather");
  EXPECT_EQ(gather.collective, "all_gather");
  EXPECT_EQ(gather.gpus, 2);
  EXPECT_EQ(gather.elems_per_token, 2 * 4 * 128);  // K and V of 4 KV heads x 128
  EXPECT_EQ(gather.volume_factor, 1.0);            // bf16 KV moved as half elements
  EXPECT_EQ(gather.scale, 48);
  EXPECT_EQ(gather.tokens, TokenRule::kAllRanks);
  EXPECT_EQ(gather.seq_split, 1);
  const Op& pre = Find(l.context, "context_moe_pre_dispatch");
  EXPECT_EQ(pre.collective, "all_gather");
  EXPECT_EQ(pre.gpus, 2);
  EXPECT_EQ(pre.seq_split, 1);
  EXPECT_EQ(Find(l.context, "context_moe_post_dispatch").collective, "reduce_scatter");
  EXPECT_EQ(Find(l.context, "context_moe").seq_split, 1);
  EXPECT_EQ(Find(l.context, "context_moe").tokens, TokenRule::kAllRanks);
  // Decode: every rank runs every row; only the experts' partial sums are all-reduced.
  for (const Op& op : l.generation) EXPECT_EQ(op.seq_split, 1) << op.name;
  EXPECT_FALSE(Has(l.generation, "generation_moe_pre_dispatch"));
  EXPECT_EQ(Find(l.generation, "generation_moe_post_dispatch").kind, OpKind::kCustomAllReduce);
  EXPECT_FALSE(Has(l.generation, "generation_cp_kv_all_gather"));
  // fp8 KV: half as many half-width elements per token.
  ModelConfig fp8 = m;
  fp8.quant.kv = "fp8";
  EXPECT_EQ(Find(Build(fp8, {.moe_ep = 2, .cp = 2}, Engine::kSglang).context, "context_cp_kv_all_gather").volume_factor,
            0.5);
  // Without CP nothing is split and no all-gather is added.
  const OpList plain = Build(m, {.dp = 2, .moe_ep = 2}, Engine::kSglang);
  for (const Op& op : plain.context) EXPECT_EQ(op.seq_split, 1) << op.name;
  EXPECT_FALSE(Has(plain.context, "context_cp_kv_all_gather"));
  EXPECT_EQ((ParallelConfig{.moe_ep = 4, .cp = 4}).GpusPerWorker(), 4);
  EXPECT_EQ((ParallelConfig{.moe_ep = 4, .cp = 4}).Compact(), "tp1pp1dp1etp1ep4cp4");
  EXPECT_EQ((ParallelConfig{.tp = 2}).Compact(), "tp2pp1dp1etp1ep1");
}

TEST(Ops, ContextParallelRules) {
  const ModelConfig moe = LoadModel("Qwen/Qwen3-30B-A3B", kModels);
  EXPECT_NO_THROW(ValidateParallel(moe, {.moe_ep = 4, .cp = 4}, Engine::kSglang));
  EXPECT_NO_THROW(ValidateParallel(moe, {.moe_tp = 2, .moe_ep = 1, .cp = 2}, Engine::kSglang));
  ExpectUsage(moe, {.moe_ep = 2, .cp = 2}, Engine::kTrtllm, "modelled for sglang only");
  ExpectUsage(moe, {.moe_ep = 2, .cp = 2}, Engine::kVllm, "modelled for sglang only");
  ExpectUsage(moe, {.tp = 2, .moe_ep = 4, .cp = 2}, Engine::kSglang, "needs tp 1 and dp 1");
  ExpectUsage(moe, {.moe_ep = 4, .cp = 2}, Engine::kSglang, "tp x dp x cp = moe_tp x moe_ep");
  ExpectUsage(moe, {.cp = 0}, Engine::kSglang, "parallel sizes must be >= 1");
  // Architectures SGLang runs no prefill CP for, and families whose op list does not model it.
  ExpectUsage(LoadModel("meta-llama/Meta-Llama-3.1-8B", kModels), {.cp = 2}, Engine::kSglang,
              "SGLang runs no context-parallel prefill for LlamaForCausalLM");
  ExpectUsage(LoadModel("mistralai/Mixtral-8x7B-v0.1", kModels), {.moe_ep = 2, .cp = 2}, Engine::kSglang,
              "SGLang runs no context-parallel prefill for MixtralForCausalLM");
  ExpectUsage(LoadModel("deepseek-ai/DeepSeek-V3", kModels), {.moe_ep = 8, .cp = 8}, Engine::kSglang,
              "op list of deepseek-ai/DeepSeek-V3 does not model it");
}

}  // namespace
}  // namespace servecast::model
