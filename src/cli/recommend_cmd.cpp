#include "cli/recommend_cmd.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "cli/value_checks.h"
#include "core/error.h"
#include "perfdb/modes.h"
#include "report/terminal.h"
#include "search/recommend.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "serve/session.h"

namespace servecast::cli {

CLI::App* AddRecommendCommand(CLI::App& app, RecommendArgs& a) {
  auto* c = app.add_subcommand("recommend",
                               "the fewest GPUs that meet the latency limits at a target request rate or concurrency");
  AddPlanFlags(c, a.plan, "hybrid");
  c->add_option("--backend", a.plan.engine,
                "serving engine modelled: trtllm, vllm, sglang, or auto (walk each engine, answer the one needing the "
                "fewest GPUs; ties: the most tokens/s per GPU)")
      ->capture_default_str();
  AddDecodeSystemFlag(c, a.plan.decode_system);
  AddSlaFlags(c, a.sla);
  AddWorkloadFlags(c, a.workload);
  auto* rate = c->add_option("--target-request-rate", a.target_request_rate, "requests/s the cluster must serve")
                   ->check(NumberIn(0, 1e9, true));
  auto* conc = c->add_option("--target-concurrency", a.target_concurrency, "concurrent requests the cluster must hold")
                   ->check(IntIn(1, kMaxBatch * kMaxGpus));
  rate->excludes(conc);
  c->add_option("--max-gpus", a.max_gpus,
                "largest GPU count tried (ladder 1, 2, 4, 8, 16, 24, ...), at most 4096; from 128 GPUs on the walk "
                "stops at the first count from which no larger one can meet the target")
      ->capture_default_str()
      ->check(IntIn(1, kMaxGpus));
  c->add_flag("--every-gpu-count", a.every_gpu_count,
              "try every count 1, 2, 3, ... up to --max-gpus instead of the ladder (the answer can be 6 or 12; "
              "one search per count)");
  return c;
}

namespace {

std::string Fmt(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

std::string Describe(const search::Point& p) {
  std::string s = std::string(search::ModeName(p.mode)) + " " + p.Parallel() + " x " + std::to_string(p.replicas) +
                  " replica(s) of " + std::to_string(p.gpus_per_replica) + " GPU(s)";
  if (p.mode == search::Mode::kAgg)
    s += ", batch " + std::to_string(p.batch) + ", prefill budget " + std::to_string(p.ctx_tokens) + " tokens";
  else
    s += ", " + std::to_string(p.prefill_workers) + " prefill worker(s) at batch " + std::to_string(p.prefill_batch) +
         ", " + std::to_string(p.decode_workers) + " decode worker(s) at batch " + std::to_string(p.batch);
  return s;
}

}  // namespace

namespace {

// One engine's walk up the GPU counts.
struct Walk {
  EngineSearch open;
  int max_gpus = 0;  // the largest count this walk may try (auto: the fewest found so far)
  search::RecommendResult r;
};

std::string TargetText(const search::RecommendTarget& t) {
  return t.request_rate > 0 ? Fmt(t.request_rate, 3) + " requests/s"
                            : std::to_string(t.concurrency) + " concurrent requests";
}

nlohmann::ordered_json WalkJson(const Walk& w, const PlanSetup& s, const search::SearchInputs& in,
                                const search::RecommendTarget& target, const std::string& decode_system) {
  const search::RecommendResult& r = w.r;
  nlohmann::ordered_json j;
  j["model"] = s.model().name;
  j["system"] = s.spec().name;
  if (!decode_system.empty()) j["decode_system"] = decode_system;
  j["engine"] = w.open.engine;
  if (!w.open.error.empty()) {
    j["error"] = w.open.error;
    return j;
  }
  j["data"] = w.open.DataName();
  j["database_mode"] = perfdb::DatabaseModeName(w.open.db->mode());
  j["target"] = target.request_rate > 0 ? nlohmann::ordered_json{{"request_rate", target.request_rate}}
                                        : nlohmann::ordered_json{{"concurrency", target.concurrency}};
  j["limits"] = {{"isl", in.isl},
                 {"osl", in.osl},
                 {"ttft_ms", in.ttft_ms},
                 {"tpot_ms", in.tpot_ms},
                 {"request_latency_ms", in.request_latency_ms}};
  j["max_gpus"] = w.max_gpus;
  j["found"] = r.found;
  j["gpus"] = r.found ? nlohmann::ordered_json(r.gpus) : nlohmann::ordered_json(nullptr);
  if (r.found) {
    j["margin"] = r.margin;
    j["request_rate"] = search::ClusterRequestRate(r.point);
    j["concurrency"] = search::ClusterConcurrency(r.point);
    j["deployment"] = report::PointJson(r.point);
  } else {
    j["deployment"] = nullptr;
  }
  j["steps"] = report::RecommendStepsJson(r);
  if (r.stopped_at > 0)  // only then, so that the document of a found count is unchanged
    j["stopped"] = {{"after_gpus", r.stopped_at},
                    {"reason", r.stopped_by_limits ? "limits" : "target"},
                    {"bound_gpus", r.bound_gpus},
                    {"bound_request_rate", r.bound_request_rate},
                    {"bound_concurrency", r.bound_concurrency}};
  return j;
}

void PrintFound(const search::RecommendResult& r, const std::string& target_text) {
  const search::Point& p = r.point;
  std::printf("minimum: %d GPU(s)\n", r.gpus);
  std::printf("deployment: %s\n", Describe(p).c_str());
  std::printf("  TTFT %.1f ms, TPOT %.2f ms, %.1f tokens/s/user, %.1f tokens/s/GPU, %.1f GiB/GPU\n", p.ttft_ms,
              p.tpot_ms, p.tokens_per_s_user, p.tokens_per_s_gpu_cluster, p.memory_gib);
  std::printf("  delivers %.3f requests/s and holds %lld concurrent requests; target %s: margin %+.1f%%\n",
              search::ClusterRequestRate(p), static_cast<long long>(search::ClusterConcurrency(p)), target_text.c_str(),
              100.0 * r.margin);
}

// --backend auto: one row per engine, the count it needs and its deployment there.
std::string EngineTable(const std::vector<Walk>& walks, int pick, int max_gpus) {
  std::string out = "backend auto: the fewest GPUs of each engine\n";
  char line[512];
  std::snprintf(line, sizeof line, "  %-7s  %-44s  %5s  %-6s  %-32s  %12s  %10s\n", "engine", "data", "GPUs", "mode",
                "parallel", "tokens/s/gpu", "requests/s");
  out += line;
  for (const Walk& w : walks) {
    if (!w.open.error.empty()) {
      std::snprintf(line, sizeof line, "  %-7s  %-44s  %s\n", w.open.engine.c_str(), w.open.DataName().c_str(),
                    w.open.error.substr(0, w.open.error.find('\n')).c_str());
    } else if (!w.r.found) {
      std::snprintf(line, sizeof line, "  %-7s  %-44s  none up to %d GPUs%s\n", w.open.engine.c_str(),
                    w.open.DataName().c_str(), w.max_gpus,
                    w.max_gpus < max_gpus ? " (the walk stops at the fewest another engine needs)" : "");
    } else {
      const search::Point& p = w.r.point;
      std::snprintf(line, sizeof line, "  %-7s  %-44s  %5d  %-6s  %-32s  %12.1f  %10.3f\n", w.open.engine.c_str(),
                    w.open.DataName().c_str(), w.r.gpus, search::ModeName(p.mode), p.Parallel().c_str(),
                    p.tokens_per_s_gpu_cluster, search::ClusterRequestRate(p));
    }
    out += line;
  }
  if (pick < 0) return out + "pick: none (no engine meets the target within --max-gpus)\n";
  return out + "pick: " + walks[static_cast<std::size_t>(pick)].open.engine +
         ", the fewest GPUs (ties: the most tokens/s per GPU)\n";
}

}  // namespace

int RunRecommend(const RecommendArgs& a, const std::function<std::string(const std::string&)>& find) {
  search::RecommendTarget target;
  target.request_rate = a.target_request_rate;
  target.concurrency = a.target_concurrency;
  if ((target.request_rate > 0) == (target.concurrency > 0))
    throw UsageError("give exactly one of --target-request-rate R or --target-concurrency C");

  const bool auto_engine = a.plan.engine == "auto";
  const std::vector<std::string> engines = BackendEngines(a.plan.engine);
  PlanSetup s = LoadPlan(a.plan, find);
  const bool split = !a.plan.decode_system.empty();
  const std::optional<systems::SystemSpec> decode_spec =
      split ? std::optional<systems::SystemSpec>(systems::LoadSystemByName(s.systems_dir, a.plan.decode_system))
            : std::nullopt;
  search::SearchInputs in = SearchInputsFrom(a.sla, model::ParseEngine(engines.front()), a.max_gpus, s.model());
  ApplyWorkload(a.workload, in);
  if (split) ApplyDecodeSystem(in, a.max_gpus);

  std::vector<Walk> walks;
  for (const std::string& name : engines) {
    Walk w;
    PlanArgs pa = a.plan;
    pa.engine = name;
    w.open = OpenEngineSearch(name, s.model_config, s.spec(), decode_spec ? &*decode_spec : nullptr,
                              DataOptions(pa, s.systems_dir), in, s.engines_dir, a.workload.calibration, auto_engine);
    walks.push_back(std::move(w));
  }
  // An engine can only be the answer at a count no larger than the fewest found
  // so far, so each later walk stops there (the same answer as walking each to
  // --max-gpus, fewer searches).
  int cap = a.max_gpus;
  for (Walk& w : walks) {
    w.max_gpus = cap;
    if (!w.open.error.empty()) continue;
    const std::vector<int> ladder = a.every_gpu_count ? search::EveryGpuCount(cap) : search::GpuLadder(cap);
    auto run = [&](int gpus) {
      search::SearchInputs at = in;
      at.total_gpus = gpus;
      return w.open.Run(at);
    };
    w.r = search::Recommend(run, target, ladder, search::kSearchStableGpus);
    if (w.r.found) cap = w.r.gpus;
  }
  std::vector<const search::RecommendResult*> found;
  for (const Walk& w : walks) found.push_back(w.open.error.empty() ? &w.r : nullptr);
  const int pick = auto_engine ? search::PickFewest(found) : 0;
  if (std::all_of(walks.begin(), walks.end(), [](const Walk& w) { return !w.open.error.empty(); }))
    throw UsageError("no engine could be searched: " + walks.front().open.error);
  // The walk reported in full: the picked engine's, else the first searched.
  std::size_t shown = pick >= 0 ? static_cast<std::size_t>(pick) : 0;
  if (pick < 0)
    for (std::size_t i = walks.size(); i-- > 0;)
      if (walks[i].open.error.empty()) shown = i;
  const Walk& main = walks[shown];
  const search::RecommendResult& r = main.r;

  const std::string target_text = TargetText(target);
  const std::string limits = "TTFT <= " + Fmt(in.ttft_ms, 0) + " ms, " +
                             (in.request_latency_ms > 0 ? "request latency <= " + Fmt(in.request_latency_ms, 0) + " ms"
                                                        : "TPOT <= " + Fmt(in.tpot_ms, 1) + " ms");
  const std::string decode_name = split ? decode_spec->name : std::string();
  if (a.plan.json) {
    nlohmann::ordered_json j = WalkJson(main, s, in, target, decode_name);
    if (auto_engine) {
      nlohmann::ordered_json all = nlohmann::ordered_json::array();
      for (const Walk& w : walks) all.push_back(&w == &main ? j : WalkJson(w, s, in, target, decode_name));
      j = {{"backend", "auto"},
           {"pick", pick >= 0 ? nlohmann::ordered_json(walks[static_cast<std::size_t>(pick)].open.engine)
                              : nlohmann::ordered_json(nullptr)},
           {"engines", all}};
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    const std::string where = split ? s.spec().name + " (prefill) + " + decode_name + " (decode)" : s.spec().name;
    if (auto_engine) {
      // The other engines' walks first, each its table; the picked one's report last.
      for (const Walk& w : walks) {
        if (!w.open.error.empty() || &w == &main) continue;
        std::printf("== %s ==\nservecast recommend: %s on %s (%s), data %s (%s)\n", w.open.engine.c_str(),
                    s.model().name.c_str(), where.c_str(), w.open.engine.c_str(), w.open.DataName().c_str(),
                    perfdb::DatabaseModeName(w.open.db->mode()));
        std::printf("%s\n", report::RecommendStepsTable(w.r).c_str());
      }
      std::printf("== %s (%s) ==\n", main.open.engine.c_str(), pick >= 0 ? "picked" : "none picked");
    }
    std::printf("servecast recommend: %s on %s (%s), data %s (%s)\n", s.model().name.c_str(), where.c_str(),
                main.open.engine.c_str(), main.open.DataName().c_str(), perfdb::DatabaseModeName(main.open.db->mode()));
    std::printf("target: %s at %s (isl %lld, osl %lld)\n\n", target_text.c_str(), limits.c_str(),
                static_cast<long long>(in.isl), static_cast<long long>(in.osl));
    std::printf("%s", report::RecommendStepsTable(r).c_str());
    std::printf("\n");
    if (r.found) PrintFound(r, target_text);
    if (auto_engine) std::printf("\n%s", EngineTable(walks, pick, a.max_gpus).c_str());
  }
  if (!r.found) {
    double best_rate = 0;
    std::int64_t best_conc = 0;
    bool any_sla = false;
    for (const Walk& w : walks)
      for (const auto& st : w.r.steps) {
        best_rate = std::max(best_rate, st.best_request_rate);
        best_conc = std::max(best_conc, st.best_concurrency);
        any_sla = any_sla || st.any_meets_sla;
      }
    for (const Walk& w : walks)
      if (w.r.stopped_at > 0)
        std::fprintf(stderr, "note: %s%s\n", auto_engine ? (w.open.engine + ": ").c_str() : "",
                     search::StoppedNote(w.r).c_str());
    if (!any_sla) {
      std::fprintf(stderr,
                   "error: no deployment on up to %d GPUs meets %s (the table above says why per GPU count); relax "
                   "the limits\n",
                   a.max_gpus, limits.c_str());
      return 1;
    }
    for (const Walk& w : walks)
      if (w.r.stopped_at > 0) {
        best_rate = std::max(best_rate, w.r.bound_request_rate);
        best_conc = std::max(best_conc, w.r.bound_concurrency);
      }
    std::fprintf(stderr,
                 "error: no GPU count up to %d serves %s at %s; the best found: %.3f requests/s, %lld concurrent "
                 "requests (raise --max-gpus or relax the limits)\n",
                 a.max_gpus, target_text.c_str(), limits.c_str(), best_rate, static_cast<long long>(best_conc));
    return 1;
  }
  return 0;
}

}  // namespace servecast::cli
