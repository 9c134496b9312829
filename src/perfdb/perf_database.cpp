#include "perfdb/perf_database.h"

#include "tables/table_spec.h"

#include <algorithm>
#include <string_view>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <set>
#include <unordered_map>

#include <yaml-cpp/yaml.h>

namespace servecast::perfdb {
namespace {

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool IsMetaOrMetric(const std::string& c) {
  static const std::set<std::string> kExact = {"framework", "version", "device", "kernel_source", "samples",
                                               "rsd",       "timing",  "l2",     "throttled"};
  return kExact.count(c) || StartsWith(c, "latency") || StartsWith(c, "power") || StartsWith(c, "energy") ||
         StartsWith(c, "clock");
}

std::string Join(const std::vector<std::string>& v, const std::string& sep = ", ") {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// Column `name` of `t` or the optional default; throws DataError otherwise.
struct ColumnRef {
  std::optional<std::size_t> index;
  Value fallback;
};

ColumnRef Resolve(const std::string& table_name, const servecast::Table& t, const std::string& name,
                  const std::string& file) {
  if (auto i = t.FindColumn(name)) return {i, {}};
  for (const auto& [key, value] : OptionalKeyDefaults(table_name))
    if (key == name) return {std::nullopt, value};
  std::vector<std::string> present;
  for (const auto& c : t.columns()) present.push_back(c.name);
  throw DataError(file + ": table " + table_name + " has no column '" + name + "'; columns present: " + Join(present));
}

}  // namespace

std::vector<std::string> KeyColumns(const std::string& table_name, const servecast::Table& table) {
  if (const tables::TableSpec* spec = tables::FindTableSpec(table_name))
    return spec->LoadKeyColumns(table.FindColumn("op_name").has_value());
  std::vector<std::string> key;
  for (const auto& c : table.columns())
    if (!IsMetaOrMetric(c.name)) key.push_back(c.name);
  return key;
}

const std::vector<std::pair<std::string, Value>>& OptionalKeyDefaults(const std::string& table_name) {
  static const std::vector<std::pair<std::string, Value>> kNone;
  const tables::TableSpec* spec = tables::FindTableSpec(table_name);
  return spec ? spec->load_key_defaults : kNone;
}

const char* SourceKindName(SourceKind k) {
  switch (k) {
    case SourceKind::kPrimary:
      return "primary";
    case SourceKind::kReuse:
      return "reuse";
    case SourceKind::kOlderSibling:
      return "older";
  }
  return "?";
}

PerfDatabase PerfDatabase::Open(std::vector<std::string> roots, std::string system, std::string backend,
                                std::string version, OpenOptions options) {
  return Open(std::make_shared<const DataTree>(DataTree::Scan(roots)), std::move(system), std::move(backend),
              std::move(version), std::move(options));
}

PerfDatabase PerfDatabase::Open(std::shared_ptr<const DataTree> tree, std::string system, std::string backend,
                                std::string version, OpenOptions options) {
  const std::vector<std::string>& roots = tree->roots();
  auto systems = tree->Systems();
  if (std::find(systems.begin(), systems.end(), system) == systems.end())
    throw MissingDataError("no perf data for system '" + system + "' under [" + Join(roots) +
                           "]; systems with data: " + (systems.empty() ? "none" : Join(systems)));
  auto backends = tree->Backends(system);
  if (std::find(backends.begin(), backends.end(), backend) == backends.end())
    throw MissingDataError("no perf data for backend '" + backend + "' on system '" + system +
                           "'; backends with data: " + Join(backends));
  auto with_tables = tree->BackendVersions(system, backend, /*with_tables_only=*/true);
  if (version.empty()) {
    if (with_tables.empty())
      throw MissingDataError("backend '" + backend + "' on system '" + system +
                             "' has only marker directories (no table files)");
    version = with_tables.back();
  } else {
    auto all = tree->BackendVersions(system, backend, /*with_tables_only=*/false);
    if (std::find(all.begin(), all.end(), version) == all.end())
      throw MissingDataError("no version '" + version + "' of backend '" + backend + "' on system '" + system +
                             "'; versions: " + Join(all));
  }
  PerfDatabase db;
  db.tree_ = std::move(tree);
  db.system_ = std::move(system);
  db.backend_ = std::move(backend);
  db.version_ = std::move(version);
  db.options_ = std::move(options);
  db.cache_ = std::make_shared<Cache>();
  return db;
}

std::vector<std::string> PerfDatabase::TableNames() const {
  std::set<std::string> names;
  for (const auto& d : tree_->dirs()) {
    if (d.system != system_) continue;
    if (d.backend == backend_) {
      for (const auto& [t, files] : d.tables) names.insert(t);
      if (d.version == version_)
        for (const auto& r : d.reuse) names.insert(r.table);
    }
    if (d.family == "comm" && d.backend == "nccl" && d.HasTable("nccl_perf")) names.insert("nccl_perf");
  }
  return {names.begin(), names.end()};
}

const LoadedTable& PerfDatabase::Table(const std::string& table_name) const {
  return Cached(table_name, table_name, nullptr);
}

const LoadedTable& PerfDatabase::Table(const std::string& table_name, const RowSlice& slice) const {
  // '\n' cannot occur in a table name (a file stem listed by discovery); the
  // column's length keeps (column, value) pairs apart.
  return Cached(table_name + "\n" + std::to_string(slice.column.size()) + ":" + slice.column + "=" + slice.value,
                table_name, &slice);
}

const LoadedTable& PerfDatabase::Cached(const std::string& cache_key, const std::string& table_name,
                                        const RowSlice* slice) const {
  Slot* slot = nullptr;
  {
    std::lock_guard<std::mutex> lock(cache_->mu);
    auto& s = cache_->tables[cache_key];
    if (!s) s = std::make_unique<Slot>();
    slot = s.get();  // slots are never removed: the pointer stays valid
  }
  std::lock_guard<std::mutex> lock(slot->mu);
  if (!slot->table) slot->table = Load(table_name, slice);  // a throw leaves the slot empty: the next call retries
  return *slot->table;
}

std::vector<std::pair<std::string, const LoadedTable*>> PerfDatabase::Loaded() const {
  std::vector<std::pair<std::string, Slot*>> slots;
  {
    std::lock_guard<std::mutex> lock(cache_->mu);
    for (const auto& [key, slot] : cache_->tables) slots.emplace_back(key, slot.get());
  }
  std::vector<std::pair<std::string, const LoadedTable*>> out;
  for (const auto& [key, slot] : slots) {
    std::lock_guard<std::mutex> lock(slot->mu);
    if (!slot->table) continue;
    std::string label = key;  // "name" or "name\n<len>:column=value" (see Table(name, slice))
    if (const std::size_t nl = key.find('\n'); nl != std::string::npos)
      label = key.substr(0, nl) + "{" + key.substr(key.find(':', nl) + 1) + "}";
    out.emplace_back(std::move(label), slot->table.get());
  }
  return out;
}

std::vector<std::string> PerfDatabase::SliceValues(const std::string& table_name, const std::string& column) const {
  std::string family;
  std::vector<TableSource> sources = Sources(table_name, family);
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& s : sources)
    for (auto& v : FileSliceValues(s.file, column))
      if (seen.insert(v).second) out.push_back(std::move(v));
  return out;
}

namespace {
bool IsCsv(const std::string& file) { return file.size() >= 4 && file.compare(file.size() - 4, 4, ".csv") == 0; }

// A row the table's declaration refuses (a negative, zero or NaN latency, a key
// out of its range) never reaches an answer: DataError naming the file, the line
// (CSV) or row (Parquet) and the column. For a slice the file is checked whole to
// name the file's row.
void RefuseBadRows(const std::string& table_name, const servecast::Table& t, const std::string& file,
                   bool is_slice) {
  std::optional<tables::RowProblem> p = tables::FirstBadRow(table_name, t);
  // An integer key read as floating point with no value the checks refuse (128.0,
  // 1e30): the CSV re-read with the declared types names the cell.
  if (!p && IsCsv(file))
    if (auto keys = tables::IntegerKeysStoredAsDouble(table_name, t); !keys.empty())
      servecast::Table::ReadCsv(file, keys);
  if (!p) return;
  if (is_slice)
    if (auto whole = tables::FirstBadRow(table_name, LoadTableFile(file))) p = whole;
  const std::string what = "column '" + p->column + "' " + p->what;
  if (IsCsv(file)) {
    const int line = servecast::Table::CsvLineOfRow(file, p->row);
    throw DataError(SourceLocation{file, line, ""}, what + " (table " + table_name + ")", p->expected);
  }
  throw DataError(SourceLocation{file, 0, ""}, "row " + std::to_string(p->row + 1) + ": " + what + " (table " +
                                                   table_name + ")",
                  p->expected);
}
}  // namespace

const servecast::Table& PerfDatabase::ParsedCsv(const std::string& file) const {
  ParsedFile* slot = nullptr;
  {
    std::lock_guard<std::mutex> lock(cache_->mu);
    auto& p = cache_->csv_files[file];
    if (!p) p = std::make_unique<ParsedFile>();
    slot = p.get();
  }
  std::lock_guard<std::mutex> lock(slot->mu);
  if (!slot->table) slot->table = std::make_unique<const servecast::Table>(LoadTableFile(file));
  return *slot->table;
}

servecast::Table PerfDatabase::ReadSlice(const std::string& file, const RowSlice& slice) const {
  if (!IsCsv(file)) return ReadTableFile(file, slice);
  const servecast::Table& t = ParsedCsv(file);
  return t.Select(t.RowsOf(slice, file));
}

std::vector<std::string> PerfDatabase::FileSliceValues(const std::string& file, const std::string& column) const {
  if (!IsCsv(file)) return TableFileColumnValues(file, column);
  return ParsedCsv(file).DistinctText(column, file);
}

std::vector<TableSource> PerfDatabase::Sources(const std::string& table_name, std::string& family) const {
  // The family holding the table: the one whose (backend) versions have it or
  // whose requested-version reuse.yaml declares it.
  family.clear();
  for (const auto& d : tree_->dirs()) {
    if (d.system != system_ || d.backend != backend_) continue;
    bool declared = d.version == version_ && std::any_of(d.reuse.begin(), d.reuse.end(),
                                                         [&](const ReuseEntry& r) { return r.table == table_name; });
    if (d.HasTable(table_name) || declared) {
      family = d.family;
      break;
    }
  }
  std::vector<TableSource> sources;
  auto add = [&](SourceKind kind, const VersionDir& d, const std::string& reason) {
    for (const auto& f : d.tables.at(table_name)) {
      if (std::any_of(sources.begin(), sources.end(), [&](const TableSource& s) { return s.file == f; })) continue;
      TableSource s;
      s.kind = kind;
      s.version = d.version;
      s.backend = d.backend;
      s.file = f;
      s.reason = reason;
      sources.push_back(std::move(s));
    }
  };
  if (!family.empty()) {
    const VersionDir* primary = tree_->Find(system_, family, backend_, version_);
    if (primary && primary->HasTable(table_name)) add(SourceKind::kPrimary, *primary, "");
    // comm tables (custom all-reduce) take no donors and no older versions while
    // the requested version has its own comm table; when it has none, older
    // versions serve it, nearest first (AIC: vllm 0.22.0 and trtllm 1.3.0rc15/rc17
    // read the custom all-reduce of 0.19.0 and 1.3.0rc10, ...).
    const bool comm_fallback = family == "comm" && options_.shared_layer && sources.empty();
    if (comm_fallback) {
      auto versions = tree_->Versions(system_, family, backend_);
      for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
        const VersionDir& d = **it;
        if (VersionDirLess(d.version, version_) && d.HasTable(table_name)) add(SourceKind::kOlderSibling, d, "");
      }
    }
    if (family != "comm" && options_.shared_layer) {
      if (primary) {
        bool declares = std::any_of(primary->reuse.begin(), primary->reuse.end(),
                                    [&](const ReuseEntry& r) { return r.table == table_name; });
        if (declares && !primary->reuse_error.empty()) throw ConfigError(primary->reuse_error);
        for (const auto& r : primary->reuse) {
          if (r.table != table_name) continue;
          const VersionDir* donor = tree_->Find(system_, family, backend_, r.from_version);
          if (!donor || !donor->HasTable(table_name))
            throw ConfigError(r.file + ": reuse of table '" + table_name + "' from version '" + r.from_version +
                              "', but " + system_ + "/" + family + "/" + backend_ + "/" + r.from_version + " has no " +
                              table_name + " file");
          add(SourceKind::kReuse, *donor,
              r.reason + (r.approved_by.empty() ? "" : " (approved by " + r.approved_by + ")"));
        }
      }
      auto versions = tree_->Versions(system_, family, backend_);
      for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
        const VersionDir& d = **it;
        if (VersionDirLess(d.version, version_) && d.HasTable(table_name)) add(SourceKind::kOlderSibling, d, "");
      }
    }
  }
  if (sources.empty() && table_name == "nccl_perf") {
    // NCCL is system-wide: <system>/comm/nccl/<version>.
    auto versions = tree_->Versions(system_, "comm", "nccl");
    const VersionDir* pick = nullptr;
    const VersionDir* newest = nullptr;
    const VersionDir* preferred = nullptr;
    for (const VersionDir* d : versions) {
      if (!d->HasTable("nccl_perf")) continue;
      newest = d;
      if (d->version == options_.preferred_nccl_version) preferred = d;
      if (!options_.nccl_version.empty() && d->version == options_.nccl_version) pick = d;
    }
    if (options_.nccl_version.empty()) {
      pick = preferred;
      if (!pick) {
        // No table for the declared NCCL version: a OneCCL table (Intel XPUs),
        // the declared one or the newest, has the same columns.
        const VersionDir* declared = nullptr;
        for (const VersionDir* d : tree_->Versions(system_, "comm", "oneccl")) {
          if (!d->HasTable("oneccl_perf")) continue;
          pick = d;  // newest so far
          if (d->version == options_.oneccl_version) declared = d;
        }
        if (declared) pick = declared;
        if (pick) {
          family = "comm";
          for (const auto& f : pick->tables.at("oneccl_perf")) {
            TableSource s;
            s.kind = SourceKind::kPrimary;
            s.version = pick->version;
            s.backend = pick->backend;
            s.file = f;
            s.reason = "no NCCL table" +
                       (options_.preferred_nccl_version.empty() ? std::string()
                                                                : " for version " + options_.preferred_nccl_version) +
                       "; OneCCL";
            sources.push_back(std::move(s));
          }
          pick = nullptr;
        } else {
          pick = newest;
        }
      }
    }
    if (pick) {
      family = "comm";
      add(SourceKind::kPrimary, *pick, "");
    }
  }
  if (sources.empty()) {
    std::string where = system_ + "/" + backend_ + "/" + version_;
    auto names = TableNames();
    std::string msg = "no table '" + table_name + "' for " + where;
    if (!family.empty()) {
      std::vector<std::string> have;
      for (const VersionDir* d : tree_->Versions(system_, family, backend_))
        if (d->HasTable(table_name)) have.push_back(d->version);
      msg += " (family '" + family + "' has it only at versions: " + (have.empty() ? "none" : Join(have)) +
             (family == "comm" ? "; comm tables come from older versions only when the requested version has no comm table" : "") + ")";
    }
    msg += "; tables that exist for backend '" + backend_ + "': " + (names.empty() ? "none" : Join(names));
    throw MissingDataError(msg);
  }
  return sources;
}

