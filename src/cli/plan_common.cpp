#include "cli/plan_common.h"

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "cli/data_roots.h"
#include "cli/value_checks.h"
#include "core/error.h"
#include "model/family.h"
#include "perfdb/modes.h"
#include "perfdb/perf_database.h"
#include "serve/engine_profile.h"
#include "serve/session.h"

namespace servecast::cli {

void AddPlanFlags(CLI::App* c, PlanArgs& a, const std::string& default_mode) {
  if (!default_mode.empty()) a.database_mode = default_mode;
  c->add_option("--model,--model-path", a.model,
                "HF id (bundled, an alias of models/aliases.yaml, or in the HF cache), a config.json or its folder "
                "(--model-path: the same, AIC's spelling)")
      ->required();
  c->add_option("--system", a.system, "system (systems/<name>.yaml), e.g. h200_sxm")->required();
  c->add_option("--data", a.data, "perf-data source BACKEND[/VERSION] (default: the system's only source, else cuda)");
  c->add_option("--data-root", a.data_roots,
                kDataRootHelp);
  if (!default_mode.empty())
    c->add_option("--database-mode", a.database_mode, "silicon, hybrid, empirical or sol (any case: SILICON)")
        ->capture_default_str();
  c->add_option("--transfer-policy", a.transfer_policy, "hybrid / empirical: off, conservative, balanced, aggressive")
      ->capture_default_str();
  c->add_flag("--json", a.json, "print one JSON document and nothing else");
  c->add_option("--systems", a.systems_dir, "system spec folder (default: systems/ of the installation)");
  c->add_option("--models", a.models_dir, "bundled model folder (default: models/ of the installation)");
  c->add_option("--engines", a.engines_dir, "engine profile folder (default: engines/ of the installation)");
}

void AddSlaFlags(CLI::App* c, SlaArgs& a) {
  c->add_option("--isl", a.isl, "input tokens per request")->capture_default_str()->check(IntIn(1, kMaxTokens));
  c->add_option("--osl", a.osl, "output tokens per request (at most 131072: each candidate sums its decode steps)")->capture_default_str()->check(IntIn(2, kMaxSearchOsl));
  c->add_option("--ttft", a.ttft, "limit on time to first token, ms")->capture_default_str()->check(NumberIn(0, 1e9, true));
  c->add_option("--tpot", a.tpot, "limit on time per output token, ms")->capture_default_str()->check(NumberIn(0, 1e9, true));
  c->add_option("--request-latency", a.request_latency, "limit on request latency, ms (replaces --tpot)")
      ->check(NumberIn(0, 1e9));
  c->add_option("--modes", a.modes, "serving modes searched: agg, disagg or agg,disagg")->capture_default_str();
  auto* nextn = c->add_option("--nextn", a.nextn,
                              "MTP draft tokens per decode step (models with MTP layers), or auto: the "
                              "checkpoint's num_nextn_predict_layers; searched with and without")
                    ->capture_default_str()
                    ->check(CLI::Validator(
                        [](std::string& v) -> std::string {
                          if (v == "auto") return "";
                          try {
                            std::size_t used = 0;
                            const int n = std::stoi(v, &used);
                            if (used == v.size() && n >= 0 && n <= 16) return "";
                          } catch (const std::exception&) {
                          }
                          return "'" + v + "': expected an integer in [0, 16] or auto";
                        },
                        "0..16|auto"));
  auto* accepted = c->add_option("--mtp-accepted", a.mtp_accepted, "mean accepted draft tokens per step (with --nextn)")
                       ->capture_default_str()
                       ->check(NumberIn(0, 16));
  c->add_option("--mtp-accept-rates", a.mtp_accept_rates,
                "AIC's per-position acceptance rates R1,R2,...: MTP with 1, 2, ... draft tokens (one per rate, "
                "mean accepted R1 + R1 R2 + ...) and without, searched in one pool")
      ->delimiter(',')
      ->check(NumberIn(0, 1))
      ->excludes(nextn)
      ->excludes(accepted);
  c->add_flag("--strict-sla", a.strict_sla,
              "the limits must hold: drop points over the TPOT / request-latency limit before the frontier and the "
              "pick (default: judged at pick time, the nearest shown when none meets them)");
}

model::ModelConfig LoadModelNoted(const std::string& spec, const std::string& models_dir) {
  model::ModelConfig m = model::LoadModel(spec, models_dir);
  if (!m.resolution_note.empty()) std::fprintf(stderr, "note: --model %s\n", m.resolution_note.c_str());
  return m;
}

PlanSetup LoadPlan(const PlanArgs& a, const std::function<std::string(const std::string&)>& find) {
  std::string systems_dir = a.systems_dir.empty() ? find("systems") : a.systems_dir;
  std::string models_dir = a.models_dir.empty() ? find("models") : a.models_dir;
  std::string engines_dir = a.engines_dir.empty() ? find("engines") : a.engines_dir;
  systems::SystemSpec spec = systems::LoadSystemByName(systems_dir, a.system);
  model::ModelConfig m = LoadModelNoted(a.model, models_dir);
  serve::Deployment d(m, std::move(spec));
  return PlanSetup{std::move(systems_dir), std::move(models_dir), std::move(engines_dir), std::move(m), std::move(d)};
}

serve::DatabaseOptions MakeDataOptions(const std::vector<std::string>& roots, const std::string& data,
                                       const std::string& database_mode, const std::string& transfer_policy,
                                       const std::string& systems_dir, const std::string& engine) {
  serve::DatabaseOptions dbo;
  dbo.roots = ResolveDataRoots(roots);
  dbo.engine = engine;
  if (dbo.roots.empty()) dbo.roots.push_back((std::filesystem::path(systems_dir) / "data").string());
  if (!data.empty()) {
    const auto slash = data.find('/');
    dbo.backend = data.substr(0, slash);
    if (slash != std::string::npos) dbo.version = data.substr(slash + 1);
  }
  dbo.mode = perfdb::ParseDatabaseMode(database_mode);
  dbo.policy = perfdb::ParseTransferPolicy(transfer_policy);
  return dbo;
}

serve::DatabaseOptions DataOptions(const PlanArgs& a, const std::string& systems_dir) {
  return MakeDataOptions(a.data_roots, a.data, a.database_mode, a.transfer_policy, systems_dir, a.engine);
}

const serve::Database& OpenDataNoted(serve::Deployment& d, const serve::DatabaseOptions& options,
                                     const std::set<serve::TableNeed>& needs) {
  const serve::Database& db = d.OpenData(options, needs);
  if (!db.source_note().empty()) std::fprintf(stderr, "note: %s\n", db.source_note().c_str());
  return db;
}

void AddWorkloadFlags(CLI::App* c, WorkloadArgs& a) {
  c->add_option("--prefix", a.prefix, "cached prefix tokens of the input")->capture_default_str()->check(IntIn(0, kMaxTokens));
  c->add_option("--moe-distribution", a.moe_distribution, "expert load: balanced, power_law_1.01, power_law_1.2")
      ->check(ExpertLoad());
  c->add_option("--calibration", a.calibration,
                "engine-profile constants: servecast (default) or aic (AIConfigurator's, engines/aic/)");
}

void ApplyWorkload(const WorkloadArgs& a, search::SearchInputs& in) {
  in.prefix = a.prefix;
  in.moe_distribution = a.moe_distribution;
  if (in.prefix < 0 || in.prefix >= in.isl) throw UsageError("--prefix must lie in [0, isl)");
}

CLI::Option* AddDecodeSystemFlag(CLI::App* c, std::string& decode_system) {
  return c->add_option("--decode-system", decode_system,
                       "decode workers on this system, prefill workers on --system: disaggregated serving only, each "
                       "side with its own system's data; a replica's GPUs count both sides");
}

void ApplyDecodeSystem(search::SearchInputs& in, int most_gpus) {
  if (!in.disagg)
    throw UsageError(
        "--decode-system searches disaggregated serving (prefill on --system, decode on "
        "--decode-system); --modes agg leaves nothing to search");
  if (most_gpus < 2) throw UsageError("--decode-system needs at least 2 GPUs (one prefill and one decode worker)");
  in.agg = false;
}

std::vector<std::string> BackendEngines(const std::string& backend) {
  if (backend == "auto") return {"trtllm", "vllm", "sglang"};
  model::ParseEngine(backend);  // an unknown name is a usage error here, before any data is read
  return {backend};
}

std::string EngineSearch::DataName() const {
  if (!db) return "-";
  return db->source() + (decode_db ? " + " + decode_db->source() + " (decode)" : "");
}

search::SearchResult EngineSearch::Run(const search::SearchInputs& in) const {
  search::SearchInputs at = in;
  at.engine = model::ParseEngine(engine);
  return search::RunSearch(deployment->model(), *db, profile, at, DecodeOrNull());
}

EngineSearch OpenEngineSearch(const std::string& engine, const model::ModelConfig& m, const systems::SystemSpec& spec,
                              const systems::SystemSpec* decode_spec, const serve::DatabaseOptions& options,
                              const search::SearchInputs& in_all, const std::string& engines_dir,
                              const std::string& calibration, bool keep_errors) {
  EngineSearch e;
  e.engine = engine;
  search::SearchInputs in = in_all;
  in.engine = model::ParseEngine(engine);
  serve::DatabaseOptions dbo = options;
  dbo.engine = engine;
  e.deployment = std::make_unique<serve::Deployment>(m, spec);
  // One side's data; `side` names it in a kept error ("" for --system).
  auto open = [&](serve::Deployment& d, const std::string& side) -> const serve::Database* {
    try {
      return &OpenDataNoted(d, dbo, search::SearchNeeds(d, in));
    } catch (const perfdb::MissingDataError& ex) {
      if (!keep_errors) throw;
      e.error = "no data" + side + ": " + ex.what();
    } catch (const UsageError& ex) {
      if (!keep_errors) throw;
      e.error = side.empty() ? std::string(ex.what()) : side.substr(2, side.size() - 3) + ": " + ex.what();
    }
    return nullptr;
  };
  e.db = open(*e.deployment, "");
  if (e.db && decode_spec) {
    e.decode_deployment = std::make_unique<serve::Deployment>(m, *decode_spec);
    e.decode_db = open(*e.decode_deployment, " (--decode-system " + decode_spec->name + ")");
    if (e.decode_db) e.decode = {&e.decode_deployment->model(), e.decode_db};
  }
  e.profile = serve::LoadEngineProfileByName(engines_dir, in.engine, calibration);
  return e;
}

double FoldAcceptRates(int nextn, const std::vector<double>& rates) {
  double expected = 0, chain = 1;
  for (int i = 0; i < nextn && i < static_cast<int>(rates.size()); ++i) {
    chain *= rates[static_cast<std::size_t>(i)];
    expected += chain;
  }
  return expected;
}

search::SearchInputs SearchInputsFrom(const SlaArgs& s, model::Engine e, int total_gpus, const model::ModelConfig& m) {
  search::SearchInputs in;
  in.engine = e;
  in.total_gpus = total_gpus;
  in.isl = s.isl;
  in.osl = s.osl;
  in.ttft_ms = s.ttft;
  in.tpot_ms = s.tpot;
  in.request_latency_ms = s.request_latency;
  const std::int64_t layers = m.num_nextn_predict_layers;
  const bool mtp_family = model::FamilyOf(m).Knobs().mtp;
  if (s.nextn == "auto") {
    in.nextn = static_cast<int>(layers);
    if (layers > 0 && s.mtp_accepted <= 0)
      throw UsageError("--nextn auto (" + std::to_string(layers) +
                       " draft token(s), the checkpoint's "
                       "num_nextn_predict_layers) needs --mtp-accepted A, the mean accepted draft tokens per step: "
                       "the search does not guess the acceptance");
    if (layers == 0)
      std::fprintf(stderr,
                   "note: --nextn auto: %s ships no MTP layers (num_nextn_predict_layers absent or 0); "
                   "searched without MTP\n",
                   m.name.c_str());
  } else {
    in.nextn = std::stoi(s.nextn);
  }
  in.mtp_accepted = in.nextn > 0 ? s.mtp_accepted : 0;
  in.strict_sla = s.strict_sla;
  if (in.mtp_accepted > in.nextn) throw UsageError("--mtp-accepted must lie in [0, nextn]");
  for (std::size_t n = 1; n <= s.mtp_accept_rates.size(); ++n)
    in.mtp_variants.emplace_back(static_cast<int>(n), FoldAcceptRates(static_cast<int>(n), s.mtp_accept_rates));
  if (!s.mtp_accept_rates.empty() && !mtp_family)
    std::fprintf(stderr,
                 "note: --mtp-accept-rates: %s has no MTP draft layers servecast models (DeepSeek family); "
                 "searched without MTP\n",
                 m.name.c_str());
  if (mtp_family && layers > 0 && in.nextn == 0 && s.mtp_accept_rates.empty())
    std::fprintf(stderr,
                 "note: %s ships MTP (num_nextn_predict_layers=%lld) and is searched without it; --nextn auto "
                 "--mtp-accepted A, or --mtp-accept-rates R1,R2,..., searches with it too\n",
                 m.name.c_str(), static_cast<long long>(layers));
  in.agg = in.disagg = false;
  std::stringstream ss(s.modes);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "agg") in.agg = true;
    else if (item == "disagg") in.disagg = true;
    else throw UsageError("--modes '" + s.modes + "': expected agg, disagg or agg,disagg");
  }
  if (in.isl < 1 || in.osl < 2) throw UsageError("--isl must be >= 1 and --osl >= 2");
  if (in.ttft_ms <= 0 || (in.request_latency_ms <= 0 && in.tpot_ms <= 0))
    throw UsageError("--ttft and --tpot (or --request-latency) must be positive");
  return in;
}

}  // namespace servecast::cli
