#include "collect/finalize.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <unordered_map>

#include "core/build_info.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/table_file.h"
#include "core/value.h"
#include "core/yaml_util.h"

namespace servecast::collect {
namespace {

namespace fs = std::filesystem;

int CompareValues(const Value& a, const Value& b) {
  if (IsNumeric(a) && IsNumeric(b)) {
    double x = AsDouble(a), y = AsDouble(b);
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  std::string x = ToString(a), y = ToString(b);
  return x < y ? -1 : (x > y ? 1 : 0);
}

// Reads an existing table and conforms it to the expected columns (types by
// spec); a different column set is an error naming both.
Table LoadExisting(const std::string& path, const std::vector<ColumnSpec>& cols) {
  Table raw = ReadTableFile(path, cols);
  std::vector<std::string> have, want;
  for (const auto& c : raw.columns()) have.push_back(c.name);
  for (const auto& c : cols) want.push_back(c.name);
  std::vector<std::string> hs = have, ws = want;
  std::sort(hs.begin(), hs.end());
  std::sort(ws.begin(), ws.end());
  if (hs != ws) {
    auto join = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
      return s;
    };
    throw DataError(path + ": existing columns (" + join(have) + ") differ from this run's (" + join(want) +
                    "); a table holds one schema (e.g. --measure-power on or off for all its rows): use "
                    "another --out or the same flags");
  }
  Table out(cols);
  for (std::size_t r = 0; r < raw.num_rows(); ++r) {
    std::vector<Value> row;
    for (const auto& c : cols) {
      Value v = raw.Get(r, raw.ColumnIndex(c.name));
      row.push_back(std::move(v));
    }
    out.AppendRow(std::move(row));
  }
  return out;
}

Params RowParams(const Table& t, std::size_t r) {
  Params p;
  for (std::size_t c = 0; c < t.num_columns(); ++c) p.Set(t.columns()[c].name, t.Get(r, c));
  return p;
}

// The journals and plans of the run dirs (the shards of one plan).
struct Shards {
  JournalHeader header;  // the first run dir's
  std::vector<PlanFile> plans;
  std::unordered_map<std::string, JournalRecord> latest;  // id -> newest record
  std::unordered_map<std::string, std::string> commit_of;  // id -> commit of the call that wrote its newest record
  std::set<int> seen;                                     // shard indices
  int count = 1;
};

Shards ReadShards(const std::vector<std::string>& run_dirs) {
  Shards s;
  for (std::size_t i = 0; i < run_dirs.size(); ++i) {
    const std::string& dir = run_dirs[i];
    JournalContents jc = ReadJournal(dir + "/journal.jsonl");
    if (i == 0) {
      s.header = jc.header;
      s.count = s.header.shard_count;
    } else {
      JournalHeader h = jc.header;
      h.shard_index = s.header.shard_index;  // shards differ only in their index
      std::string diff = s.header.Mismatch(h);
      if (!diff.empty())
        throw UsageError("run dirs " + run_dirs[0] + " and " + dir + " are not shards of one plan: " + diff);
    }
    if (!s.seen.insert(jc.header.shard_index).second)
      throw UsageError("two run dirs hold shard " + std::to_string(jc.header.shard_index) + "/" +
                       std::to_string(s.count) + "; pass each shard once");
    // The calls that wrote the journal: its session lines, or (journals written
    // before those existed) the calls its collector.log names.
    std::vector<JournalSession> sessions = jc.sessions;
    if (sessions.size() == 1)
      if (std::vector<JournalSession> logged = SessionsFromLog(dir + "/collector.log"); !logged.empty())
        sessions = std::move(logged);
    for (auto& r : jc.records) {
      s.commit_of[r.id] = SessionOf(sessions, r.at).servecast_commit;
      s.latest[r.id] = std::move(r);
    }
    s.plans.push_back(ReadPlanFile(dir + "/plan.jsonl"));
  }
  return s;
}

// Planned keys per table (the union over shards' copies of the full plan) and op -> table.
struct PlannedKeys {
  std::map<std::string, std::map<std::string, const PlanFile::Entry*>> by_table;  // table -> identity -> entry
  std::map<std::string, std::string> op_table;
  bool partial_selection = false;
};

PlannedKeys CollectPlannedKeys(const std::vector<PlanFile>& plans) {
  PlannedKeys pk;
  for (const auto& pf : plans) {
    pk.partial_selection = pk.partial_selection || pf.partial_selection;
    for (const auto& e : pf.entries) {
      const TableSpec* spec = FindTableSpec(e.table);
      if (!spec) throw DataError("plan names unknown table '" + e.table + "'");
      const PlanFile::Entry*& slot = pk.by_table[e.table][RowIdentity(*spec, e.key)];
      if (!slot || e.selected) slot = &e;  // a shard that selected the case speaks for it
      pk.op_table[e.op] = e.table;
    }
  }
  return pk;
}

// The newest records per table: the rows of the passed ones, case counts by
// status, and the identities of the cases that did not pass.
struct RecordsByTable {
  std::map<std::string, std::vector<Params>> new_rows;
  std::map<std::string, std::map<std::string, std::size_t>> counts;  // table -> status -> n
  // Cases whose newest record is not passed: table -> (row identity, record).
  std::map<std::string, std::vector<std::pair<std::string, const JournalRecord*>>> not_passed;
  // Rows of passed records per table and collector commit, with the times of the
  // first and last of them.
  struct ByCommit {
    std::size_t rows = 0;
    std::string first_at, last_at;
  };
  std::map<std::string, std::map<std::string, ByCommit>> by_commit;
  bool with_power = false;
};

RecordsByTable SortRecords(const std::unordered_map<std::string, JournalRecord>& latest,
                           const std::unordered_map<std::string, std::string>& commit_of,
                           const std::map<std::string, std::string>& op_table) {
  RecordsByTable out;
  bool power_known = false;
  for (const auto& [id, r] : latest) {
    auto it = op_table.find(r.op);
    if (it == op_table.end()) throw DataError("journal case '" + id + "' belongs to no op of the plan");
    out.counts[it->second][std::string(ToString(r.status))]++;
    if (r.status != Disposition::kPassed) {
      const TableSpec* spec = FindTableSpec(it->second);
      Params key = r.params;
      key.Set("op_name", r.op);
      bool keyed = true;
      for (const auto& name : spec->IdentityColumns()) keyed = keyed && key.Has(name);
      if (keyed) out.not_passed[it->second].emplace_back(RowIdentity(*spec, key), &r);
      continue;
    }
    for (const auto& row : r.rows) {
      bool p = row.Has("power");
      if (power_known && p != out.with_power) throw DataError("journal mixes rows with and without power columns");
      out.with_power = p;
      power_known = true;
      out.new_rows[it->second].push_back(row);
    }
    if (!r.rows.empty()) {
      auto c = commit_of.find(id);
      RecordsByTable::ByCommit& b = out.by_commit[it->second][c == commit_of.end() ? std::string("?") : c->second];
      b.rows += r.rows.size();
      if (b.first_at.empty() || r.at < b.first_at) b.first_at = r.at;
      if (r.at > b.last_at) b.last_at = r.at;
    }
  }
  return out;
}

// Cases of `ids` per table, through the op of the case's newest record (a
// pending rerun case still has the record it had before the rerun).
std::map<std::string, std::size_t> CountByTable(const std::set<std::string>& ids,
                                                const std::unordered_map<std::string, JournalRecord>& latest,
                                                const std::map<std::string, std::string>& op_table) {
  std::map<std::string, std::size_t> by_table;
  for (const auto& id : ids) {
    auto r = latest.find(id);
    if (r == latest.end()) continue;
    auto t = op_table.find(r->second.op);
    if (t != op_table.end()) ++by_table[t->second];
  }
  return by_table;
}

// Where a table is written: its version folder, format and path. "auto" keeps
// the format the table is already kept in (the bundled tables are Parquet); a
// copy in the other format is refused.
struct TableTarget {
  std::string dir, format, path;
};

TableTarget ResolveTableTarget(const std::string& out_root, const JournalHeader& header, const TableSpec& spec,
                               const std::string& table_name, const std::string& format) {
  TableTarget t;
  t.dir = out_root + "/" + header.system + "/" + spec.family + "/" + header.backend + "/" + header.version;
  t.format = format;
  if (format == "auto") t.format = PathExists(t.dir + "/" + table_name + ".parquet") ? "parquet" : "csv";
  t.path = t.dir + "/" + table_name + "." + t.format;
  std::string other = t.dir + "/" + table_name + (t.format == "csv" ? ".parquet" : ".csv");
  if (PathExists(other) && format == "auto")
    throw UsageError(t.path + " and " + other +
                     " both hold this table; keep one (a data folder holds a table in one "
                     "format)");
  if (PathExists(other))
    throw UsageError(other + " already holds this table; collect with --format " +
                     (t.format == "csv" ? "parquet" : "csv") + " or convert it with `servecast db convert`");
  return t;
}

// The existing table's rows by identity (with the part, PartRowIdentity),
// overwritten by the new rows (newest row per key wins); counts rows_before and
// rows_added. `cases` gets the case identity (RowIdentity) of every merged row.
std::map<std::string, std::vector<Value>> MergeRows(const TableSpec& spec, const std::vector<ColumnSpec>& cols,
                                                    const std::string& path, const std::vector<Params>& new_rows,
                                                    TableOutcome& outcome, std::set<std::string>& cases) {
  std::map<std::string, std::vector<Value>> by_key;
  if (PathExists(path)) {
    Table old = LoadExisting(path, cols);
    outcome.rows_before = old.num_rows();
    for (std::size_t r = 0; r < old.num_rows(); ++r) {
      const Params row = RowParams(old, r);
      by_key[PartRowIdentity(spec, row)] = old.Row(r);
      cases.insert(RowIdentity(spec, row));
    }
  }
  for (const auto& row : new_rows) {
    std::vector<Value> cells;
    for (const auto& c : cols) {
      const Value& v = row.Get(c.name);
      if (c.type == ValueType::kDouble && TypeOf(v) == ValueType::kInt64)
        cells.emplace_back(static_cast<double>(std::get<std::int64_t>(v)));
      else
        cells.push_back(v);
    }
    by_key[PartRowIdentity(spec, row)] = std::move(cells);
    cases.insert(RowIdentity(spec, row));
    ++outcome.rows_added;
  }
  return by_key;
}

// A row kept from the existing table whose case's newest record here is not
// passed (e.g. a re-run that now fails) is not this run's measurement: say so.
void NoteStaleRows(const std::string& table_name, const std::set<std::string>& cases,
                   const std::vector<std::pair<std::string, const JournalRecord*>>& not_passed, TableOutcome& outcome) {
  std::size_t stale = 0;
  const JournalRecord* example = nullptr;
  for (const auto& [identity, r] : not_passed)
    if (cases.count(identity)) {
      ++stale;
      if (!example || r->id < example->id) example = r;
    }
  if (stale > 0)
    log::Warn(table_name + ": " + std::to_string(stale) +
              " row(s) kept from the existing table although the newest journal record of their case is not "
              "passed (e.g. " +
              example->id + ": " + std::string(ToString(example->status)) +
              "); the run's summary counts those cases by that record");
  outcome.stale_rows = stale;
  if (example) outcome.stale_example = example->id + ": " + std::string(ToString(example->status));
}

// The merged rows sorted by identity, so that the committed CSV diffs cleanly.
Table SortedTable(const TableSpec& spec, const std::vector<ColumnSpec>& cols,
                  std::map<std::string, std::vector<Value>>& by_key) {
  std::vector<std::vector<Value>> rows;
  for (auto& [_, cells] : by_key) rows.push_back(std::move(cells));
  std::vector<std::size_t> id_cols;
  for (const auto& name : spec.RowIdentityColumns())
    for (std::size_t c = 0; c < cols.size(); ++c)
      if (cols[c].name == name) id_cols.push_back(c);
  std::sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
    for (std::size_t c : id_cols)
      if (int cmp = CompareValues(a[c], b[c]); cmp != 0) return cmp < 0;
    return false;
  });
  Table merged(cols);
  for (auto& cells : rows) merged.AppendRow(std::move(cells));
  return merged;
}

