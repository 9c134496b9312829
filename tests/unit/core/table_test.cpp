#include "core/table.h"

#include <gtest/gtest.h>

#include <cmath>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "core_test_util.h"

namespace servecast {
namespace {

using testing::HasText;
using testing::TempDir;
using testing::ThrownMessage;
using VT = ValueType;

Table SmallTable() {
  Table t({{"name", VT::kString}, {"m", VT::kInt64}, {"latency", VT::kDouble}});
  t.AppendRow({std::string("a"), std::int64_t{1}, 0.5});
  t.AppendRow({std::string("b"), std::int64_t{2}, 1.25});
  t.AppendRow({std::string("c"), std::int64_t{3}, 2.0});
  return t;
}

TEST(TableTest, TypedColumnsAndAccessors) {
  Table t = SmallTable();
  EXPECT_EQ(t.num_rows(), 3u);
  EXPECT_EQ(t.num_columns(), 3u);
  EXPECT_EQ(t.GetString(1, 0), "b");
  EXPECT_EQ(t.GetInt(2, 1), 3);
  EXPECT_DOUBLE_EQ(t.GetDouble(1, 2), 1.25);
  EXPECT_DOUBLE_EQ(t.GetDouble(2, 1), 3.0);  // int columns widen
  EXPECT_EQ(t.Get(0, 1), Value(std::int64_t{1}));
  EXPECT_EQ(t.Row(0), (std::vector<Value>{std::string("a"), std::int64_t{1}, 0.5}));
}

TEST(TableTest, TypedGettersRefuseOtherColumnTypes) {
  Table t = SmallTable();
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { t.GetInt(0, 0); }), "'name' is not an integer column"));
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { t.GetInt(0, 2); }), "'latency' is not an integer column"));
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { t.GetDouble(0, 0); }), "'name' is not numeric"));
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { t.GetString(0, 1); }), "'m' is not a string column"));
}

TEST(TableTest, DuplicateColumnNamesAreRefused) {
  std::string msg = ThrownMessage<DataError>([] {
    Table t({{"m", VT::kInt64}, {"n", VT::kInt64}, {"m", VT::kDouble}});
  });
  EXPECT_TRUE(HasText(msg, "duplicate column 'm'"));
}

TEST(TableTest, AppendRowWidensIntegersForDoubleColumns) {
  Table t({{"x", VT::kDouble}});
  t.AppendRow({std::int64_t{7}});
  EXPECT_EQ(TypeOf(t.Get(0, 0)), VT::kDouble);
  EXPECT_DOUBLE_EQ(t.GetDouble(0, 0), 7.0);
}

TEST(TableTest, AppendRowTypeErrorNamesColumnAndTypesAndLeavesNoTrace) {
  Table t = SmallTable();
  // The first cells are fine; the bad one is last, so a half-applied row would show.
  std::string msg = ThrownMessage<DataError>([&] {
    t.AppendRow({std::string("d"), std::int64_t{4}, std::string("fast")});
  });
  EXPECT_TRUE(HasText(msg, "column 'latency' is double; got string 'fast'"));
  EXPECT_EQ(t.num_rows(), 3u);
  EXPECT_EQ(t.ToCsv(), SmallTable().ToCsv());

  msg = ThrownMessage<DataError>([&] { t.AppendRow({std::string("d"), 4.5, 1.0}); });
  EXPECT_TRUE(HasText(msg, "column 'm' is int64; got double '4.5'"));
  msg = ThrownMessage<DataError>([&] { t.AppendRow({std::int64_t{9}, std::int64_t{4}, 1.0}); });
  EXPECT_TRUE(HasText(msg, "column 'name' is string; got int64 '9'"));
  EXPECT_EQ(t.num_rows(), 3u);
}

TEST(TableTest, AppendRowWithWrongCellCount) {
  Table t = SmallTable();
  std::string msg = ThrownMessage<DataError>([&] { t.AppendRow({std::string("d"), std::int64_t{4}}); });
  EXPECT_TRUE(HasText(msg, "row has 2 cells; the table has 3 columns"));
  EXPECT_EQ(t.num_rows(), 3u);
}

