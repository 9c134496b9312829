#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "collect/journal.h"
#include "collect/plan.h"
#include "collect/registry.h"

namespace servecast::collect {

// The supported plan of a run (all shards, before --limit), stored in the run
// dir as plan.jsonl so that finalize and `check --plan` know every planned key.
struct PlanFile {
  std::string backend;
  std::string plan_hash;
  bool partial_selection = false;  // --limit / --smoke / --case-filter / --model narrowed the run
  struct Entry {
    std::string op, id, table;
    Params key;             // the table identity: op_name + key columns
    bool selected = false;  // in this run's final list (after shard and --limit)
  };
  std::vector<Entry> entries;
};

void WritePlanFile(const std::string& path, const Registry& registry, const Plan& plan, const PlanOptions& options,
                   const std::vector<Case>& supported);
PlanFile ReadPlanFile(const std::string& path);

// The identity of a row of `table` as text ("op_name|k1|k2..."), from any row
// that has the columns: the case's identity (TableSpec::IdentityColumns).
std::string RowIdentity(const TableSpec& table, const Params& row);
// RowIdentity followed by the part ("...|part|") where the table's rows are the
// parts of one op (TableSpec::RowIdentityColumns): what merged rows are kept apart by.
std::string PartRowIdentity(const TableSpec& table, const Params& row);

struct TableOutcome {
  std::string path;
  std::size_t rows_before = 0, rows_added = 0, rows_after = 0;
  std::size_t planned = 0, missing = 0;
  std::size_t selected = 0, missing_selected = 0;  // of the cases this run set out to collect
  std::size_t rerun_cases = 0;  // finished cases of this table re-run by --rerun-where in this invocation
  // Cases of this table --rerun-where selected that got no new record in this
  // invocation (it was interrupted before reaching them).
  std::size_t rerun_pending = 0;
  // Rows kept from the existing table although their case's newest journal record is
  // not passed (a re-run that now fails or is skipped): not a current measurement.
  std::size_t stale_rows = 0;
  std::string stale_example;  // one such case id and its status
  // Rows of the written table flagged `throttled` (the clock fell below 90% of
  // its start, or the driver reported a slowdown, while the row was timed).
  std::size_t throttled_rows = 0;
  std::string status;  // complete | partial
};

struct FinalizeResult {
  std::string data_dir;
  std::map<std::string, TableOutcome> tables;
};

// A `collect --resume --rerun-where` invocation, for the provenance of the
// tables it re-measured.
struct RerunProvenance {
  std::string where;               // the expression as given
  std::set<std::string> case_ids;  // finished cases it re-ran that got a new record
  std::string before;              // its --rerun-before TIME; empty without one
  // Finished cases it selected for re-running that got no new record (an
  // interrupted invocation); each still has its older record in the journal.
  std::set<std::string> pending_ids;
};

// Writes a folder's collection_meta.yaml atomically, with its header line.
void WriteCollectionMeta(const std::string& path, const YAML::Node& meta);

// Merges the rows of the runs' journals into the tables under
// <out_root>/<system>/<family>/<backend>/<version>/ (newest row per key wins,
// atomic writes) and updates collection_meta.yaml there. Several run dirs are the
// shards of one plan: they must agree on backend, library stack, device, system
// and plan hash. Throws Error when they do not, or when a table's columns differ
// from this run's (e.g. power measured in one and not the other).
// `format` is "csv", "parquet" or "auto": each table in the format of its file
// already in the target folder, a new table as CSV. With "csv" or "parquet", a
// table already stored in the other format there is refused (one format per
// table). Parquet files group their row groups by the table's slice columns.
// With `rerun`, each table that holds re-run or pending cases records
// `rerun_where`, `rerun_before` (when given) and `rerun_cases` in its
// collection_meta.yaml entry, and `rerun_pending` when some are pending; without
// it (or for a table with neither) those fields are removed, since the entry
// describes the latest write of the table.
FinalizeResult Finalize(const std::vector<std::string>& run_dirs, const std::string& out_root,
                        const std::string& format = "auto", const RerunProvenance* rerun = nullptr);

}  // namespace servecast::collect
