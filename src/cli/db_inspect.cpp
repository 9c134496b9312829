#include "cli/db_inspect.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <memory>

#include "collect/journal.h"
#include "cli/data_roots.h"
#include "core/error.h"
#include "core/value.h"
#include "perfdb/attention.h"
#include "perfdb/comm.h"
#include "perfdb/discovery.h"
#include "perfdb/gemm.h"
#include "perfdb/moe.h"
#include "perfdb/perf_database.h"
#include "perfdb/quantize.h"
#include "perfdb/sol.h"
#include "system/system_spec.h"

namespace servecast::cli {

CLI::App* AddDbInspectCommand(CLI::App& db, DbInspectArgs& a) {
  auto* c = db.add_subcommand("inspect", "list systems, families, backends, versions and tables with row counts");
  c->add_option("roots", a.roots, "data roots (e.g. systems/data); several are merged, the first wins")->required();
  c->add_flag("--json", a.json, "print one JSON document");
  c->add_option("--slices", a.slices_system,
                "SYSTEM: list the key coverage of every table of this system (needs --backend)");
  c->add_option("--backend", a.slices_backend, "with --slices: the data backend (cuda, trtllm, ...)");
  c->add_option("--version", a.slices_version, "with --slices: the version (default: newest)");
  c->add_option("--systems", a.systems_dir, "system spec folder (for --slices)");
  return c;
}

namespace {

// "lo..hi" of the last coordinate of the points.
std::string LastCoordRange(const std::vector<perfdb::GridPoint>& pts) {
  double lo = 1e300, hi = -1e300;
  for (const auto& p : pts) {
    lo = std::min(lo, p.coords.back());
    hi = std::max(hi, p.coords.back());
  }
  return FormatDouble(lo) + ".." + FormatDouble(hi);
}

void PrintGemmSlices(const perfdb::GemmPerf& gemm) {
  for (const auto& dt : gemm.gemm_dtypes()) {
    const auto& sites = gemm.Slice(dt).sites();
    std::size_t points = 0;
    std::int64_t mlo = INT64_MAX, mhi = 0, nlo = INT64_MAX, nhi = 0, klo = INT64_MAX, khi = 0;
    for (const auto& site : sites) {
      points += site.m.size();
      mlo = std::min(mlo, site.m.front());
      mhi = std::max(mhi, site.m.back());
      nlo = std::min(nlo, site.n);
      nhi = std::max(nhi, site.n);
      klo = std::min(klo, site.k);
      khi = std::max(khi, site.k);
    }
    std::printf("  gemm_dtype=%s: %zu (n, k) sites, %zu points; m %lld..%lld, n %lld..%lld, k %lld..%lld\n", dt.c_str(),
                sites.size(), points, (long long)mlo, (long long)mhi, (long long)nlo, (long long)nhi, (long long)klo,
                (long long)khi);
  }
}

// One line per slice of the table `name`; a table that cannot be sliced says why.
void PrintTableSlices(const perfdb::PerfDatabase& db, const std::string& name,
                      const std::shared_ptr<const perfdb::Sol>& sol) {
  try {
    if (name == "gemm_perf") {
      PrintGemmSlices(perfdb::GemmPerf(db.Table(name).table, *sol));
    } else if (name == "context_attention_perf" || name == "generation_attention_perf") {
      const auto& loaded = db.Table(name);
      auto print = [&](const auto& table) {
        for (const auto& [key, grid] : table.slices())
          std::printf("  %s: %zu points; %s\n", key.ToString().c_str(), grid.points().size(),
                      grid.CoveredRange().c_str());
      };
      if (name == "context_attention_perf")
        print(perfdb::ContextAttentionTable::FromLoaded(loaded, sol));
      else
        print(perfdb::GenerationAttentionTable::FromLoaded(loaded, sol));
    } else if (name == "moe_perf") {
      auto t = perfdb::MoeTable::FromLoaded(db.Table(name), sol);
      for (const auto& [key, slice] : t.slices())
        std::printf("  %s: %zu token counts %s\n", key.ToString().c_str(), slice.points.size(),
                    LastCoordRange(slice.points).c_str());
    } else if (name == "nccl_perf" || name == "custom_allreduce_perf") {
      const auto& loaded = db.Table(name);
      auto print = [&](const auto& table) {
        for (const auto& [key, slice] : table.slices())
          std::printf("  %s: %zu sizes %s elements\n", key.ToString().c_str(), slice.points.size(),
                      LastCoordRange(slice.points).c_str());
      };
      if (name == "nccl_perf")
        print(perfdb::NcclTable::FromLoaded(loaded, sol));
      else
        print(perfdb::CustomAllReduceTable::FromLoaded(loaded, sol));
    } else if (name == "computescale_perf") {
      auto t = perfdb::ComputeScaleTable::FromLoaded(db.Table(name), sol);
      for (const auto& [key, grid] : t.slices())
        std::printf("  %s: %zu points; %s\n", key.c_str(), grid.points().size(), grid.CoveredRange().c_str());
    } else {
      std::printf("  %zu rows (no slice model for this table yet)\n", db.Table(name).table.num_rows());
    }
  } catch (const Error& e) {
    std::printf("  cannot slice: %s\n", e.what());
  }
}

// --slices: the key coverage of every table of one system, backend and version.
int InspectSlices(const DbInspectArgs& a, const std::function<std::string(const std::string&)>& find) {
  if (a.slices_backend.empty()) throw UsageError("db inspect --slices needs --backend");
  std::string sys_dir = a.systems_dir.empty() ? find("systems") : a.systems_dir;
  auto sol = std::make_shared<const perfdb::Sol>(systems::LoadSystemByName(sys_dir, a.slices_system));
  auto db = perfdb::PerfDatabase::Open(a.roots, a.slices_system, a.slices_backend, a.slices_version);
  std::printf("%s / %s / %s\n", a.slices_system.c_str(), a.slices_backend.c_str(), db.version().c_str());
  for (const auto& name : db.TableNames()) {
    std::printf("%s\n", name.c_str());
    PrintTableSlices(db, name, sol);
  }
  return 0;
}

// The data folders of the roots with their tables and row counts, and the tree's problems.
int InspectTree(const DbInspectArgs& a) {
  auto tree = perfdb::DataTree::Scan(a.roots);
  auto dirs = perfdb::Inventory(tree, true);
  collect::Json doc = collect::Json::array();
  for (const auto& d : dirs) {
    collect::Json tables = collect::Json::array();
    for (const auto& t : d.tables)
      tables.push_back({{"table", t.name}, {"files", t.files}, {"rows", t.rows}, {"error", t.error}});
    collect::Json reuse = collect::Json::array();
    for (const auto& r : d.reuse) reuse.push_back({{"table", r.table}, {"from_version", r.from_version}});
    doc.push_back({{"system", d.system},
                   {"family", d.family},
                   {"backend", d.backend},
                   {"version", d.version},
                   {"marker_only", d.marker_only},
                   {"collection_meta", d.has_collection_meta},
                   {"reuse", reuse},
                   {"tables", tables}});
  }
  if (a.json) {
    std::printf("%s\n", collect::Json{{"dirs", doc}, {"problems", tree.problems()}}.dump(2).c_str());
  } else {
    for (const auto& d : dirs) {
      std::printf("%s/%s/%s/%s%s%s\n", d.system.c_str(), d.family.c_str(), d.backend.c_str(), d.version.c_str(),
                  d.marker_only ? "  (marker only)" : "", d.reuse.empty() ? "" : "  (reuse.yaml)");
      for (const auto& r : d.reuse) std::printf("    reuses %s from %s\n", r.table.c_str(), r.from_version.c_str());
      for (const auto& t : d.tables) {
        if (t.rows >= 0)
          std::printf("    %-34s %10lld rows\n", t.name.c_str(), static_cast<long long>(t.rows));
        else
          std::printf("    %-34s  unreadable: %s\n", t.name.c_str(), t.error.c_str());
      }
    }
    for (const auto& p : tree.problems()) std::printf("problem: %s\n", p.c_str());
  }
  return 0;
}

}  // namespace

int RunDbInspect(const DbInspectArgs& args, const std::function<std::string(const std::string&)>& find) {
  DbInspectArgs a = args;
  a.roots = ResolveDataRoots(a.roots, "db inspect: data root");
  return a.slices_system.empty() ? InspectTree(a) : InspectSlices(a, find);
}

}  // namespace servecast::cli