TEST(TableTest, ColumnIndexAndFindColumn) {
  Table t = SmallTable();
  EXPECT_EQ(t.ColumnIndex("latency"), 2u);
  EXPECT_EQ(t.FindColumn("m"), std::optional<std::size_t>(1));
  EXPECT_FALSE(t.FindColumn("k").has_value());
  std::string msg = ThrownMessage<DataError>([&] { t.ColumnIndex("k"); });
  EXPECT_TRUE(HasText(msg, "no column 'k' (columns: name, m, latency)"));
}

TEST(TableTest, SelectKeepsListedRowsInOrder) {
  Table t = SmallTable();
  Table s = t.Select({2, 0});
  EXPECT_EQ(s.columns(), t.columns());
  ASSERT_EQ(s.num_rows(), 2u);
  EXPECT_EQ(s.GetString(0, 0), "c");
  EXPECT_EQ(s.GetString(1, 0), "a");
  EXPECT_EQ(t.Select({}).num_rows(), 0u);
  EXPECT_EQ(t.Select({1, 1}).num_rows(), 2u);
}

TEST(TableTest, AppendByNameMatchesColumnsByName) {
  Table src({{"latency", VT::kDouble}, {"name", VT::kString}, {"m", VT::kInt64}});
  src.AppendRow({3.5, std::string("z"), std::int64_t{26}});
  Table dst = SmallTable();
  dst.AppendByName(src, 0);
  ASSERT_EQ(dst.num_rows(), 4u);
  EXPECT_EQ(dst.Row(3), (std::vector<Value>{std::string("z"), std::int64_t{26}, 3.5}));

  Table fewer({{"name", VT::kString}, {"m", VT::kInt64}});
  fewer.AppendRow({std::string("q"), std::int64_t{1}});
  EXPECT_THROW(dst.AppendByName(fewer, 0), DataError);
  Table renamed({{"name", VT::kString}, {"m", VT::kInt64}, {"lat", VT::kDouble}});
  renamed.AppendRow({std::string("q"), std::int64_t{1}, 1.0});
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { dst.AppendByName(renamed, 0); }), "no column 'latency'"));
  EXPECT_EQ(dst.num_rows(), 4u);
}

TEST(TableTest, CsvRoundTripWithQuotingCommasQuotesAndNewlines) {
  Table t({{"text", VT::kString}, {"n", VT::kInt64}, {"x", VT::kDouble}});
  const std::vector<std::string> texts = {"plain", "a,b", "say \"hi\"", "line1\nline2", "\"quoted, twice\"\n", ""};
  std::int64_t n = -2;
  for (const auto& s : texts) t.AppendRow({s, n++, 0.1 * static_cast<double>(n)});
  std::string csv = t.ToCsv();
  EXPECT_NE(csv.find("\"a,b\""), std::string::npos) << csv;
  EXPECT_NE(csv.find("\"say \"\"hi\"\"\""), std::string::npos) << csv;

  Table back = Table::ParseCsv(csv, "mem.csv");
  EXPECT_EQ(back.columns(), t.columns());
  ASSERT_EQ(back.num_rows(), t.num_rows());
  for (std::size_t r = 0; r < t.num_rows(); ++r) EXPECT_EQ(back.Row(r), t.Row(r)) << "row " << r;
  EXPECT_EQ(back.ToCsv(), csv);
}

TEST(TableTest, CsvHeaderNamesAreQuotedToo) {
  Table t({{"a,b", VT::kInt64}, {"c", VT::kString}});
  t.AppendRow({std::int64_t{1}, std::string("x")});
  EXPECT_EQ(t.ToCsv(), "\"a,b\",c\n1,x\n");
  Table back = Table::ParseCsv(t.ToCsv(), "h.csv");
  EXPECT_EQ(back.columns()[0].name, "a,b");
}

TEST(TableTest, DoublesRoundTripExactly) {
  Table t({{"x", VT::kDouble}});
  const std::vector<double> xs = {0.1, 1e-05, 1.0 / 3.0, 123456789.125, -2.5e300, 5e-324};
  for (double x : xs) t.AppendRow({x});
  Table back = Table::ParseCsv(t.ToCsv(), "d.csv");
  ASSERT_EQ(back.columns()[0].type, VT::kDouble);
  for (std::size_t r = 0; r < xs.size(); ++r) EXPECT_EQ(back.GetDouble(r, 0), xs[r]);
}

