#include "collect/moe_routing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "../core/core_test_util.h"
#include "core/bf16.h"
#include "core/error.h"

namespace servecast::collect {
namespace {

using servecast::testing::HasText;
using servecast::testing::ThrownMessage;

MoeRoutingShape Shape(std::int64_t tokens, std::int64_t experts, std::int64_t topk, std::int64_t ep,
                      std::string distribution) {
  MoeRoutingShape s;
  s.num_tokens = tokens;
  s.num_experts = experts;
  s.topk = topk;
  s.moe_ep_size = ep;
  s.distribution = std::move(distribution);
  return s;
}

const std::vector<std::string> kDistributions = {"balanced", "power_law_1.01", "power_law_1.2"};

// Shapes that cover T·topk <= E, T·topk > E, T < topk, ep 1..E, and a topk near E.
std::vector<MoeRoutingShape> Shapes() {
  std::vector<MoeRoutingShape> out;
  for (const auto& d : kDistributions) {
    for (std::int64_t t : {1, 2, 3, 7, 16, 100, 1024}) {
      out.push_back(Shape(t, 8, 2, 1, d));
      out.push_back(Shape(t, 8, 2, 2, d));
      out.push_back(Shape(t, 128, 8, 8, d));
      out.push_back(Shape(t, 256, 8, 32, d));
      out.push_back(Shape(t, 6, 4, 3, d));
      out.push_back(Shape(t, 8, 8, 8, d));
    }
  }
  return out;
}

std::string Name(const MoeRoutingShape& s) {
  return "T=" + std::to_string(s.num_tokens) + " E=" + std::to_string(s.num_experts) + " k=" + std::to_string(s.topk) +
         " ep=" + std::to_string(s.moe_ep_size) + " " + s.distribution;
}

// Every invariant of the contract, for one routing.
void ExpectValid(const MoeRoutingShape& s, const MoeRouting& r) {
  SCOPED_TRACE(Name(s));
  const std::int64_t T = s.num_tokens, E = s.num_experts, K = s.topk;
  ASSERT_EQ(r.num_tokens, T);
  ASSERT_EQ(r.num_experts, E);
  ASSERT_EQ(r.topk, K);
  ASSERT_EQ(r.expert_ids.size(), static_cast<std::size_t>(T * K));
  ASSERT_EQ(r.weights.size(), static_cast<std::size_t>(T * K));
  ASSERT_EQ(r.logits.size(), static_cast<std::size_t>(T * E));
  ASSERT_EQ(r.tokens_per_expert.size(), static_cast<std::size_t>(E));
  std::vector<std::int64_t> counts(static_cast<std::size_t>(E), 0);
  for (std::int64_t t = 0; t < T; ++t) {
    std::set<std::int32_t> picked;
    double weight_sum = 0;
    for (std::int64_t j = 0; j < K; ++j) {
      std::int32_t e = r.expert_ids[t * K + j];
      ASSERT_GE(e, 0);
      ASSERT_LT(e, E);
      EXPECT_TRUE(picked.insert(e).second) << "token " << t << " picks expert " << e << " twice";
      ++counts[e];
      EXPECT_GT(r.weights[t * K + j], 0);
      weight_sum += r.weights[t * K + j];
    }
    EXPECT_NEAR(weight_sum, 1.0, 1e-5) << "token " << t;
  }
  EXPECT_EQ(counts, r.tokens_per_expert);
  EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), std::int64_t{0}), T * K);
  for (std::int64_t c : counts) EXPECT_LE(c, T);
  EXPECT_EQ(r.local_experts, E / s.moe_ep_size);
  EXPECT_EQ(r.local_assignments, std::accumulate(counts.begin(), counts.begin() + E / s.moe_ep_size, std::int64_t{0}));
}

TEST(MoeRoutingTest, EveryShapeAndDistributionMeetsTheContract) {
  for (const auto& s : Shapes())
    for (int sample = 0; sample < 5; ++sample) ExpectValid(s, SynthesizeMoeRouting(s, 42, sample));
}