// Planned keys the table lacks, over the whole plan and over this run's selection.
void CountMissing(const std::map<std::string, const PlanFile::Entry*>& keys, const std::set<std::string>& cases,
                  TableOutcome& outcome) {
  outcome.planned = keys.size();
  for (const auto& [k, entry] : keys) {
    bool have = cases.count(k) > 0;
    if (!have) ++outcome.missing;
    if (entry->selected) {
      ++outcome.selected;
      if (!have) ++outcome.missing_selected;
    }
  }
}

// The share of the written rows flagged throttled, rounded to 0.001 (so a meta
// diffs cleanly run to run); 0 for an empty table. Written with FormatDouble (the
// shortest text that reads back as the rounded value: 0.279, not yaml-cpp's
// 17-digit 0.27900000000000003).
double ThrottledShare(const TableOutcome& outcome) {
  if (outcome.rows_after == 0) return 0;
  return std::round(1000.0 * static_cast<double>(outcome.throttled_rows) / static_cast<double>(outcome.rows_after)) /
         1000.0;
}

// Rows of `t` whose `throttled` column is set (0 when the table has none).
std::size_t CountThrottled(const Table& t) {
  const auto col = t.FindColumn("throttled");
  if (!col) return 0;
  std::size_t n = 0;
  for (std::size_t r = 0; r < t.num_rows(); ++r) n += t.GetDouble(r, *col) != 0;
  return n;
}

