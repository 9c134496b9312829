// Speed-of-light times: AIC's formulas on the shipped H200 spec, checked by hand.
#include <gtest/gtest.h>

#include "perfdb/sol.h"
#include "system/system_spec.h"

namespace servecast::perfdb {
namespace {

Sol H200() { return Sol(systems::LoadSystemByName(SERVECAST_SOURCE_DIR "/systems", "h200_sxm")); }

TEST(SolTest, GemmIsComputeBoundWhenLargeAndMemoryBoundWhenThin) {
  Sol sol = H200();
  double bf16 = sol.PeakFlops("bfloat16"), bw = sol.spec().gpu.mem_bw_bytes_per_s;
  // 8192^3 bf16: 2*8192^3 flops at the bf16 peak.
  EXPECT_DOUBLE_EQ(sol.GemmMs("bfloat16", 8192, 8192, 8192), 1e3 * 2.0 * 8192.0 * 8192 * 8192 / bf16);
  // m = 1: the weight read dominates: 2 bytes * (n + k + n*k).
  EXPECT_DOUBLE_EQ(sol.GemmMs("bfloat16", 1, 4096, 4096), 1e3 * 2.0 * (4096 + 4096 + 4096.0 * 4096) / bw);
  // fp8 moves one byte per element and runs at the fp8 peak.
  EXPECT_DOUBLE_EQ(sol.GemmMs("fp8", 1, 4096, 4096), 1e3 * 1.0 * (4096 + 4096 + 4096.0 * 4096) / bw);
  EXPECT_DOUBLE_EQ(sol.GemmMs("fp8_block", 8192, 8192, 8192), 1e3 * 2.0 * 8192.0 * 8192 * 8192 / sol.PeakFlops("fp8"));
  EXPECT_THROW(sol.GemmMs("int3", 1, 1, 1), Error);
}

TEST(SolTest, ContextAttentionCausalWindowAndPrefix) {
  Sol sol = H200();
  double bf16 = sol.PeakFlops("bfloat16"), bw = sol.spec().gpu.mem_bw_bytes_per_s;
  // b=1, s=16384, 32 heads, 8 kv, d=128, causal: 2*b*s^2*n*h*2/2 flops.
  double flops = 2.0 * 16384 * 16384 * 32 * 128 * 2 / 2;
  EXPECT_DOUBLE_EQ(sol.ContextAttentionMs(1, 16384, 0, 32, 8, 128, 0, "bfloat16", "bfloat16"), 1e3 * flops / bf16);
  // Sliding window 1024 over 4096 tokens: 2*b*s*w*n*h*2.
  double wflops = 2.0 * 4096 * 1024 * 32 * 128 * 2;
  EXPECT_DOUBLE_EQ(sol.ContextAttentionMs(1, 4096, 0, 32, 8, 128, 1024, "bfloat16", "bfloat16"), 1e3 * wflops / bf16);
  // Tiny prefill is memory bound: q/o bf16 plus the KV cache.
  double bytes = 2.0 * 1 * 2 * 32 * 1 * 128 + 2.0 * 1 * 2 * 8 * 1 * 128;
  EXPECT_DOUBLE_EQ(sol.ContextAttentionMs(1, 1, 0, 32, 8, 128, 0, "bfloat16", "bfloat16"), 1e3 * bytes / bw);
  // The MHA sentinel (0 kv heads) means kv = n.
  EXPECT_DOUBLE_EQ(sol.ContextAttentionMs(1, 1, 0, 32, 0, 128, 0, "bfloat16", "bfloat16"),
                   sol.ContextAttentionMs(1, 1, 0, 32, 32, 128, 0, "bfloat16", "bfloat16"));
}

TEST(SolTest, GenerationAttentionReadsTheKvCache) {
  Sol sol = H200();
  double bw = sol.spec().gpu.mem_bw_bytes_per_s;
  // b=64, s=8192 (8191 cached keys), 32 heads, 8 kv, d=128, bf16 KV.
  double kv_len = 8191;
  double bytes = 64.0 * (2 * 32 * 128 + 2 * 8 * kv_len * 128 * 2 + 2 * 32 * 128);
  EXPECT_DOUBLE_EQ(sol.GenerationAttentionMs(64, 8192, 32, 8, 128, 0, "bfloat16"), 1e3 * bytes / bw);
  // fp8 KV halves the cache bytes; a window caps the keys read.
  double fp8_bytes = 64.0 * (2 * 32 * 128 + 2 * 8 * kv_len * 128 * 1 + 2 * 32 * 128);
  EXPECT_DOUBLE_EQ(sol.GenerationAttentionMs(64, 8192, 32, 8, 128, 0, "fp8"), 1e3 * fp8_bytes / bw);
  double win_bytes = 64.0 * (2 * 32 * 128 + 2 * 8 * 128.0 * 128 * 2 + 2 * 32 * 128);
  EXPECT_DOUBLE_EQ(sol.GenerationAttentionMs(64, 8192, 32, 8, 128, 128, "bfloat16"), 1e3 * win_bytes / bw);
}

TEST(SolTest, MoeAndCollectives) {
  Sol sol = H200();
  double bw = sol.spec().gpu.mem_bw_bytes_per_s, fp8 = sol.PeakFlops("fp8");
  // 16 tokens, top-8 of 128 experts, h 4096, inter 1536, ep 1, tp 1: weight-read bound.
  double tot = 16 * 8;
  double bytes = 1.0 * (tot * 4096 * 2 + tot * 1536 * 3 + 4096.0 * 1536 * 3 * std::min(128.0, tot));
  double flops = tot * 4096 * 1536 * 3 * 2;
  EXPECT_DOUBLE_EQ(sol.MoeMs("fp8", 16, 4096, 1536, 8, 128, 1, 1), std::max(1e3 * flops / fp8, 1e3 * bytes / bw));
  // Custom all-reduce of 1M half elements on 8 GPUs over NVLink.
  double p2p = sol.spec().node.intra_node_bw_bytes_per_s;
  EXPECT_DOUBLE_EQ(sol.CustomAllReduceMs(1 << 20, 8), 1e3 * 2.0 * (1 << 20) * 2 / 8 * 7 / p2p);
  EXPECT_DOUBLE_EQ(sol.NcclMs("all_reduce", 1 << 20, 8, "half"), 2 * sol.NcclMs("all_gather", 1 << 20, 8, "half"));
  EXPECT_EQ(sol.NcclMs("all_reduce", 1 << 20, 1, "half"), 0);
  // send_recv moves the whole message over one link: n/(n-1) x an all-gather's bytes.
  EXPECT_DOUBLE_EQ(sol.NcclMs("send_recv", 1 << 20, 2, "half"), 2 * sol.NcclMs("all_gather", 1 << 20, 2, "half"));
  // Beyond one node the inter-node bandwidth applies.
  EXPECT_LT(sol.NcclMs("all_gather", 1 << 20, 8, "half"), sol.NcclMs("all_gather", 1 << 20, 16, "half"));
}

TEST(SolTest, MissingPeakFlopsIsATypedError) {
  Sol sol = H200();
  EXPECT_THROW(sol.GemmMs("nvfp4", 128, 128, 128), MissingSystemFlopsError);  // Hopper has no fp4 tensor cores
}

}  // namespace
}  // namespace servecast::perfdb