namespace {

// The steps of PerfDatabase::Load, in order.

// Merged columns: the first source's, in its order, plus the optional key
// columns it lacks.
std::vector<ColumnSpec> MergedColumns(const std::string& table_name, const servecast::Table& first) {
  std::vector<ColumnSpec> cols = first.columns();
  for (const auto& [name, value] : OptionalKeyDefaults(table_name))
    if (!first.FindColumn(name)) cols.push_back({name, TypeOf(value)});
  return cols;
}

// A column that is int in one source and double in another becomes double. A
// non-key column some source lacks (AIC's optional `power`) reads as NaN there
// (an integer column becomes a double column) or as empty text: returns those
// columns' fill values.
std::map<std::string, Value> UnifyColumnTypes(std::vector<ColumnSpec>& cols,
                                              const std::vector<servecast::Table>& loaded,
                                              const std::vector<std::string>& key_columns) {
  std::map<std::string, Value> fill;
  for (auto& c : cols) {
    bool absent = false;
    for (const auto& t : loaded) {
      auto i = t.FindColumn(c.name);
      if (!i) absent = true;
      if (i && t.columns()[*i].type == ValueType::kDouble && c.type == ValueType::kInt64) c.type = ValueType::kDouble;
    }
    const bool is_key = std::find(key_columns.begin(), key_columns.end(), c.name) != key_columns.end();
    if (absent && !is_key) {
      if (c.type == ValueType::kInt64) c.type = ValueType::kDouble;
      fill[c.name] = c.type == ValueType::kString ? Value(std::string()) : Value(std::nan(""));
    }
  }
  return fill;
}

// A slice must be cut along the key, or the merge (first source wins a key)
// would differ from the whole table's.
void RequireKeySlice(const std::string& table_name, const RowSlice* slice,
                     const std::vector<std::string>& key_columns) {
  if (slice && std::find(key_columns.begin(), key_columns.end(), slice->column) == key_columns.end())
    throw Error("table " + table_name + ": slice column '" + slice->column + "' is not a key column (keys: " +
                Join(key_columns) + ")");
}

// The key of every row of every source, compared field by field (strings by
// bytes, numbers as doubles by bits, so an int 32 and a double 32.0 are one key).
class RowKeys {
 public:
  RowKeys(const std::string& table_name, const std::vector<servecast::Table>& loaded,
          const std::vector<TableSource>& sources, const std::vector<std::string>& key_columns)
      : loaded_(loaded), fields_(loaded.size()) {
    for (std::size_t si = 0; si < loaded.size(); ++si) {
      const servecast::Table& t = loaded[si];
      for (const auto& k : key_columns) {
        const ColumnRef ref = Resolve(table_name, t, k, sources[si].file);
        Field f;
        f.index = ref.index;
        f.is_string =
            ref.index ? t.columns()[*ref.index].type == ValueType::kString : TypeOf(ref.fallback) == ValueType::kString;
        if (!ref.index) {
          if (f.is_string)
            f.fallback_string = std::get<std::string>(ref.fallback);
          else
            f.fallback_double = AsDouble(ref.fallback);
        }
        fields_[si].push_back(std::move(f));
      }
    }
  }

