// Attention transfers of util-empirical (src/perfdb/modes.cpp; docs/perfdb.md,
// "Transfers"): xquant / xprofile across dtype profiles, the prefill head-size
// transfer vs head_dim 128, and their TransferPolicy gates. Every donor slice
// here is one leaf, so its util is SOL(leaf) / latency and an answer is
// SOL(query) / (util x scale): the expectations are that formula.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/table.h"
#include "perfdb/modes.h"
#include "system/system_spec.h"

namespace servecast::perfdb {
namespace {

bool Has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::shared_ptr<const Sol> H200() {
  return std::make_shared<const Sol>(systems::LoadSystemByName(SERVECAST_SOURCE_DIR "/systems", "h200_sxm"));
}

// MHA (heads 8), batch 1, seq 1024, one leaf per slice:
//   (bfloat16, bfloat16, head_dim 128) latency 2
//   (fp8_block, fp8,     head_dim 128) latency 1
Table ContextTable() {
  return Table::ParseCsv(
      "batch_size,isl,num_heads,num_key_value_heads,head_dim,attn_dtype,kv_cache_dtype,latency\n"
      "1,1024,8,8,128,bfloat16,bfloat16,2\n"
      "1,1024,8,8,128,fp8_block,fp8,1\n",
      "ctx.csv");
}

ContextAttentionQuery Ctx(const std::string& attn, const std::string& kv, std::int64_t head_dim, std::int64_t seq) {
  ContextAttentionQuery q;
  q.batch = 1;
  q.seq = seq;
  q.num_heads = 8;
  q.num_kv_heads = 8;
  q.head_dim = head_dim;
  q.attn_dtype = attn;
  q.kv_cache_dtype = kv;
  return q;
}

double CtxSol(const Sol& sol, const ContextAttentionQuery& q) {
  return sol.ContextAttentionMs(1, static_cast<double>(q.seq), 0, 8, 8, static_cast<double>(q.head_dim), 0,
                                q.attn_dtype, q.kv_cache_dtype);
}

TEST(AttentionTransferTest, ContextXquantBorrowsTheSameProfileSlice) {
  const auto sol = H200();
  const Table t = ContextTable();
  const ContextAttentionTable ctx(t, sol);
  // (fp8, fp8) has no slice; (fp8_block, fp8) has the same profile (fp8 rate,
  // 1-byte FMHA, 1-byte KV). At the leaf's own coordinates the SOLs are equal,
  // so the answer is the donor's latency, 1 ms; at seq 2048 it is
  // SOL(q) / (SOL(leaf) / 1).
  const OpEstimator empirical(*sol, DatabaseMode::kEmpirical, nullptr, &ctx, nullptr);
  OpEstimate e = empirical.ContextAttention(Ctx("fp8", "fp8", 128, 1024));
  EXPECT_EQ(e.source, "empirical");
  EXPECT_NEAR(e.latency_ms, 1.0, 1e-12);
  EXPECT_EQ(e.detail.rfind("xquant from {attn_dtype=fp8_block, kv_cache_dtype=fp8", 0), 0u) << e.detail;
  const double u = CtxSol(*sol, Ctx("fp8_block", "fp8", 128, 1024)) / 1.0;
  e = empirical.ContextAttention(Ctx("fp8", "fp8", 128, 2048));
  EXPECT_NEAR(e.latency_ms, CtxSol(*sol, Ctx("fp8", "fp8", 128, 2048)) / u, 1e-12);
  EXPECT_NEAR(e.sol_fraction, u, 1e-15);
  // HYBRID: the silicon miss, then the same answer with the miss in detail.
  const OpEstimator hybrid(*sol, DatabaseMode::kHybrid, nullptr, &ctx, nullptr);
  const OpEstimate h = hybrid.ContextAttention(Ctx("fp8", "fp8", 128, 2048));
  EXPECT_NEAR(h.latency_ms, e.latency_ms, 1e-15);
  EXPECT_TRUE(Has(h.detail, "silicon miss")) << h.detail;
  // xquant needs "balanced"; "conservative" refuses it and names the donor.
  const OpEstimator cons(*sol, DatabaseMode::kEmpirical, nullptr, &ctx, nullptr, TransferPolicy::kConservative);
  try {
    cons.ContextAttention(Ctx("fp8", "fp8", 128, 1024));
    ADD_FAILURE();
  } catch (const OpMissError& err) {
    EXPECT_TRUE(Has(err.what(), "xquant donor {attn_dtype=fp8_block")) << err.what();
  }
  const OpEstimator bal(*sol, DatabaseMode::kEmpirical, nullptr, &ctx, nullptr, TransferPolicy::kBalanced);
  EXPECT_NEAR(bal.ContextAttention(Ctx("fp8", "fp8", 128, 1024)).latency_ms, 1.0, 1e-12);
}

TEST(AttentionTransferTest, ContextXprofileRanksComputeFirstAndKeepsTheUtil) {
  const auto sol = H200();
  const Table t = ContextTable();
  const ContextAttentionTable ctx(t, sol);
  // (bfloat16, fp8): bf16 rate, 2-byte FMHA, 1-byte KV. No same-profile slice;
  // nearest: (bfloat16, bfloat16) (same rate, KV bytes 1 octave off) before
  // (fp8_block, fp8) (other rate). Util unchanged (x1: no attention util levels
  // in AIC's facts): latency = SOL(q) / (SOL(bf16 leaf) / 2).
  const ContextAttentionQuery q = Ctx("bfloat16", "fp8", 128, 1024);
  const double u = CtxSol(*sol, Ctx("bfloat16", "bfloat16", 128, 1024)) / 2.0;
  const OpEstimator empirical(*sol, DatabaseMode::kEmpirical, nullptr, &ctx, nullptr);
  const OpEstimate e = empirical.ContextAttention(q);
  EXPECT_NEAR(e.latency_ms, CtxSol(*sol, q) / u, 1e-12);
  EXPECT_EQ(e.detail.rfind("xprofile from {attn_dtype=bfloat16, kv_cache_dtype=bfloat16", 0), 0u) << e.detail;
  EXPECT_TRUE(Has(e.detail, "\u00d71")) << e.detail;
  // xprofile needs "aggressive".
  const OpEstimator bal(*sol, DatabaseMode::kEmpirical, nullptr, &ctx, nullptr, TransferPolicy::kBalanced);
  EXPECT_THROW(bal.ContextAttention(q), OpMissError);
}

TEST(AttentionTransferTest, ContextHeadSizeTransferUsesAicRatiosVs128) {
  const auto sol = H200();
  const Table t = ContextTable();
  const ContextAttentionTable ctx(t, sol);
  const double u_bf16 = CtxSol(*sol, Ctx("bfloat16", "bfloat16", 128, 1024)) / 2.0;
  const OpEstimator empirical(*sol, DatabaseMode::kEmpirical, nullptr, &ctx, nullptr);
  // head_dim 64 (no slice has 64): the 128 slice's util x 0.58.
  ContextAttentionQuery q = Ctx("bfloat16", "bfloat16", 64, 1024);
  OpEstimate e = empirical.ContextAttention(q);
  EXPECT_NEAR(e.latency_ms, CtxSol(*sol, q) / (u_bf16 * 0.58), 1e-12);
  EXPECT_NEAR(e.sol_fraction, u_bf16 * 0.58, 1e-15);
  EXPECT_EQ(e.detail.rfind("head-size transfer from head_dim 128 \u00d70.58; ", 0), 0u) << e.detail;
  // 192 -> x1.10; 256 with fp8 dtypes -> the 128 fp8 donor through xquant, x1.17.
  q = Ctx("bfloat16", "bfloat16", 192, 1024);
  EXPECT_NEAR(empirical.ContextAttention(q).latency_ms, CtxSol(*sol, q) / (u_bf16 * 1.10), 1e-12);
  q = Ctx("fp8", "fp8", 256, 1024);
  const double u_fp8 = CtxSol(*sol, Ctx("fp8_block", "fp8", 128, 1024)) / 1.0;
  e = empirical.ContextAttention(q);
  EXPECT_NEAR(e.latency_ms, CtxSol(*sol, q) / (u_fp8 * 1.17), 1e-12);
  EXPECT_TRUE(Has(e.detail, "head-size transfer from head_dim 128 \u00d71.17, xquant from")) << e.detail;
  // A head size without a ratio (96): the typed miss, naming the ratios that exist.
  try {
    empirical.ContextAttention(Ctx("bfloat16", "bfloat16", 96, 1024));
    ADD_FAILURE();
  } catch (const OpMissError& err) {
    EXPECT_TRUE(Has(err.what(), "no ratio vs 128 for head_dim 96")) << err.what();
  }
  // Gated as a shape transfer: "off" refuses it, "conservative" allows it.
  const OpEstimator off(*sol, DatabaseMode::kHybrid, nullptr, &ctx, nullptr, TransferPolicy::kOff);
  EXPECT_THROW(off.ContextAttention(Ctx("bfloat16", "bfloat16", 64, 1024)), OpMissError);
  const OpEstimator cons(*sol, DatabaseMode::kHybrid, nullptr, &ctx, nullptr, TransferPolicy::kConservative);
  q = Ctx("bfloat16", "bfloat16", 64, 1024);
  EXPECT_NEAR(cons.ContextAttention(q).latency_ms, CtxSol(*sol, q) / (u_bf16 * 0.58), 1e-12);
  // SILICON never transfers.
  const OpEstimator silicon(*sol, DatabaseMode::kSilicon, nullptr, &ctx, nullptr);
  EXPECT_THROW(silicon.ContextAttention(q), OpMissError);
}

// Generation: heads 8 (MHA), batch 4, seq 1000 (isl 999 + step 1), latency 5 ms
// (far above SOL, so the load-time clamp does not bind); kv bfloat16 only.
TEST(AttentionTransferTest, GenerationXquantXprofileAndNoHeadSizeTransfer) {
  const auto sol = H200();
  const Table t = Table::ParseCsv(
      "batch_size,isl,num_heads,num_key_value_heads,head_dim,attn_dtype,kv_cache_dtype,step,latency\n"
      "4,999,8,8,128,bfloat16,bfloat16,1,5\n",
      "gen.csv");
  const GenerationAttentionTable gen(t, sol);
  auto sol_at = [&](const std::string& kv, std::int64_t head_dim) {
    return sol->GenerationAttentionMs(4, 1000, 8, 8, static_cast<double>(head_dim), 0, kv);
  };
  const double u = sol_at("bfloat16", 128) / 5.0;
  GenerationAttentionQuery q;
  q.batch = 4;
  q.seq = 1000;
  q.num_heads = 8;
  q.num_kv_heads = 8;
  q.head_dim = 128;
  const OpEstimator empirical(*sol, DatabaseMode::kEmpirical, nullptr, nullptr, &gen);
  // float16 KV: same profile as bfloat16 (2 bytes, bf16 rate) -> xquant.
  q.kv_cache_dtype = "float16";
  OpEstimate e = empirical.GenerationAttention(q);
  EXPECT_NEAR(e.latency_ms, sol_at("float16", 128) / u, 1e-12);
  EXPECT_EQ(e.detail.rfind("xquant from {kv_cache_dtype=bfloat16", 0), 0u) << e.detail;
  // fp8 KV on SM 90: fp8 rate and 1 byte -> xprofile, util unchanged.
  q.kv_cache_dtype = "fp8";
  e = empirical.GenerationAttention(q);
  EXPECT_NEAR(e.latency_ms, sol_at("fp8", 128) / u, 1e-12);
  EXPECT_EQ(e.detail.rfind("xprofile from {kv_cache_dtype=bfloat16", 0), 0u) << e.detail;
  const OpEstimator bal(*sol, DatabaseMode::kHybrid, nullptr, nullptr, &gen, TransferPolicy::kBalanced);
  EXPECT_THROW(bal.GenerationAttention(q), OpMissError);
  // No head-size transfer for generation.
  q.kv_cache_dtype = "bfloat16";
  q.head_dim = 64;
  try {
    empirical.GenerationAttention(q);
    ADD_FAILURE();
  } catch (const OpMissError& err) {
    EXPECT_TRUE(Has(err.what(), "prefill only")) << err.what();
  }
}

}  // namespace
}  // namespace servecast::perfdb
