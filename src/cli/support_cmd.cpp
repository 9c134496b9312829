#include "cli/support_cmd.h"

#include <cstdio>
#include <memory>
#include <set>
#include <nlohmann/json.hpp>

#include "cli/value_checks.h"
#include "core/error.h"
#include "perfdb/modes.h"
#include "perfdb/perf_database.h"
#include "search/search.h"
#include "search/support.h"
#include "serve/database.h"
#include "serve/session.h"

namespace servecast::cli {

CLI::App* AddSupportCommand(CLI::App& app, SupportArgs& a) {
  auto* c = app.add_subcommand("support",
                               "can the perf data answer this model on this system? PASS, PARTIAL or FAIL per engine");
  a.plan.engine.clear();
  AddPlanFlags(c, a.plan, "");
  c->add_option("--backend", a.plan.engine,
                "serving engine: trtllm, vllm or sglang, or auto: all three (the default, as with no --backend)");
  c->add_option("--total-gpus", a.total_gpus, "GPUs whose parallel configurations are checked (default: one node)")
      ->check(IntIn(1, kMaxGpus));
  c->add_option("--isl", a.isl, "input tokens of the representative workload")->capture_default_str()->check(IntIn(1, kMaxTokens));
  c->add_option("--osl", a.osl, "output tokens of the representative workload (at most 131072)")->capture_default_str()->check(IntIn(2, kMaxSearchOsl));
  return c;
}

namespace {

struct EngineOutcome {
  search::SupportReport report;
  std::string open_error;  // the data source could not be opened
  std::string data_note;   // the engine's own data was absent: which source stood in
};

EngineOutcome CheckEngine(const SupportArgs& a, const PlanSetup& s, model::Engine e, int gpus) {
  EngineOutcome out;
  out.report.engine = e;
  search::SearchInputs in;
  in.engine = e;
  in.total_gpus = gpus;
  std::set<serve::TableNeed> needs;
  try {
    needs = search::SearchNeeds(s.deployment, in);
  } catch (const UsageError& ex) {
    out.report.reason = ex.what();
    return out;
  }
  serve::DatabaseOptions dbo = DataOptions(a.plan, s.systems_dir);
  dbo.engine = model::EngineName(e);  // --backend auto names no engine of its own
  // Without --data: the engine's own data (backend = engine name), else the system's default source.
  std::vector<serve::DatabaseOptions> tries;
  if (a.plan.data.empty()) {
    serve::DatabaseOptions own = dbo;
    own.backend = model::EngineName(e);
    tries.push_back(own);
  }
  tries.push_back(dbo);
  std::unique_ptr<serve::Database> silicon, hybrid;
  bool own_failed = false;
  for (const serve::DatabaseOptions& t : tries) {
    try {
      serve::DatabaseOptions so = t;
      so.mode = perfdb::DatabaseMode::kSilicon;
      silicon = serve::Database::Open(s.spec(), so, needs);
      serve::DatabaseOptions ho = t;
      ho.mode = perfdb::DatabaseMode::kHybrid;
      hybrid = serve::Database::Open(s.spec(), ho, needs);
      break;
    } catch (const perfdb::MissingDataError& ex) {
      if (out.open_error.empty()) out.open_error = ex.what();
      own_failed = true;
      silicon.reset();
      hybrid.reset();
    }
  }
  if (!silicon) {
    out.report.verdict = search::SupportVerdict::kFail;
    out.report.reason = "data: " + out.open_error;
    return out;
  }
  if (own_failed) out.data_note = std::string("no ") + model::EngineName(e) + " data; read " + silicon->source();
  out.open_error.clear();
  serve::Deployment d = s.deployment;  // each engine's data settles its own copy
  d.UseData(*silicon);
  const model::ModelConfig& m = d.model();
  search::SupportWorkload w;
  w.isl = a.isl;
  w.osl = a.osl;
  out.report = search::CheckSupport(m, e, gpus, *silicon, hybrid.get(), w);
  if (!out.data_note.empty()) out.report.reason = out.data_note + (out.report.reason.empty() ? "" : "; " + out.report.reason);
  return out;
}

}  // namespace

int RunSupport(const SupportArgs& a, const std::function<std::string(const std::string&)>& find) {
  if (a.isl < 1 || a.osl < 2) throw UsageError("--isl must be >= 1 and --osl >= 2");
  PlanSetup s = LoadPlan(a.plan, find);
  const int gpus = a.total_gpus > 0 ? a.total_gpus : std::max(1, s.spec().node.gpus_per_node);
  std::vector<model::Engine> engines;
  for (const std::string& name : BackendEngines(a.plan.engine.empty() ? "auto" : a.plan.engine))
    engines.push_back(model::ParseEngine(name));

  std::vector<EngineOutcome> outs;
  for (model::Engine e : engines) outs.push_back(CheckEngine(a, s, e, gpus));

  bool any = false;
  for (const auto& o : outs) any = any || o.report.verdict != search::SupportVerdict::kFail;
  if (a.plan.json) {
    nlohmann::ordered_json j;
    j["model"] = s.model().name;
    j["architecture"] = s.model().architecture;
    j["system"] = s.spec().name;
    j["total_gpus"] = gpus;
    j["workload"] = {{"isl", a.isl}, {"osl", a.osl}, {"batches", {1, 64}}};
    auto& arr = j["engines"] = nlohmann::ordered_json::array();
    for (const auto& o : outs) {
      const auto& r = o.report;
      arr.push_back({{"engine", model::EngineName(r.engine)},
                     {"data", r.data},
                     {"verdict", search::SupportVerdictName(r.verdict)},
                     {"reason", r.reason},
                     {"config", r.config},
                     {"configs", r.configs},
                     {"configs_pass", r.configs_pass},
                     {"configs_partial", r.configs_partial},
                     {"fallbacks", r.fallbacks},
                     {"misses", [&] {
                        nlohmann::ordered_json m = nlohmann::ordered_json::array();
                        for (const auto& c : r.details)
                          if (r.verdict == search::SupportVerdict::kFail && c.par.ToString() == r.config)
                            for (const auto& miss : c.hybrid_misses) m.push_back({{"op", miss.op}, {"reason", miss.reason}});
                        return m;
                      }()}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return any ? 0 : 1;
  }
  std::printf("servecast support: %s (%s) on %s; parallel configurations for %d GPUs, isl %lld, osl %lld, batch 1 "
              "and 64\n\n",
              s.model().name.c_str(), s.model().architecture.c_str(), s.spec().name.c_str(), gpus,
              static_cast<long long>(a.isl), static_cast<long long>(a.osl));
  std::printf("  %-7s %-28s %-8s %-17s %s\n", "engine", "data", "verdict", "pass/partial/all", "reason");
  for (const auto& o : outs) {
    const auto& r = o.report;
    const std::string counts = std::to_string(r.configs_pass) + "/" + std::to_string(r.configs_partial) + "/" +
                               std::to_string(r.configs);
    std::string reason = r.reason;
    if (r.verdict == search::SupportVerdict::kPass)
      reason = (o.data_note.empty() ? "" : o.data_note + "; ") + "every op of " + r.config + " answered by the tables";
    if (reason.size() > 150) reason = reason.substr(0, 147) + "...";
    std::printf("  %-7s %-28s %-8s %-17s %s\n", model::EngineName(r.engine), r.data.empty() ? "-" : r.data.c_str(),
                search::SupportVerdictName(r.verdict), counts.c_str(), reason.c_str());
  }
  for (const auto& o : outs) {
    const auto& r = o.report;
    if (r.verdict == search::SupportVerdict::kPartial) {
      std::printf("\n%s PARTIAL (%s): ops that fall back to util-empirical in HYBRID mode (or to the roofline of a table not collected yet):\n",
                  model::EngineName(r.engine), r.config.c_str());
      for (const std::string& f : r.fallbacks) std::printf("  - %s\n", f.c_str());
    } else if (r.verdict == search::SupportVerdict::kFail) {
      std::printf("\n%s FAIL%s:\n", model::EngineName(r.engine),
                  r.config.empty() ? "" : (" (nearest: " + r.config + ")").c_str());
      bool listed = false;
      for (const auto& c : r.details)
        if (c.par.ToString() == r.config)
          for (const auto& miss : c.hybrid_misses) std::printf("  - %s: %s\n", miss.op.c_str(), miss.reason.c_str()), listed = true;
      if (!listed) std::printf("  %s\n", r.reason.c_str());
    }
  }
  return any ? 0 : 1;
}

}  // namespace servecast::cli
