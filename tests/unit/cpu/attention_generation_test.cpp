#include "backends/cpu/attention_generation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "attention_test_util.h"
#include "cpu_test_util.h"

namespace servecast::cpu {
namespace {

using collect::Disposition;
using collect::FailureClass;
using testing::Describe;

AttentionShape DecodeShape(std::int64_t b, std::int64_t step, std::int64_t n, std::int64_t kv, std::int64_t h,
                           std::int64_t w) {
  AttentionShape s;
  s.batch = b;
  s.isl = 1;
  s.num_heads = n;
  s.num_kv_heads = kv;
  s.head_dim = h;
  s.window = w;
  s.step = step;
  return s;
}

// Logical (contiguous) inputs and the same K/V scattered into a paged cache.
struct DecodeInputs {
  std::vector<float> q, k, v;  // q [b][n][h]; k, v [b][tokens][kv][h]
  PagedKvCache cache;
};

DecodeInputs MakeInputs(const AttentionShape& s, std::uint64_t seed) {
  const std::int64_t tokens = s.step + 1, H = s.head_dim, KV = s.num_kv_heads;
  DecodeInputs in;
  Rng rng(seed);
  in.q.resize(static_cast<std::size_t>(s.batch * s.num_heads * H));
  in.k.resize(static_cast<std::size_t>(s.batch * tokens * KV * H));
  in.v.resize(in.k.size());
  FillUniform(in.q.data(), in.q.size(), rng, -3, 3);
  FillUniform(in.k.data(), in.k.size(), rng, -1, 1);
  FillUniform(in.v.data(), in.v.size(), rng, -1, 1);
  in.cache = MakePagedKvCache(s.batch, tokens, KV, H, rng);
  // Unused slots hold garbage, so reading past the end shows.
  std::fill(in.cache.k.begin(), in.cache.k.end(), 1e3f);
  std::fill(in.cache.v.begin(), in.cache.v.end(), 1e3f);
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t g = 0; g < KV; ++g)
        for (std::int64_t d = 0; d < H; ++d) {
          std::size_t src = static_cast<std::size_t>(((b * tokens + t) * KV + g) * H + d);
          std::size_t dst = static_cast<std::size_t>(in.cache.Offset(b, t, g) + d);
          in.cache.k[dst] = in.k[src];
          in.cache.v[dst] = in.v[src];
        }
  return in;
}

std::vector<double> Naive(const AttentionShape& s, const DecodeInputs& in) {
  // One query at position `step` over step + 1 keys.
  return testing::NaiveAttention({s.batch, 1, s.step + 1, s.num_heads, s.num_kv_heads, s.head_dim, s.window, s.step},
                                 in.q, in.k, in.v);
}

TEST(PagedKvCacheTest, PageTableIsAShuffledPermutation) {
  Rng rng(5);
  PagedKvCache cache = MakePagedKvCache(3, 130, 2, 64, rng);
  EXPECT_EQ(cache.pages_per_seq, 3);  // ceil(130 / 64)
  EXPECT_EQ(cache.num_pages, 9);
  EXPECT_EQ(cache.k.size(), static_cast<std::size_t>(9 * 2 * kKvPageSize * 64));
  std::vector<std::int32_t> sorted = cache.page_table;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int32_t> identity(9);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(cache.page_table, identity);
  // Token 65 of sequence 1 is token 1 of that sequence's second page.
  std::int64_t page = cache.page_table[1 * 3 + 1];
  EXPECT_EQ(cache.Offset(1, 65, 1), ((page * 2 + 1) * kKvPageSize + 1) * 64);
  EXPECT_EQ(PagedKvCacheBytes(3, 130, 2, 64), 2.0 * 4 * 9 * 2 * 64 * 64 + 4.0 * 9);
}

TEST(PagedDecodeTest, MatchesNaiveAttentionOnOddShapes) {
  const std::vector<AttentionShape> shapes = {
      DecodeShape(1, 0, 4, 4, 64, 0),       // one token: the output is its value
      DecodeShape(2, 63, 8, 2, 64, 0),      // exactly one full page
      DecodeShape(3, 64, 8, 2, 128, 0),     // one token into the second page
      DecodeShape(2, 200, 8, 2, 128, 0),    // step not a multiple of the page size
      DecodeShape(2, 200, 4, 1, 64, 50),    // window inside the last pages
      DecodeShape(1, 300, 6, 3, 128, 100),  // window spanning a page boundary
      DecodeShape(2, 20, 2, 2, 256, 500),   // window larger than the sequence
  };
  for (const AttentionShape& s : shapes) {
    SCOPED_TRACE("b=" + std::to_string(s.batch) + " step=" + std::to_string(s.step) +
                 " n=" + std::to_string(s.num_heads) + " kv=" + std::to_string(s.num_kv_heads) +
                 " h=" + std::to_string(s.head_dim) + " w=" + std::to_string(s.window));
    DecodeInputs in = MakeInputs(s, 21);
    std::vector<float> out(in.q.size(), std::numeric_limits<float>::quiet_NaN());
    DecodeWorkspace ws;
    ASSERT_TRUE(PagedDecode(s, in.q.data(), in.cache, out.data(), ws));
    std::vector<double> ref = Naive(s, in);
    double worst = 0;
    for (std::size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::fabs(out[i] - ref[i]));
    EXPECT_LT(worst, 2e-5);
    EXPECT_TRUE(CheckDecode(s, in.q.data(), in.cache, out.data(), 3).ok());
  }
}

TEST(PagedDecodeTest, UsesThePageTable) {
  AttentionShape s = DecodeShape(2, 150, 4, 2, 64, 0);
  DecodeInputs in = MakeInputs(s, 8);
  std::vector<float> out(in.q.size());
  DecodeWorkspace ws;
  ASSERT_TRUE(PagedDecode(s, in.q.data(), in.cache, out.data(), ws));
  PagedKvCache identity = in.cache;
  std::iota(identity.page_table.begin(), identity.page_table.end(), 0);
  ASSERT_NE(identity.page_table, in.cache.page_table);
  std::vector<float> wrong(in.q.size());
  ASSERT_TRUE(PagedDecode(s, in.q.data(), identity, wrong.data(), ws));
  double diff = 0;
  for (std::size_t i = 0; i < out.size(); ++i) diff = std::max(diff, double(std::fabs(out[i] - wrong[i])));
  EXPECT_GT(diff, 1e-2);
}

TEST(CheckDecodeTest, CatchesWrongOutputs) {
  AttentionShape s = DecodeShape(2, 90, 4, 2, 64, 0);
  DecodeInputs in = MakeInputs(s, 4);
  std::vector<float> out(in.q.size());
  DecodeWorkspace ws;
  ASSERT_TRUE(PagedDecode(s, in.q.data(), in.cache, out.data(), ws));
  ASSERT_TRUE(CheckDecode(s, in.q.data(), in.cache, out.data(), 1).ok());
  std::vector<float> corrupted = out;
  corrupted[5] -= 1e-3f;  // b=0, head 0: always checked
  EXPECT_FALSE(CheckDecode(s, in.q.data(), in.cache, corrupted.data(), 1).ok());
  AttentionShape windowed = s;
  windowed.window = 16;
  EXPECT_FALSE(CheckDecode(windowed, in.q.data(), in.cache, out.data(), 1).ok());
}

collect::Params GenerationParams(std::int64_t b, std::int64_t step, std::int64_t n, std::int64_t kv, std::int64_t h,
                                 std::int64_t w) {
  return {{"batch_size", b},
          {"isl", std::int64_t{1}},
          {"num_heads", n},
          {"num_key_value_heads", kv},
          {"head_dim", h},
          {"window_size", w},
          {"beam_width", std::int64_t{1}},
          {"attn_dtype", std::string("float32")},
          {"kv_cache_dtype", std::string("float32")},
          {"step", step}};
}

TEST(AttentionGenerationOpTest, PassesAndEmitsARow) {
  auto op = MakeAttentionGenerationOp();
  for (const collect::Params& p : {GenerationParams(4, 100, 8, 2, 128, 0), GenerationParams(2, 1000, 4, 4, 64, 0),
                                   GenerationParams(3, 300, 8, 1, 64, 128), GenerationParams(1, 0, 2, 2, 32, 0)}) {
    collect::CaseResult r = testing::RunCase(*op, p);
    testing::ExpectPassedRow(r, *op, p, "servecast_cpu_paged_decode");
  }
}

TEST(AttentionGenerationOpTest, UnsupportedConfigurationsAreNotSupported) {
  auto op = MakeAttentionGenerationOp();
  auto with = [](std::string name, Value v) {
    collect::Params p = GenerationParams(1, 10, 2, 1, 64, 0);
    p.Set(name, std::move(v));
    return p;
  };
  for (const collect::Params& p : {with("isl", std::int64_t{4}), with("attn_dtype", std::string("fp8")),
                                   with("kv_cache_dtype", std::string("fp8")), with("beam_width", std::int64_t{4}),
                                   with("head_dim", std::int64_t{72})}) {
    collect::CaseResult r = testing::RunCase(*op, p);
    EXPECT_EQ(r.disposition, Disposition::kNotSupported) << p.Canonical() << " -> " << Describe(r);
    EXPECT_EQ(r.failure_class, FailureClass::kUnsupportedConfig);
  }
  collect::CaseResult r = testing::RunCase(*op, with("step", std::int64_t{-1}));
  EXPECT_EQ(r.disposition, Disposition::kFailed) << Describe(r);
}

TEST(AttentionGenerationOpTest, MemoryBytesCoversCacheAndQueries) {
  auto op = MakeAttentionGenerationOp();
  double bytes = op->MemoryBytes(GenerationParams(16, 4095, 32, 8, 128, 0));
  double cache = PagedKvCacheBytes(16, 4096, 8, 128);
  EXPECT_GE(bytes, cache + 2.0 * 4 * 16 * 32 * 128);
  EXPECT_LT(bytes, cache * 1.01 + 2.0 * 4 * 16 * 32 * 128);
}

}  // namespace
}  // namespace servecast::cpu
