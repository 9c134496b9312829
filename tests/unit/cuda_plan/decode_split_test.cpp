// The paged-decode split rule (PlanPagedDecodeOn, host code in backends/cuda_plan):
// the split count that minimizes the wave model (waves of resident CTAs x (pages per
// split + a fixed cost), plus the reduce kernel's cost when split). Needs no GPU (the SM
// count and the TMA ring are arguments) and no CUDA: it runs in every build, CI
// included (it lived in tests/gpu, which CI does not build).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "backends/cuda_plan/paged_decode_plan.h"
#include "core/error.h"

namespace sc = servecast::cuda;

namespace {

constexpr int kH200Sms = 132;

// batch, query heads, KV heads, head dim, KV length (tokens), window
sc::PagedDecodePlan Plan(std::int64_t batch, std::int64_t heads, std::int64_t tokens, sc::KvDtype kv,
                         bool balanced = true, std::int64_t kv_heads = 8) {
  sc::PagedDecodeTuning tuning;
  tuning.wave_balanced_splits = balanced;
  const sc::PagedDecodeShape s{batch, heads, kv_heads, 128, tokens, 0};
  return sc::PlanPagedDecodeOn(s, kH200Sms, kv, /*tma_ring=*/false, tuning);
}

// CTAs of the launch over the slots of the waves it takes.
double Busy(const sc::PagedDecodePlan& p, std::int64_t batch, int ctas_per_sm) {
  const std::int64_t ctas = batch * 8 * p.head_chunks * p.splits;
  const std::int64_t slots = static_cast<std::int64_t>(ctas_per_sm) * kH200Sms;
  return static_cast<double>(ctas) / static_cast<double>(((ctas + slots - 1) / slots) * slots);
}

}  // namespace

TEST(PagedDecodeSplitRule, SmallBatchLongContextFillsOneWave) {
  // bf16 KV, groups of 4: the tensor-core kernel, 2 CTAs per SM at head dim 128 (264
  // slots). 16 sequences x 8 KV heads = 128 CTAs per split: the old rule took 3 splits
  // (384 CTAs, a second wave of 120: 73% busy); 2 splits are one wave of 256 (97%).
  const sc::PagedDecodePlan p = Plan(16, 32, 65536, sc::KvDtype::kBf16);
  ASSERT_TRUE(p.tensor_cores);
  EXPECT_EQ(p.splits, 2) << p.Describe();
  EXPECT_GT(Busy(p, 16, 2), 0.95);
  const sc::PagedDecodePlan old = Plan(16, 32, 65536, sc::KvDtype::kBf16, false);
  EXPECT_EQ(old.splits, 3) << old.Describe();
  EXPECT_LT(Busy(old, 16, 2), 0.75);
  // 4 x 131072: 32 CTAs per split; the old rule's 9 splits made 288 CTAs (two waves).
  const sc::PagedDecodePlan p4 = Plan(4, 32, 131072, sc::KvDtype::kBf16);
  EXPECT_EQ(p4.splits, 8) << p4.Describe();
  EXPECT_EQ(Plan(4, 32, 131072, sc::KvDtype::kBf16, false).splits, 9);
}

TEST(PagedDecodeSplitRule, Fp8AndCudaCoreKernelsUseTheirOwnSlots) {
  // fp8 KV, groups of 4: 3 CTAs per SM (396 slots); 128 CTAs per split: 3 splits (384, 97%).
  const sc::PagedDecodePlan f = Plan(16, 32, 65536, sc::KvDtype::kFp8E4m3);
  ASSERT_TRUE(f.tensor_cores);
  EXPECT_EQ(f.splits, 3) << f.Describe();
  EXPECT_GT(Busy(f, 16, 3), 0.95);
  // bf16, groups of 2: the CUDA-core kernel, 4 CTAs per SM (528 slots); 4 splits = 512.
  const sc::PagedDecodePlan c = Plan(16, 16, 65536, sc::KvDtype::kBf16);
  ASSERT_FALSE(c.tensor_cores);
  EXPECT_EQ(c.splits, 4) << c.Describe();
  EXPECT_GT(Busy(c, 16, 4), 0.95);
}

TEST(PagedDecodeSplitRule, LargeBatchAndShortContextsKeepOneSplit) {
  // 1024 x 8 KV heads = 8192 CTAs: 31.03 waves of 264 at one split (97%); no split needed.
  EXPECT_EQ(Plan(1024, 32, 4096, sc::KvDtype::kBf16).splits, 1);
  // 64 tokens = one page: a split is at least 4 pages, so never split.
  EXPECT_EQ(Plan(1, 32, 64, sc::KvDtype::kBf16).splits, 1);
  // One sequence, 16384 tokens (256 pages, at most 64 splits): 8 CTAs per split, 32
  // splits fill 256 of 264 slots (97%).
  EXPECT_EQ(Plan(1, 32, 16384, sc::KvDtype::kBf16).splits, 32);
}