  std::uint64_t Hash(std::size_t si, std::size_t r) const {
    std::uint64_t h = 0x9e3779b97f4a7c15ull;
    for (const Field& f : fields_[si]) {
      const std::uint64_t v = f.is_string ? std::hash<std::string_view>{}(Str(si, r, f)) : Bits(si, r, f);
      h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
      h *= 0xff51afd7ed558ccdull;
      h ^= h >> 33;
    }
    return h;
  }

  bool Same(std::size_t sa, std::size_t ra, std::size_t sb, std::size_t rb) const {
    for (std::size_t i = 0; i < fields_[sa].size(); ++i) {
      const Field& fa = fields_[sa][i];
      const Field& fb = fields_[sb][i];
      if (fa.is_string != fb.is_string) return false;
      if (fa.is_string ? Str(sa, ra, fa) != Str(sb, rb, fb) : Bits(sa, ra, fa) != Bits(sb, rb, fb)) return false;
    }
    return true;
  }

 private:
  struct Field {
    std::optional<std::size_t> index;
    bool is_string = false;
    std::string fallback_string;
    double fallback_double = 0;
  };
  std::string_view Str(std::size_t si, std::size_t r, const Field& f) const {
    return f.index ? std::string_view(loaded_[si].GetString(r, *f.index)) : std::string_view(f.fallback_string);
  }
  std::uint64_t Bits(std::size_t si, std::size_t r, const Field& f) const {
    const double d = f.index ? loaded_[si].GetDouble(r, *f.index) : f.fallback_double;
    std::uint64_t b;
    std::memcpy(&b, &d, sizeof b);
    return b;
  }
  const std::vector<servecast::Table>& loaded_;
  std::vector<std::vector<Field>> fields_;
};

// The first key a source repeats: the rows (0-based, in the source as read) of
// its first occurrence and of the repeat.
struct RepeatedKey {
  std::size_t first_row = 0;
  std::size_t row = 0;
};

// Which rows of each source supply a new key (first source, first row wins),
// through an open-addressing table of row hashes: no per-row allocation.
// Counts the rows dropped into `out`; `repeats[si]` is the first key source si
// repeats within itself.
std::vector<std::vector<std::size_t>> FirstRowPerKey(const std::vector<servecast::Table>& loaded, const RowKeys& keys,
                                                     LoadedTable& out,
                                                     std::vector<std::optional<RepeatedKey>>& repeats) {
  struct Slot {
    std::uint64_t hash = 0;
    std::uint32_t source_plus1 = 0;  // 0: empty
    std::uint32_t row = 0;
  };
  std::vector<std::vector<std::size_t>> keep(loaded.size());
  repeats.assign(loaded.size(), std::nullopt);
  std::size_t total_rows = 0;
  for (const auto& t : loaded) total_rows += t.num_rows();
  std::size_t capacity = 16;
  while (capacity < 2 * total_rows) capacity <<= 1;
  std::vector<Slot> slots(capacity);
  for (std::size_t si = 0; si < loaded.size(); ++si) {
    const servecast::Table& t = loaded[si];
    keep[si].reserve(t.num_rows());
    for (std::size_t r = 0; r < t.num_rows(); ++r) {
      const std::uint64_t h = keys.Hash(si, r);
      std::size_t pos = h & (capacity - 1);
      bool duplicate = false;
      while (slots[pos].source_plus1 != 0) {
        const Slot& s = slots[pos];
        if (s.hash == h && keys.Same(s.source_plus1 - 1, s.row, si, r)) {
          const bool same_source = s.source_plus1 - 1 == si;
          ++(same_source ? out.duplicate_rows_dropped : out.shadowed_rows);
          if (same_source && !repeats[si]) repeats[si] = RepeatedKey{s.row, r};
          duplicate = true;
          break;
        }
        pos = (pos + 1) & (capacity - 1);
      }
      if (duplicate) continue;
      slots[pos] = Slot{h, static_cast<std::uint32_t>(si + 1), static_cast<std::uint32_t>(r)};
      keep[si].push_back(r);
    }
  }
  return keep;
}

// The kept rows of every source, in source order, as one table of `cols`; sets
// each source's rows_used and `out.row_source`. The first source is copied
// column-wise when its columns are the merged ones.
servecast::Table CopyKeptRows(const std::string& table_name, const std::vector<ColumnSpec>& cols,
                              const std::map<std::string, Value>& fill, std::vector<servecast::Table>& loaded,
                              const std::vector<std::vector<std::size_t>>& keep, std::vector<TableSource>& sources,
                              LoadedTable& out) {
  servecast::Table merged(cols);
  std::size_t first_source = 0;
  if (loaded.front().columns() == cols) {
    if (keep.front().size() == loaded.front().num_rows())
      merged = std::move(loaded.front());  // every row kept: no copy
    else
      merged = loaded.front().Select(keep.front());
    out.row_source.assign(keep.front().size(), 0);
    sources.front().rows_used = keep.front().size();
    first_source = 1;
  }
  for (std::size_t si = first_source; si < loaded.size(); ++si) {
    const servecast::Table& t = loaded[si];
    std::vector<ColumnRef> refs;
    for (const auto& c : cols) {
      auto f = fill.find(c.name);
      if (f != fill.end() && !t.FindColumn(c.name))
        refs.push_back({std::nullopt, f->second});
      else
        refs.push_back(Resolve(table_name, t, c.name, sources[si].file));
    }
    for (std::size_t r : keep[si]) {
      std::vector<Value> row;
      row.reserve(refs.size());
      for (const auto& ref : refs) row.push_back(ref.index ? t.Get(r, *ref.index) : ref.fallback);
      merged.AppendRow(std::move(row));
      out.row_source.push_back(static_cast<std::uint16_t>(si));
    }
    sources[si].rows_used = keep[si].size();
  }
  return merged;
}

// Whether `file` may repeat a key: only a file whose folder holds a
// collection_meta.yaml written by another collector (one without servecast's
// `servecast:` section, as AIC's: its files repeat thousands of keys with
// different latencies and AIC's loader takes the first). A table servecast
// collected, or one with no meta at all, holds each key once, as `servecast
// check` demands of it.
bool MayRepeatKeys(const std::string& file) {
  const std::filesystem::path meta = std::filesystem::path(file).parent_path() / "collection_meta.yaml";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(meta, ec)) return false;
  try {
    const YAML::Node n = YAML::LoadFile(meta.string());
    return n.IsMap() && !n["servecast"];
  } catch (const YAML::Exception&) {
    return false;  // an unreadable meta is not another collector's
  }
}

