#include "backends/cpu/attention_context.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "attention_test_util.h"
#include "cpu_test_util.h"

namespace servecast::cpu {
namespace {

using collect::Disposition;
using collect::FailureClass;
using testing::Describe;

struct PrefillInputs {
  std::vector<float> q, k, v;
};

PrefillInputs RandomInputs(const AttentionShape& s, std::uint64_t seed) {
  PrefillInputs in;
  in.q.resize(static_cast<std::size_t>(s.batch * s.isl * s.num_heads * s.head_dim));
  in.k.resize(static_cast<std::size_t>(s.batch * s.isl * s.num_kv_heads * s.head_dim));
  in.v.resize(in.k.size());
  Rng rng(seed);
  FillUniform(in.q.data(), in.q.size(), rng, -3, 3);
  FillUniform(in.k.data(), in.k.size(), rng, -1, 1);
  FillUniform(in.v.data(), in.v.size(), rng, -1, 1);
  return in;
}

AttentionShape Shape(std::int64_t b, std::int64_t s, std::int64_t n, std::int64_t kv, std::int64_t h, std::int64_t w) {
  AttentionShape shape;
  shape.batch = b;
  shape.isl = s;
  shape.num_heads = n;
  shape.num_kv_heads = kv;
  shape.head_dim = h;
  shape.window = w;
  return shape;
}

std::vector<double> Naive(const AttentionShape& s, const PrefillInputs& in) {
  return testing::NaiveAttention({s.batch, s.isl, s.isl, s.num_heads, s.num_kv_heads, s.head_dim, s.window, 0}, in.q,
                                 in.k, in.v);
}

TEST(FlashPrefillTest, MatchesNaiveAttentionOnOddShapes) {
  const std::vector<AttentionShape> shapes = {
      Shape(2, 37, 8, 2, 64, 0),     // isl not a multiple of either tile, GQA 8/2
      Shape(1, 100, 4, 4, 128, 0),   // MHA, head_dim 128, several query and key tiles
      Shape(1, 77, 8, 2, 64, 20),    // window < isl and < both tiles
      Shape(2, 150, 6, 3, 128, 70),  // window > key tile: a query spans key tiles
      Shape(3, 1, 2, 1, 32, 0),      // a single token
      Shape(1, 65, 4, 1, 256, 64),   // MQA, window == key tile, head_dim 256
      Shape(1, 33, 2, 2, 80, 0),     // head_dim 80
  };
  for (const AttentionShape& s : shapes) {
    SCOPED_TRACE("b=" + std::to_string(s.batch) + " s=" + std::to_string(s.isl) + " n=" + std::to_string(s.num_heads) +
                 " kv=" + std::to_string(s.num_kv_heads) + " h=" + std::to_string(s.head_dim) +
                 " w=" + std::to_string(s.window));
    PrefillInputs in = RandomInputs(s, 11);
    std::vector<float> out(in.q.size(), std::numeric_limits<float>::quiet_NaN());
    PrefillWorkspace ws;
    ASSERT_TRUE(FlashPrefill(s, in.q.data(), in.k.data(), in.v.data(), out.data(), ws));
    std::vector<double> ref = Naive(s, in);
    double worst = 0;
    for (std::size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::fabs(out[i] - ref[i]));
    EXPECT_LT(worst, 2e-5);  // also fails on NaN: a position never written
    // The sampled check inside the op agrees.
    EXPECT_TRUE(CheckPrefill(s, in.q.data(), in.k.data(), in.v.data(), out.data(), 5).ok());
  }
}

TEST(FlashPrefillTest, CausalAndWindowSemantics) {
  // Zero queries make every visible key equally likely: each output is the mean of
  // the values it sees, which pins down the mask exactly.
  for (std::int64_t window : {0, 1, 3}) {
    AttentionShape s = Shape(1, 5, 1, 1, 32, window);
    PrefillInputs in = RandomInputs(s, 3);
    std::fill(in.q.begin(), in.q.end(), 0.0f);
    std::vector<float> out(in.q.size());
    PrefillWorkspace ws;
    ASSERT_TRUE(FlashPrefill(s, in.q.data(), in.k.data(), in.v.data(), out.data(), ws));
    for (std::int64_t pos = 0; pos < 5; ++pos) {
      std::int64_t first = window > 0 ? std::max<std::int64_t>(0, pos - window + 1) : 0;
      for (std::int64_t d = 0; d < 32; ++d) {
        double mean = 0;
        for (std::int64_t j = first; j <= pos; ++j) mean += in.v[j * 32 + d];
        mean /= static_cast<double>(pos - first + 1);
        EXPECT_NEAR(out[pos * 32 + d], mean, 1e-6) << "window " << window << " pos " << pos << " d " << d;
      }
    }
  }
}

TEST(FlashPrefillTest, RejectsHeadDimWithoutKernel) {
  AttentionShape s = Shape(1, 4, 1, 1, 100, 0);
  std::vector<float> buf(400);
  PrefillWorkspace ws;
  EXPECT_FALSE(FlashPrefill(s, buf.data(), buf.data(), buf.data(), buf.data(), ws));
}

TEST(CheckPrefillTest, CatchesWrongOutputs) {
  AttentionShape s = Shape(2, 40, 4, 2, 64, 0);
  PrefillInputs in = RandomInputs(s, 9);
  std::vector<float> out(in.q.size());
  PrefillWorkspace ws;
  ASSERT_TRUE(FlashPrefill(s, in.q.data(), in.k.data(), in.v.data(), out.data(), ws));
  ASSERT_TRUE(CheckPrefill(s, in.q.data(), in.k.data(), in.v.data(), out.data(), 1).ok());

  // The last element of the last position is always checked.
  std::vector<float> corrupted = out;
  corrupted.back() += 1e-3f;
  RefCheck check = CheckPrefill(s, in.q.data(), in.k.data(), in.v.data(), corrupted.data(), 1);
  EXPECT_FALSE(check.ok());
  EXPECT_NE(check.Describe("out", "rule").find("s=39"), std::string::npos) << check.Describe("out", "rule");

  // An output computed without the window fails a check that expects one.
  AttentionShape windowed = s;
  windowed.window = 8;
  EXPECT_FALSE(CheckPrefill(windowed, in.q.data(), in.k.data(), in.v.data(), out.data(), 1).ok());
}

collect::Params ContextParams(std::int64_t b, std::int64_t s, std::int64_t n, std::int64_t kv, std::int64_t h,
                              std::int64_t w) {
  return {{"batch_size", b},
          {"isl", s},
          {"num_heads", n},
          {"num_key_value_heads", kv},
          {"head_dim", h},
          {"window_size", w},
          {"beam_width", std::int64_t{1}},
          {"attn_dtype", std::string("float32")},
          {"kv_cache_dtype", std::string("float32")},
          {"step", std::int64_t{0}}};
}

TEST(AttentionContextOpTest, PassesAndEmitsARow) {
  auto op = MakeAttentionContextOp();
  for (const collect::Params& p : {ContextParams(1, 37, 8, 2, 64, 0), ContextParams(2, 70, 4, 4, 128, 0),
                                   ContextParams(1, 90, 8, 2, 128, 33), ContextParams(1, 16, 4, 0, 64, 0)}) {
    collect::CaseResult r = testing::RunCase(*op, p);
    testing::ExpectPassedRow(r, *op, p, "servecast_cpu_flash_prefill");
  }
}

TEST(AttentionContextOpTest, UnsupportedConfigurationsAreNotSupported) {
  auto op = MakeAttentionContextOp();
  auto with = [](std::string name, Value v) {
    collect::Params p = ContextParams(1, 8, 2, 1, 64, 0);
    p.Set(name, std::move(v));
    return p;
  };
  for (const collect::Params& p :
       {with("attn_dtype", std::string("fp8")), with("kv_cache_dtype", std::string("bfloat16")),
        with("beam_width", std::int64_t{2}), with("step", std::int64_t{3}), with("head_dim", std::int64_t{100})}) {
    collect::CaseResult r = testing::RunCase(*op, p);
    EXPECT_EQ(r.disposition, Disposition::kNotSupported) << p.Canonical() << " -> " << Describe(r);
    EXPECT_EQ(r.failure_class, FailureClass::kUnsupportedConfig) << p.Canonical();
    EXPECT_TRUE(r.rows.empty());
  }
  for (const collect::Params& p : {with("num_key_value_heads", std::int64_t{3}), with("isl", std::int64_t{0}),
                                   with("attn_dtype", std::string("fp9"))}) {
    collect::CaseResult r = testing::RunCase(*op, p);
    EXPECT_EQ(r.disposition, Disposition::kFailed) << p.Canonical() << " -> " << Describe(r);
    EXPECT_EQ(r.failure_class, FailureClass::kUnsupportedConfig) << p.Canonical();
  }
  collect::Params missing = ContextParams(1, 8, 2, 1, 64, 0);
  collect::Params trimmed;
  for (const auto& [k, v] : missing.items())
    if (k != "head_dim") trimmed.Set(k, v);
  collect::CaseResult r = testing::RunCase(*op, trimmed);
  EXPECT_EQ(r.disposition, Disposition::kFailed) << Describe(r);
  EXPECT_NE(r.message.find("head_dim"), std::string::npos) << r.message;
}

TEST(AttentionContextOpTest, MemoryBytesCoversTensors) {
  auto op = MakeAttentionContextOp();
  double bytes = op->MemoryBytes(ContextParams(2, 100, 8, 2, 128, 0));
  double tensors = 4.0 * 2 * 100 * 128 * (2 * 8 + 2 * 2);
  EXPECT_GE(bytes, tensors);
  EXPECT_LT(bytes, tensors * 1.1);
}

}  // namespace
}  // namespace servecast::cpu