// collection_meta.yaml beside the tables: merges this table's entry.
void UpdateCollectionMeta(const TableTarget& target, const std::string& table_name, const Shards& shards,
                          bool partial_selection, const std::map<std::string, std::size_t>& counts,
                          const std::map<std::string, RecordsByTable::ByCommit>& by_commit,
                          const TableOutcome& outcome, const RerunProvenance* rerun) {
  const JournalHeader& header = shards.header;
  std::string meta_path = target.dir + "/collection_meta.yaml";
  YAML::Node meta = PathExists(meta_path) ? LoadYamlFile(meta_path) : YAML::Node(YAML::NodeType::Map);
  meta["schema_version"] = 1;
  meta["servecast"]["version"] = std::string(BuildVersion());
  meta["servecast"]["commit"] = std::string(BuildCommit());
  meta["backend"] = header.backend;
  meta["backend_version"] = header.version;
  meta["device"] = header.device;
  meta["arch"] = header.arch;
  meta["sm"] = header.sm;
  meta["system"] = header.system;
  YAML::Node t = meta["tables"][table_name];
  // Rows merged from another run (another plan) keep that run's provenance: its entry
  // moves to `earlier_runs` before this run's replaces it, so a table grown over
  // several plans names every collector commit and plan that wrote its rows.
  if (t["plan_hash"] && t["plan_hash"].as<std::string>() != "sha256:" + header.plan_hash) {
    YAML::Node earlier;
    for (const char* key : {"plan_hash", "collector_commit", "collected_at", "collected_by", "planned", "rows",
                            "selection", "status", "converted", "rerun_where", "rerun_cases"})
      if (t[key]) earlier[key] = YAML::Clone(t[key]);
    YAML::Node list = t["earlier_runs"] ? t["earlier_runs"] : YAML::Node(YAML::NodeType::Sequence);
    list.push_back(earlier);
    t["earlier_runs"] = list;
  }
  t["file"] = table_name + "." + target.format;
  t.remove("converted");  // the file is this write's, not a conversion's
  // Which collector wrote the rows: the commit of every call whose records the
  // table holds (a resumed run can span several), not the commit finalizing it.
  std::string newest_commit, newest_at;
  for (const auto& [commit, b] : by_commit)
    if (b.last_at > newest_at) newest_at = b.last_at, newest_commit = commit;
  t["collected_at"] = newest_at.empty() ? UtcNow() : newest_at;
  t["collector_commit"] = newest_commit.empty() ? std::string(BuildCommit()) : newest_commit;
  t.remove("collected_by");
  if (by_commit.size() > 1) {
    std::vector<std::pair<std::string, const RecordsByTable::ByCommit*>> calls;
    for (const auto& [commit, b] : by_commit) calls.emplace_back(commit, &b);
    std::sort(calls.begin(), calls.end(), [](const auto& a, const auto& b) { return a.second->first_at < b.second->first_at; });
    YAML::Node list(YAML::NodeType::Sequence);
    for (const auto& [commit, b] : calls) {
      YAML::Node e;
      e["commit"] = commit;
      e["rows"] = static_cast<long long>(b->rows);
      e["first_at"] = b->first_at;
      e["last_at"] = b->last_at;
      list.push_back(e);
    }
    t["collected_by"] = list;
  }
  if (std::string(BuildCommit()) != t["collector_commit"].as<std::string>())
    t["finalized_by"] = std::string(BuildCommit());
  else
    t.remove("finalized_by");
  t["plan_hash"] = "sha256:" + header.plan_hash;
  t["shards"] = std::to_string(shards.seen.size()) + "/" + std::to_string(shards.count);
  t["planned"] = static_cast<long long>(outcome.planned);
  t["rows"] = static_cast<long long>(outcome.rows_after);
  t["missing"] = static_cast<long long>(outcome.missing);
  t["selection"] = partial_selection ? "narrowed" : "full";
  t["selected"] = static_cast<long long>(outcome.selected);
  t["missing_selected"] = static_cast<long long>(outcome.missing_selected);
  YAML::Node cases;
  for (const auto& [status, n] : counts) cases[status] = static_cast<long long>(n);
  t["cases"] = cases;
  t["status"] = outcome.status;
  // How much of the table was timed at a reduced clock: a sustained-serving
  // estimate built on throttled rows reads slower-clocked kernels.
  t["throttled_rows"] = static_cast<long long>(outcome.throttled_rows);
  t["throttled_share"] = FormatDouble(ThrottledShare(outcome));
  if (partial_selection && outcome.status == "partial")
    t["note"] = "the run was narrowed by --limit/--smoke/--model/--case-filter; the table does not cover the full plan";
  else
    t.remove("note");
  // A table with cases still to re-run names the rerun even when the
  // invocation re-ran none of them (interrupted before it reached them).
  if (outcome.rerun_cases > 0 || outcome.rerun_pending > 0) {
    t["rerun_where"] = rerun->where;
    if (!rerun->before.empty())
      t["rerun_before"] = rerun->before;
    else
      t.remove("rerun_before");
    t["rerun_cases"] = static_cast<long long>(outcome.rerun_cases);
  } else {
    t.remove("rerun_where");
    t.remove("rerun_before");
    t.remove("rerun_cases");
  }
  if (outcome.rerun_pending > 0)
    t["rerun_pending"] = static_cast<long long>(outcome.rerun_pending);
  else
    t.remove("rerun_pending");
  // Kept rows whose case's newest record is not passed stay visible in the meta
  // (the log warning alone is lost with the terminal).
  if (outcome.stale_rows > 0) {
    t["stale_rows"] = static_cast<long long>(outcome.stale_rows);
    t["stale_example"] = outcome.stale_example;
  } else {
    t.remove("stale_rows");
    t.remove("stale_example");
  }
  WriteCollectionMeta(meta_path, meta);
}

}  // namespace

