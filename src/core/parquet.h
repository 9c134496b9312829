#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/table.h"

namespace servecast {

// Our own Parquet reader and writer for flat tables (docs/parquet.md).

// Reads a flat Parquet file into a Table. Throws DataError naming the file and what
// is wrong (bad magic, truncated footer/page, unsupported encoding/codec/type/nesting,
// nulls in a numeric column) -- never crashes.
Table ReadParquet(const std::string& path);
Table ParseParquet(std::string_view bytes, const std::string& origin);

// Reads only the rows of `slice`. Row groups whose column statistics (min_value /
// max_value) rule the value out are not decompressed; the rest are decoded and
// filtered row by row, so a file without statistics reads correctly, only slower.
// A missing or non-string slice column is a DataError.
Table ReadParquet(const std::string& path, const RowSlice& slice);
Table ParseParquet(std::string_view bytes, const std::string& origin, const RowSlice& slice);

// The distinct values of string column `column`, in first-encounter order: from
// the row groups' statistics where each row group holds one value (min == max),
// else by decoding that column alone.
std::vector<std::string> ParquetColumnValues(const std::string& path, const std::string& column);

struct ParquetWriteOptions {
  enum class Codec { kUncompressed, kSnappy, kZstd } codec = Codec::kZstd;
  int zstd_level = 3;
  bool dictionary = true;  // dictionary-encode string columns
  std::size_t row_group_rows = 1 << 20;
  // Columns whose values partition the rows into slices (e.g. gemm_dtype): rows
  // are grouped by them, stably (slices in first-encounter order, rows of a slice
  // in table order), and no row group holds two slices, so that a slice read
  // skips the other slices' row groups by their statistics.
  std::vector<std::string> group_by = {};
};

// Writes atomically (temp file, fsync, rename): INT64, DOUBLE and BYTE_ARRAY (STRING)
// columns, all REQUIRED, data page v1, PLAIN or (strings, dictionary=true)
// RLE_DICTIONARY; per column chunk the statistics min_value / max_value (strings
// by unsigned bytes, integers and doubles by value; none for a double chunk
// holding a NaN) and null_count 0.
void WriteParquet(const Table& table, const std::string& path, const ParquetWriteOptions& options = {});
std::string SerializeParquet(const Table& table, const ParquetWriteOptions& options = {});

}  // namespace servecast