TEST(MoeRoutingTest, IsDeterministic) {
  for (const auto& d : kDistributions) {
    MoeRoutingShape s = Shape(64, 16, 4, 2, d);
    MoeRouting a = SynthesizeMoeRouting(s, 7, 3), b = SynthesizeMoeRouting(s, 7, 3);
    EXPECT_EQ(a.expert_ids, b.expert_ids) << d;
    EXPECT_EQ(a.weights, b.weights) << d;
    EXPECT_EQ(a.logits, b.logits) << d;
  }
}

TEST(MoeRoutingTest, PowerLawSamplesAndSeedsDiffer) {
  MoeRoutingShape s = Shape(256, 64, 4, 4, "power_law_1.2");
  MoeRouting s0 = SynthesizeMoeRouting(s, 7, 0);
  EXPECT_NE(s0.tokens_per_expert, SynthesizeMoeRouting(s, 7, 1).tokens_per_expert);
  EXPECT_NE(s0.tokens_per_expert, SynthesizeMoeRouting(s, 8, 0).tokens_per_expert);
  // A sample does not depend on which other samples were drawn.
  EXPECT_EQ(SynthesizeMoeRouting(s, 7, 4).expert_ids, SynthesizeMoeRouting(s, 7, 4).expert_ids);
}

TEST(MoeRoutingTest, BalancedGivesEveryExpertTheSameLoad) {
  for (const auto& s : Shapes()) {
    if (s.distribution != "balanced") continue;
    MoeRouting r = SynthesizeMoeRouting(s, 1);
    const std::int64_t lo = s.num_tokens * s.topk / s.num_experts;
    for (std::int64_t c : r.tokens_per_expert) {
      EXPECT_GE(c, lo) << Name(s);
      EXPECT_LE(c, lo + 1) << Name(s);
    }
  }
  // Expert ids do not depend on the seed or the sample (only logits and weights do).
  MoeRoutingShape s = Shape(33, 16, 4, 4, "balanced");
  EXPECT_EQ(SynthesizeMoeRouting(s, 1, 0).expert_ids, SynthesizeMoeRouting(s, 2, 3).expert_ids);
}

TEST(MoeRoutingTest, BalancedSpreadsOneTokensPicksOverTheEpRanks) {
  // AIC's stride pattern: one token of a 128-expert, top-8 model sends one pick to
  // each of 8 EP ranks (stride 16), not all 8 to rank 0.
  MoeRouting r = SynthesizeMoeRouting(Shape(1, 128, 8, 8, "balanced"), 1);
  EXPECT_EQ(r.expert_ids, (std::vector<std::int32_t>{0, 16, 32, 48, 64, 80, 96, 112}));
  EXPECT_EQ(r.local_assignments, 1);
  // Mixtral-like: token t picks t mod 4 and t mod 4 + 4.
  MoeRouting m = SynthesizeMoeRouting(Shape(5, 8, 2, 2, "balanced"), 1);
  EXPECT_EQ(m.expert_ids, (std::vector<std::int32_t>{0, 4, 1, 5, 2, 6, 3, 7, 0, 4}));
}

TEST(MoeRoutingTest, PowerLawPutsTheMostLoadedRankFirst) {
  for (const auto& s : Shapes()) {
    if (s.distribution == "balanced") continue;
    for (int sample = 0; sample < 5; ++sample) {
      MoeRouting r = SynthesizeMoeRouting(s, 42, sample);
      const std::int64_t L = r.local_experts;
      for (std::int64_t rank = 1; rank < s.moe_ep_size; ++rank) {
        std::int64_t load = std::accumulate(r.tokens_per_expert.begin() + rank * L,
                                            r.tokens_per_expert.begin() + (rank + 1) * L, std::int64_t{0});
        EXPECT_GE(r.local_assignments, load) << Name(s) << " sample " << sample << " rank " << rank;
      }
    }
  }
}