std::string RowIdentity(const TableSpec& table, const Params& row) {
  std::string key;
  for (const auto& name : table.IdentityColumns()) {
    key += ToString(row.Get(name));
    key += '|';
  }
  return key;
}

std::string PartRowIdentity(const TableSpec& table, const Params& row) {
  std::string key = RowIdentity(table, row);
  if (table.estimator && !table.estimator->parts.empty()) {
    key += ToString(row.Get(table.estimator->parts));
    key += '|';
  }
  return key;
}

void WritePlanFile(const std::string& path, const Registry& registry, const Plan& plan, const PlanOptions& opt,
                   const std::vector<Case>& supported) {
  std::string out;
  bool partial = opt.limit >= 0 || !opt.models.empty() || !opt.case_filters.empty();
  Json head{{"type", "plan"}, {"backend", plan.backend}, {"plan_hash", plan.plan_hash}, {"partial_selection", partial}};
  out += head.dump() + "\n";
  std::set<std::string> chosen;
  for (const auto& c : plan.cases) chosen.insert(c.id);
  for (const auto& c : supported) {
    const Op* op = registry.FindOp(plan.backend, c.op);
    Params key;
    key.Set("op_name", c.op);
    for (const auto& col : op->table().key_columns) key.Set(col.name, c.params.Get(col.name));
    Json j{{"op", c.op}, {"id", c.id}, {"table", op->table().name}, {"key", ParamsToJson(key)},
            {"selected", chosen.count(c.id) > 0}};
    out += j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  }
  WriteFileAtomic(path, out);
}

