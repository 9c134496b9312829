#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>
#include <string>
#include <vector>

#include "core/params.h"
#include "core/table.h"
#include "core/table_file.h"

namespace servecast::tables {

// What the op behind one row costs, for speed-of-light bounds and the
// "no row beats physics" gate. `compute_dtype` names the peak FLOP/s to use
// (a key of the system spec's peak table: float32, bfloat16, fp8, ...).
struct OpCost {
  double flops = 0;
  double bytes = 0;  // minimum bytes moved to/from device memory
  std::string compute_dtype;
};

// One perf table: its name, family, key columns (after the common prefix) and the
// cost of a row from its key columns. Shared by every backend that writes it.
struct TableSpec {
  std::string name;    // "gemm_perf"
  std::string family;  // "gemm"
  std::vector<ColumnSpec> key_columns;
  bool zero_latency_legal = false;
  std::function<OpCost(const Params& key)> cost;
  // Columns of this table only, after the timing columns (e.g. the bandwidths of
  // a collective); the op gives their values with the row.
  std::vector<ColumnSpec> extra_columns = {};
  // Key columns that cut the table into the slices a reader loads one at a time
  // (gemm_dtype: a model reads one or two GEMM dtypes). A Parquet file groups its
  // row groups by them (core/parquet.h, ParquetWriteOptions::group_by).
  std::vector<std::string> slice_columns = {};
  // Integer key columns whose smallest valid value is not 1 (e.g. window_size 0 =
  // full attention); every other integer key must be >= 1.
  std::vector<std::pair<std::string, std::int64_t>> key_minimum = {};

  // prefix + key columns + metric columns + extra columns (+ power), in file order.
  std::vector<ColumnSpec> AllColumns(bool with_power) const;
  // The names that identify a row: op_name plus the key columns.
  std::vector<std::string> IdentityColumns() const;
  // The key columns' names (the parameters every case of an op writing this table carries).
  std::vector<std::string> KeyColumnNames() const;
  // How this table's files are written (Parquet: grouped by the slice columns).
  TableWriteOptions WriteOptions() const;
  // The smallest valid value of an integer key column.
  std::int64_t KeyMinimum(std::string_view column) const;
};

// A row of a perf table that breaks its declaration.
struct RowProblem {
  std::size_t row = 0;  // 0-based data row
  std::string column;
  std::string what;      // "is -0.5"
  std::string expected;  // "a finite latency > 0 (ms)"
};
// The first row of `t`, a table named `table_name`, whose values the declaration
// refuses: `latency` finite and > 0 (>= 0 where zero is legal); numeric key
// columns finite, integral where the key is an integer, and at least its minimum.
// A table without a declaration gets the latency rule only. Columns `t` lacks
// are not checked here (the readers name missing key columns).
std::optional<RowProblem> FirstBadRow(const std::string& table_name, const Table& t);

// Columns every table starts with.
const std::vector<ColumnSpec>& PrefixColumns();
// Timing columns after the keys: latency (median, ms), latency_p10, latency_p90,
// samples, rsd, timing, l2, clock_mhz_before, clock_mhz_after, throttled.
const std::vector<ColumnSpec>& MetricColumns();
// Present only when the run measured power: power (W), power_limit (W).
const std::vector<ColumnSpec>& PowerColumns();

// All table specs servecast knows; FindTableSpec returns nullptr for unknown names.
const std::vector<TableSpec>& AllTableSpecs();
// Adds a table at start-up (before any lookup threads exist); used by test-only ops.
// Throws Error when the name is taken.
void AddTableSpec(TableSpec spec);
const TableSpec* FindTableSpec(std::string_view name);

// Bytes per element of a dtype name (float32 4, bfloat16/float16 2, fp8 1, ...);
// throws Error for an unknown dtype.
double DtypeBytes(std::string_view dtype);

}  // namespace servecast::tables
