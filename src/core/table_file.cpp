#include "core/table_file.h"

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
  const std::vector<std::size_t> keep = t.RowsOf(slice, path);
  if (keep.size() == t.num_rows()) return t;
  return t.Select(keep);
}

std::vector<std::string> TableFileColumnValues(const std::string& path, const std::string& column) {
  if (EndsWith(path, ".parquet")) return ParquetColumnValues(path, column);
  if (!EndsWith(path, ".csv")) UnknownType(path);
  return Table::ReadCsv(path).DistinctText(column, path);
}

void WriteTableFile(const Table& table, const std::string& path, const TableWriteOptions& options) {
  if (EndsWith(path, ".csv")) return table.WriteCsv(path);
  if (EndsWith(path, ".parquet")) return WriteParquet(table, path, options.parquet);
  UnknownType(path);
}

}  // namespace servecast