std::string RowKeyText(const std::string& table_name, const servecast::Table& t, std::size_t row,
                       const std::vector<std::string>& key_columns, const std::string& file) {
  std::string out;
  for (const auto& k : key_columns) {
    const ColumnRef ref = Resolve(table_name, t, k, file);
    out += (out.empty() ? "" : ", ") + k + "=" + ToString(ref.index ? t.Get(row, *ref.index) : ref.fallback);
  }
  return out;
}

// A key repeated inside one file that must hold each key once is a DataError
// naming the file, both lines (CSV) or rows (Parquet) and the key. Rows of a
// slice are numbered in the whole file.
void RefuseRepeatedKeys(const std::string& table_name, const std::vector<servecast::Table>& loaded,
                        const std::vector<TableSource>& sources, const std::vector<std::string>& key_columns,
                        const std::vector<std::optional<RepeatedKey>>& repeats, const RowSlice* slice) {
  for (std::size_t si = 0; si < loaded.size(); ++si) {
    if (!repeats[si] || MayRepeatKeys(sources[si].file)) continue;
    const std::string& file = sources[si].file;
    std::size_t first = repeats[si]->first_row, again = repeats[si]->row;
    const std::string key = RowKeyText(table_name, loaded[si], again, key_columns, file);
    if (slice) {
      const std::vector<std::size_t> rows = LoadTableFile(file).RowsOf(*slice, file);
      first = rows.at(first);
      again = rows.at(again);
    }
    const bool csv = IsCsv(file);
    const std::string where =
        csv ? "lines " + std::to_string(servecast::Table::CsvLineOfRow(file, first)) + " and " +
                  std::to_string(servecast::Table::CsvLineOfRow(file, again))
            : "rows " + std::to_string(first + 1) + " and " + std::to_string(again + 1);
    throw DataError(SourceLocation{file, csv ? servecast::Table::CsvLineOfRow(file, again) : 0, ""},
                    "duplicate key " + key + " (table " + table_name + "): " + where + " hold it",
                    "each key once in a file (servecast check refuses it too)");
  }
}

}  // namespace

