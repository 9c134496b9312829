#include "collect/check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "collect/finalize.h"
#include "collect/table_spec.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/table_file.h"
#include "core/yaml_util.h"
#include "system/system_spec.h"
#include "tables/table_spec.h"

namespace servecast::collect {
namespace {

namespace fs = std::filesystem;

struct Report {
  Json tables = Json::array();
  std::size_t hard_failures = 0;
  std::size_t warnings = 0;
};

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  auto lo = static_cast<std::size_t>(pos);
  auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

Params RowKey(const Table& t, std::size_t r, const std::vector<std::size_t>& cols) {
  Params p;
  for (std::size_t c : cols) p.Set(t.columns()[c].name, t.Get(r, c));
  return p;
}

std::string KeyText(const Params& p) { return p.Canonical(); }

// Finds the table to compare against: one table file, or <dir>/**/<table>.{csv,parquet}.
std::string FindAgainst(const std::string& against, const std::string& table) {
  if (fs::is_regular_file(against)) return against;
  if (!fs::is_directory(against)) return "";
  for (const auto& e : fs::recursive_directory_iterator(against))
    if (e.is_regular_file() && (e.path().filename() == table + ".csv" || e.path().filename() == table + ".parquet"))
      return e.path().string();
  return "";
}

Json CompareAgainst(const Table& ours, const TableSpec& spec, const std::string& path) {
  Table theirs = ReadTableFile(path);
  // Shared key columns: the spec's keys both tables have (AIC tables lack some of ours, e.g. op_name may differ).
  std::vector<std::string> keys;
  for (const auto& c : spec.key_columns)
    if (ours.FindColumn(c.name) && theirs.FindColumn(c.name)) keys.push_back(c.name);
  // Tables whose rows differ by op_name under the same key columns.
  if ((spec.name == "elementwise_perf" || spec.name == "nccl_perf") && theirs.FindColumn("op_name"))
    keys.insert(keys.begin(), "op_name");
  // A table whose rows are the parts of one op (gdn_perf: the convolution and the
  // scan, named differently by each collector) compares the sums of a key's parts,
  // one of each part, as the estimator reads it.
  const std::string parts = spec.estimator ? spec.estimator->parts : std::string();
  auto index = [&](const Table& t) {
    std::unordered_map<std::string, double> m;
    std::unordered_set<std::string> parts_seen;
    std::size_t lat = t.ColumnIndex("latency");
    const std::optional<std::size_t> part_col = parts.empty() ? std::nullopt : t.FindColumn(parts);
    for (std::size_t r = 0; r < t.num_rows(); ++r) {
      std::string k;
      for (const auto& name : keys) {
        Value v = t.Get(r, t.ColumnIndex(name));
        k += (IsNumeric(v) ? FormatDouble(AsDouble(v)) : ToString(v)) + "|";
      }
      if (!part_col) {
        m.emplace(k, t.GetDouble(r, lat));  // first wins, as the loaders do
      } else if (parts_seen.insert(k + ToString(t.Get(r, *part_col))).second) {
        m[k] += t.GetDouble(r, lat);
      }
    }
    return m;
  };
  auto a = index(ours), b = index(theirs);
  std::vector<double> ratios;
  std::size_t only_ours = 0;
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it == b.end()) ++only_ours;
    else if (it->second > 0) ratios.push_back(v / it->second);
  }
  Json j{{"against", path}, {"key_columns", keys}, {"shared_keys", ratios.size()}, {"only_ours", only_ours},
         {"only_theirs", b.size() - ratios.size()}};
  if (!ratios.empty()) {
    j["ratio_median"] = Quantile(ratios, 0.5);
    j["ratio_p10"] = Quantile(ratios, 0.1);
    j["ratio_p90"] = Quantile(ratios, 0.9);
  }
  return j;
}

