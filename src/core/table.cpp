#include "core/table.h"

#include <cmath>
#include <cstdlib>
#include <deque>
#include <string_view>
#include <unordered_set>

#include "core/error.h"
#include "core/fs.h"

namespace servecast {
namespace {

// CSV text split into records of fields (RFC 4180: quotes, doubled quotes,
// embedded separators and newlines; CR outside quotes ignored). Fields are views
// into the text; a field that needs unescaping is copied into `owned`. Blank lines
// are skipped. Records the 1-based line of each record.
struct CsvCells {
  std::vector<std::string_view> cells;   // every field, record after record
  std::vector<std::size_t> record_begin;  // index of each record's first field; one extra at the end
  std::vector<int> lines;
  std::deque<std::string> owned;
  std::size_t records() const { return lines.size(); }
  std::size_t size(std::size_t r) const { return record_begin[r + 1] - record_begin[r]; }
  std::string_view at(std::size_t r, std::size_t c) const { return cells[record_begin[r] + c]; }
};

CsvCells SplitCsv(std::string_view text, const std::string& origin) {
  CsvCells out;
  const std::size_t n = text.size();
  std::size_t i = 0;
  int line = 1;
  while (i < n) {
    const int record_line = line;
    const std::size_t first = out.cells.size();
    bool started = false;  // anything beyond one empty, unquoted field
    while (true) {
      const std::size_t s = i;
      while (i < n && text[i] != ',' && text[i] != '\n' && text[i] != '"' && text[i] != '\r') ++i;
      if (i < n && (text[i] == '"' || text[i] == '\r')) {
        // The slow path: unescape this field into a string of its own.
        std::string f(text.substr(s, i - s));
        bool in_quotes = false;
        for (; i < n; ++i) {
          const char c = text[i];
          if (in_quotes) {
            if (c == '"') {
              if (i + 1 < n && text[i + 1] == '"') {
                f += '"';
                ++i;
              } else {
                in_quotes = false;
              }
            } else {
              if (c == '\n') ++line;
              f += c;
            }
            continue;
          }
          if (c == '"') {
            in_quotes = true;
            started = true;
          } else if (c == ',' || c == '\n') {
            break;
          } else if (c != '\r') {
            f += c;
          }
        }
        if (in_quotes)
          throw DataError(SourceLocation{origin, record_line, ""}, "unterminated quoted field", "a closing '\"'");
        if (!f.empty()) started = true;
        out.owned.push_back(std::move(f));
        out.cells.push_back(out.owned.back());
      } else {
        if (i > s) started = true;
        out.cells.push_back(text.substr(s, i - s));
      }
      if (i < n && text[i] == ',') {
        started = true;
        ++i;
        continue;
      }
      break;
    }
    if (i < n) {  // the newline ending the record
      ++i;
      ++line;
    }
    if (!started && out.cells.size() == first + 1) {  // a blank line
      out.cells.pop_back();
      continue;
    }
    out.record_begin.push_back(first);
    out.lines.push_back(record_line);
  }
  out.record_begin.push_back(out.cells.size());
  return out;
}

std::string Quote(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace

Table::Table(std::vector<ColumnSpec> columns) : specs_(std::move(columns)) {
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j)
      if (specs_[j].name == specs_[i].name) throw DataError("duplicate column '" + specs_[i].name + "'");
    switch (specs_[i].type) {
      case ValueType::kInt64: data_.emplace_back(std::vector<std::int64_t>{}); break;
      case ValueType::kDouble: data_.emplace_back(std::vector<double>{}); break;
      case ValueType::kString: data_.emplace_back(std::vector<std::string>{}); break;
    }
  }
}

std::optional<std::size_t> Table::FindColumn(std::string_view name) const {
  for (std::size_t i = 0; i < specs_.size(); ++i)
    if (specs_[i].name == name) return i;
  return std::nullopt;
}

std::size_t Table::ColumnIndex(std::string_view name) const {
  if (auto i = FindColumn(name)) return *i;
  std::string have;
  for (const auto& c : specs_) have += (have.empty() ? "" : ", ") + c.name;
  throw DataError("no column '" + std::string(name) + "' (columns: " + have + ")");
}

Table Table::FromColumns(std::vector<ColumnSpec> specs, std::vector<ColumnData> data) {
  if (specs.size() != data.size())
    throw DataError(std::to_string(data.size()) + " columns of data for " + std::to_string(specs.size()) + " specs");
  Table t(std::move(specs));
  std::size_t rows = 0;
  for (std::size_t c = 0; c < data.size(); ++c) {
    if (static_cast<ValueType>(data[c].index()) != t.specs_[c].type)
      throw DataError("column '" + t.specs_[c].name + "' is " + TypeName(t.specs_[c].type) + "; data of another type");
    std::size_t n = std::visit([](const auto& v) { return v.size(); }, data[c]);
    if (c == 0) rows = n;
    else if (n != rows)
      throw DataError("column '" + t.specs_[c].name + "' has " + std::to_string(n) + " rows; expected " +
                      std::to_string(rows));
  }
  t.data_ = std::move(data);
  t.num_rows_ = rows;
  return t;
}

void Table::AppendRow(std::vector<Value> row) {
  if (row.size() != specs_.size())
    throw DataError("row has " + std::to_string(row.size()) + " cells; the table has " +
                    std::to_string(specs_.size()) + " columns");
  // Validate every cell before touching the columns, so a bad row leaves no trace.
  for (std::size_t c = 0; c < row.size(); ++c) {
    ValueType want = specs_[c].type, got = TypeOf(row[c]);
    if (want == got) continue;
    if (want == ValueType::kDouble && got == ValueType::kInt64) {
      row[c] = static_cast<double>(std::get<std::int64_t>(row[c]));
      continue;
    }
    throw DataError("column '" + specs_[c].name + "' is " + TypeName(want) + "; got " + TypeName(got) + " '" +
                    ToString(row[c]) + "'");
  }
  for (std::size_t c = 0; c < row.size(); ++c) {
    std::visit(
        [&](auto& col) {
          using T = typename std::decay_t<decltype(col)>::value_type;
          col.push_back(std::move(std::get<T>(row[c])));
        },
        data_[c]);
  }
  ++num_rows_;
}

void Table::AppendByName(const Table& other, std::size_t row) {
  std::vector<Value> cells;
  cells.reserve(specs_.size());
  if (other.num_columns() != specs_.size())
    throw DataError("cannot append: column sets differ (" + std::to_string(other.num_columns()) + " vs " +
                    std::to_string(specs_.size()) + ")");
  for (const auto& spec : specs_) cells.push_back(other.Get(row, other.ColumnIndex(spec.name)));
  AppendRow(std::move(cells));
}

Value Table::Get(std::size_t row, std::size_t col) const {
  return std::visit([&](const auto& c) -> Value { return c.at(row); }, data_.at(col));
}

std::int64_t Table::GetInt(std::size_t row, std::size_t col) const {
  if (auto* c = std::get_if<std::vector<std::int64_t>>(&data_.at(col))) return c->at(row);
  throw DataError("column '" + specs_[col].name + "' is not an integer column");
}

double Table::GetDouble(std::size_t row, std::size_t col) const {
  if (auto* c = std::get_if<std::vector<double>>(&data_.at(col))) return c->at(row);
  if (auto* c = std::get_if<std::vector<std::int64_t>>(&data_.at(col))) return static_cast<double>(c->at(row));
  throw DataError("column '" + specs_[col].name + "' is not numeric");
}

const std::string& Table::GetString(std::size_t row, std::size_t col) const {
  if (auto* c = std::get_if<std::vector<std::string>>(&data_.at(col))) return c->at(row);
  throw DataError("column '" + specs_[col].name + "' is not a string column");
}

std::vector<Value> Table::Row(std::size_t row) const {
  std::vector<Value> out;
  out.reserve(specs_.size());
  for (std::size_t c = 0; c < specs_.size(); ++c) out.push_back(Get(row, c));
  return out;
}

Table Table::Select(const std::vector<std::size_t>& rows) const {
  Table out(specs_);
  for (std::size_t r : rows) out.AppendRow(Row(r));
  return out;
}

Table Table::ParseCsv(std::string_view text, const std::string& origin, const std::vector<ColumnSpec>& types) {
  const CsvCells csv = SplitCsv(text, origin);
  if (csv.records() == 0) throw DataError(SourceLocation{origin, 1, ""}, "empty file", "a header line");
  const std::size_t ncol = csv.size(0);
  std::vector<std::string> header;
  for (std::size_t c = 0; c < ncol; ++c) header.emplace_back(csv.at(0, c));
  const std::size_t nrows = csv.records() - 1;
  for (std::size_t r = 1; r < csv.records(); ++r) {
    if (csv.size(r) != ncol)
      throw DataError(SourceLocation{origin, csv.lines[r], ""}, "row has " + std::to_string(csv.size(r)) + " fields",
                      std::to_string(ncol) + " fields as in the header");
  }
  // Each column's type: given, or inferred from its non-empty cells.
  std::vector<ColumnSpec> specs;
  for (std::size_t c = 0; c < ncol; ++c) {
    std::optional<ValueType> given;
    for (const auto& t : types)
      if (t.name == header[c]) given = t.type;
    if (given) {
      specs.push_back(ColumnSpec{header[c], *given});
      continue;
    }
    bool all_int = true, all_num = true, any = false;
    std::int64_t iv;
    double dv;
    for (std::size_t r = 1; r < csv.records() && all_num; ++r) {
      const std::string_view cell = csv.at(r, c);
      if (cell.empty()) continue;
      any = true;
      if (all_int && ParseInt64(cell, iv)) continue;  // an integer is a number too
      all_int = false;
      if (!ParseNumber(cell, dv)) all_num = false;
    }
    ValueType t = !any ? ValueType::kString : all_int ? ValueType::kInt64 : all_num ? ValueType::kDouble : ValueType::kString;
    specs.push_back(ColumnSpec{header[c], t});
  }
  std::vector<ColumnData> data;
  data.reserve(ncol);
  for (std::size_t c = 0; c < ncol; ++c) {
    bool declared = false;
    for (const auto& t : types) declared = declared || t.name == header[c];
    auto fail = [&](std::size_t r, std::string_view cell, const char* what) {
      throw DataError(SourceLocation{origin, csv.lines[r], header[c]},
                      cell.empty() ? std::string("empty cell") : "'" + std::string(cell) + "' is not " + what,
                      std::string(what) + (declared ? " (the column's declared type)" : " like the rest of the column"));
    };
    switch (specs[c].type) {
      case ValueType::kInt64: {
        std::vector<std::int64_t> v(nrows);
        for (std::size_t r = 1; r < csv.records(); ++r)
          if (!ParseInt64(csv.at(r, c), v[r - 1])) fail(r, csv.at(r, c), "an integer");
        data.emplace_back(std::move(v));
        break;
      }
      case ValueType::kDouble: {
        std::vector<double> v(nrows);
        for (std::size_t r = 1; r < csv.records(); ++r)
          if (!ParseNumber(csv.at(r, c), v[r - 1])) fail(r, csv.at(r, c), "a number");
        data.emplace_back(std::move(v));
        break;
      }
      case ValueType::kString: {
        std::vector<std::string> v;
        v.reserve(nrows);
        for (std::size_t r = 1; r < csv.records(); ++r) v.emplace_back(csv.at(r, c));
        data.emplace_back(std::move(v));
        break;
      }
    }
  }
  return FromColumns(std::move(specs), std::move(data));
}

Table Table::ReadCsv(const std::string& path, const std::vector<ColumnSpec>& types) {
  return ParseCsv(ReadFile(path), path, types);
}

namespace {
std::size_t TextColumn(const Table& t, const std::string& column, const std::string& origin) {
  const auto c = t.FindColumn(column);
  if (!c) throw DataError(origin + ": no slice column '" + column + "'");
  if (t.columns()[*c].type != ValueType::kString)
    throw DataError(origin + ": slice column '" + column + "' is not a string column");
  return *c;
}
}  // namespace

std::vector<std::size_t> Table::RowsOf(const RowSlice& slice, const std::string& origin) const {
  const std::size_t c = TextColumn(*this, slice.column, origin);
  const auto& text = std::get<std::vector<std::string>>(data_[c]);
  std::vector<std::size_t> out;
  for (std::size_t r = 0; r < num_rows_; ++r)
    if (text[r] == slice.value) out.push_back(r);
  return out;
}

std::vector<std::string> Table::DistinctText(const std::string& column, const std::string& origin) const {
  const std::size_t c = TextColumn(*this, column, origin);
  const auto& text = std::get<std::vector<std::string>>(data_[c]);
  std::vector<std::string> out;
  std::unordered_set<std::string_view> seen;
  for (const std::string& v : text)
    if (seen.insert(v).second) out.push_back(v);
  return out;
}

int Table::CsvLineOfRow(const std::string& path, std::size_t row) {
  const std::string text = ReadFile(path);
  const CsvCells cells = SplitCsv(text, path);
  return row + 1 < cells.records() ? cells.lines[row + 1] : 0;
}

std::string Table::ToCsv() const {
  std::string out;
  for (std::size_t c = 0; c < specs_.size(); ++c) {
    if (c) out += ',';
    out += Quote(specs_[c].name);
  }
  out += '\n';
  for (std::size_t r = 0; r < num_rows_; ++r) {
    for (std::size_t c = 0; c < specs_.size(); ++c) {
      if (c) out += ',';
      out += Quote(ToString(Get(r, c)));
    }
    out += '\n';
  }
  return out;
}

void Table::WriteCsv(const std::string& path) const { WriteFileAtomic(path, ToCsv()); }

}  // namespace servecast
