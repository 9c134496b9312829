#pragma once

#include <string>
#include <vector>

#include "core/table.h"

namespace servecast {

// Tables on disk, by extension: `.csv` (Table::ReadCsv, with optional column
// types) or `.parquet` (ReadParquet; its own types). Anything else is a DataError.
bool IsTableFile(const std::string& path);
Table ReadTableFile(const std::string& path, const std::vector<ColumnSpec>& csv_types = {});
// Writes atomically in the format the extension names (Parquet: zstd).
void WriteTableFile(const Table& table, const std::string& path);

}  // namespace servecast