PlanFile ReadPlanFile(const std::string& path) {
  std::string text = ReadFile(path);
  PlanFile pf;
  std::size_t pos = 0;
  int line = 0;
  while (pos < text.size()) {
    ++line;
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string where = path + ":" + std::to_string(line);
    try {
      Json j = Json::parse(std::string_view(text.data() + pos, nl - pos));
      if (line == 1) {
        if (j.at("type") != "plan") throw DataError(where + ": expected the plan header");
        pf.backend = j.at("backend").get<std::string>();
        pf.plan_hash = j.at("plan_hash").get<std::string>();
        pf.partial_selection = j.value("partial_selection", false);
      } else {
        PlanFile::Entry e;
        e.op = j.at("op").get<std::string>();
        e.id = j.at("id").get<std::string>();
        e.table = j.at("table").get<std::string>();
        e.key = ParamsFromJson(j.at("key"), where);
        e.selected = j.value("selected", false);
        pf.entries.push_back(std::move(e));
      }
    } catch (const Json::exception& e) {
      throw DataError(where + ": malformed plan line (" + std::string(e.what()) + "); expected JSON written by servecast");
    }
    pos = nl + 1;
  }
  if (line == 0) throw DataError(path + ": empty plan file");
  return pf;
}

void WriteCollectionMeta(const std::string& path, const YAML::Node& meta) {
  YAML::Emitter em;
  em << meta;
  WriteFileAtomic(path, std::string("# Provenance of the perf tables in this folder; written by servecast.\n") +
                            em.c_str() + "\n");
}

