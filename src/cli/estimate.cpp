#include "cli/estimate.h"
#include "cli/data_roots.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "cli/plan_common.h"
#include "cli/value_checks.h"
#include "core/error.h"
#include "model/family.h"
#include "model/model_config.h"
#include "model/ops.h"
#include "perfdb/modes.h"
#include "serve/agg.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "serve/session.h"
#include "serve/simulate.h"
#include "serve/static.h"
#include "system/system_spec.h"

namespace servecast::cli {

namespace {

using Json = nlohmann::ordered_json;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct DetailFlags {
  bool time = false, memory = false, source = false;
};

DetailFlags ParseDetail(const std::string& text) {
  DetailFlags d;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "time") d.time = true;
    else if (item == "memory") d.memory = true;
    else if (item == "source") d.source = true;
    else if (item == "all") d.time = d.memory = d.source = true;
    else if (!item.empty())
      throw UsageError("--detail '" + text + "': unknown item '" + item + "' (expected time, memory, source or all)");
  }
  return d;
}

Json PhaseJson(const serve::PhaseEstimate& p) {
  Json ops = Json::array();
  for (const auto& l : p.ops) {
    ops.push_back({{"name", l.name},
                   {"kind", model::OpKindName(l.kind)},
                   {"latency_ms", l.latency_ms},
                   {"share", l.share},
                   {"source", l.source},
                   {"sol_ms", l.sol_ms},
                   {"sol_fraction", l.latency_ms > 0 ? l.sol_ms / l.latency_ms : 0},
                   {"energy_wms", l.energy_wms},
                   {"detail", l.detail}});
    if (l.overlap != 0) ops.back()["overlap"] = l.overlap;  // 1 / 2: its stream in a region paying the longer
  }
  Json out = {{"latency_ms", p.latency_ms}, {"sol_ms", p.sol_ms}, {"math_ms", p.math_ms}};
  out["energy_wms"] = p.energy_wms;  // W*ms; 0 without power data
  out["power_w"] = p.PowerW();       // energy / latency
  out["ops"] = ops;
  return out;
}

void PrintPhase(const char* title, const serve::PhaseEstimate& p, bool with_detail, const std::string& note) {
  std::printf("\n%s: %.4f ms%s\n", title, p.latency_ms, note.c_str());
  std::printf("  %-36s %12s %7s  %-13s %8s%s\n", "op", "ms", "share", "source", "SOL frac", with_detail ? "  how" : "");
  for (const auto& l : p.ops) {
    std::printf("  %-36s %12.4f %6.1f%%  %-13s %8.2f", l.name.c_str(), l.latency_ms, 100 * l.share, l.source.c_str(),
                l.latency_ms > 0 ? l.sol_ms / l.latency_ms : 0.0);
    if (with_detail) std::printf("  %s", l.detail.c_str());
    std::printf("\n");
  }
}

// --detail source: the rows of the tables this estimate read that came from
// another version or source than the database's own (perfdb merges reuse donors
// and older versions in, first source wins a key), per table or slice, so that
// figures resting on them are marked as such.
void PrintMergedRows(const serve::Database& db) {
  const perfdb::PerfDatabase* pdb = db.perf_database();
  if (!pdb) return;
  bool any = false;
  for (const auto& [label, t] : pdb->Loaded())
    for (const auto& s : t->sources) {
      if (s.kind == perfdb::SourceKind::kPrimary || s.rows_used == 0) continue;
      if (!any) std::printf("\nrows merged from other versions or sources (data %s):\n", db.source().c_str());
      any = true;
      std::printf("  %-40s %zu of %zu rows from %s/%s (%s%s%s)\n", label.c_str(), s.rows_used, t->table.num_rows(),
                  s.backend.c_str(), s.version.c_str(), perfdb::SourceKindName(s.kind), s.reason.empty() ? "" : ": ",
                  s.reason.c_str());
    }
}

std::string FormatRate(double r) {
  char b[64];
  std::snprintf(b, sizeof b, "%.4g requests/s", r);
  return b;
}

}  // namespace

