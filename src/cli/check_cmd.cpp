#include "cli/check_cmd.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/plan_common.h"
#include "cli/value_checks.h"
#include "core/error.h"
#include "model/model_config.h"
#include "search/coverage.h"
#include "system/system_spec.h"

namespace servecast::cli {

CLI::App* AddCheckCommand(CLI::App& app, CheckArgs& a) {
  collect::CheckOptions& o = a.check;
  auto* c =
      app.add_subcommand("check", "judge perf tables by their content (quality gates); --coverage: the coverage gate");
  c->add_option("data_dir", o.data_dir,
                "data folder: a data root, a system folder or one version folder (--coverage: a system folder)")
      ->required();
  auto* coverage = c->add_flag("--coverage", a.coverage,
                               "every bundled model x engine x the parallel configurations of one node against the "
                               "system folder's tables: list each lookup that misses; exit 1 on a miss the gaps file "
                               "does not declare or a declared gap that no longer misses");
  c->add_option("--gaps", a.gaps, "--coverage: the declared-gaps file (default: <data_dir>/COVERAGE_GAPS.yaml)")
      ->needs(coverage);
  c->add_option("--models", a.models_dir, "--coverage: bundled model folder (default: models/ of the installation)")
      ->needs(coverage);
  c->add_option("--data", a.data, "--coverage: perf-data source BACKEND[/VERSION] (default: as servecast default)")
      ->needs(coverage);
  c->add_option("--plan", o.plan_run_dir, "run dir whose plan.jsonl lists the planned cases (names missing keys)")
      ->excludes(coverage);
  c->add_option("--against", o.against, "another data dir or CSV table: ratio distribution on shared keys")
      ->excludes(coverage);
  c->add_flag("--json", o.json, "print one JSON document");
  c->add_option("--physics-tolerance", o.physics_tolerance, "fraction by which a row may beat its speed-of-light bound")
      ->capture_default_str()
      ->check(NumberIn(0, 1))
      ->excludes(coverage);
  c->add_option("--systems", o.systems_dir, "system spec folder (default: systems/ of the installation)");
  return c;
}

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

Json KeyJson(const std::vector<std::pair<std::string, std::string>>& key) {
  Json j = Json::object();
  for (const auto& [column, value] : key) j[column] = value;
  return j;
}

std::string Plural(std::size_t n, const std::string& one, const std::string& many = "") {
  return std::to_string(n) + " " + (n == 1 ? one : many.empty() ? one + "s" : many);
}

std::string GapText(const search::CoverageGap& g, const std::string& file) {
  std::string s = g.issue > 0 ? "issue " + std::to_string(g.issue) : std::string();
  if (!g.reason.empty()) s += (s.empty() ? "" : ": ") + g.reason;
  return s + " (" + file + " line " + std::to_string(g.line) + ")";
}

int RunCoverageGate(const CheckArgs& a, const std::function<std::string(const std::string&)>& find) {
  const std::string systems_dir = a.check.systems_dir.empty() ? find("systems") : a.check.systems_dir;
  const std::string models_dir = a.models_dir.empty() ? find("models") : a.models_dir;
  std::error_code ec;
  fs::path dir = fs::path(a.check.data_dir).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  if (!fs::is_directory(dir, ec))
    throw UsageError("check --coverage: '" + a.check.data_dir +
                     "' is not a folder; expected a system folder "
                     "(<data root>/<system>, e.g. systems/data/h200_sxm)");
  const std::string system = dir.filename().string();
  const fs::path spec_file = fs::path(systems_dir) / (system + ".yaml");
  if (!fs::is_regular_file(spec_file, ec))
    throw UsageError("check --coverage: '" + a.check.data_dir + "' is not a system folder: no " + spec_file.string() +
                     " (expected <data root>/<system> with systems/<system>.yaml)");
  const systems::SystemSpec spec = systems::LoadSystemByName(systems_dir, system);

  std::string gaps_file = a.gaps;
  if (gaps_file.empty() && fs::is_regular_file(dir / "COVERAGE_GAPS.yaml", ec))
    gaps_file = (dir / "COVERAGE_GAPS.yaml").string();
  search::CoverageOptions opt;
  opt.models_dir = models_dir;
  opt.data = MakeDataOptions({dir.parent_path().string()}, a.data, "silicon", "aggressive", systems_dir, "");
  if (!gaps_file.empty()) opt.gaps = search::LoadCoverageGaps(gaps_file, model::BundledModels(models_dir));
  const search::CoverageReport r = search::RunCoverage(spec, opt);

  if (a.check.json) {
    Json j;
    j["system"] = r.system;
    j["data"] = r.data;
    j["gpus"] = r.gpus;
    j["workload"] = {{"isl", r.isl}, {"osl", r.osl}, {"batches", r.batches}};
    j["models"] = r.models;
    j["configs"] = r.configs;
    j["lookups"] = r.lookups;
    j["gaps_file"] = gaps_file;
    Json misses = Json::array();
    for (const search::CoverageMiss& m : r.misses) {
      Json configs = Json::object();
      for (const auto& [engine, set] : m.configs) configs[engine] = set;
      Json e = {{"model", m.model}, {"table", m.table},   {"key", KeyJson(m.key)}, {"engines", m.engines},
                {"ops", m.ops},     {"configs", configs}, {"reason", m.reason}};
      if (m.gap >= 0) {
        const search::CoverageGap& g = r.gaps[static_cast<std::size_t>(m.gap)];
        e["declared"] = {{"line", g.line}, {"issue", g.issue}, {"reason", g.reason}};
      } else {
        e["declared"] = nullptr;
      }
      misses.push_back(e);
    }
    j["misses"] = misses;
    Json stale = Json::array();
    for (int g : r.stale) {
      const search::CoverageGap& gap = r.gaps[static_cast<std::size_t>(g)];
      stale.push_back({{"line", gap.line}, {"model", gap.model}, {"table", gap.table}, {"key", KeyJson(gap.key)}});
    }
    j["stale_gaps"] = stale;
    j["undeclared"] = r.Undeclared();
    j["pass"] = r.Pass();
    std::printf("%s\n", j.dump(2).c_str());
    return r.Pass() ? 0 : 1;
  }

  std::printf("servecast check --coverage: %s (%s), data %s, %d GPUs (one node)\n", r.system.c_str(),
              spec.gpu.device_name.c_str(), r.data.empty() ? "-" : r.data.c_str(), r.gpus);
  std::printf("  %zu bundled models x 3 engines: %s, %s at isl %lld, osl %lld, batch 1 and 64 (SILICON)\n", r.models,
              Plural(r.configs, "parallel configuration").c_str(), Plural(r.lookups, "lookup").c_str(),
              static_cast<long long>(r.isl), static_cast<long long>(r.osl));
  std::printf("  gaps: %s\n\n", gaps_file.empty()
                                    ? "no gaps file (every miss is undeclared)"
                                    : (gaps_file + " (" + Plural(r.gaps.size(), "gap") + " declared)").c_str());
  std::printf("misses: %s (by table and key), %zu undeclared\n", Plural(r.misses.size(), "lookup").c_str(),
              r.Undeclared());
  std::string model;
  for (const search::CoverageMiss& m : r.misses) {
    if (m.model != model) {
      model = m.model;
      std::printf("  %s\n", model.c_str());
    }
    if (m.table.empty())
      std::printf("    cannot be estimated: %s\n", m.reason.c_str());
    else
      std::printf("    %s {%s}\n", m.table.c_str(), m.KeyText().c_str());
    std::string engines;
    for (const auto& e : m.engines) {
      const auto it = m.configs.find(e);
      engines += (engines.empty() ? "" : ", ") + e +
                 (it == m.configs.end() ? std::string() : " (" + Plural(it->second.size(), "config") + ")");
    }
    std::string ops;
    for (const auto& o : m.ops) ops += (ops.empty() ? "" : ", ") + o;
    std::printf("      %s  %s%s\n", m.gap >= 0 ? "declared  " : "UNDECLARED", engines.c_str(),
                ops.empty() ? "" : ("; ops " + ops).c_str());
    if (m.gap >= 0) std::printf("      gap: %s\n", GapText(r.gaps[static_cast<std::size_t>(m.gap)], gaps_file).c_str());
    if (!m.table.empty()) std::printf("      miss: %s\n", m.reason.c_str());
  }
  if (r.misses.empty()) std::printf("  none\n");
  std::printf("\nstale gaps (declared, no longer missing):%s\n", r.stale.empty() ? " none" : "");
  for (int g : r.stale) {
    const search::CoverageGap& gap = r.gaps[static_cast<std::size_t>(g)];
    std::printf("  %s %s {%s}: %s; remove it\n", gap.model.c_str(), gap.unsupported ? "unsupported" : gap.table.c_str(),
                search::OpLookup{gap.table, gap.key}.KeyText().c_str(), GapText(gap, gaps_file).c_str());
  }
  if (r.Pass())
    std::printf("\ncoverage: PASS (every miss is declared)\n");
  else
    std::printf("\ncoverage: FAIL (%s, %s)\n", Plural(r.Undeclared(), "undeclared miss", "undeclared misses").c_str(),
                Plural(r.stale.size(), "stale gap").c_str());
  return r.Pass() ? 0 : 1;
}

}  // namespace

int RunCheck(const CheckArgs& args, const std::function<std::string(const std::string&)>& find) {
  if (args.coverage) return RunCoverageGate(args, find);
  collect::CheckOptions ch = args.check;
  if (ch.systems_dir.empty()) ch.systems_dir = find("systems");
  std::error_code ec;
  if (!fs::is_directory(ch.systems_dir, ec))  // checked before any table is read
    throw UsageError("--systems '" + ch.systems_dir + "': not a directory; expected a folder of <name>.yaml "
                     "system specs");
  return collect::Check(ch);
}

}  // namespace servecast::cli
