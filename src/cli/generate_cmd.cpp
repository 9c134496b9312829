#include "cli/generate_cmd.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "cli/value_checks.h"
#include "core/error.h"
#include "core/fs.h"
#include "model/family.h"
#include "perfdb/modes.h"
#include "perfdb/perf_database.h"
#include "report/generate.h"
#include "report/html.h"
#include "report/terminal.h"
#include "search/search.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "serve/memory.h"
#include "serve/session.h"

namespace servecast::cli {

CLI::App* AddGenerateCommand(CLI::App& app, GenerateArgs& a) {
  auto* c = app.add_subcommand("generate",
                               "write launch configurations (engine command lines, Kubernetes manifest) for the best "
                               "deployments of a model on N GPUs");
  AddPlanFlags(c, a.plan, "silicon");
  c->add_option("--backend", a.plan.engine,
                "serving engine: trtllm, vllm, sglang, or auto (search each, write the files of the engine whose best "
                "deployment meets the limits with the most tokens/s per GPU)")
      ->capture_default_str();
  c->add_option("--total-gpus", a.total_gpus, "GPUs to deploy on")->required()->check(IntIn(1, kMaxGpus));
  AddSlaFlags(c, a.sla);
  c->add_option("--save-dir", a.save_dir, "output folder (default: ./servecast-<model>-<system>-<N>gpu)");
  c->add_option("--image", a.image,
                "container image of k8s_deploy.yaml (default: nvcr.io/nvidia/ai-dynamo/<engine>-runtime:" +
                    std::string(report::kDynamoVersion) + ")");
  return c;
}

namespace {

// Weight bytes of the whole model: one GPU's share at tp 1; the rough formula
// (bf16, 2 bytes x [V H + L (4 H^2 + FFN + 4 H)]) when no op list can be built.
double ModelWeightBytes(const model::ModelConfig& m, model::Engine e) {
  try {
    model::OpListOptions oo;
    oo.engine = e;
    return serve::WeightBytes(model::BuildOpList(m, model::ParallelConfig{}, oo).context);
  } catch (const UsageError&) {
    const double H = static_cast<double>(m.hidden_size), L = static_cast<double>(m.num_layers);
    const double ffn = !model::FamilyOf(m).HasExperts()
                           ? 3 * H * static_cast<double>(m.intermediate_size)
                           : 3 * H * static_cast<double>(m.moe_intermediate_size) * static_cast<double>(m.num_experts) +
                                 H * static_cast<double>(m.num_experts);
    return 2.0 * (static_cast<double>(m.vocab_size) * H + L * (4 * H * H + ffn + 4 * H));
  }
}

// --backend auto: one search per engine on its own data and profile; the engine whose
// chosen deployment meets the limits with the most tokens/s per GPU (search::PickMeeting).
// Fills `table` (one entry per engine) and returns the pick, "" when none meets them.
std::string PickEngineByFiles(const GenerateArgs& a, const PlanSetup& s, nlohmann::ordered_json& table) {
  const std::vector<std::string> engines = {"trtllm", "vllm", "sglang"};
  std::vector<search::SearchResult> results(engines.size());
  std::vector<const search::SearchResult*> searched(engines.size(), nullptr);
  std::vector<std::string> errors(engines.size());
  for (std::size_t i = 0; i < engines.size(); ++i) {
    PlanArgs pa = a.plan;
    pa.engine = engines[i];
    const model::Engine kind = model::ParseEngine(engines[i]);
    const search::SearchInputs in = SearchInputsFrom(a.sla, kind, a.total_gpus, s.model());
    serve::Deployment d(s.model(), s.spec());
    try {
      const serve::Database& db = OpenDataNoted(d, DataOptions(pa, s.systems_dir), search::SearchNeeds(d, in));
      const serve::EngineProfile profile = serve::LoadEngineProfileByName(s.engines_dir, kind);
      results[i] = search::RunSearch(d.model(), db, profile, in);
      searched[i] = &results[i];
    } catch (const perfdb::MissingDataError& ex) {
      errors[i] = std::string("no data: ") + ex.what();
    } catch (const UsageError& ex) {
      errors[i] = ex.what();
    }
  }
  const int pick = search::PickMeeting(searched);
  table = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < engines.size(); ++i) {
    nlohmann::ordered_json e = {{"engine", engines[i]}};
    const search::Point* p = searched[i] ? search::ChosenPoint(*searched[i]) : nullptr;
    if (!errors[i].empty()) {
      e["error"] = errors[i].substr(0, errors[i].find('\n'));
    } else if (!p) {
      e["error"] = "no deployment could be estimated";
    } else {
      e["deployment"] = report::PointJson(*p);
      e["meets_limits"] = search::MeetingPoint(*searched[i]) != nullptr;
    }
    e["picked"] = static_cast<int>(i) == pick;
    table.push_back(std::move(e));
  }
  return pick < 0 ? std::string() : engines[static_cast<std::size_t>(pick)];
}

}  // namespace