TEST(MoeRoutingTest, PowerLawIsSkewed) {
  // 4096 tokens, 128 experts, top 8: balanced would give every expert 256.
  for (const std::string d : {"power_law_1.01", "power_law_1.2"}) {
    MoeRouting r = SynthesizeMoeRouting(Shape(4096, 128, 8, 8, d), 42);
    auto [lo, hi] = std::minmax_element(r.tokens_per_expert.begin(), r.tokens_per_expert.end());
    EXPECT_GT(*hi, 2 * 256) << d;
    EXPECT_LT(*lo, 256 / 2) << d;
    EXPECT_GT(r.local_assignments, 4096 * 8 / 8) << d << ": rank 0 carries more than its balanced share";
  }
}

TEST(MoeRoutingTest, LogitsTopKIsExactlyTheExpertIds) {
  for (const auto& s : Shapes()) {
    MoeRouting r = SynthesizeMoeRouting(s, 5, 1);
    const std::int64_t E = s.num_experts, K = s.topk;
    for (std::int64_t t = 0; t < s.num_tokens; ++t) {
      const float* row = r.logits.data() + t * E;
      for (std::int64_t e = 0; e < E; ++e)
        ASSERT_EQ(Bf16ToF32(F32ToBf16(row[e])), row[e]) << Name(s) << ": logit not bf16-exact";
      // A stable descending sort of the row: its first K are the picks, in slot order.
      std::vector<std::int32_t> order(static_cast<std::size_t>(E));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
      std::vector<std::int32_t> top(order.begin(), order.begin() + K);
      std::vector<std::int32_t> want(r.expert_ids.begin() + t * K, r.expert_ids.begin() + (t + 1) * K);
      ASSERT_EQ(top, want) << Name(s) << " token " << t;
      // A margin: every pick >= 1, every other expert <= 0.
      EXPECT_GE(row[want.back()], 1.0f);
      if (K < E) {
        EXPECT_LE(row[order[K]], 0.0f);
      }
      // Weights are the softmax over the picked logits.
      double z = 0;
      for (std::int32_t e : want) z += std::exp(static_cast<double>(row[e]));
      for (std::int64_t j = 0; j < K; ++j)
        EXPECT_NEAR(r.weights[t * K + j], std::exp(static_cast<double>(row[want[j]])) / z, 1e-6);
    }
  }
}

TEST(MoeRoutingTest, RejectsInvalidShapesWithClearMessages) {
  auto msg = [](const MoeRoutingShape& s) { return ThrownMessage<Error>([&] { SynthesizeMoeRouting(s, 1); }); };
  EXPECT_TRUE(HasText(msg(Shape(4, 8, 9, 1, "balanced")), "topk must be <= num_experts"));
  EXPECT_TRUE(HasText(msg(Shape(4, 8, 9, 1, "balanced")), "topk=9"));
  EXPECT_TRUE(HasText(msg(Shape(4, 8, 2, 3, "balanced")), "num_experts must be a multiple of moe_ep_size"));
  EXPECT_TRUE(HasText(msg(Shape(0, 8, 2, 1, "balanced")), "num_tokens must be >= 1"));
  EXPECT_TRUE(HasText(msg(Shape(4, 8, 0, 1, "balanced")), "topk must be >= 1"));
  EXPECT_TRUE(HasText(msg(Shape(4, 8, 2, 0, "balanced")), "moe_ep_size must be >= 1"));
  for (const std::string bad : {"zipf", "power_law_", "power_law_x", "power_law_-1", "power_law_1.2x", ""})
    EXPECT_TRUE(HasText(msg(Shape(4, 8, 2, 1, bad)), "unknown distribution '" + bad + "'")) << bad;
  EXPECT_TRUE(HasText(ThrownMessage<Error>([] { SynthesizeMoeRouting(Shape(4, 8, 2, 1, "balanced"), 1, -1); }),
                      "sample must be >= 0"));
}

}  // namespace
}  // namespace servecast::collect
