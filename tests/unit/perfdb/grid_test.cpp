#include "perfdb/grid.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace servecast::perfdb {
namespace {

// SOL = product of the coordinates: easy to check by hand.
double ProductSol(std::span<const double> x) {
  double p = 1;
  for (double v : x) p *= v;
  return p;
}

GridPoint P(std::vector<double> c, double lat, std::optional<double> power = std::nullopt) {
  return GridPoint{std::move(c), lat, power};
}

GridOptions Opts2(int transform_axis = -1) {
  GridOptions o;
  o.name = "toy{q=1}";
  o.axis_names = {"a", "b"};
  o.transform_axis = transform_axis;
  return o;
}

// a in {1, 2}, b in {1, 4}.
std::vector<GridPoint> Square() {
  return {P({1, 1}, 1, 100), P({1, 4}, 4, 200), P({2, 1}, 2, 300), P({2, 4}, 9, 400)};
}

std::string MissMessage(const Grid& g, std::vector<double> q) {
  try {
    g.Query(q);
  } catch (const InterpolationMissError& e) {
    return e.what();
  }
  return "";
}

TEST(GridTest, ExactHitIsTheLeafVerbatim) {
  const Grid g(Opts2(), Square(), ProductSol);
  const Estimate e = g.Query({2, 4});
  EXPECT_EQ(e.latency_ms, 9);
  EXPECT_EQ(*e.power_w, 400);
  EXPECT_EQ(e.source, EstimateSource::kSilicon);
  EXPECT_DOUBLE_EQ(e.sol_fraction, 8.0 / 9.0);
  EXPECT_STREQ(EstimateSourceName(e.source), "silicon");
}

TEST(GridTest, RawLerpOnEachAxisAndPowerLinear) {
  const Grid g(Opts2(), Square(), ProductSol);
  Estimate e = g.Query({1.5, 1});  // between (1,1)=1 and (2,1)=2
  EXPECT_DOUBLE_EQ(e.latency_ms, 1.5);
  EXPECT_DOUBLE_EQ(*e.power_w, 200);
  EXPECT_EQ(e.source, EstimateSource::kInterpolated);
  EXPECT_DOUBLE_EQ(e.sol_fraction, 1.5 / 1.5);
  e = g.Query({1, 2.5});  // 1 + (4 - 1) * 0.5
  EXPECT_DOUBLE_EQ(e.latency_ms, 2.5);
  // Both axes: b first under each a: a=1 -> 2.5, a=2 -> 2 + 7*0.5 = 5.5; then a: 4.0.
  e = g.Query({1.5, 2.5});
  EXPECT_DOUBLE_EQ(e.latency_ms, 4.0);
  EXPECT_DOUBLE_EQ(*e.power_w, 250);
}

TEST(GridTest, SqrtBlendOnTheTransformAxisOnly) {
  const Grid g(Opts2(/*transform_axis=*/1), Square(), ProductSol);
  // sqrt(1)=1, sqrt(4)=2, halfway 1.5 -> 2.25.
  EXPECT_DOUBLE_EQ(g.Query({1, 2.5}).latency_ms, 2.25);
  // ((sqrt(2) + 3) / 2)^2 = (11 + 6 sqrt 2) / 4.
  EXPECT_NEAR(g.Query({2, 2.5}).latency_ms, (11 + 6 * std::sqrt(2.0)) / 4, 1e-12);
  // Axis a stays raw: (1 + 2) / 2.
  EXPECT_DOUBLE_EQ(g.Query({1.5, 1}).latency_ms, 1.5);
  // Power is linear even on the sqrt axis.
  EXPECT_DOUBLE_EQ(*g.Query({1, 2.5}).power_w, 150);
}

TEST(GridTest, RaggedBranchScalesTheSurvivorBySolRatio) {
  // (2,4) missing: under a=2, b only reaches 1.
  const Grid g(Opts2(), {P({1, 1}, 1), P({1, 4}, 4), P({2, 1}, 2)}, ProductSol);
  const Estimate e = g.Query({1.5, 4});
  // survivor (1,4)=4 scaled by SOL(1.5,4)/SOL(1,4) = 6/4 -> 6.
  EXPECT_DOUBLE_EQ(e.latency_ms, 6);
  EXPECT_EQ(e.source, EstimateSource::kInterpolated);
  EXPECT_FALSE(e.power_w.has_value());
  // Ragged at an inner level too: b=2.5 under a=2 is out of range, under a=1 it is 2.5.
  EXPECT_DOUBLE_EQ(g.Query({1.5, 2.5}).latency_ms, 2.5 * (1.5 * 2.5) / (1 * 2.5));
}

TEST(GridTest, OneAxisHoldUsesMedianUtilOfTheTail) {
  GridOptions o;
  o.name = "curve";
  o.axis_names = {"x"};
  o.k_tail = 2;
  // utils SOL/lat = x/lat: 1, 2, 2, 4.
  const std::vector<GridPoint> pts = {P({1}, 1), P({2}, 1), P({4}, 2), P({8}, 2)};
  const Grid g(o, pts, ProductSol);
  Estimate e = g.Query({16});  // median(2, 4) = 3
  EXPECT_DOUBLE_EQ(e.latency_ms, 16.0 / 3.0);
  EXPECT_EQ(e.source, EstimateSource::kExtrapolated);
  EXPECT_DOUBLE_EQ(e.sol_fraction, 3);
  EXPECT_DOUBLE_EQ(g.Query({0.5}).latency_ms, 0.5 / 1.5);  // median(1, 2)
  o.k_tail = 1;
  const Grid g1(o, pts, ProductSol);
  EXPECT_DOUBLE_EQ(g1.Query({16}).latency_ms, 4);  // util 4
  EXPECT_DOUBLE_EQ(g1.Query({3}).latency_ms, 1.5);
}

// Leaves on a = 1 at b = 1..16 and one at (2, 1); query (1, 64) is beyond b.
std::vector<GridPoint> HoldGrid(bool invalidate_two) {
  return {P({1, 1}, invalidate_two ? 0 : 1), P({1, 2}, 2), P({1, 4}, 4), P({1, 8}, 32), P({1, 16}, 32),
          P({2, 1}, invalidate_two ? -1 : 2)};
}

TEST(GridTest, MultiAxisHoldWeightsFourNearestInsideRadius) {
  const Grid g(Opts2(), HoldGrid(false), ProductSol);
  // log2 distances from (0, 6): 2, 3, 4, 5 (used), 6 = radius, 6.08.
  // w = ((6-d)/(6d))^2 = 1/9, 1/36, 1/144, 1/900 ~ 400, 100, 25, 4 (/3600).
  // utils 16/32, 8/32, 4/4, 2/2 -> util = (200 + 25 + 25 + 4) / 529.
  const Estimate e = g.Query({1, 64});
  const double util = 254.0 / 529.0;
  EXPECT_NEAR(e.latency_ms, 64 / util, 1e-9);
  EXPECT_NEAR(e.sol_fraction, util, 1e-12);
  EXPECT_EQ(e.source, EstimateSource::kExtrapolated);
}

TEST(GridTest, MultiAxisHoldWithInfiniteRadiusUsesInverseSquare) {
  // Only four valid leaves: R = inf, w = 1/d^2 = 1/4, 1/9, 1/16, 1/25 ~ 900, 400, 225, 144.
  const Grid g(Opts2(), HoldGrid(true), ProductSol);
  const double util = (900 * 0.5 + 400 * 0.25 + 225 + 144) / 1669.0;
  EXPECT_NEAR(g.Query({1, 64}).latency_ms, 64 / util, 1e-9);
}

TEST(GridTest, MissesNameSliceQueryAndRange) {
  const Grid empty(Opts2(), {}, ProductSol);
  std::string m = MissMessage(empty, {1, 1});
  EXPECT_NE(m.find("toy{q=1}"), std::string::npos) << m;
  EXPECT_NE(m.find("empty table"), std::string::npos) << m;

  // Nothing valid to anchor a hold.
  const Grid dead(Opts2(), {P({1, 1}, 0), P({1, 2}, -1)}, ProductSol);
  m = MissMessage(dead, {1, 8});
  EXPECT_NE(m.find("{a=1, b=8}"), std::string::npos) << m;
  EXPECT_NE(m.find("b [1, 2]"), std::string::npos) << m;

  // A ragged branch whose SOL is zero cannot be corrected.
  const Grid zero(Opts2(), {P({1, 1}, 1), P({1, 4}, 4), P({2, 1}, 2)}, [](std::span<const double>) { return 0.0; });
  m = MissMessage(zero, {1.5, 4});
  EXPECT_NE(m.find("no usable branch"), std::string::npos) << m;

  // 1-axis: the boundary anchor has no positive util.
  GridOptions o;
  o.name = "curve";
  o.axis_names = {"x"};
  const Grid c(o, {P({1}, 1), P({2}, 0)}, ProductSol);
  m = MissMessage(c, {4});
  EXPECT_NE(m.find("no positive-util boundary anchor"), std::string::npos) << m;
  EXPECT_THROW(c.Query({1, 2}), Error);  // wrong arity
}

TEST(GridTest, DuplicatesFirstWinsAndLeaveOneOut) {
  std::vector<GridPoint> pts = Square();
  pts.push_back(P({1, 1}, 77));
  pts.push_back(P({1.5, 1}, 1.5));
  pts.push_back(P({1.5, 2.5}, 99));
  pts.push_back(P({1.5, 4}, 6));
  const Grid g(Opts2(), pts, ProductSol);
  EXPECT_EQ(g.duplicates_dropped(), 1u);
  EXPECT_EQ(g.Query({1, 1}).latency_ms, 1);
  // Only (1.5, 2.5) is strictly inside its siblings on both axes.
  for (std::size_t i = 0; i < g.points().size(); ++i) EXPECT_EQ(g.IsInterior(i), i == 5) << i;
  const Grid h = g.Without(5);
  EXPECT_EQ(h.points().size(), 6u);
  // Under a = 1.5: 1.5 + (6 - 1.5) * 0.5.
  EXPECT_DOUBLE_EQ(h.Query({1.5, 2.5}).latency_ms, 3.75);
  EXPECT_EQ(h.Query({1.5, 2.5}).source, EstimateSource::kInterpolated);
  // An exact key on an outer axis is followed even when the inner axis then
  // falls outside: (1.5, 0.5) holds rather than bracketing a.
  EXPECT_EQ(h.Query({1.5, 0.5}).source, EstimateSource::kExtrapolated);
}

TEST(GridTest, AxisCurveMatchesOneAxisGridBitForBit) {
  std::vector<GridPoint> pts;
  for (int i = 0; i < 12; ++i) {
    const double x = std::pow(2.0, i) + (i % 3);
    pts.push_back(P({x}, 0.01 * x + 0.3 / (i + 1), 100.0 + i));
  }
  auto sol1 = [](double x) { return 0.004 * x + 0.001; };
  GridOptions o;
  o.name = "moe";
  o.axis_names = {"num_tokens"};
  const Grid g(o, pts, [&](std::span<const double> x) { return sol1(x[0]); });
  const AxisCurve c("moe", "num_tokens", pts, sol1);
  EXPECT_EQ(c.size(), 12u);
  for (double x = 0.25; x < 8000; x = x * 1.37 + 0.5) {
    const Estimate a = g.Query({x}), b = c.Query(x);
    EXPECT_EQ(a.latency_ms, b.latency_ms) << x;
    EXPECT_EQ(*a.power_w, *b.power_w) << x;
    EXPECT_EQ(a.source, b.source) << x;
    EXPECT_EQ(a.sol_fraction, b.sol_fraction) << x;
  }
  for (const auto& p : pts) {
    EXPECT_EQ(c.Query(p.coords[0]).latency_ms, p.latency_ms);
    EXPECT_EQ(c.Query(p.coords[0]).source, EstimateSource::kSilicon);
  }
  const AxisCurve empty("e", "x", {}, sol1);
  EXPECT_THROW(empty.Query(1), InterpolationMissError);
}

}  // namespace
}  // namespace servecast::perfdb