CLI::App* AddEstimateCommand(CLI::App& app, EstimateArgs& a) {
  auto* c = app.add_subcommand("estimate", "latency, throughput and memory of one deployment (static, agg or disagg)");
  c->add_option("--model,--model-path", a.model,
                "HF id (bundled, an alias of models/aliases.yaml, or in the HF cache), a config.json or its folder "
                "(--model-path: the same, AIC's spelling)")
      ->required();
  c->add_option("--system", a.system, "system (systems/<name>.yaml), e.g. h200_sxm")->required();
  c->add_option("--backend", a.engine, "serving engine modelled: trtllm, vllm or sglang")->capture_default_str();
  c->add_option("--data", a.data,
                "perf-data source BACKEND[/VERSION] under the data roots (default: the system's only source, else "
                "cuda; newest version, or the current one an AIC systems folder's query_versions.yaml names)");
  c->add_option("--data-root", a.data_roots,
                kDataRootHelp);
  c->add_option("--database-mode", a.database_mode,
                "silicon (tables; a miss is an error; a table servecast cannot collect yet answers with its roofline, "
                "labelled), hybrid (tables, then util-empirical), empirical, sol; any case")
      ->capture_default_str();
  c->add_option("--transfer-policy", a.transfer_policy, "hybrid / empirical: off, conservative, balanced, aggressive")
      ->capture_default_str();
  c->add_option("--mode", a.mode,
                "static (one batch prefilled then decoded), agg (in-flight batching), disagg (prefill and decode workers)")
      ->capture_default_str();
  c->add_option("--ctx-tokens", a.ctx_tokens,
                "agg: prefill tokens per engine step (default: the engine profile's default_ctx_tokens, else isl; "
                "with --simulate also the simulated engine's step budget, default its sim.max_num_tokens)")
      ->check(IntIn(1, kMaxTokens));
  c->add_option("--prefill-batch", a.prefill_batch, "disagg: requests per prefill pass")->capture_default_str()
      ->check(IntIn(1, kMaxBatch));
  c->add_option("--decode-batch", a.decode_batch, "disagg: requests per decode worker (default: --batch)")
      ->check(IntIn(1, kMaxBatch));
  c->add_option("--prefill-workers", a.prefill_workers, "disagg: prefill workers")->capture_default_str()
      ->check(IntIn(1, kMaxGpus));
  c->add_option("--decode-workers", a.decode_workers, "disagg: decode workers")->capture_default_str()
      ->check(IntIn(1, kMaxGpus));
  for (auto [flag, field] : {std::pair{"--prefill-tp", &a.prefill_tp}, {"--prefill-pp", &a.prefill_pp},
                             {"--prefill-dp", &a.prefill_dp}, {"--prefill-moe-tp", &a.prefill_moe_tp},
                             {"--prefill-moe-ep", &a.prefill_moe_ep}, {"--prefill-cp", &a.prefill_cp},
                             {"--decode-tp", &a.decode_tp},
                             {"--decode-pp", &a.decode_pp}, {"--decode-dp", &a.decode_dp},
                             {"--decode-moe-tp", &a.decode_moe_tp}, {"--decode-moe-ep", &a.decode_moe_ep}})
    c->add_option(flag, *field,
                  std::string("disagg: the ") + (flag[2] == 'p' ? "prefill" : "decode") + " workers' " +
                      (std::string(flag).substr(std::string(flag).find('-', 2) + 1)) + " (default: the shared value)")
        ->check(IntIn(1, kMaxGpus));
  c->add_option("--isl", a.isl, "input tokens per request")->capture_default_str()->check(IntIn(1, kMaxTokens));
  c->add_option("--osl", a.osl, "output tokens per request (static, disagg: at most 65536 decode steps evaluated, (osl - 1) / stride)")->capture_default_str()->check(IntIn(1, kMaxTokens));
  c->add_option("--prefix", a.prefix, "cached prefix tokens of the input")->capture_default_str()
      ->check(IntIn(0, kMaxTokens));
  c->add_option("--batch", a.batch, "requests batched together (per attention-DP rank)")->capture_default_str()
      ->check(IntIn(1, kMaxBatch));
  c->add_option("--tp", a.tp, "tensor parallel")->capture_default_str()->check(IntIn(1, kMaxGpus));
  c->add_option("--pp", a.pp, "pipeline parallel")->capture_default_str()->check(IntIn(1, kMaxGpus));
  c->add_option("--dp", a.dp, "attention data parallel (MoE models)")->capture_default_str()->check(IntIn(1, kMaxGpus));
  c->add_option("--moe-tp", a.moe_tp, "tensor parallel inside the experts (default 1)")->check(IntIn(1, kMaxGpus));
  c->add_option("--moe-ep", a.moe_ep, "expert parallel (default tp x dp x cp / moe_tp)")->check(IntIn(1, kMaxGpus));
  c->add_option("--cp", a.cp,
                "context parallel: the prefill split over cp GPUs (sglang only; tp 1, dp 1; static, and the disagg "
                "prefill workers; decode is never split)")
      ->capture_default_str()
      ->check(IntIn(1, kMaxGpus));
  c->add_option("--nextn", a.nextn, "MTP draft tokens per decode step")->capture_default_str()->check(IntIn(0, 16));
  c->add_option("--mtp-accepted", a.mtp_accepted, "mean accepted draft tokens per step (with --nextn)")
      ->capture_default_str()
      ->check(NumberIn(0, 16));
  c->add_option("--stride", a.stride, "decode steps per evaluated step (1 = every step)")->capture_default_str()
      ->check(IntIn(1, kMaxTokens));
  c->add_option("--gemm-quant", a.gemm_quant, "override the GEMM quantization (default: from the checkpoint)");
  c->add_option("--moe-quant", a.moe_quant, "override the MoE quantization");
  c->add_option("--kv-quant", a.kv_quant, "override the KV-cache dtype");
  c->add_option("--fmha-quant", a.fmha_quant, "override the attention math dtype");
  c->add_option("--comm-quant", a.comm_quant, "override the collectives' dtype");
  c->add_option("--moe-distribution", a.moe_distribution,
                "expert load: balanced, power_law_1.01, power_law_1.2 (default power_law_1.2)")
      ->check(ExpertLoad());
  c->add_option("--detail", a.detail, "comma list: time (per-op table), memory (breakdown), source (how each op was costed, and the rows of other versions or sources merged into the tables read), all");
  c->add_flag("--json", a.json, "print one JSON document and nothing else");
  c->add_flag("--simulate", a.simulate,
              "agg / disagg: also simulate the engine request by request (closed-loop clients: agg, --batch per "
              "worker; disagg, the decode batch x decode ranks; or Poisson arrivals with --sim-rate): TTFT / TPOT "
              "mean, median, p90, throughput, KV-cache state; disagg also the prefill queue and the KV hand-off");
  c->add_option("--sim-requests", a.sim_requests, "--simulate: measured requests (default 10 x the clients)")
      ->check(IntIn(1, 10'000'000));
  c->add_option("--sim-warmup", a.sim_warmup, "--simulate: warm-up requests issued first, excluded (default 2 x the clients)")
      ->check(IntIn(0, 10'000'000));
  c->add_option("--sim-rate", a.sim_rate,
                "--simulate: open loop, Poisson arrivals at this many requests/s (agg: per worker; disagg: the whole "
                "deployment; default: closed loop)")
      ->check(NumberIn(0, 1e9, true));
  c->add_option("--sim-range-ratio", a.sim_range_ratio,
                "--simulate: isl and osl uniform in [ratio x L, L] per request (1: fixed)")
      ->capture_default_str()
      ->check(NumberIn(0, 1, true));
  c->add_option("--sim-seed", a.sim_seed, "--simulate: seed of the request lengths and arrivals")
      ->capture_default_str()
      ->check(IntIn(0, std::int64_t{1} << 62));
  c->add_option("--systems", a.systems_dir, "system spec folder (default: systems/ of the installation)");
  c->add_option("--models", a.models_dir, "bundled model folder (default: models/ of the installation)");
  c->add_option("--engines", a.engines_dir, "engine profile folder (default: engines/ of the installation)");
  c->add_option("--calibration", a.calibration,
                "engine-profile constants: servecast (default, engines/<engine>.yaml) or aic (AIConfigurator's, "
                "engines/aic/<engine>.yaml)");
  return c;
}