int RunGenerate(const GenerateArgs& a_in, const std::function<std::string(const std::string&)>& find) {
  GenerateArgs a = a_in;
  PlanSetup s = LoadPlan(a.plan, find);
  nlohmann::ordered_json auto_table;
  if (a.plan.engine == "auto") {
    const std::string pick = PickEngineByFiles(a, s, auto_table);
    if (pick.empty()) {
      std::string why;
      for (const auto& e : auto_table)
        why += "\n  " + e["engine"].get<std::string>() + ": " +
               (e.contains("error") ? e["error"].get<std::string>() : std::string("does not meet the limits"));
      throw UsageError("--backend auto: no engine's best deployment on " + std::to_string(a.total_gpus) +
                       " GPUs meets the limits; give --backend to write one engine's files anyway" + why);
    }
    a.plan.engine = pick;
  }
  const model::Engine engine_kind = model::ParseEngine(a.plan.engine);
  const search::SearchInputs in = SearchInputsFrom(a.sla, engine_kind, a.total_gpus, s.model());
  const serve::EngineProfile engine = serve::LoadEngineProfileByName(s.engines_dir, engine_kind);

  std::optional<search::Point> agg, disagg;
  std::optional<search::SearchResult> searched;  // kept for report.html
  const serve::Database* db = nullptr;
  std::string origin, fallback_reason;
  bool agg_meets = false, disagg_meets = false;
  try {
    db = &OpenDataNoted(s.deployment, DataOptions(a.plan, s.systems_dir), search::SearchNeeds(s.deployment, in));
    const search::SearchResult& r = searched.emplace(search::RunSearch(s.model(), *db, engine, in));
    for (const search::ModeResult& mr : r.modes) {
      if (mr.best.empty()) continue;
      const search::Point& p = mr.points[mr.best.front()];
      if (mr.mode == search::Mode::kAgg) agg = p, agg_meets = mr.best_meets_sla;
      else disagg = p, disagg_meets = mr.best_meets_sla;
    }
    origin = std::string("search (data ") + db->source() + ", " + perfdb::DatabaseModeName(db->mode()) + ")";
    if (!agg && !disagg) {
      std::size_t most = 0;
      for (const search::ModeResult& mr : r.modes)
        for (const auto& [why, n] : mr.skipped)
          if (n > most) most = n, fallback_reason = why;
      if (fallback_reason.empty()) fallback_reason = "the search found no deployment";
    }
  } catch (const perfdb::MissingDataError& ex) {
    fallback_reason = ex.what();
    const auto nl = fallback_reason.find('\n');
    if (nl != std::string::npos) fallback_reason.resize(nl);
  }

  report::LaunchContext c;
  c.engine = engine_kind;
  c.model_id = s.model().name;
  c.system = s.spec().name;
  c.isl = in.isl;
  c.osl = in.osl;
  c.kv_fp8 = s.model().quant.kv == "fp8";
  c.memory_fraction = engine.memory.kv_budget.fraction;
  c.total_gpus = a.total_gpus;
  c.gpus_per_node = s.spec().node.gpus_per_node;
  c.image = a.image;
  if (!agg && !disagg) {
    const double weights = ModelWeightBytes(s.model(), engine_kind);
    const int tp = report::WeightsFitTp(weights, s.spec().gpu.mem_capacity_bytes, s.spec().node.gpus_per_node,
                                        a.total_gpus);
    if (tp == 0)
      throw UsageError("no deployment: the search could not answer (" + fallback_reason + ") and " +
                       std::to_string(weights / 1e9) + " GB of weights do not fit " +
                       std::to_string(std::min(s.spec().node.gpus_per_node, a.total_gpus)) + " GPU(s) of " +
                       std::to_string(s.spec().gpu.mem_capacity_bytes / 1e9) + " GB with 1.5x headroom");
    agg = report::WeightsFitPoint(s.model(), tp, a.total_gpus, in.isl);
    c.predicted = false;
    origin = "weights-fit rule (" + fallback_reason + ")";
  }
  c.origin = origin;

  const std::string dir = a.save_dir.empty() ? report::DefaultSaveDir(s.model().name, s.spec().name, a.total_gpus)
                                             : a.save_dir;
  std::vector<report::GeneratedFile> files;
  for (const auto& p : {agg, disagg})
    if (p)
      for (auto& f : report::LaunchFiles(c, *p)) files.push_back(std::move(f));

  nlohmann::ordered_json summary;
  summary["model"] = s.model().name;
  summary["system"] = s.spec().name;
  summary["engine"] = model::EngineName(engine_kind);
  summary["total_gpus"] = a.total_gpus;
  if (!auto_table.is_null()) summary["backend_auto"] = auto_table;
  summary["origin"] = origin;
  summary["predicted"] = c.predicted;
  summary["limits"] = {{"isl", in.isl}, {"osl", in.osl}, {"ttft_ms", in.ttft_ms}, {"tpot_ms", in.tpot_ms},
                       {"request_latency_ms", in.request_latency_ms}};
  summary["agg"] = agg ? report::PointJson(*agg) : nlohmann::ordered_json(nullptr);
  if (agg && c.predicted) summary["agg"]["meets_limits"] = agg_meets;
  summary["disagg"] = disagg ? report::PointJson(*disagg) : nlohmann::ordered_json(nullptr);
  if (disagg) summary["disagg"]["meets_limits"] = disagg_meets;
  files.push_back({"summary.json", summary.dump(2) + "\n"});
  if (c.predicted && searched) {
    // The search's HTML report (as `default --save-dir` writes it), linking the files above.
    report::ReportContext ctx;
    ctx.model = &s.model();
    ctx.system = s.spec().name;
    ctx.device = s.spec().gpu.device_name;
    ctx.engine = model::EngineName(engine_kind);
    ctx.data = db->source();
    ctx.database_mode = perfdb::DatabaseModeName(db->mode());
    ctx.inputs = in;
    if (const search::Point* chosen = search::ChosenPoint(*searched))
      ctx.data_notes = search::DataNotes(*chosen, s.model(), *db, in);
    for (const auto& f : files) ctx.launch_files.push_back(f.path);
    files.push_back({"report.html", report::HtmlReport(*searched, ctx)});
  }

  std::vector<std::string> written;
  for (const auto& f : files) {
    const std::string path = (std::filesystem::path(dir) / f.path).string();
    WriteFileAtomic(path, f.content);
    if (f.path.size() > 3 && f.path.substr(f.path.size() - 3) == ".sh")
      std::filesystem::permissions(path, std::filesystem::perms::owner_exec | std::filesystem::perms::group_exec |
                                             std::filesystem::perms::others_exec,
                                   std::filesystem::perm_options::add);
    written.push_back(path);
  }

  if (a.plan.json) {
    summary["save_dir"] = dir;
    summary["files"] = written;
    std::printf("%s\n", summary.dump(2).c_str());
    return 0;
  }
  std::printf("servecast generate: %s on %s, %d GPUs, engine %s\n", s.model().name.c_str(), s.spec().name.c_str(),
              a.total_gpus, model::EngineName(engine_kind));
  std::printf("chosen by: %s\n", origin.c_str());
  if (!auto_table.is_null()) {
    std::printf("backend auto: each engine's best deployment on %d GPUs\n", a.total_gpus);
    for (const auto& e : auto_table) {
      if (e.contains("error")) {
        std::printf("  %-7s %s\n", e["engine"].get<std::string>().c_str(), e["error"].get<std::string>().c_str());
        continue;
      }
      const auto& d = e["deployment"];
      std::printf("  %-7s %-6s %-32s %9.1f tokens/s/GPU  %7.1f tokens/s/user  meets limits: %s%s\n",
                  e["engine"].get<std::string>().c_str(), d["mode"].get<std::string>().c_str(),
                  d["parallel"].get<std::string>().c_str(), d["tokens_per_s_gpu"].get<double>(),
                  d["tokens_per_s_user"].get<double>(), e["meets_limits"].get<bool>() ? "yes" : "no",
                  e["picked"].get<bool>() ? "  <- picked" : "");
    }
  }
  for (const auto& [name, p, meets] : {std::tuple{"agg", agg, agg_meets}, std::tuple{"disagg", disagg, disagg_meets}}) {
    if (!p) {
      std::printf("%-6s none%s\n", name, std::string(name) == "disagg" && !c.predicted ? " (weights-fit rule: agg only)" : "");
      continue;
    }
    if (c.predicted)
      std::printf("%-6s %s x %d replica(s): TTFT %.1f ms, TPOT %.2f ms, %.1f tokens/s/GPU, %.1f tokens/s/user%s\n",
                  name, p->Parallel().c_str(), p->replicas, p->ttft_ms, p->tpot_ms, p->tokens_per_s_gpu_cluster,
                  p->tokens_per_s_user, meets ? "" : "  (does NOT meet the limits: the nearest)");
    else
      std::printf("%-6s %s x %d replica(s) (no prediction)\n", name, p->Parallel().c_str(), p->replicas);
  }
  std::printf("wrote %zu files under %s/:\n", written.size(), dir.c_str());
  for (const auto& f : files) std::printf("  %s\n", f.path.c_str());
  return 0;
}

}  // namespace servecast::cli
