#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/table.h"

namespace servecast {

// Our own Parquet reader and writer for flat tables (docs/parquet.md).

// Reads a flat Parquet file into a Table. Throws DataError naming the file and what
// is wrong (bad magic, truncated footer/page, unsupported encoding/codec/type/nesting,
// nulls in a numeric column) -- never crashes.
Table ReadParquet(const std::string& path);
Table ParseParquet(std::string_view bytes, const std::string& origin);

struct ParquetWriteOptions {
  enum class Codec { kUncompressed, kSnappy, kZstd } codec = Codec::kZstd;
  int zstd_level = 3;
  bool dictionary = true;  // dictionary-encode string columns
  std::size_t row_group_rows = 1 << 20;
};

// Writes atomically (temp file, fsync, rename): INT64, DOUBLE and BYTE_ARRAY (STRING)
// columns, all REQUIRED, data page v1, PLAIN or (strings, dictionary=true)
// RLE_DICTIONARY.
void WriteParquet(const Table& table, const std::string& path, const ParquetWriteOptions& options = {});
std::string SerializeParquet(const Table& table, const ParquetWriteOptions& options = {});

}  // namespace servecast
