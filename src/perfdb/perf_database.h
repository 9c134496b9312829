#pragma once

// The perf database of one (system, backend, version): resolves each table from
// its sources and loads it lazily (docs/perfdb.md, "Loading").
//
// Sources of one table, in priority order (first source containing a key wins):
//   1. primary: <system>/<family>/<backend>/<version>/<table>.{parquet,csv}
//   2. donors declared in that directory's reuse.yaml, in file order
//   3. same-backend sibling versions strictly older than <version>, nearest first
// The `comm` family takes only its primary source (never reuse, never siblings).
// `nccl_perf` is system-wide: when the backend has none at <version>, it comes
// from <system>/comm/nccl/<newest version> (or Options::nccl_version).

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/table.h"
#include "core/table_file.h"
#include "perfdb/discovery.h"

namespace servecast::perfdb {

// A table (or a system, backend, version) that is not in the data. The message
// names what was asked for and what exists.
class MissingDataError : public Error {
 public:
  explicit MissingDataError(const std::string& message) : Error(message) {}
};

// Identity (key) columns of a table, resolved by name. A table servecast
// declares (tables/table_spec.h) is keyed as its declaration says
// (TableSpec::LoadKeyColumns; op_name when `table` has that column); any other
// table's key is every column that is neither metadata (framework, version,
// device, kernel_source) nor a metric (latency*, power*, energy*, samples, rsd,
// timing, l2, clock*, throttled).
std::vector<std::string> KeyColumns(const std::string& table_name, const Table& table);
// Key columns that may be absent from a file, with the value they take then
// (the declaration's load_key_defaults: window_size of the attention tables -> 0).
const std::vector<std::pair<std::string, Value>>& OptionalKeyDefaults(const std::string& table_name);

enum class SourceKind { kPrimary, kReuse, kOlderSibling };
const char* SourceKindName(SourceKind k);  // "primary", "reuse", "older"

struct TableSource {
  SourceKind kind = SourceKind::kPrimary;
  std::string version;  // the version directory it lives in
  std::string backend;
  std::string file;
  std::string reason;         // reuse: reason and approver from reuse.yaml
  std::size_t rows_read = 0;  // rows in the file
  std::size_t rows_used = 0;  // rows that supplied a new key
};

struct LoadedTable {
  std::string name;
  std::string family;
  Table table;                             // merged rows, first source's column order
  std::vector<std::string> key_columns;    // identity columns, resolved by name
  std::vector<TableSource> sources;        // priority order; each was read
  std::vector<std::uint16_t> row_source;   // per row: index into `sources`
  std::size_t shadowed_rows = 0;           // rows whose key an earlier source supplied
  std::size_t duplicate_rows_dropped = 0;  // rows repeating a key of an earlier row of the same source
};

struct OpenOptions {
  std::string nccl_version;  // empty: newest <system>/comm/nccl/<version>; set: that version or nothing
  // The system spec's declared versions (systems::CollectiveSpec), used when
  // nccl_version is empty: the declared NCCL version when its table exists; else
  // the OneCCL table (<system>/comm/oneccl/<oneccl_version or newest>/oneccl_perf,
  // same columns) when one exists; else the newest NCCL version.
  std::string preferred_nccl_version = {};
  std::string oneccl_version = {};
  // The "shared layer": reuse.yaml donors and older versions fill keys the primary
  // version lacks. On for SILICON and HYBRID; EMPIRICAL and SOL read the active
  // version only (AIC §1.1).
  bool shared_layer = true;
};

class PerfDatabase {
 public:
  // Scans `roots` and selects (system, backend, version). An empty version means
  // the newest version of the backend on that system that has table files.
  // Throws MissingDataError naming what exists when the system, backend or
  // version is not present.
  static PerfDatabase Open(std::vector<std::string> roots, std::string system, std::string backend,
                           std::string version = "", OpenOptions options = {});
  // The same over a tree already scanned (one scan per command).
  static PerfDatabase Open(std::shared_ptr<const DataTree> tree, std::string system, std::string backend,
                           std::string version = "", OpenOptions options = {});