TEST(PagedDecodeSplitRule, FixedCostsKeepShortLaunchesRight) {
  // Rows the first version of the wave rule (fill the last wave best, ignoring each
  // split's fixed cost) made slower in run h200-attn4: one sequence, 4/1 heads, 1023
  // cached tokens (16 pages, 1 CTA per split): it took 1 split (2.1x slower than 4);
  // the wave model takes 4 (4 CTAs of 4 pages).
  EXPECT_EQ(Plan(1, 4, 1024, sc::KvDtype::kBf16, true, 1).splits, 4);
  // 1024 sequences, 4/1 heads, fp8, 16 pages: 1024 CTAs already fill 2.6 waves of 396;
  // splitting in 3 (as that version did, 1.27x slower) only adds work: 1 split.
  EXPECT_EQ(Plan(1024, 4, 1024, sc::KvDtype::kFp8E4m3, true, 1).splits, 1);
}

TEST(PagedDecodeSplitRule, TheTmaRingFillsLongBf16SplitsWhereTheDeviceHasIt) {
  const sc::PagedDecodeShape s{16, 32, 8, 128, 65536, 0};
  // 2 splits of 512 pages: the bf16 default takes the TMA ring where the device runs it.
  const sc::PagedDecodePlan on = sc::PlanPagedDecodeOn(s, kH200Sms, sc::KvDtype::kBf16, true);
  EXPECT_TRUE(on.tma) << on.Describe();
  EXPECT_EQ(on.Describe().rfind("mma,tma,splits=2,", 0), 0u) << on.Describe();
  const sc::PagedDecodePlan off = sc::PlanPagedDecodeOn(s, kH200Sms, sc::KvDtype::kBf16, false);
  EXPECT_FALSE(off.tma);
  EXPECT_EQ(off.Describe().rfind("mma,splits=2,", 0), 0u) << off.Describe();
  // Splits shorter than kPagedDecodeTmaMinPages keep the cp.async ring; fp8 never has it.
  const sc::PagedDecodePlan shorter =
      sc::PlanPagedDecodeOn({1, 32, 8, 128, 1024, 0}, kH200Sms, sc::KvDtype::kBf16, true);
  EXPECT_LT(shorter.pages_per_split, sc::kPagedDecodeTmaMinPages) << shorter.Describe();
  EXPECT_FALSE(shorter.tma) << shorter.Describe();
  EXPECT_FALSE(sc::PlanPagedDecodeOn(s, kH200Sms, sc::KvDtype::kFp8E4m3, true).tma);
}

TEST(PagedDecodeSplitRule, VariantsAreCheckedAndAimAtTheirOwnOccupancy) {
  const sc::PagedDecodeShape s{16, 32, 8, 128, 65536, 0};
  sc::PagedDecodeTuning bad;
  bad.variant = sc::kPagedDecodeVariantCount;
  EXPECT_THROW(sc::PlanPagedDecodeOn(s, kH200Sms, sc::KvDtype::kBf16, true, bad), servecast::Error);
  // A TMA variant other than the default needs the ring: no silent cp.async stand-in.
  sc::PagedDecodeTuning tma3d;
  tma3d.variant = 9;
  ASSERT_STREQ(sc::kPagedDecodeVariantConfigs[9].name, "tma3d_l2_256");
  EXPECT_THROW(sc::PlanPagedDecodeOn(s, kH200Sms, sc::KvDtype::kBf16, false, tma3d), servecast::Error);
  EXPECT_NE(
      sc::PlanPagedDecodeOn(s, kH200Sms, sc::KvDtype::kBf16, true, tma3d).Describe().find(",variant=tma3d_l2_256"),
      std::string::npos);
  // fine_splits aims at 8x one wave: more splits than the default at the same shape.
  sc::PagedDecodeTuning fine;
  fine.variant = 8;
  ASSERT_STREQ(sc::kPagedDecodeVariantConfigs[8].name, "fine_splits");
  EXPECT_GT(sc::PlanPagedDecodeOn(s, kH200Sms, sc::KvDtype::kBf16, false, fine).splits,
            sc::PlanPagedDecodeOn(s, kH200Sms, sc::KvDtype::kBf16, false).splits);
  // The occupancy the split rule assumes, from the shared-memory arithmetic the kernels
  // are compiled with: the default 2 CTAs per SM at head dim 128 (4 at 64), fp8 3 and 5.
  const sc::PagedDecodeMmaConfig& d = sc::kPagedDecodeVariantConfigs[0].config;
  EXPECT_EQ(sc::PagedDecodeMmaCtasPerSm(128, d.warps, d.stages, false, d.tma), 2);
  EXPECT_EQ(sc::PagedDecodeMmaCtasPerSm(64, d.warps, d.stages, false, d.tma), 4);
  EXPECT_EQ(sc::PagedDecodeMmaCtasPerSm(128, d.warps, sc::PagedDecodeFp8Stages(128), true, false), 3);
  EXPECT_EQ(sc::PagedDecodeMmaCtasPerSm(64, d.warps, sc::PagedDecodeFp8Stages(64), true, false), 5);
  EXPECT_STREQ(sc::kPagedDecodeVariantConfigs[sc::kPagedDecodeCpAsyncVariant].name, "cp_async");
}