std::vector<servecast::Table> PerfDatabase::ReadSources(const std::string& table_name,
                                                        std::vector<TableSource>& sources,
                                                        const RowSlice* slice) const {
  std::vector<servecast::Table> loaded;
  for (auto& s : sources) {
    loaded.push_back(slice ? ReadSlice(s.file, *slice) : LoadTableFile(s.file));
    RefuseBadRows(table_name, loaded.back(), s.file, slice != nullptr);
    s.rows_read = loaded.back().num_rows();
  }
  return loaded;
}

std::unique_ptr<LoadedTable> PerfDatabase::Load(const std::string& table_name, const RowSlice* slice) const {
  auto out = std::make_unique<LoadedTable>();
  out->name = table_name;
  std::vector<TableSource> sources = Sources(table_name, out->family);
  std::vector<servecast::Table> loaded = ReadSources(table_name, sources, slice);
  std::vector<ColumnSpec> cols = MergedColumns(table_name, loaded.front());
  out->key_columns = KeyColumns(table_name, servecast::Table(cols));
  const std::map<std::string, Value> fill = UnifyColumnTypes(cols, loaded, out->key_columns);
  RequireKeySlice(table_name, slice, out->key_columns);
  const RowKeys keys(table_name, loaded, sources, out->key_columns);
  std::vector<std::optional<RepeatedKey>> repeats;
  const std::vector<std::vector<std::size_t>> keep = FirstRowPerKey(loaded, keys, *out, repeats);
  RefuseRepeatedKeys(table_name, loaded, sources, out->key_columns, repeats, slice);
  out->table = CopyKeptRows(table_name, cols, fill, loaded, keep, sources, *out);
  out->sources = std::move(sources);
  return out;
}

std::vector<InventoryDir> Inventory(const DataTree& tree, bool count_rows) {
  std::vector<InventoryDir> out;
  for (const auto& d : tree.dirs()) {
    InventoryDir inv;
    inv.system = d.system;
    inv.family = d.family;
    inv.backend = d.backend;
    inv.version = d.version;
    inv.marker_only = d.marker_only();
    inv.has_reuse_yaml = d.has_reuse_yaml;
    inv.has_collection_meta = d.has_collection_meta;
    inv.reuse = d.reuse;
    for (const auto& [name, files] : d.tables) {
      InventoryTable t;
      t.name = name;
      t.files = files;
      if (count_rows) {
        try {
          std::int64_t rows = 0;
          for (const auto& f : files) rows += static_cast<std::int64_t>(LoadTableFile(f).num_rows());
          t.rows = rows;
        } catch (const Error& e) {
          t.error = e.what();
        }
      }
      inv.tables.push_back(std::move(t));
    }
    out.push_back(std::move(inv));
  }
  return out;
}

}  // namespace servecast::perfdb