  const std::string& system() const { return system_; }
  const std::string& backend() const { return backend_; }
  const std::string& version() const { return version_; }
  const DataTree& tree() const { return *tree_; }

  // Names of the tables this database can resolve (over all families).
  std::vector<std::string> TableNames() const;
  // Loads the table on first use and caches it; thread-safe. Throws
  // MissingDataError (naming the tables that exist) when no source has it, and
  // DataError / ConfigError for unreadable files.
  const LoadedTable& Table(const std::string& table_name) const;
  // One slice of the table: the rows whose string key column `slice.column`
  // holds `slice.value`, merged over the sources by the same rules, so that the
  // slices of a table together are exactly Table(table_name). Loaded on first
  // use and cached like a table; a Parquet source decodes only the row groups
  // that can hold the slice. The column must be a key column (else Error).
  const LoadedTable& Table(const std::string& table_name, const RowSlice& slice) const;
  // The distinct values of a key column over every source of the table, in the
  // order the merged table first holds them (Parquet: read from the row groups'
  // statistics, nothing decoded, when each row group holds one value).
  std::vector<std::string> SliceValues(const std::string& table_name, const std::string& column) const;
  // The tables and slices loaded so far, in name order, each labelled
  // "gemm_perf" or "gemm_perf{gemm_dtype=bfloat16}": where their rows came from,
  // for reports. Call it when no load is in flight.
  std::vector<std::pair<std::string, const LoadedTable*>> Loaded() const;

 private:
  // One slot per table with its own lock, so that different tables load in
  // parallel and each loads once.
  struct Slot {
    std::mutex mu;
    std::unique_ptr<LoadedTable> table;
  };
  // A CSV file parsed once for its slices (CSV cannot be read in part).
  struct ParsedFile {
    std::mutex mu;
    std::unique_ptr<const servecast::Table> table;
  };
  struct Cache {
    std::mutex mu;  // guards the maps only
    std::map<std::string, std::unique_ptr<Slot>> tables;
    std::map<std::string, std::unique_ptr<ParsedFile>> csv_files;
  };
  // One file's rows of a slice, or its slice column's values: Parquet reads only
  // what it needs; CSV is parsed once per database and cut from memory.
  servecast::Table ReadSlice(const std::string& file, const RowSlice& slice) const;
  std::vector<std::string> FileSliceValues(const std::string& file, const std::string& column) const;
  const servecast::Table& ParsedCsv(const std::string& file) const;
  // The sources of a table in priority order, and its family (MissingDataError when none).
  std::vector<TableSource> Sources(const std::string& table_name, std::string& family) const;
  // Loads a table (or one slice of it): its sources, read and checked
  // (ReadSources), their columns unified, the first row of each key kept, the
  // kept rows copied into one table (perf_database.cpp, the steps in order).
  std::unique_ptr<LoadedTable> Load(const std::string& table_name, const RowSlice* slice) const;
  // Every source's rows (or the slice's), refused when the declaration refuses a
  // row; sets each source's rows_read.
  std::vector<servecast::Table> ReadSources(const std::string& table_name, std::vector<TableSource>& sources,
                                            const RowSlice* slice) const;
  const LoadedTable& Cached(const std::string& cache_key, const std::string& table_name,
                            const RowSlice* slice) const;

  std::shared_ptr<const DataTree> tree_;
  std::string system_, backend_, version_;
  OpenOptions options_;
  std::shared_ptr<Cache> cache_;
};

// What the data roots hold, for `servecast db inspect`.
struct InventoryTable {
  std::string name;
  std::vector<std::string> files;
  std::int64_t rows = -1;  // summed over files; -1 when a file could not be read
  std::string error;       // why the rows are unknown
};
struct InventoryDir {
  std::string system, family, backend, version;
  bool marker_only = false;
  bool has_reuse_yaml = false;
  bool has_collection_meta = false;
  std::vector<ReuseEntry> reuse;
  std::vector<InventoryTable> tables;
};
// Every version directory under the roots (loads each table file to count rows;
// `count_rows = false` skips that).
std::vector<InventoryDir> Inventory(const DataTree& tree, bool count_rows = true);

}  // namespace servecast::perfdb
