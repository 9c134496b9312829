// Skip reasons as the terminal and HTML reports print them (report::GroupSkips).

#include "report/terminal.h"

#include <gtest/gtest.h>

#include "fixture.h"

namespace servecast::report {
namespace {

TEST(GroupSkips, FoldsReasonsThatDifferOnlyInTheKey) {
  const std::map<std::string, std::size_t> skipped = {
      {"KV cache over the engine's budget", 10},
      {"missing data (decode): moe {E=256, tp=16, num_tokens=16} has no silicon-mode estimate: x", 1},
      {"missing data (decode): moe {E=256, tp=2, num_tokens=16} has no silicon-mode estimate: x", 2},
      {"missing data (decode): moe {E=256, tp=4, num_tokens=16} has no silicon-mode estimate: x", 1},
      {"missing data (prefill): moe {E=256, tp=16, num_tokens=4000} has no silicon-mode estimate: x", 1},
      {"missing data: gemm <fp8> & co", 7},
  };
  const std::vector<SkipGroup> g = GroupSkips(skipped);
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(g[0].reason, "KV cache over the engine's budget");
  EXPECT_EQ(g[0].count, 10u);
  EXPECT_EQ(g[0].keys, 1u);
  EXPECT_EQ(g[1].reason, "missing data (decode): moe");
  EXPECT_EQ(g[1].count, 4u);
  EXPECT_EQ(g[1].keys, 3u);
  EXPECT_EQ(g[1].example, "missing data (decode): moe {E=256, tp=16, num_tokens=16} has no silicon-mode estimate: x");
  // A group of one key stays the reason itself, in full.
  EXPECT_EQ(g[2].keys, 1u);
  EXPECT_EQ(g[2].reason, "missing data (prefill): moe {E=256, tp=16, num_tokens=4000} has no silicon-mode estimate: x");
  EXPECT_EQ(g[3].reason, "missing data: gemm <fp8> & co");
  EXPECT_EQ(g[3].count, 7u);
}

TEST(GroupSkips, TerminalReportPrintsOneLinePerGroup) {
  const auto m = testing::MakeModel();
  search::SearchResult r;
  search::ModeResult agg;
  agg.skipped = {{"missing data: moe {tp=1} has none", 2}, {"missing data: moe {tp=2} has none", 3}};
  r.modes.push_back(agg);
  const ReportContext c = testing::MakeContext(m);
  const std::string out = TerminalReport(r, c);
  EXPECT_NE(out.find("  skipped 5: missing data: moe (2 keys, each in --json), e.g.\n      moe {tp=1} has none\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("{tp=2}"), std::string::npos) << out;
  // The JSON keeps each key.
  const nlohmann::ordered_json j = JsonReport(r, c);
  EXPECT_EQ(j["modes"]["agg"]["skipped"].size(), 2u);
}

}  // namespace
}  // namespace servecast::report