void CheckVersionDir(const std::string& dir, const CheckOptions& opt, const PlanFile* plan, Report& rep) {
  std::string meta_path = dir + "/collection_meta.yaml";
  YamlReader meta(meta_path, LoadYamlFile(meta_path));
  std::string system_name = meta.RequiredString("system");
  systems::SystemSpec sys = systems::LoadSystemByName(opt.systems_dir, system_name);
  YAML::Node tables = meta.node()["tables"];
  if (!tables.IsMap() || tables.size() == 0) {
    rep.hard_failures++;
    rep.tables.push_back(Json{{"dir", dir}, {"errors", Json::array({"collection_meta.yaml lists no tables"})}});
    return;
  }
  // Every CSV table in the folder must be listed in the provenance.
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!IsTableFile(e.path().string())) continue;
    std::string stem = e.path().stem().string();
    if (!tables[stem]) {
      rep.hard_failures++;
      rep.tables.push_back(Json{{"table", stem}, {"path", e.path().string()},
                                {"errors", Json::array({"no entry in collection_meta.yaml (data without provenance)"})}});
    }
  }
  for (const auto& kv : tables) {
    std::string name = kv.first.as<std::string>();
    YamlReader tmeta(meta_path, kv.second, "tables." + name);
    Json tj{{"table", name}, {"dir", dir}};
    Json errors = Json::array(), warnings = Json::array();
    const TableSpec* spec = FindTableSpec(name);
    std::string fallback = PathExists(dir + "/" + name + ".parquet") ? name + ".parquet" : name + ".csv";
    std::string path = dir + "/" + tmeta.OptionalString("file", fallback);
    tj["path"] = path;
    if (!spec) errors.push_back("unknown table '" + name + "'");
    else if (!PathExists(path)) errors.push_back("table file is missing");
    if (!errors.empty()) {
      tj["errors"] = errors;
      rep.hard_failures += errors.size();
      rep.tables.push_back(tj);
      continue;
    }
    Table t;
    try {
      t = ReadTableFile(path);
    } catch (const Error& e) {
      errors.push_back(std::string("does not parse: ") + e.what());
    }
    std::vector<std::string> id_cols = spec->IdentityColumns();
    if (errors.empty()) {
      std::vector<std::string> required = {"framework", "version", "device", "op_name", "kernel_source", "latency"};
      for (const auto& c : spec->key_columns) required.push_back(c.name);
      for (const auto& c : required)
        if (!t.FindColumn(c)) errors.push_back("missing column '" + c + "'");
      if (t.num_rows() == 0) errors.push_back("table is empty");
    }
    // Key values the declaration refuses (type, whole number, minimum); latency is counted below.
    if (errors.empty()) {
      if (auto p = tables::FirstBadRow(name, t); p && p->column != "latency") {
        const bool csv = fs::path(path).extension() == ".csv";
        const std::string where = csv ? "line " + std::to_string(Table::CsvLineOfRow(path, p->row))
                                      : "row " + std::to_string(p->row + 1);
        errors.push_back(where + ": column '" + p->column + "' " + p->what + "; expected " + p->expected);
      }
    }
    // An integer key read as floating point that no check above refuses (128.0, 1e30).
    if (errors.empty() && fs::path(path).extension() == ".csv")
      if (auto keys = tables::IntegerKeysStoredAsDouble(name, t); !keys.empty()) try {
          Table::ReadCsv(path, keys);
        } catch (const Error& e) {
          errors.push_back(std::string("does not parse: ") + e.what());
        }
    if (errors.empty()) {
      tj["rows"] = t.num_rows();
      std::size_t lat = t.ColumnIndex("latency");
      // Duplicates by the row identity (with the part where a case writes one row
      // per part); planned cases by the case identity.
      std::vector<std::size_t> idc, case_idc;
      for (const auto& n : spec->RowIdentityColumns()) idc.push_back(t.ColumnIndex(n));
      for (const auto& n : id_cols) case_idc.push_back(t.ColumnIndex(n));
      std::vector<std::size_t> key_cols;
      for (const auto& c : spec->key_columns) key_cols.push_back(t.ColumnIndex(c.name));
      key_cols.push_back(t.ColumnIndex("op_name"));
      // The row's kernel says what a key alone cannot (moe_perf: ",nongated" experts
      // run two projections, not three): the cost reads it where the table has it.
      if (auto ks = t.FindColumn("kernel_source")) key_cols.push_back(*ks);
      std::unordered_map<std::string, std::size_t> seen;
      std::unordered_set<std::string> cases_seen;
      std::size_t bad_latency = 0, dups = 0, beats = 0, noisy = 0, throttled = 0;
      Json examples = Json::array();
      auto rsd_col = t.FindColumn("rsd");
      auto thr_col = t.FindColumn("throttled");
      auto clock_col = t.FindColumn("clock_mhz_after");
      std::vector<double> throttled_clocks;  // clock_mhz_after of the throttled rows
      // Index of a string `l2` column (cold / warm), or npos when the table has none.
      std::size_t l2_col = std::string::npos;
      if (auto c = t.FindColumn("l2"); c && t.columns()[*c].type == ValueType::kString) l2_col = *c;
      for (std::size_t r = 0; r < t.num_rows(); ++r) {
        double l = t.GetDouble(r, lat);
        Params key = RowKey(t, r, idc);
        std::string kt = KeyText(key);
        if (!std::isfinite(l) || l < 0 || (l == 0 && !spec->zero_latency_legal)) {
          if (bad_latency++ < 5) examples.push_back("row " + std::to_string(r + 2) + " (" + kt + "): latency " + FormatDouble(l));
        }
        cases_seen.insert(KeyText(RowKey(t, r, case_idc)));
        if (!seen.emplace(kt, r).second) {
          if (dups++ < 5) examples.push_back("row " + std::to_string(r + 2) + ": duplicate key " + kt);
        }
        // No row beats physics: latency >= max(FLOPs / peak, bytes / bandwidth).
        try {
          OpCost cost = spec->cost(RowKey(t, r, key_cols));
          double t_compute = cost.flops > 0 ? cost.flops / systems::PeakFlops(sys, cost.compute_dtype) : 0;
          // A warm-cache row whose working set fits in L2 may outrun DRAM; bound
          // only rows that had to stream from memory.
          bool cached = cost.bytes <= sys.gpu.l2_bytes && !(l2_col != std::string::npos && t.GetString(r, l2_col) == "cold");
          double t_memory = cached ? 0 : cost.bytes / sys.gpu.mem_bw_bytes_per_s;
          double bound_ms = 1e3 * std::max(t_compute, t_memory);
          if (l > 0 && l < bound_ms * (1 - opt.physics_tolerance)) {
            if (beats++ < 5)
              examples.push_back("row " + std::to_string(r + 2) + " (" + kt + "): " + FormatDouble(l) +
                                 " ms beats the speed-of-light bound " + FormatDouble(bound_ms) + " ms of " + system_name);
          }
        } catch (const Error& e) {
          errors.push_back(std::string("cannot bound row ") + std::to_string(r + 2) + ": " + e.what());
          break;
        }
        if (rsd_col && t.GetDouble(r, *rsd_col) > opt.rsd_warn) ++noisy;
        if (thr_col && t.GetDouble(r, *thr_col) != 0) {
          ++throttled;
          if (clock_col) throttled_clocks.push_back(t.GetDouble(r, *clock_col));
        }
      }
      if (bad_latency) errors.push_back(std::to_string(bad_latency) + " rows with non-finite, negative or zero latency");
      if (dups) errors.push_back(std::to_string(dups) + " duplicate keys");
      if (beats) errors.push_back(std::to_string(beats) + " rows faster than physics allows");
      if (noisy) warnings.push_back(std::to_string(noisy) + " rows with rsd > " + FormatDouble(opt.rsd_warn));
      if (throttled) {
        // The share, as finalize writes it into collection_meta.yaml (throttled_share).
        const double share = std::round(1000.0 * static_cast<double>(throttled) / static_cast<double>(t.num_rows())) / 10.0;
        std::string clocks;
        if (!throttled_clocks.empty()) {
          std::sort(throttled_clocks.begin(), throttled_clocks.end());
          clocks = " (SM clock after timing: median " + FormatDouble(throttled_clocks[throttled_clocks.size() / 2]) +
                   " MHz, lowest " + FormatDouble(throttled_clocks.front()) + " MHz)";
        }
        warnings.push_back(std::to_string(throttled) + " rows (" + FormatDouble(share) + "% of " +
                           std::to_string(t.num_rows()) + ") measured while throttled" + clocks);
        tj["throttled_rows"] = throttled;
      }
      if (!examples.empty()) tj["examples"] = examples;

      // Collected vs planned. A run narrowed on purpose (--smoke, --limit, --model,
      // --case-filter) leaves the rest of the plan uncollected: that is reported,
      // not failed. A case the run set out to collect and did not is a failure.
      std::int64_t planned = tmeta.OptionalInt("planned", -1);
      std::int64_t missing = tmeta.OptionalInt("missing", 0);
      std::int64_t missing_selected = tmeta.OptionalInt("missing_selected", missing);
      std::string selection = tmeta.OptionalString("selection", "full");
      std::string status = tmeta.OptionalString("status", "unknown");
      tj["planned"] = planned;
      tj["status"] = status;
      tj["selection"] = selection;
      if (plan) {
        Json missing_keys = Json::array();
        std::size_t n_missing = 0, n_planned = 0, n_unselected_missing = 0;
        for (const auto& e : plan->entries) {
          if (e.table != name) continue;
          ++n_planned;
          Params p;
          for (const auto& col : id_cols) p.Set(col, e.key.Get(col));
          if (cases_seen.count(KeyText(p))) continue;
          if (!e.selected && plan->partial_selection) {
            ++n_unselected_missing;
            continue;
          }
          if (n_missing++ < 20) missing_keys.push_back(e.id);
        }
        tj["planned"] = n_planned;
        if (n_missing) {
          errors.push_back(std::to_string(n_missing) + " of " + std::to_string(n_planned) + " planned cases have no row");
          tj["missing_keys"] = missing_keys;
        }
        if (n_unselected_missing)
          warnings.push_back(std::to_string(n_unselected_missing) + " planned cases were outside this narrowed run");
      } else if (missing_selected > 0 || (selection == "full" && missing > 0)) {
        errors.push_back("collected " + std::to_string(t.num_rows()) + " rows for " + std::to_string(planned) +
                         " planned cases (" + std::to_string(selection == "full" ? missing : missing_selected) +
                         " missing, status " + status + "); run `check --plan RUN_DIR` to list them");
      } else if (missing > 0) {
        warnings.push_back("partial table: a narrowed run (" + std::to_string(missing) + " of " +
                           std::to_string(planned) + " planned cases not collected yet)");
      }
      if (!opt.against.empty()) {
        std::string other = FindAgainst(opt.against, name);
        // A single file is compared only with the table whose key columns it has.
        if (!other.empty() && fs::is_regular_file(opt.against)) {
          Table header = ReadTableFile(other);
          for (const auto& c : spec->key_columns)
            if (!header.FindColumn(c.name)) other.clear();
        }
        if (!other.empty()) tj["against"] = CompareAgainst(t, *spec, other);
      }
    }
    if (!errors.empty()) tj["errors"] = errors;
    if (!warnings.empty()) tj["warnings"] = warnings;
    rep.hard_failures += errors.size();
    rep.warnings += warnings.size();
    rep.tables.push_back(tj);
  }
}

}  // namespace

