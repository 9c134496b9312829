#include "core/table_file.h"

#include "core/error.h"
#include "core/parquet.h"

namespace servecast {
namespace {

bool EndsWith(const std::string& s, const char* suffix) {
  std::string x(suffix);
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

}  // namespace

bool IsTableFile(const std::string& path) { return EndsWith(path, ".csv") || EndsWith(path, ".parquet"); }

Table ReadTableFile(const std::string& path, const std::vector<ColumnSpec>& csv_types) {
  if (EndsWith(path, ".csv")) return Table::ReadCsv(path, csv_types);
  if (EndsWith(path, ".parquet")) return ReadParquet(path);
  throw DataError(path + ": unknown table file type; expected .csv or .parquet");
}

void WriteTableFile(const Table& table, const std::string& path) {
  if (EndsWith(path, ".csv")) return table.WriteCsv(path);
  if (EndsWith(path, ".parquet")) return WriteParquet(table, path);
  throw DataError(path + ": unknown table file type; expected .csv or .parquet");
}

}  // namespace servecast