TEST(TableTest, TypeInferencePerColumn) {
  Table t = Table::ParseCsv(
      "i,d,s,mixed,big\n"
      "1,1.5,abc,1,9007199254740993\n"
      "-2,3,def,x,-9223372036854775808\n"
      "30,1e3,7,2.5,1\n",
      "infer.csv");
  ASSERT_EQ(t.num_rows(), 3u);
  EXPECT_EQ(t.columns()[0].type, VT::kInt64);
  EXPECT_EQ(t.columns()[1].type, VT::kDouble);
  EXPECT_EQ(t.columns()[2].type, VT::kString);
  EXPECT_EQ(t.columns()[3].type, VT::kString);
  EXPECT_EQ(t.columns()[4].type, VT::kInt64);
  EXPECT_EQ(t.GetInt(1, 0), -2);
  EXPECT_DOUBLE_EQ(t.GetDouble(2, 1), 1000.0);
  EXPECT_EQ(t.GetString(2, 2), "7");  // a number in a string column stays text
  EXPECT_EQ(t.GetString(0, 3), "1");
  EXPECT_EQ(t.GetInt(0, 4), 9007199254740993LL);  // exact, not through double
  EXPECT_EQ(t.GetInt(1, 4), INT64_MIN);
}

TEST(TableTest, IntegerOverflowInfersDouble) {
  Table t = Table::ParseCsv("v\n9223372036854775808\n1\n", "o.csv");
  EXPECT_EQ(t.columns()[0].type, VT::kDouble);
}

TEST(TableTest, HeaderOnlyGivesStringColumnsAndNoRows) {
  Table t = Table::ParseCsv("a,b,c\n", "h.csv");
  EXPECT_EQ(t.num_rows(), 0u);
  ASSERT_EQ(t.num_columns(), 3u);
  for (const auto& c : t.columns()) EXPECT_EQ(c.type, VT::kString);
}

TEST(TableTest, CrLfAndMissingFinalNewlineAreAccepted) {
  Table t = Table::ParseCsv("a,b\r\n1,x\r\n2,y", "crlf.csv");
  ASSERT_EQ(t.num_rows(), 2u);
  EXPECT_EQ(t.GetInt(1, 0), 2);
  EXPECT_EQ(t.GetString(1, 1), "y");
}

TEST(TableTest, RaggedRowIsDataErrorNamingFileAndLine) {
  std::string msg = ThrownMessage<DataError>([] { Table::ParseCsv("a,b\n1,2\n3\n4,5\n", "perf.csv"); });
  EXPECT_TRUE(HasText(msg, "perf.csv:3"));
  EXPECT_TRUE(HasText(msg, "row has 1 fields"));
  EXPECT_TRUE(HasText(msg, "2 fields as in the header"));

  msg = ThrownMessage<DataError>([] { Table::ParseCsv("a,b\n1,2,3\n", "wide.csv"); });
  EXPECT_TRUE(HasText(msg, "wide.csv:2"));
}

TEST(TableTest, RaggedRowLineCountsNewlinesInsideQuotes) {
  // The quoted field spans lines 2-3, so the ragged record starts on line 4.
  std::string msg = ThrownMessage<DataError>([] { Table::ParseCsv("a,b\n\"x\ny\",1\n2\n", "q.csv"); });
  EXPECT_TRUE(HasText(msg, "q.csv:4"));
}

TEST(TableTest, UnterminatedQuoteIsDataError) {
  std::string msg = ThrownMessage<DataError>([] { Table::ParseCsv("a,b\n1,\"open\n", "u.csv"); });
  EXPECT_TRUE(HasText(msg, "u.csv:2"));
  EXPECT_TRUE(HasText(msg, "unterminated"));
}

TEST(TableTest, EmptyInputIsDataError) {
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([] { Table::ParseCsv("", "e.csv"); }), "e.csv:1: empty file"));
}

// table.h: "An empty numeric cell is an error that names file, line and column."
TEST(TableTest, EmptyCellInNumericColumnIsDataErrorNamingFileLineAndColumn) {
  std::string msg =
      ThrownMessage<DataError>([] { Table::ParseCsv("op,latency\ngemm,1.5\nattn,\nnorm,2.5\n", "holes.csv"); });
  EXPECT_TRUE(HasText(msg, "holes.csv:3"));
  EXPECT_TRUE(HasText(msg, "latency"));
}

