#include "cli/default_cmd.h"

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/plan_common.h"
#include "cli/value_checks.h"
#include "core/error.h"
#include "model/model_config.h"
#include "perfdb/modes.h"
#include "report/save.h"
#include "report/terminal.h"
#include "search/search.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "serve/session.h"
#include "system/system_spec.h"

namespace servecast::cli {

CLI::App* AddDefaultCommand(CLI::App& app, DefaultArgs& a) {
  auto* c = app.add_subcommand("default", "search deployments of a model on N GPUs: Pareto frontier and the best");
  c->add_option("--model", a.model,
                "HF id (bundled, an alias of models/aliases.yaml, or in the HF cache), a config.json or its folder")
      ->required();
  c->add_option("--system", a.system, "system (systems/<name>.yaml), e.g. h200_sxm")->required();
  c->add_option("--total-gpus", a.total_gpus, "GPUs to deploy on")->required()->check(IntIn(1, kMaxGpus));
  c->add_option("--backend", a.engine, "serving engine modelled: trtllm, vllm or sglang")->capture_default_str();
  c->add_option("--data", a.data, "perf-data source BACKEND[/VERSION] (default: the system's only source, else cuda)");
  c->add_option("--data-root", a.data_roots, "data root (repeat; default: systems/data of the installation)");
  c->add_option("--database-mode", a.database_mode, "silicon, hybrid, empirical or sol")->capture_default_str();
  c->add_option("--transfer-policy", a.transfer_policy, "hybrid / empirical: off, conservative, balanced, aggressive")
      ->capture_default_str();
  AddSlaFlags(c, a.sla);
  c->add_option("--prefix", a.prefix, "cached prefix tokens of the input")->capture_default_str()->check(IntIn(0, kMaxTokens));
  c->add_option("--top-n", a.top_n, "deployments listed per mode")->capture_default_str()->check(IntIn(1, 1000));
  c->add_option("--moe-distribution", a.moe_distribution, "expert load: balanced, power_law_1.01, power_law_1.2")
      ->check(ExpertLoad());
  c->add_flag("--json", a.json, "print one JSON document and nothing else");
  c->add_option("--save-dir", a.save_dir,
                "write summary.json, report.html and per-mode CSV tables to a new folder under this one");
  c->add_option("--systems", a.systems_dir, "system spec folder (default: systems/ of the installation)");
  c->add_option("--models", a.models_dir, "bundled model folder (default: models/ of the installation)");
  c->add_option("--engines", a.engines_dir, "engine profile folder (default: engines/ of the installation)");
  c->add_option("--calibration", a.calibration,
                "engine-profile constants: servecast (default) or aic (AIConfigurator's, engines/aic/)");
  return c;
}

int RunDefault(const DefaultArgs& a, const std::function<std::string(const std::string&)>& find) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string systems_dir = a.systems_dir.empty() ? find("systems") : a.systems_dir;
  const std::string models_dir = a.models_dir.empty() ? find("models") : a.models_dir;
  const std::string engines_dir = a.engines_dir.empty() ? find("engines") : a.engines_dir;
  systems::SystemSpec spec = systems::LoadSystemByName(systems_dir, a.system);
  serve::Deployment d(LoadModelNoted(a.model, models_dir), spec);

  search::SearchInputs in = SearchInputsFrom(a.sla, model::ParseEngine(a.engine), a.total_gpus);
  in.prefix = a.prefix;
  in.top_n = a.top_n;
  in.moe_distribution = a.moe_distribution;
  if (in.prefix < 0 || in.prefix >= in.isl) throw UsageError("--prefix must lie in [0, isl)");
  const serve::DatabaseOptions dbo =
      MakeDataOptions(a.data_roots, a.data, a.database_mode, a.transfer_policy, systems_dir);
  const serve::Database* db = &d.OpenData(dbo, search::SearchNeeds(d, in));
  const model::ModelConfig& m = d.model();
  const serve::EngineProfile engine = serve::LoadEngineProfileByName(engines_dir, in.engine, a.calibration);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const search::SearchResult r = search::RunSearch(m, *db, engine, in);
  report::ReportContext ctx;
  ctx.model = &m;
  ctx.system = spec.name;
  ctx.device = spec.gpu.device_name;
  ctx.engine = a.engine;
  ctx.data = db->source();
  ctx.database_mode = perfdb::DatabaseModeName(db->mode());
  ctx.inputs = in;
  ctx.load_seconds = load_s;
  if (const search::Point* chosen = search::ChosenPoint(r)) ctx.data_notes = search::DataNotes(*chosen, m, *db, in);
  const std::string saved = a.save_dir.empty() ? std::string() : report::SaveReport(r, ctx, a.save_dir);
  if (a.json) {
    std::printf("%s\n", report::JsonReport(r, ctx).dump(2).c_str());
  } else {
    std::printf("%s", report::TerminalReport(r, ctx).c_str());
    if (!saved.empty()) std::printf("report saved to %s/ (report.html, summary.json, <mode>/*.csv)\n", saved.c_str());
  }
  return r.chosen >= 0 ? 0 : 1;
}

}  // namespace servecast::cli
