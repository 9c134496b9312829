#include "core/table.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "core/fs.h"

namespace servecast {
namespace {

bool ParseInt(const std::string& s, std::int64_t& out) {
  if (s.empty()) return false;
  auto res = std::from_chars(s.data(), s.data() + s.size(), out);
  return res.ec == std::errc() && res.ptr == s.data() + s.size();
}

bool ParseDouble(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// Splits CSV text into records of fields (RFC 4180: quotes, doubled quotes,
// embedded separators and newlines). Records the 1-based line of each record.
std::vector<std::vector<std::string>> SplitCsv(std::string_view text, const std::string& origin,
                                               std::vector<int>& lines) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> fields;
  std::string field;
  bool in_quotes = false, field_started = false;
  int line = 1, record_line = 1;
  auto end_record = [&] {
    fields.push_back(std::move(field));
    field.clear();
    if (!(fields.size() == 1 && fields[0].empty() && !field_started)) {
      records.push_back(std::move(fields));
      lines.push_back(record_line);
    }
    fields.clear();
    field_started = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"') {
      in_quotes = true;
      field_started = true;
    } else if (c == ',') {
      fields.push_back(std::move(field));
      field.clear();
      field_started = true;
    } else if (c == '\r') {
      // tolerate CRLF
    } else if (c == '\n') {
      end_record();
      ++line;
      record_line = line;
    } else {
      field += c;
      field_started = true;
    }
  }
  if (in_quotes) throw DataError(SourceLocation{origin, record_line, ""}, "unterminated quoted field", "a closing '\"'");
  if (field_started || !field.empty() || !fields.empty()) end_record();
  return records;
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
  std::vector<int> lines;
  auto records = SplitCsv(text, origin, lines);
  if (records.empty()) throw DataError(SourceLocation{origin, 1, ""}, "empty file", "a header line");
  const auto& header = records[0];
  std::size_t ncol = header.size();
  for (std::size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != ncol)
      throw DataError(SourceLocation{origin, lines[r], ""},
                      "row has " + std::to_string(records[r].size()) + " fields",
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
    for (std::size_t r = 1; r < records.size() && all_num; ++r) {
      const std::string& cell = records[r][c];
      if (cell.empty()) continue;
      any = true;
      if (all_int && !ParseInt(cell, iv)) all_int = false;
      if (!ParseDouble(cell, dv)) all_num = false;
    }
    ValueType t = !any ? ValueType::kString : all_int ? ValueType::kInt64 : all_num ? ValueType::kDouble : ValueType::kString;
    specs.push_back(ColumnSpec{header[c], t});
  }
  Table table(std::move(specs));
  for (std::size_t r = 1; r < records.size(); ++r) {
    std::vector<Value> row;
    row.reserve(ncol);
    for (std::size_t c = 0; c < ncol; ++c) {
      const std::string& cell = records[r][c];
      ValueType t = table.specs_[c].type;
      auto fail = [&](const char* what) {
        throw DataError(SourceLocation{origin, lines[r], header[c]},
                        cell.empty() ? std::string("empty cell") : "'" + cell + "' is not " + what,
                        std::string(what) + " like the rest of the column");
      };
      switch (t) {
        case ValueType::kInt64: {
          std::int64_t v = 0;
          if (!ParseInt(cell, v)) fail("an integer");
          row.emplace_back(v);
          break;
        }
        case ValueType::kDouble: {
          double v = 0;
          if (!ParseDouble(cell, v)) fail("a number");
          row.emplace_back(v);
          break;
        }
        case ValueType::kString: row.emplace_back(cell); break;
      }
    }
    table.AppendRow(std::move(row));
  }
  return table;
}

Table Table::ReadCsv(const std::string& path, const std::vector<ColumnSpec>& types) {
  return ParseCsv(ReadFile(path), path, types);
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