namespace {

model::ParallelConfig MakeParallel(int tp, int pp, int dp, int moe_tp, int moe_ep, int cp = 1) {
  model::ParallelConfig par;
  par.tp = tp;
  par.pp = pp;
  par.dp = dp;
  par.cp = cp;
  par.moe_tp = moe_tp > 0 ? moe_tp : 1;
  par.moe_ep = moe_ep > 0 ? moe_ep : std::max(1, tp * dp * cp / par.moe_tp);
  return par;
}

int Pick(int side, int shared) { return side > 0 ? side : shared; }

Json ParallelJson(const model::ParallelConfig& p) {
  Json j = {{"tp", p.tp}, {"pp", p.pp}, {"dp", p.dp}, {"moe_tp", p.moe_tp}, {"moe_ep", p.moe_ep}};
  if (p.cp > 1) j["cp"] = p.cp;  // context parallel (present when > 1)
  j["gpus"] = p.GpusPerWorker();
  return j;
}

Json MemoryJson(const serve::MemoryBreakdown& mem) {
  return {{"weights_bytes", mem.weights},
          {"activations_bytes", mem.activations},
          {"kv_cache_bytes", mem.kv_cache},
          {"nccl_bytes", mem.nccl},
          {"other_bytes", mem.other},
          {"total_bytes", mem.total},
          {"capacity_bytes", mem.capacity},
          {"oom", mem.oom},
          {"kv_bytes_per_token", mem.kv_bytes_per_token},
          {"state_bytes_per_sequence", mem.state_bytes_per_sequence},
          {"kv_budget_bytes", mem.kv_budget},
          {"kv_oom", mem.kv_oom},
          {"max_batch", mem.max_batch}};
}

// The figures every mode's answer has, under the same JSON keys and terminal lines.
template <class Estimate>
void PutHeadline(Json& out, const Estimate& r) {
  out["ttft_ms"] = r.ttft_ms;
  out["tpot_ms"] = r.tpot_ms;
  out["request_latency_ms"] = r.request_latency_ms;
  out["seq_per_s"] = r.seq_per_s;
  out["tokens_per_s"] = r.tokens_per_s;
  out["tokens_per_s_gpu"] = r.tokens_per_s_gpu;
  out["tokens_per_s_user"] = r.tokens_per_s_user;
  out["concurrency"] = r.concurrency;
}

template <class Estimate>
void PrintThroughput(const Estimate& r) {
  std::printf("  request latency  %10.3f ms\n", r.request_latency_ms);
  std::printf("  tokens/s         %10.1f   per GPU %.1f   per user %.1f   concurrency %lld\n", r.tokens_per_s,
              r.tokens_per_s_gpu, r.tokens_per_s_user, static_cast<long long>(r.concurrency));
}

void PrintMemory(const serve::MemoryBreakdown& mem, const serve::EngineProfile& engine, std::int64_t seq_len,
                 bool detail) {
  std::printf("  memory/GPU       %10.2f GiB of %.2f GiB%s; KV room for %lld requests of %lld tokens\n",
              mem.total / kGiB, mem.capacity / kGiB,
              mem.oom ? " (OUT OF MEMORY)" : (mem.kv_oom ? " (KV cache over budget)" : ""),
              static_cast<long long>(mem.max_batch), static_cast<long long>(seq_len));
  if (!detail) return;
  std::printf("\nmemory per GPU (GiB): weights %.3f, activations %.3f, KV cache %.3f, NCCL %.3f, other %.3f = %.3f\n",
              mem.weights / kGiB, mem.activations / kGiB, mem.kv_cache / kGiB, mem.nccl / kGiB, mem.other / kGiB,
              mem.total / kGiB);
  std::printf("  KV cache: %.1f KiB per token, budget %.3f GiB (%s)\n", mem.kv_bytes_per_token / 1024.0,
              mem.kv_budget / kGiB, engine.source_file.c_str());
  if (mem.state_bytes_per_sequence > 0)
    std::printf("  recurrent state: %.1f KiB per sequence, constant in its length (in the KV cache above)\n",
                mem.state_bytes_per_sequence / 1024.0);
}

// The mode flags that only some modes take (checked after the model loads, as before).
void CheckModeFlags(const EstimateArgs& a) {
  const bool disagg = a.mode == "disagg";
  if (a.simulate && a.mode != "agg" && a.mode != "disagg")
    throw UsageError("--simulate: --mode agg and disagg are simulated (got --mode " + a.mode + ")");
  if (a.simulate && a.nextn > 0) throw UsageError("--simulate does not model MTP (--nextn) yet");
  if (a.simulate && a.prefix > 0) throw UsageError("--simulate does not model prefix-cache hits (--prefix) yet");
  if (!a.simulate && (a.sim_requests > 0 || a.sim_warmup >= 0 || a.sim_rate > 0))
    throw UsageError("--sim-requests, --sim-warmup and --sim-rate need --simulate");
  if (a.mode == "agg" && a.cp > 1)
    throw UsageError("--cp " + std::to_string(a.cp) +
                     " with --mode agg: context parallelism is modelled for prefill-only work (static, the disagg "
                     "prefill workers); SGLang splits no mixed prefill+decode batch over CP ranks and runs every "
                     "decode row on each of them (docs/estimator.md, \"Context parallelism\")");
  if (!disagg && a.prefill_cp > 0) throw UsageError("--prefill-cp applies to --mode disagg (use --cp)");
}

// Expert parallelism names a split of experts a model without them does not have
// (--dp is refused by the family's parallel rules; the derived moe values are not).
void RejectExpertFlags(const EstimateArgs& a, const model::ModelConfig& m) {
  if (model::FamilyOf(m).HasExperts()) return;
  for (const auto& [flag, value] : {std::pair<const char*, int>{"--moe-tp", a.moe_tp},
                                    {"--moe-ep", a.moe_ep},
                                    {"--prefill-moe-tp", a.prefill_moe_tp},
                                    {"--prefill-moe-ep", a.prefill_moe_ep},
                                    {"--decode-moe-tp", a.decode_moe_tp},
                                    {"--decode-moe-ep", a.decode_moe_ep}})
    if (value > 0)
      throw UsageError(std::string(flag) + " " + std::to_string(value) + ": " + a.model +
                       " has no experts (expert parallelism applies to MoE models)");
}

// The deployment: one parallel config (static, agg) or one per worker kind (disagg).
struct Parallels {
  model::ParallelConfig par, prefill, decode;
};

Parallels ParallelsOf(const EstimateArgs& a) {
  const bool disagg = a.mode == "disagg";
  Parallels ps;
  ps.par = MakeParallel(a.tp, a.pp, a.dp, a.moe_tp, a.moe_ep, disagg ? 1 : a.cp);
  ps.prefill = disagg ? MakeParallel(Pick(a.prefill_tp, a.tp), Pick(a.prefill_pp, a.pp), Pick(a.prefill_dp, a.dp),
                                     Pick(a.prefill_moe_tp, a.moe_tp), Pick(a.prefill_moe_ep, a.moe_ep),
                                     Pick(a.prefill_cp, a.cp))
                      : ps.par;
  ps.decode = disagg ? MakeParallel(Pick(a.decode_tp, a.tp), Pick(a.decode_pp, a.pp), Pick(a.decode_dp, a.dp),
                                    Pick(a.decode_moe_tp, a.moe_tp), Pick(a.decode_moe_ep, a.moe_ep))
                     : ps.par;
  return ps;
}

serve::Workload WorkloadOf(const EstimateArgs& a) {
  serve::Workload w;
  w.batch = a.batch;
  w.isl = a.isl;
  w.osl = a.osl;
  w.prefix = a.prefix;
  w.nextn = a.nextn;
  w.mtp_accepted = a.mtp_accepted;
  w.stride = a.stride;
  return w;
}

// Everything one estimate reads, opened once; the modes below answer from it.
struct Opened {
  Opened(const EstimateArgs& args, DetailFlags d, systems::SystemSpec s) : a(args), detail(d), spec(std::move(s)) {}
  const EstimateArgs& a;
  DetailFlags detail;
  systems::SystemSpec spec;
  Parallels ps;
  serve::Workload w;
  const serve::Database* db = nullptr;
  const model::ModelConfig* m = nullptr;
  model::OpList ops, decode_ops;
  serve::EngineProfile engine;
  Json head, notes;
};

// What every answer starts with: the JSON head and its notes.
void PutHead(Opened& o) {
  const model::ModelConfig& m = *o.m;
  o.notes = Json::array();
  for (const auto& n : m.quant_notes) o.notes.push_back(n);
  for (const auto& n : o.ops.notes) o.notes.push_back(n);
  o.head = {
      {"mode", o.a.mode},
      {"model", {{"name", m.name}, {"architecture", m.architecture}, {"family", model::FamilyOf(m).Name()}}},
      {"quant",
       {{"gemm", m.quant.gemm},
        {"moe", m.quant.moe},
        {"kv", m.quant.kv},
        {"fmha", m.quant.fmha},
        {"comm", m.quant.comm}}},
      {"system", o.spec.name},
      {"engine", o.a.engine},
      {"data", o.db->source()},
      {"database_mode", perfdb::DatabaseModeName(o.db->mode())},
  };
}

void PrintHead(const Opened& o, const char* what) {
  const model::ModelConfig& m = *o.m;
  std::printf("servecast estimate (%s)\n", what);
  std::printf("  model     %s  [%s, %s]\n", m.name.c_str(), model::FamilyOf(m).Name(), m.architecture.c_str());
  std::printf("  quant     gemm %s, moe %s, kv %s, fmha %s, comm %s\n", m.quant.gemm.c_str(),
              !model::FamilyOf(m).HasExperts() ? "-" : m.quant.moe.c_str(), m.quant.kv.c_str(), m.quant.fmha.c_str(),
              m.quant.comm.c_str());
  std::printf("  system    %s (%s), engine %s, data %s, database mode %s\n", o.spec.name.c_str(),
              o.spec.gpu.device_name.c_str(), o.a.engine.c_str(), o.db->source().c_str(),
              perfdb::DatabaseModeName(o.db->mode()));
}

void PrintNotes(const Opened& o) {
  for (const auto& n : o.m->quant_notes) std::printf("  note      %s\n", n.c_str());
  for (const auto& n : o.ops.notes) std::printf("  note      %s\n", n.c_str());
  std::printf("\n");
}

// --simulate: the discrete-event run of the agg deployment.
struct Simulated {
  serve::SimWorkload sw;
  serve::SimDeployment sd;
};

// The simulated workload: `clients` closed-loop clients (or Poisson at --sim-rate),
// 10 x / 2 x the clients measured / warm-up unless given.
serve::SimWorkload SimWorkloadOf(const EstimateArgs& a, std::int64_t clients) {
  serve::SimWorkload sw;
  sw.arrival = a.sim_rate > 0 ? serve::SimWorkload::Arrival::kPoisson : serve::SimWorkload::Arrival::kClosedLoop;
  sw.concurrency = clients;
  sw.rate_per_s = a.sim_rate;
  sw.requests = a.sim_requests > 0 ? a.sim_requests : 10 * clients;
  sw.warmup = a.sim_warmup >= 0 ? a.sim_warmup : 2 * clients;
  sw.isl = a.isl;
  sw.osl = a.osl;
  sw.range_ratio = a.sim_range_ratio;
  sw.seed = static_cast<std::uint64_t>(a.sim_seed);
  return sw;
}

// --ctx-tokens sets the engine's step budget (max_num_batched_tokens / chunked_prefill_size) too.
serve::EngineProfile SimEngineOf(const Opened& o) {
  serve::EngineProfile e = o.engine;
  if (o.a.ctx_tokens > 0) e.sim.max_num_tokens = o.a.ctx_tokens;
  return e;
}

Simulated SimulateAggOf(const Opened& o) {
  Simulated s;
  s.sw = SimWorkloadOf(o.a, o.a.batch);
  s.sd = serve::SimulateAgg(*o.m, o.ps.par, o.ops, *o.db, SimEngineOf(o), s.sw);
  return s;
}

Json SimStatsJson(const serve::SimStats& st) { return Json{{"mean", st.mean}, {"median", st.median}, {"p90", st.p90}}; }

Json SimWorkloadJson(const EstimateArgs& a, const serve::SimWorkload& sw) {
  return {{"arrival", a.sim_rate > 0 ? "poisson" : "closed_loop"},
          {"concurrency", sw.concurrency},
          {"rate_per_s", sw.rate_per_s},
          {"requests", sw.requests},
          {"warmup", sw.warmup},
          {"range_ratio", sw.range_ratio},
          {"seed", a.sim_seed}};
}

Json SchedulerJson(const serve::EngineProfile& engine, const serve::SimProfile& sim) {
  return {{"profile", engine.source_file},
          {"max_num_tokens", sim.max_num_tokens},
          {"max_num_seqs", sim.max_num_seqs},
          {"chunked_prefill", sim.chunked_prefill},
          {"mixed_batches", sim.mixed_batches},
          {"kv_block_tokens", sim.kv_block_tokens},
          {"admission", sim.admission == serve::SimProfile::Admission::kOnDemand ? "on_demand" : "reserve_full"}};
}

std::string SchedulerText(const serve::SimProfile& sim) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "budget %lld tokens/step, max %s running, %s prefill, %s, KV blocks of %lld, %s",
                static_cast<long long>(sim.max_num_tokens),
                sim.max_num_seqs > 0 ? std::to_string(sim.max_num_seqs).c_str() : "(no limit)",
                sim.chunked_prefill ? "chunked" : "whole-prompt",
                sim.mixed_batches ? "mixed steps" : "prefill-only steps first",
                static_cast<long long>(sim.kv_block_tokens),
                sim.admission == serve::SimProfile::Admission::kOnDemand ? "on-demand, preempt by recompute"
                                                                         : "reserve isl + osl, no eviction");
  return buf;
}

