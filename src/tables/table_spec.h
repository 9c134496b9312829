#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/params.h"
#include "core/table.h"
#include "core/table_file.h"
#include "core/value.h"
#include "tables/cost_model.h"

namespace servecast::tables {

// How an interpolation axis blends between its two bracketing rows (perfdb/grid.h):
// raw latency, or latency in sqrt space (quadratic growth, e.g. prefill length).
enum class AxisBlend { kLinear, kSqrt };
// What of a forward pass an axis reads when an op of kind kTable is costed
// (serve/evaluate.cpp): the pass's tokens (batch x new tokens, or the decode
// rows), its batch, or its sequence (new + cached tokens).
enum class AxisSource { kTokens, kBatch, kSeq };
struct TableAxis {
  std::string column;  // a numeric key column
  AxisBlend blend = AxisBlend::kLinear;
  AxisSource from = AxisSource::kTokens;
};

// What the estimator needs to read a table with no reader of its own
// (perfdb/declared.h, docs/extending.md "Add a table"):
//   - `slice_keys`: columns matched exactly (op_name or key columns); each
//     distinct value tuple is one slice;
//   - `axes`: the numeric key columns interpolated inside a slice (outer -> inner),
//     at most one of them kSqrt; every key column is a slice key, an axis or
//     load_key_ignored;
//   - `roofline(key)`: FLOPs, bytes and compute dtype at a key (slice keys and
//     axes); SOL time = max(flops / peak FLOP/s of the dtype, bytes / memory
//     bandwidth) of the system (perfdb::Sol::Ms). Empty: the declaration's `cost`.
//   - `fallback`: a slice key value whose rows answer a query when no slice
//     matches the query on the slice keys up to and including that column
//     (mla_bmm: fp8 reads the bfloat16 rows); the SOL stays the query's own.
struct EstimatorRead {
  std::vector<std::string> slice_keys;
  std::vector<TableAxis> axes;
  std::function<OpCost(const Params& key)> roofline = {};
  std::optional<std::pair<std::string, std::string>> fallback = std::nullopt;
  // How to collect it, for the message of a table the data lacks ("on the GPU
  // with servecast collect --backend cuda --ops x"); empty: a generic line.
  std::string collect = {};
  // A prefix column whose values are the parts of one op (AIC's gdn_perf and
  // mamba2_perf: kernel_source names the convolution and the scan of a layer):
  // the loader keeps rows apart by it, each part is a grid of its own, and a
  // query's answer is the sum of the parts its slice has. Empty: one part.
  std::string parts = {};
  // Set: why servecast has no rows of this table yet ("issue 25: no collector
  // op"). A data source without the table is then answered, in every mode but
  // SOL, by the declared roofline with source "roofline" and a detail naming the
  // table and this reason (every report lists such ops as not measured); a
  // source WITH the table is read as usual. Empty: the table is required.
  std::string uncollected = {};
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
  // How perfdb's loader tells rows apart when it merges sources (first source
  // wins a key): op_name is part of the key when the file has the column, unless
  // `load_key_op_name` is false (AIC's gemm and attention files have no op_name);
  // `load_key_ignored` lists key columns the loader does not tell rows apart by
  // (attention's beam_width: the estimator models beam 1); `load_key_defaults`
  // key columns a file may lack, with the value they take then.
  bool load_key_op_name = true;
  std::vector<std::string> load_key_ignored = {};
  std::vector<std::pair<std::string, Value>> load_key_defaults = {};
  // Set: the estimator reads the table through the generic path (ops of kind
  // kTable, `db query --table`); unset: a hand-written reader or none.
  std::optional<EstimatorRead> estimator = std::nullopt;

  // prefix + key columns + metric columns + extra columns (+ power), in file order.
  std::vector<ColumnSpec> AllColumns(bool with_power) const;
  // The names that identify a case's row: op_name plus the key columns.
  std::vector<std::string> IdentityColumns() const;
  // The names that tell a table's rows apart: IdentityColumns, plus the parts
  // column where the table's rows are the parts of one op (EstimatorRead::parts:
  // one case writes a row per part, gdn_perf's kernel_source).
  std::vector<std::string> RowIdentityColumns() const;
  // The key columns' names (the parameters every case of an op writing this table carries).
  std::vector<std::string> KeyColumnNames() const;
  // How this table's files are written (Parquet: grouped by the slice columns).
  TableWriteOptions WriteOptions() const;
  // The smallest valid value of an integer key column.
  std::int64_t KeyMinimum(std::string_view column) const;
  // The key columns perfdb merges sources by (see load_key_*): op_name first
  // when `has_op_name` and load_key_op_name, then the key columns in order.
  std::vector<std::string> LoadKeyColumns(bool has_op_name) const;
  // The declared key column `column`; Error naming the table and its keys when
  // it is not one (a reader asking for a column the declaration lacks).
  const ColumnSpec& KeyColumn(std::string_view column) const;
  // Where a reader finds the declared key column `column` in `t`: KeyColumn's
  // Error when the declaration lacks it; KeyIndex: t.ColumnIndex's error when
  // `t` lacks it, FindKey: nullopt then (a key with a load default).
  std::size_t KeyIndex(const Table& t, std::string_view column) const;
  std::optional<std::size_t> FindKey(const Table& t, std::string_view column) const;
  // The estimator read (Error naming the table when it has none), checked
  // against the key columns (Error naming the rule it breaks).
  const EstimatorRead& Read() const;
  // roofline(key), or cost(key) when the read declares none.
  OpCost Roofline(const Params& key) const;
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
// The integer key columns of `table_name` that `t` holds as floating point (a CSV
// cell such as 128.0, 1e3 or 9223372036854775808 makes the reader infer a double
// column): re-reading a CSV with these types names the file, line and cell.
// Empty when every integer key is stored as an integer (or there is no declaration).
std::vector<ColumnSpec> IntegerKeysStoredAsDouble(const std::string& table_name, const Table& t);

// Columns every table starts with.
const std::vector<ColumnSpec>& PrefixColumns();
// Timing columns after the keys: latency (median, ms), latency_p10, latency_p90,
// samples, rsd, timing, l2, clock_mhz_before, clock_mhz_after, throttled.
const std::vector<ColumnSpec>& MetricColumns();
// Present only when the run measured power: power (W), power_limit (W).
const std::vector<ColumnSpec>& PowerColumns();

// The declared tables the estimator reads through the generic path (those with
// an `estimator` read), in declaration order.
std::vector<const TableSpec*> EstimatorTables();

// All table specs servecast knows; FindTableSpec returns nullptr for unknown names.
const std::deque<TableSpec>& AllTableSpecs();
// Adds a table at start-up (before any lookup threads exist): test-only ops and
// extensions. Specs already handed out stay valid. Throws Error when the name is taken.
void AddTableSpec(TableSpec spec);
const TableSpec* FindTableSpec(std::string_view name);
// The spec of a table servecast declares; Error for an unknown name.
const TableSpec& GetTableSpec(std::string_view name);

// The exponent of a moe_perf expert-load name: 0 for "balanced", alpha for
// "power_law_<alpha>" with a finite alpha > 0; nothing for any other name.
std::optional<double> ExpertLoadAlpha(std::string_view distribution);

// Whether a moe_perf row's kernel_source names non-gated (relu2) experts: it contains
// "nongated", as AIC's TensorRT-LLM rows and servecast's `expert_act: relu2` rows do
// (two projections, not three).
bool IsNongatedMoeKernel(std::string_view kernel_source);

}  // namespace servecast::tables
