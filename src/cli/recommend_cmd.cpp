#include "cli/recommend_cmd.h"

#include <cstdio>
#include <nlohmann/json.hpp>

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
  c->add_option("--backend", a.plan.engine, "serving engine modelled: trtllm, vllm or sglang")->capture_default_str();
  AddSlaFlags(c, a.sla);
  auto* rate = c->add_option("--target-request-rate", a.target_request_rate, "requests/s the cluster must serve")
                   ->check(NumberIn(0, 1e9, true));
  auto* conc = c->add_option("--target-concurrency", a.target_concurrency,
                             "concurrent requests the cluster must hold")
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

int RunRecommend(const RecommendArgs& a, const std::function<std::string(const std::string&)>& find) {
  search::RecommendTarget target;
  target.request_rate = a.target_request_rate;
  target.concurrency = a.target_concurrency;
  if ((target.request_rate > 0) == (target.concurrency > 0))
    throw UsageError("give exactly one of --target-request-rate R or --target-concurrency C");

  PlanSetup s = LoadPlan(a.plan, find);
  const model::Engine engine_kind = model::ParseEngine(a.plan.engine);
  search::SearchInputs in = SearchInputsFrom(a.sla, engine_kind, a.max_gpus, s.model());
  const std::vector<int> ladder = a.every_gpu_count ? search::EveryGpuCount(a.max_gpus) : search::GpuLadder(a.max_gpus);
  const serve::Database* db =
      &OpenDataNoted(s.deployment, DataOptions(a.plan, s.systems_dir), search::SearchNeeds(s.deployment, in));
  const serve::EngineProfile engine = serve::LoadEngineProfileByName(s.engines_dir, engine_kind);

  auto run = [&](int gpus) {
    search::SearchInputs at = in;
    at.total_gpus = gpus;
    return search::RunSearch(s.model(), *db, engine, at);
  };
  const search::RecommendResult r = search::Recommend(run, target, ladder, search::kSearchStableGpus);

  const std::string target_text = target.request_rate > 0 ? Fmt(target.request_rate, 3) + " requests/s"
                                                          : std::to_string(target.concurrency) + " concurrent requests";
  const std::string limits = "TTFT <= " + Fmt(in.ttft_ms, 0) + " ms, " +
                             (in.request_latency_ms > 0 ? "request latency <= " + Fmt(in.request_latency_ms, 0) + " ms"
                                                        : "TPOT <= " + Fmt(in.tpot_ms, 1) + " ms");
  if (a.plan.json) {
    nlohmann::ordered_json j;
    j["model"] = s.model().name;
    j["system"] = s.spec().name;
    j["engine"] = model::EngineName(engine_kind);
    j["data"] = db->source();
    j["database_mode"] = perfdb::DatabaseModeName(db->mode());
    j["target"] = target.request_rate > 0 ? nlohmann::ordered_json{{"request_rate", target.request_rate}}
                                          : nlohmann::ordered_json{{"concurrency", target.concurrency}};
    j["limits"] = {{"isl", in.isl}, {"osl", in.osl}, {"ttft_ms", in.ttft_ms}, {"tpot_ms", in.tpot_ms},
                   {"request_latency_ms", in.request_latency_ms}};
    j["max_gpus"] = a.max_gpus;
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
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("servecast recommend: %s on %s (%s), data %s (%s)\n", s.model().name.c_str(), s.spec().name.c_str(),
                model::EngineName(engine_kind), db->source().c_str(), perfdb::DatabaseModeName(db->mode()));
    std::printf("target: %s at %s (isl %lld, osl %lld)\n\n", target_text.c_str(), limits.c_str(),
                static_cast<long long>(in.isl), static_cast<long long>(in.osl));
    std::printf("%s", report::RecommendStepsTable(r).c_str());
    std::printf("\n");
    if (r.found) {
      const search::Point& p = r.point;
      std::printf("minimum: %d GPU(s)\n", r.gpus);
      std::printf("deployment: %s\n", Describe(p).c_str());
      std::printf("  TTFT %.1f ms, TPOT %.2f ms, %.1f tokens/s/user, %.1f tokens/s/GPU, %.1f GiB/GPU\n", p.ttft_ms,
                  p.tpot_ms, p.tokens_per_s_user, p.tokens_per_s_gpu_cluster, p.memory_gib);
      std::printf("  delivers %.3f requests/s and holds %lld concurrent requests; target %s: margin %+.1f%%\n",
                  search::ClusterRequestRate(p), static_cast<long long>(search::ClusterConcurrency(p)),
                  target_text.c_str(), 100.0 * r.margin);
    }
  }
  if (!r.found) {
    double best_rate = 0;
    std::int64_t best_conc = 0;
    bool any_sla = false;
    for (const auto& st : r.steps) {
      best_rate = std::max(best_rate, st.best_request_rate);
      best_conc = std::max(best_conc, st.best_concurrency);
      any_sla = any_sla || st.any_meets_sla;
    }
    if (r.stopped_at > 0) std::fprintf(stderr, "note: %s\n", search::StoppedNote(r).c_str());
    if (!any_sla) {
      std::fprintf(stderr,
                   "error: no deployment on up to %d GPUs meets %s (the table above says why per GPU count); relax "
                   "the limits\n",
                   a.max_gpus, limits.c_str());
      return 1;
    }
    if (r.stopped_at > 0) {
      best_rate = std::max(best_rate, r.bound_request_rate);
      best_conc = std::max(best_conc, r.bound_concurrency);
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