// --simulate with --mode disagg: prefill and decode instances coupled by the hand-off.
struct SimulatedDisagg {
  serve::SimWorkload sw;
  serve::DisaggSimInputs in;
  serve::SimDisaggDeployment sd;
};

SimulatedDisagg SimulateDisaggOf(const Opened& o, std::int64_t prefill_batch, std::int64_t decode_batch) {
  const EstimateArgs& a = o.a;
  SimulatedDisagg s;
  s.in.prefill_workers = a.prefill_workers;
  s.in.decode_workers = a.decode_workers;
  s.in.prefill_batch = prefill_batch;
  s.in.decode_batch = decode_batch;
  // Closed loop: enough clients to fill every decode rank's batch.
  const std::int64_t ranks =
      static_cast<std::int64_t>(a.decode_workers) * o.ps.decode.dp * static_cast<std::int64_t>(o.ps.decode.pp);
  s.sw = SimWorkloadOf(a, decode_batch * ranks);
  s.sd = serve::SimulateDisagg(*o.m, o.ps.prefill, o.ops, o.ps.decode, o.decode_ops, *o.db, SimEngineOf(o), s.in,
                               s.sw);
  return s;
}

// The request figures every simulation reports.
Json SimFiguresJson(const serve::SimResult& s, double tokens_per_s, double tokens_per_s_gpu, double seq_per_s) {
  return {{"measured", s.measured},
          {"ttft_ms", SimStatsJson(s.ttft_ms)},
          {"tpot_ms", SimStatsJson(s.tpot_ms)},
          {"request_latency_ms", SimStatsJson(s.e2e_ms)},
          {"tokens_per_s", tokens_per_s},
          {"tokens_per_s_gpu", tokens_per_s_gpu},
          {"tokens_per_s_user", s.tokens_per_s_user},
          {"seq_per_s", seq_per_s},
          {"duration_ms", s.duration_ms}};
}

