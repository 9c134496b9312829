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
  AddDecodeSystemFlag(c, a.plan.decode_system);
  AddSlaFlags(c, a.sla);
  AddWorkloadFlags(c, a.workload);
  c->add_option("--save-dir", a.save_dir, "output folder (default: ./servecast-<model>-<system>-<N>gpu)");
  c->add_option("--image", a.image,
                "container image of k8s_deploy.yaml (default: nvcr.io/nvidia/ai-dynamo/<engine>-runtime:" +
                    std::string(report::kDynamoVersion) + ")")
      ->check(NonEmpty("a container image, e.g. nvcr.io/nvidia/ai-dynamo/vllm-runtime:" +
                       std::string(report::kDynamoVersion)));
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
std::string PickEngineByFiles(const GenerateArgs& a, const PlanSetup& s, const systems::SystemSpec* decode_spec,
                              nlohmann::ordered_json& table) {
  const std::vector<std::string> engines = BackendEngines("auto");
  std::vector<search::SearchResult> results(engines.size());
  std::vector<const search::SearchResult*> searched(engines.size(), nullptr);
  std::vector<std::string> errors(engines.size());
  for (std::size_t i = 0; i < engines.size(); ++i) {
    PlanArgs pa = a.plan;
    pa.engine = engines[i];
    search::SearchInputs in = SearchInputsFrom(a.sla, model::ParseEngine(engines[i]), a.total_gpus, s.model());
    ApplyWorkload(a.workload, in);
    if (decode_spec) ApplyDecodeSystem(in, a.total_gpus);
    const EngineSearch e = OpenEngineSearch(engines[i], s.model_config, s.spec(), decode_spec,
                                            DataOptions(pa, s.systems_dir), in, s.engines_dir, a.workload.calibration,
                                            true);
    errors[i] = e.error;
    if (!e.error.empty()) continue;
    results[i] = e.Run(in);
    searched[i] = &results[i];
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
  BackendEngines(a.plan.engine);  // an unknown engine: a usage error before any data is read
  PlanSetup s = LoadPlan(a.plan, find);
  const bool split = !a.plan.decode_system.empty();
  const std::optional<systems::SystemSpec> decode_spec =
      split ? std::optional<systems::SystemSpec>(systems::LoadSystemByName(s.systems_dir, a.plan.decode_system))
            : std::nullopt;
  const systems::SystemSpec* dspec = decode_spec ? &*decode_spec : nullptr;
  nlohmann::ordered_json auto_table;
  if (a.plan.engine == "auto") {
    const std::string pick = PickEngineByFiles(a, s, dspec, auto_table);
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
  search::SearchInputs in = SearchInputsFrom(a.sla, engine_kind, a.total_gpus, s.model());
  ApplyWorkload(a.workload, in);
  if (split) ApplyDecodeSystem(in, a.total_gpus);
  const serve::EngineProfile engine =
      serve::LoadEngineProfileByName(s.engines_dir, engine_kind, a.workload.calibration);

  std::optional<search::Point> agg, disagg;
  std::optional<search::SearchResult> searched;  // kept for report.html
  const serve::Database* db = nullptr;
  std::string origin, fallback_reason;
  bool agg_meets = false, disagg_meets = false;
  std::optional<EngineSearch> opened;  // the data (both systems' with --decode-system), kept for report.html
  try {
    opened.emplace(OpenEngineSearch(a.plan.engine, s.model_config, s.spec(), dspec, DataOptions(a.plan, s.systems_dir),
                                    in, s.engines_dir, a.workload.calibration, false));
    db = opened->db;
    const search::SearchResult& r = searched.emplace(opened->Run(in));
    for (const search::ModeResult& mr : r.modes) {
      if (mr.best.empty()) continue;
      const search::Point& p = mr.points[mr.best.front()];
      if (mr.mode == search::Mode::kAgg) agg = p, agg_meets = mr.best_meets_sla;
      else disagg = p, disagg_meets = mr.best_meets_sla;
    }
    origin = std::string("search (data ") + opened->DataName() + ", " + perfdb::DatabaseModeName(db->mode()) + ")";
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

  // The model as the search ran it (its quantization settled by the data), else as the system runs it.
  const model::ModelConfig& planned = opened && opened->db ? opened->deployment->model() : s.model();
  report::LaunchContext c;
  c.engine = engine_kind;
  c.model_id = s.model().name;
  c.system = s.spec().name;
  c.isl = in.isl;
  c.osl = in.osl;
  c.kv_fp8 = planned.quant.kv == "fp8";
  c.memory_fraction = engine.memory.kv_budget.fraction;
  c.total_gpus = a.total_gpus;
  c.gpus_per_node = s.spec().node.gpus_per_node;
  c.image = a.image;
  if (split) {
    c.decode_system = decode_spec->name;
    c.decode_gpus_per_node = decode_spec->node.gpus_per_node;
    c.gpu_product = report::GpuProductLabel(s.spec().gpu.device_name);
    c.decode_gpu_product = report::GpuProductLabel(decode_spec->gpu.device_name);
  }
  if (!agg && !disagg && split)
    throw UsageError("no deployment: the search could not answer (" + fallback_reason +
                     "), and the weights-fit rule sizes only aggregated deployments on one system (--decode-system "
                     "needs the search)");
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
  if (split) summary["decode_system"] = decode_spec->name;
  summary["engine"] = model::EngineName(engine_kind);
  summary["total_gpus"] = a.total_gpus;
  if (!auto_table.is_null()) summary["backend_auto"] = auto_table;
  summary["origin"] = origin;
  summary["predicted"] = c.predicted;
  summary["limits"] = {{"isl", in.isl},       {"osl", in.osl},
                       {"prefix", in.prefix}, {"ttft_ms", in.ttft_ms},
                       {"tpot_ms", in.tpot_ms}, {"request_latency_ms", in.request_latency_ms}};
  summary["agg"] = agg ? report::PointJson(*agg) : nlohmann::ordered_json(nullptr);
  if (agg && c.predicted) summary["agg"]["meets_limits"] = agg_meets;
  summary["disagg"] = disagg ? report::PointJson(*disagg) : nlohmann::ordered_json(nullptr);
  if (disagg) summary["disagg"]["meets_limits"] = disagg_meets;
  files.push_back({"summary.json", summary.dump(2) + "\n"});
  if (c.predicted && searched) {
    // The search's HTML report (as `default --save-dir` writes it), linking the files above.
    report::ReportContext ctx;
    ctx.model = &planned;
    ctx.system = split ? s.spec().name + "+" + decode_spec->name : s.spec().name;  // as `default` names it
    ctx.device = s.spec().gpu.device_name;
    ctx.engine = model::EngineName(engine_kind);
    ctx.data = opened->DataName();
    ctx.database_mode = perfdb::DatabaseModeName(db->mode());
    ctx.inputs = in;
    if (const search::Point* chosen = search::ChosenPoint(*searched))
      ctx.data_notes = search::DataNotes(*chosen, opened->deployment->model(), *db, in);
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
  const std::string where = split ? s.spec().name + " (prefill) + " + decode_spec->name + " (decode)" : s.spec().name;
  std::printf("servecast generate: %s on %s, %d GPUs, engine %s\n", s.model().name.c_str(), where.c_str(), a.total_gpus,
              model::EngineName(engine_kind));
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
