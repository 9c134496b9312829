#include "backends/cpu/moe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cpu_test_util.h"

namespace servecast::cpu {
namespace {

using collect::Disposition;
using testing::Describe;

collect::Params MoeParams(std::int64_t tokens, std::int64_t hidden, std::int64_t inter, std::int64_t topk,
                          std::int64_t experts, std::int64_t tp, std::int64_t ep, std::string distribution,
                          std::string dtype = "float32") {
  return {{"moe_dtype", dtype},  {"num_tokens", tokens}, {"hidden_size", hidden},
          {"inter_size", inter}, {"topk", topk},         {"num_experts", experts},
          {"moe_tp_size", tp},   {"moe_ep_size", ep},    {"distribution", distribution}};
}

struct Problem {
  MoeShape shape;
  collect::MoeRouting routing;
  std::vector<float> x, w13, w2;
};

Problem MakeProblem(std::int64_t tokens, std::int64_t hidden, std::int64_t inter, std::int64_t topk,
                    std::int64_t experts, std::int64_t ep, const std::string& distribution) {
  Problem p;
  p.shape = {tokens, hidden, inter, topk, experts, experts / ep};
  p.routing = collect::SynthesizeMoeRouting({tokens, experts, topk, ep, distribution}, 11);
  Rng rng(3);
  p.x.resize(static_cast<std::size_t>(tokens * hidden));
  p.w13.resize(static_cast<std::size_t>(p.shape.local_experts * hidden * 2 * inter));
  p.w2.resize(static_cast<std::size_t>(p.shape.local_experts * inter * hidden));
  FillUniform(p.x.data(), p.x.size(), rng, -1, 1);
  FillUniform(p.w13.data(), p.w13.size(), rng, -0.1f, 0.1f);
  FillUniform(p.w2.data(), p.w2.size(), rng, -0.1f, 0.1f);
  return p;
}

std::vector<std::int64_t> AllTokens(std::int64_t n) {
  std::vector<std::int64_t> t(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) t[i] = i;
  return t;
}

TEST(MoeForwardTest, RoutesByTheLogitsAndPassesTheCheck) {
  for (const std::string d : {"balanced", "power_law_1.01", "power_law_1.2"}) {
    for (std::int64_t ep : {1, 2, 4}) {
      Problem p = MakeProblem(37, 64, 48, 3, 8, ep, d);
      std::vector<float> out(p.x.size());
      MoeWorkspace ws;
      MoeForward(p.shape, p.x.data(), p.routing.logits.data(), p.w13.data(), p.w2.data(), out.data(), ws);
      std::vector<std::int32_t> picks(ws.topk_ids.begin(), ws.topk_ids.begin() + 37 * 3);
      EXPECT_EQ(picks, p.routing.expert_ids) << d << " ep " << ep;
      EXPECT_EQ(ws.expert_offsets.back(), p.routing.local_assignments) << d << " ep " << ep;
      RefCheck check = CheckMoe(p.shape, p.x.data(), p.routing, p.w13.data(), p.w2.data(), out.data(), AllTokens(37));
      EXPECT_TRUE(check.ok()) << d << " ep " << ep << ": " << check.Describe("out", "rule");
      EXPECT_EQ(check.checked(), 37 * 64);
    }
  }
}

TEST(MoeForwardTest, TokensWithNoLocalExpertGetZeros) {
  // ep 8 of 8 experts: rank 0 owns expert 0 only; balanced top-1 sends token t to t mod 8.
  Problem p = MakeProblem(16, 32, 16, 1, 8, 8, "balanced");
  std::vector<float> out(p.x.size(), 1.0f);
  MoeWorkspace ws;
  MoeForward(p.shape, p.x.data(), p.routing.logits.data(), p.w13.data(), p.w2.data(), out.data(), ws);
  for (std::int64_t t = 0; t < 16; ++t) {
    double norm = 0;
    for (std::int64_t d = 0; d < 32; ++d) norm += std::fabs(out[t * 32 + d]);
    if (t % 8 == 0)
      EXPECT_GT(norm, 0) << t;
    else
      EXPECT_EQ(norm, 0) << t;
  }
}

TEST(MoeForwardTest, CheckCatchesWrongOutputs) {
  Problem p = MakeProblem(20, 64, 32, 2, 8, 2, "power_law_1.2");
  std::vector<float> out(p.x.size());
  MoeWorkspace ws;
  MoeForward(p.shape, p.x.data(), p.routing.logits.data(), p.w13.data(), p.w2.data(), out.data(), ws);
  const auto tokens = AllTokens(20);
  ASSERT_TRUE(CheckMoe(p.shape, p.x.data(), p.routing, p.w13.data(), p.w2.data(), out.data(), tokens).ok());

  // One element off by a relative 1e-2 (token 0 picks rank 0's first expert under a
  // power law, so its output is not zero).
  std::vector<float> corrupted = out;
  ASSERT_NE(out[7], 0.0f);
  corrupted[7] *= 1.01f;
  RefCheck one = CheckMoe(p.shape, p.x.data(), p.routing, p.w13.data(), p.w2.data(), corrupted.data(), tokens);
  EXPECT_FALSE(one.ok());
  EXPECT_EQ(one.bad(), 1);
  EXPECT_NE(one.Describe("out", "rule").find("out[0,7]"), std::string::npos) << one.Describe("out", "rule");

  // A reference that combines with other weights (a wrong router softmax) fails.
  collect::MoeRouting skewed = p.routing;
  for (std::size_t a = 0; a + 1 < skewed.weights.size(); a += 2) {
    skewed.weights[a] += 0.01f;
    skewed.weights[a + 1] -= 0.01f;
  }
  EXPECT_FALSE(CheckMoe(p.shape, p.x.data(), skewed, p.w13.data(), p.w2.data(), out.data(), tokens).ok());

  // A reference routed elsewhere (another seed's power-law sample) fails.
  collect::MoeRouting other = collect::SynthesizeMoeRouting({20, 8, 2, 2, "power_law_1.2"}, 12);
  ASSERT_NE(other.expert_ids, p.routing.expert_ids);
  EXPECT_FALSE(CheckMoe(p.shape, p.x.data(), other, p.w13.data(), p.w2.data(), out.data(), tokens).ok());

  // A NaN never passes.
  corrupted = out;
  corrupted[0] = std::nanf("");
  EXPECT_FALSE(CheckMoe(p.shape, p.x.data(), p.routing, p.w13.data(), p.w2.data(), corrupted.data(), tokens).ok());
}

TEST(MoeOpTest, PassesAndEmitsARow) {
  auto op = MakeMoeOp();
  for (const collect::Params& p :
       {MoeParams(1, 64, 64, 2, 8, 1, 1, "balanced"), MoeParams(16, 128, 256, 2, 8, 2, 2, "power_law_1.01"),
        MoeParams(33, 96, 96, 4, 16, 1, 4, "power_law_1.2"), MoeParams(3, 32, 64, 8, 8, 2, 8, "balanced")}) {
    collect::CaseResult r = testing::RunCase(*op, p);
    testing::ExpectPassedRow(r, *op, p, "servecast_cpu_moe");
  }
}

TEST(MoeOpTest, OtherDtypesAreNotSupported) {
  auto op = MakeMoeOp();
  for (const std::string dt : {"bfloat16", "fp8", "fp8_block"}) {
    collect::CaseResult r = testing::RunCase(*op, MoeParams(4, 64, 64, 2, 8, 1, 1, "balanced", dt));
    EXPECT_EQ(r.disposition, Disposition::kNotSupported) << Describe(r);
    EXPECT_NE(r.message.find("float32"), std::string::npos) << r.message;
  }
}

TEST(MoeOpTest, RejectsBadParameters) {
  auto op = MakeMoeOp();
  struct Bad {
    collect::Params params;
    std::string says;
  };
  for (const Bad& b : std::vector<Bad>{
           {MoeParams(4, 64, 64, 9, 8, 1, 1, "balanced"), "topk 9 must be <= num_experts 8"},
           {MoeParams(4, 64, 64, 2, 8, 1, 3, "balanced"), "multiple of moe_ep_size 3"},
           {MoeParams(4, 64, 63, 2, 8, 2, 1, "balanced"), "inter_size 63 is not a multiple of moe_tp_size 2"},
           {MoeParams(4, 64, 64, 2, 8, 1, 1, "zipf"), "distribution 'zipf'"},
           {MoeParams(4, 64, 64, 2, 8, 1, 1, "power_law_abc"), "unknown distribution 'power_law_abc'"},
           {MoeParams(0, 64, 64, 2, 8, 1, 1, "balanced"), "num_tokens"},
           {MoeParams(4, 64, 64, 2, 8, 1, 1, "balanced", "float64"), "unknown dtype 'float64'"}}) {
    collect::CaseResult r = testing::RunCase(*op, b.params);
    EXPECT_EQ(r.disposition, Disposition::kFailed) << Describe(r);
    EXPECT_NE(r.message.find(b.says), std::string::npos) << r.message;
  }
}

TEST(MoeOpTest, MemoryBytesCountsWeightsAndSamples) {
  auto op = MakeMoeOp();
  double balanced = op->MemoryBytes(MoeParams(16, 1024, 512, 2, 16, 1, 1, "balanced"));
  // At least the local experts' weights: 16 x 3 x 1024 x 512 floats.
  EXPECT_GE(balanced, 4.0 * 16 * 3 * 1024 * 512);
  EXPECT_LT(balanced, 1.1 * 4.0 * 16 * 3 * 1024 * 512);
  EXPECT_GT(op->MemoryBytes(MoeParams(16, 1024, 512, 2, 16, 1, 1, "power_law_1.2")), balanced);
  EXPECT_LT(op->MemoryBytes(MoeParams(16, 1024, 512, 2, 16, 2, 2, "balanced")), balanced / 3);
  EXPECT_EQ(op->MemoryBytes(MoeParams(16, 1024, 512, 2, 16, 1, 1, "balanced", "nope")), 0);
}

}  // namespace
}  // namespace servecast::cpu