Json DisaggSimulationJson(const Opened& o, const SimulatedDisagg& sim) {
  const serve::SimDisaggDeployment& sd = sim.sd;
  const serve::SimResult& s = sd.result.sim;
  serve::SimProfile p = SimEngineOf(o).sim, d = p;
  if (sim.in.prefill_batch > 0) p.max_num_seqs = sim.in.prefill_batch;
  if (sim.in.decode_batch > 0) d.max_num_seqs = sim.in.decode_batch;
  Json j = {{"workload", SimWorkloadJson(o.a, sim.sw)},
            {"prefill_scheduler", SchedulerJson(o.engine, p)},
            {"decode_scheduler", SchedulerJson(o.engine, d)},
            {"handoff_ms", o.engine.sim.disagg_handoff_ms},
            {"kv_transfer_ms", sd.transfer_ms},
            {"kv_transfer_link", sd.intra_node ? "intra_node" : "inter_node"}};
  j.update(SimFiguresJson(s, sd.tokens_per_s, sd.tokens_per_s_gpu, sd.seq_per_s));
  j.update(Json{{"prefill",
           {{"kv_tokens", sd.prefill_kv_tokens},
            {"utilization", sd.result.prefill_utilization},
            {"max_queue", sd.result.prefill_max_queue},
            {"max_running", sd.result.prefill_max_running},
            {"steps", sd.result.prefill_steps},
            {"kv_saturated", sd.result.prefill_kv_saturated}}},
          {"decode",
           {{"kv_tokens", sd.decode_kv_tokens},
            {"kv_peak_fraction", s.kv_peak_fraction},
            {"kv_saturated", s.kv_saturated},
            {"preemptions", s.preemptions},
            {"max_running", s.max_running},
            {"mean_running", s.mean_running},
            {"running_limit_hit", s.running_limit_hit},
            {"steps", s.steps}}},
          {"admitted_all", s.admitted_all},
          {"step_shapes_evaluated", sd.cost_evaluations},
          {"notes", s.notes}});
  return j;
}

void PrintSimLatencies(const serve::SimResult& s) {
  std::printf("  TTFT             mean %10.3f ms   median %10.3f   p90 %10.3f\n", s.ttft_ms.mean, s.ttft_ms.median,
              s.ttft_ms.p90);
  std::printf("  TPOT             mean %10.3f ms   median %10.3f   p90 %10.3f\n", s.tpot_ms.mean, s.tpot_ms.median,
              s.tpot_ms.p90);
  std::printf("  request latency  mean %10.3f ms\n", s.e2e_ms.mean);
}