int Check(const CheckOptions& opt) {
  if (!fs::is_directory(opt.data_dir)) throw UsageError("check: " + opt.data_dir + " is not a directory");
  // A comparison table that is not there was skipped table by table (exit 0 with
  // no comparison): refused before any table is read.
  if (!opt.against.empty() && !fs::is_regular_file(opt.against) && !fs::is_directory(opt.against))
    throw UsageError("check --against " + opt.against + ": no such file or folder; expected a data dir or a table file");
  std::vector<std::string> dirs;
  for (const auto& e : fs::recursive_directory_iterator(opt.data_dir))
    if (e.is_regular_file() && e.path().filename() == "collection_meta.yaml") dirs.push_back(e.path().parent_path().string());
  if (fs::exists(opt.data_dir + "/collection_meta.yaml")) dirs.push_back(opt.data_dir);
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  Report rep;
  // Tables without any provenance beside them are data nobody can vouch for.
  for (const auto& e : fs::recursive_directory_iterator(opt.data_dir)) {
    if (!e.is_regular_file() || !IsTableFile(e.path().string())) continue;
    if (!fs::exists(e.path().parent_path() / "collection_meta.yaml")) {
      rep.hard_failures++;
      rep.tables.push_back(Json{{"path", e.path().string()}, {"errors", Json::array({"no collection_meta.yaml beside it"})}});
    }
  }
  if (dirs.empty() && rep.tables.empty())
    throw UsageError("check: no perf tables (collection_meta.yaml) under " + opt.data_dir);
  std::optional<PlanFile> plan;
  if (!opt.plan_run_dir.empty()) plan = ReadPlanFile(opt.plan_run_dir + "/plan.jsonl");
  for (const auto& d : dirs) {
    try {
      CheckVersionDir(d, opt, plan ? &*plan : nullptr, rep);
    } catch (const Error& e) {
      rep.hard_failures++;
      rep.tables.push_back(Json{{"dir", d}, {"errors", Json::array({e.what()})}});
    }
  }
  Json doc{{"data_dir", opt.data_dir}, {"ok", rep.hard_failures == 0}, {"hard_failures", rep.hard_failures},
           {"warnings", rep.warnings}, {"tables", rep.tables}};
  if (opt.json) {
    std::printf("%s\n", doc.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
  } else {
    for (const auto& t : rep.tables) {
      bool ok = !t.contains("errors");
      std::printf("%s %s", ok ? "PASS" : "FAIL", t.value("path", t.value("dir", std::string())).c_str());
      if (t.contains("rows")) std::printf("  rows=%zu", t["rows"].get<std::size_t>());
      if (t.contains("planned")) std::printf(" planned=%lld", t["planned"].get<long long>());
      if (t.contains("status")) std::printf(" status=%s", t["status"].get<std::string>().c_str());
      std::printf("\n");
      for (const char* k : {"errors", "warnings", "examples"})
        if (t.contains(k))
          for (const auto& m : t[k]) std::printf("    %s: %s\n", k, m.get<std::string>().c_str());
      if (t.contains("missing_keys"))
        for (const auto& m : t["missing_keys"]) std::printf("    missing: %s\n", m.get<std::string>().c_str());
      if (t.contains("against")) {
        const Json& a = t["against"];
        std::printf("    against %s: %zu shared keys", a["against"].get<std::string>().c_str(), a["shared_keys"].get<std::size_t>());
        if (a.contains("ratio_median"))
          std::printf(", ours/theirs median %.3f p10 %.3f p90 %.3f", a["ratio_median"].get<double>(),
                      a["ratio_p10"].get<double>(), a["ratio_p90"].get<double>());
        std::printf(", only ours %zu, only theirs %zu\n", a["only_ours"].get<std::size_t>(), a["only_theirs"].get<std::size_t>());
      }
    }
    std::printf("check: %s (%zu hard failures, %zu warnings)\n", rep.hard_failures ? "FAILED" : "ok", rep.hard_failures,
                rep.warnings);
  }
  return rep.hard_failures ? 1 : 0;
}

}  // namespace servecast::collect
