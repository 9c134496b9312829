#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/value.h"

namespace servecast {

struct ColumnSpec {
  std::string name;
  ValueType type = ValueType::kString;
  bool operator==(const ColumnSpec&) const = default;
};

// A slice of a table: the rows whose string column `column` holds `value`.
struct RowSlice {
  std::string column;
  std::string value;
};

// An in-memory table with typed columns, stored column-wise. Columns are always
// resolved by name, so tables with extra or reordered columns read the same.
class Table {
 public:
  Table() = default;
  explicit Table(std::vector<ColumnSpec> columns);

  const std::vector<ColumnSpec>& columns() const { return specs_; }
  std::size_t num_columns() const { return specs_.size(); }
  std::size_t num_rows() const { return num_rows_; }

  std::optional<std::size_t> FindColumn(std::string_view name) const;
  // Throws DataError naming the missing column and the columns present.
  std::size_t ColumnIndex(std::string_view name) const;

  // Appends a row given in column order. Integers are widened to double for
  // double columns; any other type mismatch throws DataError.
  void AppendRow(std::vector<Value> row);
  // Appends rows of another table, matching its columns by name. Columns this
  // table lacks are an error; columns the other table lacks are an error too.
  void AppendByName(const Table& other, std::size_t row);

  Value Get(std::size_t row, std::size_t col) const;
  std::int64_t GetInt(std::size_t row, std::size_t col) const;
  double GetDouble(std::size_t row, std::size_t col) const;  // int columns widen
  const std::string& GetString(std::size_t row, std::size_t col) const;
  std::vector<Value> Row(std::size_t row) const;

  // Whole columns at once (readers that decode column-wise): one vector per
  // spec, of the spec's type, all of one length; else DataError.
  using ColumnData = std::variant<std::vector<std::int64_t>, std::vector<double>, std::vector<std::string>>;
  static Table FromColumns(std::vector<ColumnSpec> specs, std::vector<ColumnData> data);

  // Keeps the rows whose index is listed, in that order.
  Table Select(const std::vector<std::size_t>& rows) const;
  // The indices of the rows in `slice`, in order; and a text column's distinct
  // values in first-encounter order. A column that is absent or not text is a
  // DataError naming `origin`.
  std::vector<std::size_t> RowsOf(const RowSlice& slice, const std::string& origin) const;
  std::vector<std::string> DistinctText(const std::string& column, const std::string& origin) const;

  // CSV with a header line. Types are inferred per column: int64 when every
  // non-empty cell is an integer, double when every one is a number, else string
  // (a column with no non-empty cell is a string column). An empty cell in a
  // numeric column is an error that names file, line and column. Columns named in
  // `types` take that type instead of the inferred one (a string column keeps its
  // text, "12.0" stays "12.0"); a cell that does not parse as its type is an error.
  static Table ReadCsv(const std::string& path, const std::vector<ColumnSpec>& types = {});
  static Table ParseCsv(std::string_view text, const std::string& origin, const std::vector<ColumnSpec>& types = {});
  // The 1-based line of CSV file `path` where data row `row` (0-based, the header
  // not counted) starts, as ReadCsv splits it (blank lines skipped, quoted
  // newlines inside a record); 0 when the file has no such row.
  static int CsvLineOfRow(const std::string& path, std::size_t row);
  std::string ToCsv() const;
  // Writes atomically: a temp file beside the target, fsync, rename.
  void WriteCsv(const std::string& path) const;

 private:
  std::vector<ColumnSpec> specs_;
  std::vector<ColumnData> data_;
  std::size_t num_rows_ = 0;
};

}  // namespace servecast
