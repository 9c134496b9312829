#pragma once

#include <string>
#include <vector>

#include "core/parquet.h"
#include "core/table.h"

namespace servecast {

// Tables on disk, by extension: `.csv` (Table::ReadCsv, with optional column
// types) or `.parquet` (ReadParquet; its own types). Anything else is a DataError.
bool IsTableFile(const std::string& path);
Table ReadTableFile(const std::string& path, const std::vector<ColumnSpec>& csv_types = {});
// Only the rows of one slice (string column == value), in file order. Parquet
// skips the row groups its statistics rule out; CSV is parsed whole, then filtered.
Table ReadTableFile(const std::string& path, const RowSlice& slice);
// The distinct values of a string column, in first-encounter order (Parquet: from
// row-group statistics when each row group holds one value).
std::vector<std::string> TableFileColumnValues(const std::string& path, const std::string& column);

// How a table file is written: Parquet's codec and its slice columns (rows
// grouped by them, one slice per row group; ignored for CSV).
struct TableWriteOptions {
  ParquetWriteOptions parquet = {};
};
// Writes atomically in the format the extension names (Parquet: zstd).
void WriteTableFile(const Table& table, const std::string& path, const TableWriteOptions& options = {});

}  // namespace servecast
