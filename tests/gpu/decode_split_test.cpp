// The paged-decode split rule (PlanPagedDecode, host code): the split count that
// minimizes the wave model (waves of resident CTAs x (pages per split + a fixed cost),
// plus the reduce kernel's cost when split). Needs no GPU (the SM count is an argument), but
// lives with the CUDA backend's tests because the planner is part of that library.
#include <gtest/gtest.h>

#include <cstdint>

#include "backends/cuda/attention_kernels.h"

namespace sc = servecast::cuda;

namespace {

constexpr int kH200Sms = 132;

// batch, query heads, KV heads, head dim, KV length (tokens), window
sc::PagedDecodePlan Plan(std::int64_t batch, std::int64_t heads, std::int64_t tokens, sc::KvDtype kv,
                         bool balanced = true, std::int64_t kv_heads = 8) {
  sc::PagedDecodeTuning tuning;
  tuning.wave_balanced_splits = balanced;
  const sc::PagedDecodeShape s{batch, heads, kv_heads, 128, tokens, 0};
  return sc::PlanPagedDecode(s, kH200Sms, kv, tuning);
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