void PrintDisaggSimulation(const Opened& o, const SimulatedDisagg& sim) {
  const EstimateArgs& a = o.a;
  const serve::SimDisaggDeployment& sd = sim.sd;
  const serve::SimResult& s = sd.result.sim;
  serve::SimProfile p = SimEngineOf(o).sim, d = p;
  if (sim.in.prefill_batch > 0) p.max_num_seqs = sim.in.prefill_batch;
  if (sim.in.decode_batch > 0) d.max_num_seqs = sim.in.decode_batch;
  std::printf("\nsimulated (%lld requests measured after %lld warm-up; %s; lengths in [%.2g L, L], seed %lld)\n",
              static_cast<long long>(s.measured), static_cast<long long>(sim.sw.warmup),
              a.sim_rate > 0 ? ("Poisson " + FormatRate(a.sim_rate)).c_str()
                             : ("closed loop, " + std::to_string(sim.sw.concurrency) + " clients").c_str(),
              sim.sw.range_ratio, static_cast<long long>(a.sim_seed));
  std::printf("  prefill          %s\n", SchedulerText(p).c_str());
  std::printf("  decode           %s\n", SchedulerText(d).c_str());
  std::printf("  hand-off         %.3f ms + KV transfer %.3f ms for %lld tokens (%s)\n", o.engine.sim.disagg_handoff_ms,
              sd.transfer_ms, static_cast<long long>(a.isl), sd.intra_node ? "NVLink, one node" : "network");
  PrintSimLatencies(s);
  std::printf("  tokens/s         %10.1f   per GPU %.1f   per user %.1f\n", sd.tokens_per_s, sd.tokens_per_s_gpu,
              s.tokens_per_s_user);
  std::printf("  prefill side     busy %.1f%%, queue max %lld, running max %lld\n",
              100 * sd.result.prefill_utilization, static_cast<long long>(sd.result.prefill_max_queue),
              static_cast<long long>(sd.result.prefill_max_running));
  std::printf(
      "  decode KV cache  %lld tokens per rank, peak use %.1f%%%s; %lld preemption(s); running max %lld, mean %.1f\n",
      static_cast<long long>(sd.decode_kv_tokens), 100 * s.kv_peak_fraction, s.kv_saturated ? " (SATURATED)" : "",
      static_cast<long long>(s.preemptions), static_cast<long long>(s.max_running), s.mean_running);
  for (const auto& n : s.notes) std::printf("  note             %s\n", n.c_str());
}

Json SimulationJson(const Opened& o, const Simulated& sim) {
  const serve::SimDeployment& sd = sim.sd;
  const serve::SimResult& s = sd.sim;
  Json j = {{"workload", SimWorkloadJson(o.a, sim.sw)}, {"scheduler", SchedulerJson(o.engine, SimEngineOf(o).sim)}};
  j.update(SimFiguresJson(s, sd.tokens_per_s, sd.tokens_per_s_gpu, sd.seq_per_s));
  j.update(Json{
      {"steps", s.steps},
      {"kv_tokens", sd.kv_tokens},
      {"kv_blocks", s.kv_blocks},
      {"kv_peak_fraction", s.kv_peak_fraction},
      {"kv_saturated", s.kv_saturated},
      {"preemptions", s.preemptions},
      {"max_running", s.max_running},
      {"mean_running", s.mean_running},
      {"running_limit_hit", s.running_limit_hit},
      {"admitted_all", s.admitted_all},
      {"step_shapes_evaluated", sd.cost_evaluations},
      {"notes", s.notes}});
  return j;
}

void PrintSimulation(const Opened& o, const Simulated& sim) {
  const EstimateArgs& a = o.a;
  const serve::SimDeployment& sd = sim.sd;
  const serve::SimResult& s = sd.sim;
  std::printf("\nsimulated (%lld requests measured after %lld warm-up; %s; lengths in [%.2g L, L], seed %lld)\n",
              static_cast<long long>(s.measured), static_cast<long long>(sim.sw.warmup),
              a.sim_rate > 0 ? ("Poisson " + FormatRate(a.sim_rate)).c_str()
                             : ("closed loop, " + std::to_string(a.batch) + " clients").c_str(),
              sim.sw.range_ratio, static_cast<long long>(a.sim_seed));
  std::printf("  scheduler        %s\n", SchedulerText(SimEngineOf(o).sim).c_str());
  PrintSimLatencies(s);
  std::printf("  tokens/s         %10.1f   per GPU %.1f   per user %.1f\n", sd.tokens_per_s, sd.tokens_per_s_gpu,
              s.tokens_per_s_user);
  std::printf(
      "  KV cache         %lld tokens per worker, peak use %.1f%%%s; %lld preemption(s); running max %lld, "
      "mean %.1f\n",
      static_cast<long long>(sd.kv_tokens), 100 * s.kv_peak_fraction, s.kv_saturated ? " (SATURATED)" : "",
      static_cast<long long>(s.preemptions), static_cast<long long>(s.max_running), s.mean_running);
  if (!s.admitted_all)
    std::printf("  CANNOT ADMIT     the concurrency: the latencies above include the queue this causes\n");
  for (const auto& n : s.notes) std::printf("  note             %s\n", n.c_str());
}