TEST(TableTest, ReadCsvAndWriteCsv) {
  TempDir dir;
  Table t = SmallTable();
  std::string path = dir.path() + "/sub/table.csv";
  t.WriteCsv(path);
  EXPECT_EQ(ReadFile(path), t.ToCsv());
  Table back = Table::ReadCsv(path);
  EXPECT_EQ(back.columns(), t.columns());
  for (std::size_t r = 0; r < t.num_rows(); ++r) EXPECT_EQ(back.Row(r), t.Row(r));
}

TEST(TableTest, WriteCsvIsAtomicAndLeavesNoTempFile) {
  TempDir dir;
  std::string path = dir.File("t.csv");
  SmallTable().WriteCsv(path);
  Table one({{"only", VT::kInt64}});
  one.AppendRow({std::int64_t{42}});
  one.WriteCsv(path);  // replaces the longer file completely
  EXPECT_EQ(ReadFile(path), "only\n42\n");
  EXPECT_EQ(dir.List(), std::vector<std::string>{"t.csv"});
}

TEST(TableTest, ReadCsvOfMissingFileNamesIt) {
  TempDir dir;
  std::string path = dir.File("absent.csv");
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { Table::ReadCsv(path); }), path));
}

TEST(TableTest, ReadCsvErrorsNameThePath) {
  TempDir dir;
  std::string path = dir.File("bad.csv");
  testing::WriteText(path, "a,b\n1,2\n3,4,5\n");
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { Table::ReadCsv(path); }), path + ":3"));
}

}  // namespace
}  // namespace servecast

namespace servecast {
namespace {

// The splitter's two paths: plain fields are views into the text; a field with a
// quote or a CR anywhere is unescaped on its own (a quote may open mid-field, as
// RFC 4180 readers commonly allow; CR outside quotes is dropped).
TEST(TableCsvSplit, QuotesAnywhereCrAndBlankLines) {
  const std::string text =
      "a,b,c\n"
      "\n"
      "x\"y,z\"w,\"\"\"q\"\"\",plain\r\n"
      "\r\n"
      "1,\"\",\"two\nlines\"\n"
      "3,,last";
  // Row 2 has 3 fields: `xy,zw` (quote opened mid-field), `"q"`, `plain` (CR dropped).
  Table t = Table::ParseCsv(text, "split.csv");
  ASSERT_EQ(t.num_rows(), 3u);
  EXPECT_EQ(t.GetString(0, 0), "xy,zw");
  EXPECT_EQ(t.GetString(0, 1), "\"q\"");
  EXPECT_EQ(t.GetString(0, 2), "plain");
  EXPECT_EQ(t.GetString(1, 0), "1");
  EXPECT_EQ(t.GetString(1, 1), "");
  EXPECT_EQ(t.GetString(1, 2), "two\nlines");
  EXPECT_EQ(t.GetString(2, 0), "3");
  EXPECT_EQ(t.GetString(2, 1), "");
  EXPECT_EQ(t.GetString(2, 2), "last");
}

TEST(TableCsvSplit, TrailingCommaIsAnEmptyLastField) {
  Table t = Table::ParseCsv("a,b\n1,", "t.csv");
  ASSERT_EQ(t.num_rows(), 1u);
  EXPECT_EQ(t.GetInt(0, 0), 1);
  EXPECT_EQ(t.GetString(0, 1), "");
}

TEST(TableCsvSplit, QuotedEmptyLineIsARecordNotABlankLine) {
  // `""` alone on a line is one empty field that was written, not a blank line.
  Table t = Table::ParseCsv("a\n\"\"\nx\n", "t.csv");
  ASSERT_EQ(t.num_rows(), 2u);
  EXPECT_EQ(t.GetString(0, 0), "");
  EXPECT_EQ(t.GetString(1, 0), "x");
}

TEST(TableCsvSplit, NumbersParseExactlyIncludingForms) {
  Table t = Table::ParseCsv("x,y\n0.1,1e-3\n+2.5,-0\n", "n.csv");
  EXPECT_EQ(t.GetDouble(0, 0), 0.1);
  EXPECT_EQ(t.GetDouble(0, 1), 1e-3);
  EXPECT_EQ(t.GetDouble(1, 0), 2.5);  // a leading '+' (strtod's form) is still a number
  EXPECT_TRUE(std::signbit(t.GetDouble(1, 1)));
}

}  // namespace
}  // namespace servecast
