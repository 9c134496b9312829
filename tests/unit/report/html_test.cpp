#include "report/html.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>

#include "fixture.h"

namespace servecast::report {
namespace {

// The value of attribute `attr` of the first element whose class list holds the token `cls`.
std::string Attr(const std::string& svg, const std::string& cls, const std::string& attr) {
  const std::regex el("<[a-z]+ class=\"(?:[^\"]*\\s)?" + cls + "(?:\\s[^\"]*)?\"[^>]*>");
  std::smatch m;
  if (!std::regex_search(svg, m, el)) return "";
  const std::string tag = m.str(0);
  const std::regex a(" " + attr + "=\"([^\"]*)\"");
  std::smatch v;
  return std::regex_search(tag, v, a) ? v.str(1) : "";
}

std::size_t Count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

TEST(NiceStep, RoundSteps) {
  EXPECT_DOUBLE_EQ(NiceStep(104, 8), 20);
  EXPECT_DOUBLE_EQ(NiceStep(954, 6), 200);
  EXPECT_DOUBLE_EQ(NiceStep(6, 6), 1);
  EXPECT_DOUBLE_EQ(NiceStep(14, 6), 2.5);
  EXPECT_DOUBLE_EQ(NiceStep(0.9, 6), 0.2);
  EXPECT_DOUBLE_EQ(NiceStep(0, 6), 1);
}

TEST(HtmlEscape, EscapesMarkup) {
  EXPECT_EQ(HtmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(HtmlEscape("Qwen/Qwen3-32B"), "Qwen/Qwen3-32B");
}

TEST(ParetoLayout, AxesCoverPointsAndLimit) {
  const auto r = testing::MakeResult();
  const auto m = testing::MakeModel();
  auto c = testing::MakeContext(m);
  // x: 100 tokens/s/user x 1.04 -> the tightest round end over 5-10 ticks: step 20, 120;
  // y: 900 x 1.06 = 954 -> step 200, 1000.
  ChartLayout l = ParetoLayout(r, c.inputs);
  EXPECT_DOUBLE_EQ(l.x_step, 20);
  EXPECT_DOUBLE_EQ(l.x_max, 120);
  EXPECT_DOUBLE_EQ(l.y_step, 200);
  EXPECT_DOUBLE_EQ(l.y_max, 1000);
  EXPECT_DOUBLE_EQ(l.X(0), l.left);
  EXPECT_DOUBLE_EQ(l.X(120), l.width - l.right);
  EXPECT_DOUBLE_EQ(l.Y(0), l.height - l.bottom);
  EXPECT_DOUBLE_EQ(l.Y(1000), l.top);
  // A TPOT limit beyond every point widens the axis: 2 ms -> 500 tokens/s/user.
  c.inputs.tpot_ms = 2;
  l = ParetoLayout(r, c.inputs);
  EXPECT_GE(l.x_max, 500);
}

TEST(ParetoSvg, FrontiersSlaLineAndChosen) {
  const auto r = testing::MakeResult();
  const auto m = testing::MakeModel();
  const auto c = testing::MakeContext(m);
  const std::string svg = ParetoSvg(r, c.inputs);
  const ChartLayout l = ParetoLayout(r, c.inputs);

  // One polyline per mode with one vertex per frontier point, at the mapped coordinates.
  for (const auto& mode : r.modes) {
    const std::string name = search::ModeName(mode.mode);
    const std::string pts = Attr(svg, "frontier-" + name, "points");
    ASSERT_FALSE(pts.empty()) << name;
    std::istringstream ss(pts);
    std::string pair;
    std::size_t n = 0;
    while (ss >> pair) {
      const auto& p = mode.points[mode.frontier[n]];
      const double x = std::stod(pair.substr(0, pair.find(','))), y = std::stod(pair.substr(pair.find(',') + 1));
      EXPECT_NEAR(x, l.X(p.tokens_per_s_user), 0.051) << name << " vertex " << n;
      EXPECT_NEAR(y, l.Y(p.tokens_per_s_gpu_cluster), 0.051) << name << " vertex " << n;
      ++n;
    }
    EXPECT_EQ(n, mode.frontier.size()) << name;
  }
  EXPECT_EQ(Count(svg, "<polyline"), 2u);

  // Every feasible point is drawn (faint dots in the mode's group).
  const auto agg_group =
      svg.substr(svg.find("point-agg"), svg.find("</g>", svg.find("point-agg")) - svg.find("point-agg"));
  EXPECT_EQ(Count(agg_group, "<circle"), 6u);

  // The TPOT limit: 25 ms = 40 tokens/s/user; x = 84 + 40 / 120 x 848 = 366.67.
  EXPECT_EQ(Attr(svg, "sla", "data-tokens-per-s-user"), "40");
  EXPECT_EQ(Attr(svg, "sla", "x1"), "366.7");
  EXPECT_EQ(Attr(svg, "sla", "x2"), "366.7");
  EXPECT_NEAR(l.X(40), 366.67, 0.01);

  // The chosen point (disagg, 45 tokens/s/user, 800 tokens/s/GPU) is ringed and labelled.
  const auto chosen = svg.substr(svg.find("<g class=\"chosen\">"));
  EXPECT_NE(chosen.find("cx=\"" + std::to_string(l.X(45)).substr(0, 5)), std::string::npos);
  EXPECT_NE(chosen.find("chosen: disagg p:"), std::string::npos);
  EXPECT_NE(chosen.find("800.0 tokens/s/GPU at 45.0 tokens/s/user"), std::string::npos);

  // Axes: tick labels and titles; legend entries.
  EXPECT_NE(svg.find(">tokens/s/user</text>"), std::string::npos);
  EXPECT_NE(svg.find(">tokens/s/GPU</text>"), std::string::npos);
  EXPECT_EQ(Count(svg, "class=\"xtick\""), 7u);  // 0, 20, ..., 120
  EXPECT_EQ(Count(svg, "class=\"ytick\""), 6u);  // 0, 200, ..., 1000
  EXPECT_NE(svg.find(">agg frontier</text>"), std::string::npos);
  EXPECT_NE(svg.find(">disagg frontier</text>"), std::string::npos);
  EXPECT_NE(svg.find(">TPOT limit</text>"), std::string::npos);
}

TEST(ParetoSvg, NoTpotLineWithRequestLatencyLimit) {
  const auto r = testing::MakeResult();
  const auto m = testing::MakeModel();
  auto c = testing::MakeContext(m);
  c.inputs.request_latency_ms = 30000;
  EXPECT_EQ(ParetoSvg(r, c.inputs).find("class=\"sla\""), std::string::npos);
}

TEST(ParetoSvg, EmptyResult) {
  const search::SearchResult r;
  const auto m = testing::MakeModel();
  const auto c = testing::MakeContext(m);
  const std::string svg = ParetoSvg(r, c.inputs);
  EXPECT_EQ(svg.find("<polyline"), std::string::npos);
  EXPECT_EQ(svg.find("class=\"chosen\""), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

TEST(HtmlReport, SelfContainedAndEscaped) {
  const auto r = testing::MakeResult();
  const auto m = testing::MakeModel();
  const auto c = testing::MakeContext(m);
  const std::string h = HtmlReport(r, c);
  EXPECT_EQ(h.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(h.find("</html>"), std::string::npos);
  // No external resources: no scripts, links, images, imports or URLs but the SVG namespace.
  for (const char* bad : {"<script", "<link", "<img", "@import", "url(", "src="})
    EXPECT_EQ(h.find(bad), std::string::npos) << bad;
  std::string rest = h;
  for (auto at = rest.find("http://www.w3.org/2000/svg"); at != std::string::npos;
       at = rest.find("http://www.w3.org/2000/svg"))
    rest.erase(at, 26);
  EXPECT_EQ(rest.find("http"), std::string::npos);
  // Names with markup characters are escaped everywhere.
  EXPECT_EQ(h.find("<Tiny>"), std::string::npos);
  EXPECT_EQ(h.find("<GPU>"), std::string::npos);
  EXPECT_EQ(h.find("<fp8>"), std::string::npos);
  EXPECT_NE(h.find("acme/&lt;Tiny&gt; &amp; &quot;Co&quot;"), std::string::npos);
  EXPECT_NE(h.find("Tiny &lt;GPU&gt;"), std::string::npos);
  EXPECT_NE(h.find("skipped 7: missing data: gemm &lt;fp8&gt; &amp; co"), std::string::npos);
  // Summary, verdict, tables.
  EXPECT_NE(h.find("Chosen deployment"), std::string::npos);
  EXPECT_NE(h.find("6400 tokens/s"), std::string::npos);  // 800 x 8 GPUs
  EXPECT_NE(h.find("1.14&times;"), std::string::npos);
  EXPECT_NE(h.find("TPOT &le; 25 ms"), std::string::npos);
  EXPECT_EQ(Count(h, "<table class=\"top\">"), 2u);
  EXPECT_EQ(Count(h, "<svg"), 1u);
}

TEST(HtmlReport, NothingMeetsTheLimits) {
  auto r = testing::MakeResult();
  for (auto& m : r.modes) m.best_meets_sla = false;
  const auto m = testing::MakeModel();
  const auto c = testing::MakeContext(m);
  const std::string h = HtmlReport(r, c);
  EXPECT_NE(h.find("Nothing met the limits"), std::string::npos);
}

TEST(HtmlReport, NoDeployment) {
  search::SearchResult r;
  search::ModeResult agg;
  agg.skipped = {{"oom", 3}};
  r.modes = {agg};
  const auto m = testing::MakeModel();
  const auto c = testing::MakeContext(m);
  const std::string h = HtmlReport(r, c);
  EXPECT_NE(h.find("No deployment could be estimated"), std::string::npos);
  EXPECT_NE(h.find("skipped 3: oom"), std::string::npos);
}

}  // namespace
}  // namespace servecast::report
