#include "report/csv_out.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "fixture.h"

namespace servecast::report {
namespace {

// Splits CSV text into rows of fields (handles the quoting CsvField produces).
std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (quoted) {
      if (ch == '"' && i + 1 < text.size() && text[i + 1] == '"')
        field += '"', ++i;
      else if (ch == '"')
        quoted = false;
      else
        field += ch;
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      row.push_back(field), field.clear();
    } else if (ch == '\n') {
      row.push_back(field), field.clear();
      rows.push_back(row), row.clear();
    } else {
      field += ch;
    }
  }
  return rows;
}

std::size_t Col(const std::vector<std::string>& head, const std::string& name) {
  for (std::size_t i = 0; i < head.size(); ++i)
    if (head[i] == name) return i;
  ADD_FAILURE() << "no column " << name;
  return 0;
}

TEST(CsvField, Quoting) {
  EXPECT_EQ(CsvField("tp2pp1"), "tp2pp1");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
}

TEST(PointsCsv, EveryFeasiblePointWithAllColumns) {
  const auto r = testing::MakeResult();
  const auto& agg = r.modes[0];
  const auto rows = ParseCsv(AllPointsCsv(agg));
  ASSERT_EQ(rows.size(), agg.points.size() + 1);
  EXPECT_EQ(rows[0], PointCsvHeader(search::Mode::kAgg));
  for (const auto& row : rows) EXPECT_EQ(row.size(), rows[0].size());
  const auto& h = rows[0];
  EXPECT_EQ(rows[1][Col(h, "mode")], "agg");
  EXPECT_EQ(rows[1][Col(h, "tokens_per_s_gpu")], "900");
  EXPECT_EQ(rows[1][Col(h, "tokens_per_s_user")], "20");
  EXPECT_EQ(rows[1][Col(h, "tpot_ms")], "50");
  EXPECT_EQ(rows[1][Col(h, "meets_sla")], "false");
  EXPECT_EQ(rows[3][Col(h, "meets_sla")], "true");
  EXPECT_EQ(rows[3][Col(h, "tp")], "2");
  EXPECT_EQ(rows[3][Col(h, "batch")], "8");
  EXPECT_EQ(rows[3][Col(h, "ctx_tokens")], "4096");
  // on_frontier marks points 0, 2 and 4.
  std::size_t on = 0;
  for (std::size_t i = 1; i < rows.size(); ++i) on += rows[i][Col(h, "on_frontier")] == "true";
  EXPECT_EQ(on, agg.frontier.size());
  EXPECT_EQ(rows[2][Col(h, "on_frontier")], "false");
}

TEST(PointsCsv, FrontierAndRankedTopN) {
  const auto r = testing::MakeResult();
  const auto& dis = r.modes[1];
  const auto front = ParseCsv(PointsCsv(dis, dis.frontier));
  ASSERT_EQ(front.size(), dis.frontier.size() + 1);
  EXPECT_EQ(front[0], PointCsvHeader(search::Mode::kDisagg));
  const auto& h = front[0];
  EXPECT_EQ(front[1][Col(h, "tokens_per_s_user")], "45");
  EXPECT_EQ(front[2][Col(h, "tokens_per_s_user")], "70");
  EXPECT_EQ(front[1][Col(h, "p_tp")], "1");
  EXPECT_EQ(front[1][Col(h, "d_tp")], "2");
  EXPECT_EQ(front[1][Col(h, "d_workers")], "2");
  EXPECT_EQ(front[1][Col(h, "parallel")], dis.points[1].Parallel());

  const auto top = ParseCsv(PointsCsv(dis, dis.best, /*ranked=*/true));
  ASSERT_EQ(top.size(), dis.best.size() + 1);
  EXPECT_EQ(top[0][0], "rank");
  EXPECT_EQ(top[1][0], "1");
  EXPECT_EQ(top[2][0], "2");
  EXPECT_EQ(top[1][Col(top[0], "tokens_per_s_gpu")], "800");
}

TEST(PointsCsv, EmptyModeHasOnlyTheHeader) {
  search::ModeResult m;
  EXPECT_EQ(ParseCsv(AllPointsCsv(m)).size(), 1u);
}

}  // namespace
}  // namespace servecast::report
