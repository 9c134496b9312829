#include "cli/default_cmd.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "cli/data_roots.h"
#include "cli/plan_common.h"
#include "cli/value_checks.h"
#include "core/error.h"
#include "model/model_config.h"
#include "perfdb/modes.h"
#include "report/save.h"
#include "report/terminal.h"
#include "search/recommend.h"
#include "search/search.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "serve/session.h"
#include "system/system_spec.h"

namespace servecast::cli {

CLI::App* AddDefaultCommand(CLI::App& app, DefaultArgs& a) {
  auto* c = app.add_subcommand("default", "search deployments of a model on N GPUs: Pareto frontier and the best");
  c->add_option("--model,--model-path", a.model,
                "HF id (bundled, an alias of models/aliases.yaml, or in the HF cache), a config.json or its folder "
                "(--model-path: the same, AIC's spelling)")
      ->required();
  c->add_option("--system", a.system, "system (systems/<name>.yaml), e.g. h200_sxm")->required();
  AddDecodeSystemFlag(c, a.decode_system);
  auto* gpus = c->add_option("--total-gpus", a.total_gpus, "GPUs to deploy on (or give --target-request-rate)")
                   ->check(IntIn(1, kMaxGpus));
  auto* rate = c->add_option("--target-request-rate", a.target_request_rate,
                             "instead of --total-gpus: the fewest GPUs (1, 2, 4, 8, then multiples of 8 up to "
                             "--max-gpus) at which a deployment meets the limits and serves this many requests/s "
                             "over the cluster; the report is the search at that count (one engine, not auto)")
                   ->check(NumberIn(0, 1e9, true));
  gpus->excludes(rate);
  c->add_option("--max-gpus", a.max_gpus,
                "with --target-request-rate: the largest GPU count tried, at most 4096 (from 128 GPUs on, the walk "
                "stops at the first count from which no larger one can meet the target)")
      ->capture_default_str()
      ->check(IntIn(1, kMaxGpus));
  c->add_option("--backend", a.engine,
                "serving engine modelled: trtllm, vllm, sglang, or auto (search each and compare)")
      ->capture_default_str();
  c->add_option("--data", a.data,
                "perf-data source BACKEND[/VERSION] (default: the engine's own source, else the system's only "
                "source, else cuda)");
  c->add_option("--data-root", a.data_roots,
                kDataRootHelp);
  c->add_option("--database-mode", a.database_mode, "silicon, hybrid, empirical or sol (any case: SILICON)")
      ->capture_default_str();
  c->add_option("--transfer-policy", a.transfer_policy, "hybrid / empirical: off, conservative, balanced, aggressive")
      ->capture_default_str();
  AddSlaFlags(c, a.sla);
  AddWorkloadFlags(c, a.workload);
  c->add_option("--top-n", a.top_n, "deployments listed per mode")->capture_default_str()->check(IntIn(1, 1000));
  c->add_flag("--json", a.json, "print one JSON document and nothing else");
  c->add_flag("--simulate", a.simulate,
              "also simulate each mode's frontier and best deployments request by request (1,000 requests of "
              "closed-loop clients at the point's concurrency; the ranking stays the closed form's): simulated "
              "TTFT, TPOT, tokens/s/GPU and whether the limits hold, in the tables and under `simulation` in --json");
  c->add_option("--save-dir", a.save_dir,
                "write summary.json, report.html and per-mode CSV tables to a new folder under this one");
  c->add_option("--systems", a.systems_dir, "system spec folder (default: systems/ of the installation)");
  c->add_option("--models", a.models_dir, "bundled model folder (default: models/ of the installation)");
  c->add_option("--engines", a.engines_dir, "engine profile folder (default: engines/ of the installation)");
  return c;
}

namespace {

// One engine's search (its data and profile, plan_common's EngineSearch) and its result.
struct EngineRun {
  EngineSearch open;
  search::SearchResult result;
  report::ReportContext ctx;
  const std::string& engine() const { return open.engine; }
  const std::string& error() const { return open.error; }
};

// The chosen point of a run, when it meets the limits (auto compares only those).
const search::Point* MeetingPoint(const EngineRun& e) {
  return e.error().empty() ? search::MeetingPoint(e.result) : nullptr;
}

// The best engine of --backend auto (search::PickMeeting); -1 when none meets the limits.
int PickEngine(const std::vector<EngineRun>& runs) {
  std::vector<const search::SearchResult*> results;
  for (const EngineRun& e : runs) results.push_back(e.error().empty() ? &e.result : nullptr);
  return search::PickMeeting(results);
}

std::string Fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// The comparison of --backend auto: one row per engine, its chosen deployment.
std::string EngineTable(const std::vector<EngineRun>& runs, int pick, int total_gpus) {
  std::string out = "backend auto: the best deployment of each engine on " + std::to_string(total_gpus) + " GPUs\n";
  char line[512];
  std::snprintf(line, sizeof line, "  %-7s  %-44s  %-6s  %-32s  %12s  %13s  %8s  %7s  %s\n", "engine", "data", "mode",
                "parallel", "tokens/s/gpu", "tokens/s/user", "TTFT ms", "TPOT ms", "meets limits");
  out += line;
  for (const EngineRun& e : runs) {
    const search::Point* p = e.error().empty() ? search::ChosenPoint(e.result) : nullptr;
    if (!p) {
      std::snprintf(line, sizeof line, "  %-7s  %-44s  %s\n", e.engine().c_str(), e.open.DataName().c_str(),
                    e.error().empty() ? "no deployment could be estimated" : e.error().c_str());
    } else {
      std::snprintf(line, sizeof line, "  %-7s  %-44s  %-6s  %-32s  %12.1f  %13.1f  %8.1f  %7.2f  %s\n",
                    e.engine().c_str(), e.open.DataName().c_str(), search::ModeName(p->mode), p->Parallel().c_str(),
                    p->tokens_per_s_gpu_cluster, p->tokens_per_s_user, p->ttft_ms, p->tpot_ms,
                    MeetingPoint(e) ? "yes" : "no");
    }
    out += line;
  }
  if (pick < 0) return out + "pick: none (no engine's deployment meets the limits)\n";
  const search::Point* best = MeetingPoint(runs[static_cast<std::size_t>(pick)]);
  out += "pick: " + runs[static_cast<std::size_t>(pick)].engine() +
         ", the highest tokens/s/gpu among the engines meeting the limits";
  double next = 0;
  std::string next_name;
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (static_cast<int>(i) != pick)
      if (const search::Point* p = MeetingPoint(runs[i]); p && p->tokens_per_s_gpu_cluster > next)
        next = p->tokens_per_s_gpu_cluster, next_name = runs[i].engine();
  if (next > 0) out += Fmt(" (%.2fx ", best->tokens_per_s_gpu_cluster / next) + next_name + "'s, the next)";
  return out + "\n";
}

}  // namespace

int RunDefault(const DefaultArgs& a, const std::function<std::string(const std::string&)>& find, DefaultOutcome* out) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool by_rate = a.target_request_rate > 0;
  if (!by_rate && a.total_gpus < 1)
    throw UsageError("give --total-gpus N, or --target-request-rate R to find the fewest GPUs that serve R");
  const bool auto_engine = a.engine == "auto";
  if (auto_engine && by_rate)
    throw UsageError("--backend auto and --target-request-rate do not combine; run one engine per target search");
  const std::vector<std::string> engines = BackendEngines(a.engine);
  const std::string systems_dir = a.systems_dir.empty() ? find("systems") : a.systems_dir;
  const std::string models_dir = a.models_dir.empty() ? find("models") : a.models_dir;
  const std::string engines_dir = a.engines_dir.empty() ? find("engines") : a.engines_dir;
  const systems::SystemSpec spec = systems::LoadSystemByName(systems_dir, a.system);
  const model::ModelConfig model_config = LoadModelNoted(a.model, models_dir);
  const bool split = !a.decode_system.empty();
  const std::optional<systems::SystemSpec> decode_spec =
      split ? std::optional<systems::SystemSpec>(systems::LoadSystemByName(systems_dir, a.decode_system))
            : std::nullopt;