FinalizeResult Finalize(const std::vector<std::string>& run_dirs, const std::string& out_root,
                        const std::string& format, const RerunProvenance* rerun) {
  if (format != "csv" && format != "parquet" && format != "auto")
    throw UsageError("format '" + format + "'; expected csv, parquet or auto");
  if (run_dirs.empty()) throw UsageError("finalize needs at least one run dir");
  const Shards shards = ReadShards(run_dirs);
  const PlannedKeys planned = CollectPlannedKeys(shards.plans);
  RecordsByTable records = SortRecords(shards.latest, shards.commit_of, planned.op_table);
  std::map<std::string, std::size_t> rerun_by_table, pending_by_table;
  if (rerun) {
    rerun_by_table = CountByTable(rerun->case_ids, shards.latest, planned.op_table);
    pending_by_table = CountByTable(rerun->pending_ids, shards.latest, planned.op_table);
  }

  FinalizeResult result;
  for (const auto& [table_name, keys] : planned.by_table) {
    const TableSpec* spec = FindTableSpec(table_name);
    const TableTarget target = ResolveTableTarget(out_root, shards.header, *spec, table_name, format);
    result.data_dir = out_root + "/" + shards.header.system;
    std::vector<ColumnSpec> cols = spec->AllColumns(records.with_power);
    TableOutcome outcome;
    outcome.path = target.path;
    std::set<std::string> cases;
    auto by_key = MergeRows(*spec, cols, target.path, records.new_rows[table_name], outcome, cases);
    NoteStaleRows(table_name, cases, records.not_passed[table_name], outcome);
    outcome.rerun_cases = rerun_by_table[table_name];
    outcome.rerun_pending = pending_by_table[table_name];
    CountMissing(keys, cases, outcome);
    Table merged = SortedTable(*spec, cols, by_key);
    outcome.rows_after = merged.num_rows();
    outcome.throttled_rows = CountThrottled(merged);
    outcome.status = outcome.missing == 0 ? "complete" : "partial";
    if (outcome.rows_after == 0) {
      log::Warn(table_name + ": no rows collected; table not written");
      outcome.status = "partial";
      result.tables[table_name] = outcome;
      continue;
    }
    WriteTableFile(merged, target.path, spec->WriteOptions());
    result.tables[table_name] = outcome;
    UpdateCollectionMeta(target, table_name, shards, planned.partial_selection, records.counts[table_name],
                         records.by_commit[table_name], outcome, rerun);
  }
  return result;
}

}  // namespace servecast::collect
