#include "perfdb/empirical.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"

namespace servecast::perfdb {
namespace {

// One axis, samples at 1, 4, 16 -> ln 0, ln 4, ln 16 -> normalised 0, 0.5, 1.
UtilGrid OneAxis() {
  return UtilGrid("one", {"x"}, {{{1}, 0.2}, {{4}, 0.4}, {{16}, 0.8}});
}

TEST(UtilGridTest, NormalisesLogAxesByMinAndSpanAndClamps) {
  const UtilGrid g = OneAxis();
  const double q2[1] = {2}, q8[1] = {8}, q100[1] = {100}, q0[1] = {0};
  EXPECT_NEAR(g.Normalise(q2)[0], 0.25, 1e-15);
  EXPECT_NEAR(g.Normalise(q8)[0], 0.75, 1e-15);
  EXPECT_EQ(g.Normalise(q100)[0], 1.0);  // clamped
  EXPECT_EQ(g.Normalise(q0)[0], 0.0);    // ln(1e-9), clamped
}

TEST(UtilGridTest, ExactSampleTakesItsUtil) {
  const UtilGrid g = OneAxis();
  const double q[1] = {4};
  const UtilLookup l = g.Lookup(q);
  EXPECT_TRUE(l.exact);
  EXPECT_EQ(l.used, 1u);
  EXPECT_EQ(l.util, 0.4);
  // Clamping beyond the data lands on the boundary sample.
  const double hi[1] = {1e6}, lo[1] = {0.5};
  EXPECT_EQ(g.Util(hi), 0.8);
  EXPECT_EQ(g.Util(lo), 0.2);
}

TEST(UtilGridTest, TwoNearestBlendWithInverseDistance) {
  const UtilGrid g = OneAxis();
  // x = 2 -> 0.25: equidistant from 0 and 0.5 -> (0.2 + 0.4) / 2.
  const double q2[1] = {2};
  EXPECT_NEAR(g.Util(q2), 0.3, 1e-15);
  // x = 3 -> t = ln 3 / ln 16; d = 0.5 - t to 0.4, t to 0.2.
  const double t = std::log(3.0) / std::log(16.0);
  const double w_near = 1 / (0.5 - t), w_far = 1 / t;
  const double q3[1] = {3};
  const UtilLookup l = g.Lookup(q3);
  EXPECT_EQ(l.used, 2u);
  EXPECT_EQ(l.nearest[0], 1u);
  EXPECT_EQ(l.nearest[1], 0u);
  EXPECT_NEAR(l.util, (0.4 * w_near + 0.2 * w_far) / (w_near + w_far), 1e-15);
}

TEST(UtilGridTest, EuclideanDistanceOverAxesAndConstantAxis) {
  // Axis a: 1 and 16 (span ln 16); axis b: 1 and 16; axis c constant 7 (span 0).
  const UtilGrid g("two", {"a", "b", "c"},
                   {{{1, 1, 7}, 0.2}, {{16, 1, 7}, 0.4}, {{1, 16, 7}, 0.6}, {{16, 16, 7}, 1.0}});
  // (2, 4, 123) -> (0.25, 0.5, 0): d to (0,0)=sqrt(.0625+.25), (1,0)=sqrt(.5625+.25),
  // (0,1)=sqrt(.0625+.25), (1,1)=sqrt(.5625+.25). Nearest two: samples 0 and 2 tied.
  const double q[3] = {2, 4, 123};
  const UtilLookup l = g.Lookup(q);
  EXPECT_EQ(l.nearest[0], 0u);
  EXPECT_EQ(l.nearest[1], 2u);
  EXPECT_NEAR(l.util, 0.4, 1e-15);
}

TEST(UtilGridTest, DropsBadSamplesAndEmptyIsATypedMiss) {
  const UtilGrid g("empty", {"x"}, {{{1}, 0}, {{2}, -1}, {{3}, NAN}, {{1, 2}, 0.5}});
  EXPECT_TRUE(g.empty());
  EXPECT_EQ(g.dropped(), 4u);
  const double q[1] = {5};
  try {
    g.Util(q);
    ADD_FAILURE() << "expected EmpiricalNotAvailableError";
  } catch (const EmpiricalNotAvailableError& e) {
    EXPECT_EQ(e.slice(), "empty");
    EXPECT_NE(std::string(e.what()).find("x=5"), std::string::npos) << e.what();
  }
  EXPECT_THROW(g.Util(q), MissingDataError);
  const UtilGrid one = OneAxis();
  const double q2[2] = {1, 2};
  EXPECT_THROW(one.Util(q2), Error);
}

TEST(UtilGridTest, SingleSampleAnswersEverywhere) {
  const UtilGrid g("single", {"x", "y"}, {{{8, 8}, 0.7}});
  const double q[2] = {1, 1000};
  EXPECT_EQ(g.Util(q), 0.7);
  EXPECT_EQ(g.CoveredRange(), "x [8, 8] x y [8, 8], 1 samples");
}

TEST(TransferPolicyTest, PresetsAllowNestedRungs) {
  using R = TransferRung;
  // off: none; conservative: xshape; balanced: + xquant; aggressive: every rung.
  for (R r : {R::kXshape, R::kXquant, R::kXprofile, R::kXop}) EXPECT_FALSE(TransferAllows(TransferPolicy::kOff, r));
  EXPECT_TRUE(TransferAllows(TransferPolicy::kConservative, R::kXshape));
  EXPECT_FALSE(TransferAllows(TransferPolicy::kConservative, R::kXquant));
  EXPECT_TRUE(TransferAllows(TransferPolicy::kBalanced, R::kXquant));
  EXPECT_FALSE(TransferAllows(TransferPolicy::kBalanced, R::kXprofile));
  for (R r : {R::kXshape, R::kXquant, R::kXprofile, R::kXop})
    EXPECT_TRUE(TransferAllows(TransferPolicy::kAggressive, r));
  for (auto p :
       {TransferPolicy::kOff, TransferPolicy::kConservative, TransferPolicy::kBalanced, TransferPolicy::kAggressive})
    EXPECT_EQ(ParseTransferPolicy(TransferPolicyName(p)), p);
  EXPECT_EQ(ParseTransferPolicy("all"), TransferPolicy::kAggressive);
  try {
    ParseTransferPolicy("everything");
    ADD_FAILURE();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("off, conservative, balanced, aggressive, all"), std::string::npos);
  }
  EXPECT_STREQ(TransferRungName(R::kXprofile), "xprofile");
}

TEST(TransferPolicyTest, UtilLevels) {
  EXPECT_EQ(GemmUtilLevel("bfloat16"), 0.70);
  EXPECT_EQ(GemmUtilLevel("int8_wo"), 0.55);
  EXPECT_EQ(GemmUtilLevel("int4_wo"), 0.45);
  EXPECT_EQ(GemmUtilLevel("fp8_block"), 0.45);
  EXPECT_EQ(GemmUtilLevel("fp8_static"), 0.45);
  EXPECT_EQ(GemmUtilLevel("nvfp4"), 0.30);
  EXPECT_EQ(GemmUtilLevel("sq"), 0.45);  // default
  EXPECT_EQ(MoeUtilLevel("bfloat16"), 0.53);
  EXPECT_EQ(MoeUtilLevel("int4_wo"), 0.07);
  EXPECT_EQ(MoeUtilLevel("fp8"), 0.40);
  EXPECT_EQ(MoeUtilLevel("w4afp8"), 0.15);
  EXPECT_EQ(MoeUtilLevel("nvfp4"), 0.23);
  EXPECT_EQ(MoeUtilLevel("nvfp4_wo"), 0.30);  // default
}

}  // namespace
}  // namespace servecast::perfdb