int EstimateAgg(const Opened& o) {
  const EstimateArgs& a = o.a;
  const model::ParallelConfig& par = o.ps.par;
  serve::AggInputs ai;
  ai.batch = a.batch;
  ai.ctx_tokens = a.ctx_tokens > 0 ? a.ctx_tokens : o.engine.agg.CtxTokens(a.isl, a.batch);
  ai.isl = a.isl;
  ai.osl = a.osl;
  ai.prefix = a.prefix;
  ai.nextn = a.nextn;
  ai.mtp_accepted = a.mtp_accepted;
  const serve::AggEstimate r = serve::RunAgg(*o.m, par, o.ops, *o.db, o.engine, ai);
  const std::int64_t C = ai.ctx_tokens;
  Simulated sim;
  if (a.simulate) sim = SimulateAggOf(o);
  if (a.json) {
    Json out = o.head;
    out["parallel"] = ParallelJson(par);
    out["workload"] = {{"batch", a.batch},
                       {"ctx_tokens", C},
                       {"isl", a.isl},
                       {"osl", a.osl},
                       {"prefix", a.prefix},
                       {"nextn", a.nextn},
                       {"mtp_accepted", a.mtp_accepted}};
    PutHeadline(out, r);
    out["steps"] = {{"mixed_step_ms", r.mixed_step_ms},
                    {"decode_step_ms", r.decode_step_ms},
                    {"mixed_steps", r.mixed_steps},
                    {"decode_steps", r.decode_steps},
                    {"mixed_steps_in_tpot", r.mixed_steps_in_tpot},
                    {"mix_gen_tokens", r.mix_gen_tokens}};
    out["memory"] = MemoryJson(r.memory);
    out["mixed_step"] = PhaseJson(r.mixed);
    if (!r.decode.ops.empty()) out["decode_step"] = PhaseJson(r.decode);
    if (a.simulate) out["simulation"] = SimulationJson(o, sim);
    out["notes"] = o.notes;
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  PrintHead(o, "agg: in-flight batching");
  std::printf("  parallel  %s  (%d GPU%s per replica)\n", par.ToString().c_str(), r.gpus, r.gpus == 1 ? "" : "s");
  std::printf(
      "  workload  concurrency %lld per worker, prefill budget %lld tokens/step, isl %lld, osl %lld, prefix %lld\n",
      static_cast<long long>(a.batch), static_cast<long long>(C), static_cast<long long>(a.isl),
      static_cast<long long>(a.osl), static_cast<long long>(a.prefix));
  PrintNotes(o);
  std::printf("  TTFT             %10.3f ms\n", r.ttft_ms);
  std::printf("  TPOT             %10.3f ms   (mixed step %.3f ms x %.4g in TPOT, decode step %.3f ms x %.4g)\n",
              r.tpot_ms, r.mixed_step_ms, r.mixed_steps_in_tpot, r.decode_step_ms, r.decode_steps);
  PrintThroughput(r);
  PrintMemory(r.memory, o.engine, a.isl + a.osl, o.detail.memory);
  if (a.simulate) PrintSimulation(o, sim);
  if (o.detail.time || o.detail.source) {
    PrintPhase("mixed step (prefill chunk + decode rows)", r.mixed, o.detail.source, "");
    if (!r.decode.ops.empty()) PrintPhase("decode-only step", r.decode, o.detail.source, "");
  }
  if (o.detail.source) PrintMergedRows(*o.db);
  return 0;
}

int EstimateDisagg(const Opened& o) {
  const EstimateArgs& a = o.a;
  const model::ParallelConfig& prefill_par = o.ps.prefill;
  const model::ParallelConfig& decode_par = o.ps.decode;
  serve::DisaggInputs di;
  di.isl = a.isl;
  di.osl = a.osl;
  di.prefix = a.prefix;
  di.nextn = a.nextn;
  di.mtp_accepted = a.mtp_accepted;
  di.prefill_batch = a.prefill_batch;
  di.decode_batch = a.decode_batch > 0 ? a.decode_batch : a.batch;
  di.prefill_workers = a.prefill_workers;
  di.decode_workers = a.decode_workers;
  di.stride = a.stride;
  const serve::DisaggEstimate r =
      serve::RunDisagg(*o.m, prefill_par, o.ops, decode_par, o.decode_ops, *o.db, o.engine, di);
  SimulatedDisagg sim;
  if (a.simulate) sim = SimulateDisaggOf(o, di.prefill_batch, di.decode_batch);
  if (a.json) {
    Json out = o.head;
    out["prefill"] = {{"parallel", ParallelJson(prefill_par)},  {"batch", di.prefill_batch},
                      {"workers", di.prefill_workers},          {"ttft_ms", r.prefill.ttft_ms},
                      {"seq_per_s", r.prefill_seq_per_s},       {"memory", MemoryJson(r.prefill.memory)},
                      {"context", PhaseJson(r.prefill.context)}};
    out["decode"] = {{"parallel", ParallelJson(decode_par)},
                     {"batch", di.decode_batch},
                     {"workers", di.decode_workers},
                     {"tpot_ms", r.decode.tpot_ms},
                     {"seq_per_s", r.decode_seq_per_s},
                     {"memory", MemoryJson(r.decode.memory)},
                     {"generation", PhaseJson(r.decode.generation)}};
    out["workload"] = {
        {"isl", a.isl},      {"osl", a.osl}, {"prefix", a.prefix}, {"nextn", a.nextn}, {"mtp_accepted", a.mtp_accepted},
        {"stride", a.stride}};
    PutHeadline(out, r);
    out["gpus"] = r.gpus;
    if (a.simulate) out["simulation"] = DisaggSimulationJson(o, sim);
    out["notes"] = o.notes;
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  PrintHead(o, "disagg: prefill and decode workers");
  std::printf("  prefill   %d x [%s], batch %lld\n", di.prefill_workers, prefill_par.ToString().c_str(),
              static_cast<long long>(di.prefill_batch));
  std::printf("  decode    %d x [%s], batch %lld   (%d GPUs in all)\n", di.decode_workers,
              decode_par.ToString().c_str(), static_cast<long long>(di.decode_batch), r.gpus);
  std::printf("  workload  isl %lld, osl %lld, prefix %lld\n", static_cast<long long>(a.isl),
              static_cast<long long>(a.osl), static_cast<long long>(a.prefix));
  PrintNotes(o);
  std::printf("  TTFT             %10.3f ms   (prefill pass %.3f ms x %.2f queueing)\n", r.ttft_ms, r.prefill.ttft_ms,
              o.engine.disagg.ttft_correction);
  std::printf("  TPOT             %10.3f ms\n", r.tpot_ms);
  PrintThroughput(r);
  std::printf("  rates            prefill %.2f req/s per worker, decode %.2f req/s per worker\n", r.prefill_seq_per_s,
              r.decode_seq_per_s);
  std::printf("  prefill worker:");
  PrintMemory(r.prefill.memory, o.engine, a.isl + a.osl, o.detail.memory);
  std::printf("  decode worker: ");
  PrintMemory(r.decode.memory, o.engine, a.isl + a.osl, o.detail.memory);
  if (a.simulate) PrintDisaggSimulation(o, sim);
  if (o.detail.time || o.detail.source) {
    PrintPhase("prefill pass (x prefill correction)", r.prefill.context, o.detail.source, "");
    PrintPhase("decode phase (x decode correction)", r.decode.generation, o.detail.source, "");
  }
  if (o.detail.source) PrintMergedRows(*o.db);
  return 0;
}

int EstimateStatic(const Opened& o) {
  const model::ParallelConfig& par = o.ps.par;
  const serve::Workload& w = o.w;
  const serve::StaticEstimate r = serve::RunStatic(*o.m, par, o.ops, *o.db, o.engine, w);
  const serve::MemoryBreakdown& mem = r.memory;
  if (o.a.json) {
    Json out = o.head;
    out["parallel"] = ParallelJson(par);
    out["workload"] = {{"batch", w.batch},   {"isl", w.isl},     {"osl", w.osl},
                       {"prefix", w.prefix}, {"nextn", w.nextn}, {"mtp_accepted", w.mtp_accepted},
                       {"stride", w.stride}};
    PutHeadline(out, r);
    out["bounds"] = {{"ttft_compute_bound_ms", r.ttft_compute_bound_ms},
                     {"tpot_weight_bound_ms", r.tpot_weight_bound_ms},
                     {"ttft_over_bound", r.ttft_compute_bound_ms > 0 ? r.ttft_ms / r.ttft_compute_bound_ms : 0},
                     {"tpot_over_bound", r.tpot_weight_bound_ms > 0 ? r.tpot_ms / r.tpot_weight_bound_ms : 0}};
    out["memory"] = MemoryJson(mem);
    out["context"] = PhaseJson(r.context);
    out["generation"] = PhaseJson(r.generation);
    out["decode_steps_evaluated"] = r.decode_steps_evaluated;
    out["notes"] = o.notes;
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  PrintHead(o, "static");
  std::printf("  parallel  %s  (%d GPU%s per replica)\n", par.ToString().c_str(), r.gpus, r.gpus == 1 ? "" : "s");
  std::printf("  workload  batch %lld, isl %lld, osl %lld, prefix %lld\n", static_cast<long long>(w.batch),
              static_cast<long long>(w.isl), static_cast<long long>(w.osl), static_cast<long long>(w.prefix));
  PrintNotes(o);
  std::printf("  TTFT             %10.3f ms   compute bound %.3f ms (x%.2f)\n", r.ttft_ms, r.ttft_compute_bound_ms,
              r.ttft_compute_bound_ms > 0 ? r.ttft_ms / r.ttft_compute_bound_ms : 0.0);
  std::printf("  TPOT             %10.3f ms   weight-streaming bound %.3f ms (x%.2f)\n", r.tpot_ms,
              r.tpot_weight_bound_ms, r.tpot_weight_bound_ms > 0 ? r.tpot_ms / r.tpot_weight_bound_ms : 0.0);
  PrintThroughput(r);
  PrintMemory(mem, o.engine, w.isl + w.osl, o.detail.memory);
  if (o.detail.time || o.detail.source) {
    PrintPhase("context (one prefill pass)", r.context, o.detail.source, "");
    char note[128];
    std::snprintf(note, sizeof note, " over %lld steps (%lld evaluated, stride %d)", static_cast<long long>(w.osl - 1),
                  static_cast<long long>(r.decode_steps_evaluated), w.stride);
    PrintPhase("generation (all decode steps)", r.generation, o.detail.source, note);
  }
  if (o.detail.source) PrintMergedRows(*o.db);
  return 0;
}

}  // namespace

int RunEstimate(const EstimateArgs& a, const std::function<std::string(const std::string&)>& find) {
  if (a.mode != "static" && a.mode != "agg" && a.mode != "disagg")
    throw UsageError("--mode '" + a.mode + "': expected static, agg or disagg");
  if (a.mode != "agg") RequireDecodeSteps(a.osl, a.stride);  // their decode is a sum over steps
  const DetailFlags detail = ParseDetail(a.detail);
  const std::string systems_dir = a.systems_dir.empty() ? find("systems") : a.systems_dir;
  const std::string models_dir = a.models_dir.empty() ? find("models") : a.models_dir;
  const std::string engines_dir = a.engines_dir.empty() ? find("engines") : a.engines_dir;
  Opened o(a, detail, systems::LoadSystemByName(systems_dir, a.system));

  const model::QuantOverrides ov{a.gemm_quant, a.moe_quant, a.kv_quant, a.fmha_quant, a.comm_quant};
  serve::Deployment d(LoadModelNoted(a.model, models_dir), o.spec, ov);
  RejectExpertFlags(a, d.model());
  CheckModeFlags(a);
  const bool disagg = a.mode == "disagg";
  o.ps = ParallelsOf(a);
  model::OpListOptions oo = serve::OpOptionsFor(model::ParseEngine(a.engine), o.spec);
  oo.nextn = a.nextn;
  oo.moe_distribution = a.moe_distribution;
  o.w = WorkloadOf(a);
  serve::ValidateWorkload(o.w);
  std::vector<model::ParallelConfig> configs{o.ps.prefill};
  if (disagg) configs.push_back(o.ps.decode);
  const std::set<serve::TableNeed> needs = d.Needs(configs, oo);  // validates the parallel configs first
  const serve::DatabaseOptions dbo =
      MakeDataOptions(a.data_roots, a.data, a.database_mode, a.transfer_policy, systems_dir, a.engine);
  o.db = &OpenDataNoted(d, dbo, needs);
  o.m = &d.model();
  o.ops = d.Ops(o.ps.prefill, oo);
  if (disagg) o.decode_ops = d.Ops(o.ps.decode, oo);
  o.engine = serve::LoadEngineProfileByName(engines_dir, oo.engine, a.calibration);
  PutHead(o);

  if (a.mode == "agg") return EstimateAgg(o);
  if (disagg) return EstimateDisagg(o);
  return EstimateStatic(o);
}

}  // namespace servecast::cli