  search::SearchInputs in =
      SearchInputsFrom(a.sla, model::ParseEngine(engines.front()), by_rate ? a.max_gpus : a.total_gpus, model_config);
  ApplyWorkload(a.workload, in);
  in.top_n = a.top_n;
  in.simulate = a.simulate;
  if (split) ApplyDecodeSystem(in, by_rate ? a.max_gpus : a.total_gpus);

  const std::vector<std::string> data_roots = ResolveDataRoots(a.data_roots);  // once: one note
  std::vector<EngineRun> runs;
  for (const std::string& name : engines) {
    EngineRun e;
    const serve::DatabaseOptions dbo =
        MakeDataOptions(data_roots, a.data, a.database_mode, a.transfer_policy, systems_dir, name);
    e.open = OpenEngineSearch(name, model_config, spec, decode_spec ? &*decode_spec : nullptr, dbo, in, engines_dir,
                              a.workload.calibration, auto_engine);
    e.ctx.model = &e.open.deployment->model();
    e.ctx.system = split ? spec.name + "+" + decode_spec->name : spec.name;
    e.ctx.device = spec.gpu.device_name;
    e.ctx.engine = name;
    e.ctx.inputs = in;
    e.ctx.inputs.engine = model::ParseEngine(name);
    if (e.open.db) {
      e.ctx.data = e.open.DataName();
      e.ctx.database_mode = perfdb::DatabaseModeName(e.open.db->mode());
    }
    runs.push_back(std::move(e));
  }
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // --target-request-rate: the GPU count, by the rule of `servecast recommend`.
  search::RecommendResult target_search;
  if (by_rate) {
    EngineRun& e = runs.front();
    auto run = [&](int gpus) {
      search::SearchInputs at = e.ctx.inputs;
      at.total_gpus = gpus;
      return e.open.Run(at);
    };
    search::RecommendTarget target;
    target.request_rate = a.target_request_rate;
    target_search = search::Recommend(run, target, search::GpuLadder(a.max_gpus), search::kSearchStableGpus);
    if (!target_search.found) {
      if (a.json || out) {
        nlohmann::ordered_json j = {{"model", e.open.deployment->model().name},
                                    {"system", spec.name},
                                    {"engine", e.engine()},
                                    {"data", e.ctx.data},
                                    {"target",
                                     {{"request_rate", a.target_request_rate},
                                      {"max_gpus", a.max_gpus},
                                      {"found", false},
                                      {"gpus", nullptr},
                                      {"steps", report::RecommendStepsJson(target_search)}}}};
        if (target_search.stopped_at > 0) j["target"]["stopped_note"] = search::StoppedNote(target_search);
        if (a.json && !(out && out->quiet_json)) std::printf("%s\n", j.dump(2).c_str());
        if (out) out->json = std::move(j);
      }
      if (!a.json) {
        std::printf("%s", report::RecommendStepsTable(target_search).c_str());
      }
      if (target_search.stopped_at > 0) std::fprintf(stderr, "note: %s\n", search::StoppedNote(target_search).c_str());
      std::fprintf(stderr,
                   "error: no GPU count up to %d (--max-gpus) has a deployment that meets the limits and serves %.3f "
                   "requests/s (the table says why per count)\n",
                   a.max_gpus, a.target_request_rate);
      return 1;
    }
    e.ctx.inputs.total_gpus = target_search.gpus;
  }

