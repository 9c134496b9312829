#include "core/table_file.h"

#include <unordered_set>

#include "core/error.h"

namespace servecast {
namespace {

bool EndsWith(const std::string& s, const char* suffix) {
  std::string x(suffix);
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

[[noreturn]] void UnknownType(const std::string& path) {
  throw DataError(path + ": unknown table file type; expected .csv or .parquet");
}

// The column of a CSV table a slice names; a DataError naming the file otherwise.
std::size_t SliceColumn(const Table& t, const std::string& path, const std::string& column) {
  auto c = t.FindColumn(column);
  if (!c) throw DataError(path + ": no slice column '" + column + "'");
  if (t.columns()[*c].type != ValueType::kString)
    throw DataError(path + ": slice column '" + column + "' is not a string column");
  return *c;
}

}  // namespace

bool IsTableFile(const std::string& path) { return EndsWith(path, ".csv") || EndsWith(path, ".parquet"); }

Table ReadTableFile(const std::string& path, const std::vector<ColumnSpec>& csv_types) {
  if (EndsWith(path, ".csv")) return Table::ReadCsv(path, csv_types);
  if (EndsWith(path, ".parquet")) return ReadParquet(path);
  UnknownType(path);
}

Table ReadTableFile(const std::string& path, const RowSlice& slice) {
  if (EndsWith(path, ".parquet")) return ReadParquet(path, slice);
  if (!EndsWith(path, ".csv")) UnknownType(path);
  Table t = Table::ReadCsv(path);
  const std::size_t c = SliceColumn(t, path, slice.column);
  std::vector<std::size_t> keep;
  for (std::size_t r = 0; r < t.num_rows(); ++r)
    if (t.GetString(r, c) == slice.value) keep.push_back(r);
  if (keep.size() == t.num_rows()) return t;
  return t.Select(keep);
}

std::vector<std::string> TableFileColumnValues(const std::string& path, const std::string& column) {
  if (EndsWith(path, ".parquet")) return ParquetColumnValues(path, column);
  if (!EndsWith(path, ".csv")) UnknownType(path);
  const Table t = Table::ReadCsv(path);
  const std::size_t c = SliceColumn(t, path, column);
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  for (std::size_t r = 0; r < t.num_rows(); ++r)
    if (seen.insert(t.GetString(r, c)).second) out.push_back(t.GetString(r, c));
  return out;
}

void WriteTableFile(const Table& table, const std::string& path, const TableWriteOptions& options) {
  if (EndsWith(path, ".csv")) return table.WriteCsv(path);
  if (EndsWith(path, ".parquet")) return WriteParquet(table, path, options.parquet);
  UnknownType(path);
}

}  // namespace servecast