  for (std::size_t i = 0; i < runs.size(); ++i) {
    EngineRun& e = runs[i];
    if (!e.error().empty()) continue;
    e.result = e.open.Run(e.ctx.inputs);
    e.ctx.load_seconds = load_s;
  }
  const int pick = auto_engine ? PickEngine(runs) : 0;
  // The report shown in full: the picked engine's (auto without a pick: the first searched).
  std::size_t shown = pick >= 0 ? static_cast<std::size_t>(pick) : 0;
  if (pick < 0)
    for (std::size_t i = runs.size(); i-- > 0;)
      if (runs[i].error().empty()) shown = i;
  EngineRun& main_run = runs[shown];
  if (!main_run.error().empty()) throw UsageError("no engine could be searched: " + main_run.error());
  const search::SearchResult& r = main_run.result;
  report::ReportContext& ctx = main_run.ctx;
  if (const search::Point* chosen = search::ChosenPoint(r))
    ctx.data_notes = search::DataNotes(*chosen, main_run.open.deployment->model(), *main_run.open.db, ctx.inputs);
  const std::string saved = a.save_dir.empty() ? std::string() : report::SaveReport(r, ctx, a.save_dir);

  const std::string target_line =
      by_rate ? Fmt("target %.3f requests/s: ", a.target_request_rate) + std::to_string(target_search.gpus) +
                    " GPUs, the fewest of the counts tried (1, 2, 4, 8, then multiples of 8 up to --max-gpus " +
                    std::to_string(a.max_gpus) + ") where a deployment meets the limits and serves it; it is " +
                    search::ModeName(target_search.point.mode) + " " + target_search.point.Parallel() +
                    Fmt(", %.3f requests/s", search::ClusterRequestRate(target_search.point)) +
                    Fmt(" (margin %+.1f%%)", 100.0 * target_search.margin) + "\n"
              : std::string();
  const bool print_json = a.json && !(out && out->quiet_json);
  if (a.json || out) {
    nlohmann::ordered_json j = report::JsonReport(r, ctx);
    if (split) {
      j["system"] = spec.name;
      j["decode_system"] = decode_spec->name;
    }
    if (by_rate)
      j["target"] = {{"request_rate", a.target_request_rate},
                     {"max_gpus", a.max_gpus},
                     {"found", true},
                     {"gpus", target_search.gpus},
                     {"margin", target_search.margin},
                     {"deployment", report::PointJson(target_search.point)},
                     {"steps", report::RecommendStepsJson(target_search)}};
    if (auto_engine) {
      nlohmann::ordered_json all = nlohmann::ordered_json::array();
      for (std::size_t i = 0; i < runs.size(); ++i) {
        const EngineRun& e = runs[i];
        if (!e.error().empty()) {
          all.push_back({{"engine", e.engine()}, {"error", e.error()}});
          continue;
        }
        nlohmann::ordered_json one = i == shown ? j : report::JsonReport(e.result, e.ctx);
        one["meets_sla"] = MeetingPoint(e) != nullptr;
        all.push_back(std::move(one));
      }
      j = {{"backend", "auto"},
           {"pick", pick >= 0 ? nlohmann::ordered_json(runs[static_cast<std::size_t>(pick)].engine())
                              : nlohmann::ordered_json(nullptr)},
           {"engines", all}};
    }
    if (print_json) std::printf("%s\n", j.dump(2).c_str());
    if (out) {
      if (!saved.empty()) j["saved"] = saved;  // for exp: where this run's reports went
      out->json = std::move(j);
    }
  }
  if (!a.json) {
    if (by_rate) std::printf("%s%s\n", report::RecommendStepsTable(target_search).c_str(), target_line.c_str());
    std::printf("%s", report::TerminalReport(r, ctx).c_str());
    if (!saved.empty()) std::printf("report saved to %s/ (report.html, summary.json, <mode>/*.csv)\n", saved.c_str());
    if (auto_engine) std::printf("\n%s", EngineTable(runs, pick, in.total_gpus).c_str());
  }
  if (auto_engine) return pick >= 0 ? 0 : 1;
  return r.chosen >= 0 ? 0 : 1;
}

}  // namespace servecast::cli
