#include "serve/validate.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "core/error.h"
#include "model/family.h"
#include "core/value.h"
#include "model/model_config.h"
#include "model/ops.h"
#include "perfdb/discovery.h"
#include "perfdb/perf_database.h"
#include "serve/agg.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "serve/session.h"
#include "serve/simulate.h"
#include "system/system_spec.h"

namespace servecast::serve {

namespace {

// ---------------------------------------------------------------- reading

// Splits one CSV record (RFC 4180 quoting; no embedded newlines).
std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::string Trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

class RowReader {
 public:
  RowReader(const std::string& file, int line, const std::map<std::string, std::size_t>& index,
            const std::vector<std::string>& fields)
      : file_(file), line_(line), index_(index), fields_(fields) {}

  std::string Text(const std::string& column) const {
    const auto it = index_.find(column);
    return it == index_.end() ? "" : Trim(fields_[it->second]);
  }
  std::optional<double> Number(const std::string& column) const {
    const std::string t = Text(column);
    if (t.empty()) return std::nullopt;
    try {
      std::size_t used = 0;
      const double v = std::stod(t, &used);
      if (used == t.size() && std::isfinite(v)) return v;
    } catch (const std::exception&) {
    }
    throw DataError(SourceLocation{file_, line_, column}, "'" + t + "' is not a number", "a number or empty");
  }
  // A non-negative whole number up to `max` (the command line's ranges: tokens
  // 2^24, requests 2^20, GPUs 4096); 1e30 was cast to INT64_MIN before.
  std::int64_t Count(const std::string& column, std::int64_t max = kMaxTokens) const {
    const std::optional<double> v = Number(column);
    if (!v) return 0;
    if (*v < 0 || std::floor(*v) != *v)
      throw DataError(SourceLocation{file_, line_, column}, "'" + Text(column) + "' is not a count",
                      "a non-negative integer or empty");
    if (*v > static_cast<double>(max))
      throw DataError(SourceLocation{file_, line_, column}, "'" + Text(column) + "' is out of range",
                      "an integer in [0, " + std::to_string(max) + "] or empty");
    return static_cast<std::int64_t>(*v);
  }
  int Size(const std::string& column) const { return static_cast<int>(Count(column, kMaxGpus)); }
  static constexpr std::int64_t kMaxTokens = std::int64_t{1} << 24;
  static constexpr std::int64_t kMaxRequests = std::int64_t{1} << 20;
  static constexpr std::int64_t kMaxGpus = 4096;

 private:
  std::string file_;
  int line_;
  const std::map<std::string, std::size_t>& index_;
  const std::vector<std::string>& fields_;
};

// "silicon_concurrency=N" among the "; "-separated fields of silicon_data_source
// (0 when absent); a value that is not a positive integer -> DataError.
std::int64_t SourceConcurrency(const std::string& text, const std::string& file, int line) {
  const std::string key = "silicon_concurrency=";
  std::size_t at = text.find(key);
  while (at != std::string::npos && at > 0 && text[at - 1] != ' ' && text[at - 1] != ';') at = text.find(key, at + 1);
  if (at == std::string::npos) return 0;
  const std::size_t begin = at + key.size();
  const std::size_t end = text.find(';', begin);
  const std::string v = Trim(text.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
  std::size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty() || n < 1)
    throw DataError(SourceLocation{file, line, "silicon_data_source"}, "silicon_concurrency '" + v + "'",
                    "a positive integer");
  return n;
}

// ---------------------------------------------------------------- helpers

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A failure while predicting one row: which stage ("unsupported model", ...) and why.
struct RowFailure {
  std::string kind, reason;
};

// Runs `f`, turning the project's errors into a RowFailure of kind `kind`
// (missing data keeps its own kind whatever the stage).
template <class F>
std::optional<RowFailure> Guard(const std::string& kind, F&& f) {
  try {
    f();
    return std::nullopt;
  } catch (const perfdb::MissingDataError& e) {
    return RowFailure{"missing data", e.what()};
  } catch (const Error& e) {
    const std::string what = e.what();
    // A model family the estimator does not cover is the model's problem, not the row's.
    if (what.find("not yet supported") != std::string::npos) return RowFailure{"unsupported model", what};
    return RowFailure{kind, what};
  }
}

model::ParallelConfig MakeParallel(int tp, int pp, int dp, int moe_tp, int moe_ep, bool moe_model,
                                   std::vector<std::string>& notes, const std::string& side) {
  model::ParallelConfig p;
  p.tp = std::max(tp, 1);
  p.pp = std::max(pp, 1);
  // An empty attention_dp_size is 1, unless the MoE sizes span more GPUs than
  // tp: then the attention runs data-parallel over the rest (vLLM/SGLang DP).
  p.dp = std::max(dp, 1);
  if (moe_model && dp == 0 && moe_tp > 0 && moe_ep > 0 && moe_tp * moe_ep > p.tp && (moe_tp * moe_ep) % p.tp == 0) {
    p.dp = moe_tp * moe_ep / p.tp;
    notes.push_back(side + "attention_dp_size empty but moe_tp x moe_ep = " + std::to_string(moe_tp * moe_ep) +
                    " > tp " + std::to_string(p.tp) + ": dp = " + std::to_string(p.dp));
  }
  const int gpus = p.tp * p.dp;
  if (!moe_model) {
    p.moe_tp = 1;
    p.moe_ep = gpus;
  } else if (moe_tp > 0 && moe_ep > 0) {
    p.moe_tp = moe_tp;
    p.moe_ep = moe_ep;
  } else if (moe_tp > 0) {
    p.moe_tp = moe_tp;
    p.moe_ep = std::max(1, gpus / moe_tp);
  } else if (moe_ep > 0) {
    p.moe_ep = moe_ep;
    p.moe_tp = std::max(1, gpus / moe_ep);
  } else {
    // Engines shard the experts like the dense layers unless expert parallelism is asked for.
    p.moe_tp = gpus;
    p.moe_ep = 1;
    notes.push_back(side + "moe sizes empty: moe_tp = tp x dp = " + std::to_string(gpus) + ", moe_ep 1");
  }
  return p;
}

std::string ParallelText(const model::ParallelConfig& p, bool moe_model) {
  std::string s = "tp" + std::to_string(p.tp);
  if (p.pp > 1) s += " pp" + std::to_string(p.pp);
  if (p.dp > 1) s += " dp" + std::to_string(p.dp);
  if (moe_model) s += " moe" + std::to_string(p.moe_tp) + "x" + std::to_string(p.moe_ep);
  return s;
}

double ErrorPct(double predicted, double measured) {
  return measured != 0 ? (predicted - measured) / measured * 100.0 : 0.0;
}

// The perf-data sources under the roots, and the databases opened so far.
class Sources {
 public:
  explicit Sources(const ValidateOptions& o) : options_(o), tree_(perfdb::DataTree::Scan(o.roots)) {}

  // "BACKEND/VERSION" for the row, or a failure.
  std::string Resolve(const SiliconRow& row, std::string& why) const {
    std::string spec = options_.data;
    if (spec.empty()) {
      const auto it = options_.data_map.find(Lower(row.backend));
      if (it != options_.data_map.end()) spec = it->second;
    }
    std::string backend = spec.empty() ? Lower(row.backend) : spec.substr(0, spec.find('/'));
    std::string version = spec.empty() || spec.find('/') == std::string::npos ? "" : spec.substr(spec.find('/') + 1);
    const std::vector<std::string> versions = tree_.BackendVersions(row.system, backend, true);
    if (versions.empty()) {
      std::string have;
      for (const auto& b : tree_.Backends(row.system)) have += (have.empty() ? "" : ", ") + b;
      why = "no perf data of backend '" + backend + "' for system '" + row.system + "' under the data roots" +
            (have.empty() ? " (the system has none)" : " (backends with data: " + have + ")");
      return "";
    }
    if (!version.empty()) return backend + "/" + version;
    if (spec.empty() && !row.backend_version.empty()) {
      // The newest at or below the row's version, else the nearest newer one.
      std::string pick;
      for (const auto& v : versions)
        if (perfdb::CompareVersionDirs(v, row.backend_version) <= 0) pick = v;
      if (pick.empty()) pick = versions.front();
      return backend + "/" + pick;
    }
    return backend + "/" + versions.back();
  }

  const Database& Open(const systems::SystemSpec& spec, const std::string& source) {
    const std::string key = spec.name + "|" + source;
    auto it = dbs_.find(key);
    if (it != dbs_.end()) return *it->second;
    DatabaseOptions dbo;
    dbo.roots = options_.roots;
    dbo.backend = source.substr(0, source.find('/'));
    dbo.version = source.substr(source.find('/') + 1);
    dbo.mode = options_.mode;
    const std::set<TableNeed> all = AllTableNeeds();
    auto db = Database::Open(spec, dbo, all);
    return *dbs_.emplace(key, std::move(db)).first->second;
  }

 private:
  const ValidateOptions& options_;
  perfdb::DataTree tree_;
  std::map<std::string, std::unique_ptr<Database>> dbs_;
};

struct Resources {
  const ValidateOptions& options;
  Sources sources;
  std::map<std::string, model::ModelConfig> models;
  std::map<std::string, systems::SystemSpec> systems;
  std::map<model::Engine, EngineProfile> engines;

  explicit Resources(const ValidateOptions& o) : options(o), sources(o) {}

  const model::ModelConfig& Model(const std::string& path) {
    auto it = models.find(path);
    if (it == models.end()) it = models.emplace(path, model::LoadModel(path, options.models_dir)).first;
    return it->second;
  }
  const systems::SystemSpec& System(const std::string& name) {
    auto it = systems.find(name);
    if (it == systems.end()) it = systems.emplace(name, systems::LoadSystemByName(options.systems_dir, name)).first;
    return it->second;
  }
  const EngineProfile& Engine(model::Engine e) {
    auto it = engines.find(e);
    if (it == engines.end()) it = engines.emplace(e, LoadEngineProfileByName(options.engines_dir, e)).first;
    return it->second;
  }
};

// A disagg row's decode is a sum over its osl - 1 steps, one pass of the op list per
// `stride` steps (RunStatic). At the default stride 32 an osl of 2^24 took 524,288
// passes (minutes for one row); past kMaxDisaggDecodeSteps passes the stride widens
// so that every row costs at most that many, each pass weighted by the steps it
// stands for, as at stride 32. Rows up to osl 131,073 keep stride 32.
constexpr std::int64_t kMaxDisaggDecodeSteps = 4096;
constexpr int kDisaggDecodeStride = DisaggInputs{}.stride;  // 32

int DisaggDecodeStride(std::int64_t osl) {
  const std::int64_t steps = osl - 1;
  return static_cast<int>(
      std::max<std::int64_t>(kDisaggDecodeStride, (steps + kMaxDisaggDecodeSteps - 1) / kMaxDisaggDecodeSteps));
}

// The measured rows' workload at concurrency c: closed loop, 10 x c measured after 2 x c warm-up.
SimWorkload RowWorkload(const SiliconRow& row, std::int64_t c, double range_ratio) {
  SimWorkload w;
  w.concurrency = c;
  w.requests = 10 * c;
  w.warmup = 2 * c;
  w.isl = row.isl;
  w.osl = row.osl;
  w.range_ratio = range_ratio;
  return w;
}

// A simulation's figures into the row: the statistic compared, its errors, the engine state.
void RecordSimulation(const SimResult& sr, bool median, RowResult& out) {
  out.simulated = true;
  out.sim_ttft_ms = median ? sr.ttft_ms.median : sr.ttft_ms.mean;
  out.sim_tpot_ms = median ? sr.tpot_ms.median : sr.tpot_ms.mean;
  out.sim_ttft_error_pct = ErrorPct(out.sim_ttft_ms, out.measured_ttft_ms);
  out.sim_tpot_error_pct = ErrorPct(out.sim_tpot_ms, out.measured_tpot_ms);
  out.sim_kv_saturated = sr.kv_saturated;
  out.sim_admitted_all = sr.admitted_all;
  out.sim_preemptions = sr.preemptions;
  out.sim_max_running = sr.max_running;
  for (const auto& n : sr.notes) out.notes.push_back("simulation: " + n);
}

void PredictRow(const SiliconRow& row, Resources& res, RowResult& out) {
  auto fail = [&](const RowFailure& f) {
    out.failure = f.kind;
    out.reason = f.reason;
  };
  const std::string mode = Lower(row.mode);
  if (mode != "agg" && mode != "disagg") return fail({"bad row", "mode '" + row.mode + "': expected agg or disagg"});
  if (!row.ttft_ms || !row.tpot_ms) return fail({"bad row", "no measured silicon_ttft_ms / silicon_tpot_ms"});
  if (!(*row.ttft_ms > 0) || !(*row.tpot_ms > 0))
    return fail({"bad row", "a measured TTFT or TPOT of " + FormatG6(std::min(*row.ttft_ms, *row.tpot_ms)) +
                                " ms is impossible (silicon_ttft_ms and silicon_tpot_ms must be > 0)"});
  if (mode == "agg" && row.tp < 1) return fail({"bad row", "tp_size must be >= 1 (one GPU at least)"});
  if (row.isl < 1 || row.osl < 2) return fail({"bad row", "isl must be >= 1 and osl >= 2"});
  if (mode == "agg" && row.batch < 1) return fail({"bad row", "batch_size (client concurrency) must be >= 1"});

  model::Engine engine{};
  if (auto f = Guard("unknown engine", [&] { engine = model::ParseEngine(Lower(row.backend)); })) return fail(*f);
  const model::ModelConfig* base = nullptr;
  if (auto f = Guard("unsupported model", [&] { base = &res.Model(row.model_path); })) return fail(*f);
  if (!base->resolution_note.empty()) out.notes.push_back(base->resolution_note);
  const systems::SystemSpec* spec = nullptr;
  if (auto f = Guard("unknown system", [&] { spec = &res.System(row.system); })) return fail(*f);

  const bool moe_model = model::FamilyOf(*base).HasExperts();
  model::QuantOverrides ov;
  ov.gemm = row.gemm_quant;
  if (moe_model) ov.moe = row.moe_quant;
  std::optional<Deployment> d;
  if (auto f = Guard("bad row", [&] { d.emplace(*base, *spec, ov); })) return fail(*f);
  for (const std::string& n : d->system_notes()) out.notes.push_back(n);

  std::string why;
  const std::string source = res.sources.Resolve(row, why);
  if (source.empty()) return fail({"missing data", why});
  out.source = source;
  const Database* db = nullptr;
  if (auto f = Guard("missing data", [&] { db = &res.sources.Open(*spec, source); })) return fail(*f);
  const EngineProfile* profile = nullptr;
  if (auto f = Guard("bad engine profile", [&] { profile = &res.Engine(engine); })) return fail(*f);

  model::OpListOptions oo = OpOptionsFor(engine, *spec);
  oo.moe_distribution = res.options.moe_distribution;

  const std::string workload = std::to_string(row.isl) + "/" + std::to_string(row.osl);
  if (mode == "agg") {
    const model::ParallelConfig par =
        MakeParallel(row.tp, row.pp, row.dp, row.moe_tp, row.moe_ep, moe_model, out.notes, "");
    // The client keeps `batch` requests in flight; each attention-DP rank serves its share.
    const std::int64_t per_rank = (row.batch + par.dp - 1) / par.dp;
    out.config = workload + " c" + std::to_string(row.batch) + " " + ParallelText(par, moe_model);
    AggEstimate r;
    if (auto f = Guard("bad row", [&] {
          d->UseData(*db);
          const model::OpList ops = d->Ops(par, oo);
          AggInputs ai;
          ai.batch = per_rank;
          ai.ctx_tokens = profile->agg.CtxTokens(row.isl, per_rank);  // the engine's default prefill budget
          ai.isl = row.isl;
          ai.osl = row.osl;
          r = RunAgg(d->model(), par, ops, *db, *profile, ai);
        }))
      return fail(*f);
    if (r.memory.oom)
      out.notes.push_back("the memory model says this deployment does not fit (oom)");
    else if (r.memory.kv_oom)
      out.notes.push_back("the KV cache of this concurrency exceeds the engine's budget");
    out.ttft_ms = r.ttft_ms;
    out.tpot_ms = r.tpot_ms;
    if (res.options.simulate) {
      SimDeployment sd;
      const SimWorkload w = RowWorkload(row, per_rank, res.options.sim_range_ratio);
      const auto f = Guard("not simulated", [&] {
        const model::OpList ops = d->Ops(par, oo);
        sd = SimulateAgg(d->model(), par, ops, *db, *profile, w);
      });
      if (f) {
        out.sim_failure = f->kind + ": " + f->reason;
      } else {
        RecordSimulation(sd.sim, res.options.sim_median, out);
      }
    }
  } else {
    const model::ParallelConfig pp = MakeParallel(row.prefill_tp, row.prefill_pp, row.prefill_dp, row.prefill_moe_tp,
                                                  row.prefill_moe_ep, moe_model, out.notes, "prefill: ");
    const model::ParallelConfig dp = MakeParallel(row.decode_tp, row.decode_pp, row.decode_dp, row.decode_moe_tp,
                                                  row.decode_moe_ep, moe_model, out.notes, "decode: ");
    // decode_batch_size is each decode rank's running batch. A row that gives only
    // the client concurrency (batch_size, else silicon_concurrency=N in
    // silicon_data_source) spreads it over the decode workers' attention-DP ranks.
    std::int64_t decode_batch = row.decode_batch;
    if (decode_batch < 1) {
      const std::int64_t concurrency = row.batch > 0 ? row.batch : row.source_concurrency;
      if (concurrency < 1)
        return fail({"bad row", "disagg row without decode_batch_size, batch_size or silicon_concurrency=N in "
                                "silicon_data_source"});
      const std::int64_t ranks = static_cast<std::int64_t>(std::max(row.decode_workers, 1)) * dp.dp;
      decode_batch = (concurrency + ranks - 1) / ranks;
      out.notes.push_back("decode batch derived: concurrency " + std::to_string(concurrency) +
                          (row.batch > 0 ? " (batch_size)" : " (silicon_concurrency)") + " / (" +
                          std::to_string(std::max(row.decode_workers, 1)) + " decode workers x dp " +
                          std::to_string(dp.dp) + ") = " + std::to_string(decode_batch) + " per rank (rounded up)");
    }
    out.config = workload + " P" + std::to_string(std::max(row.prefill_workers, 1)) + "x[" +
                 ParallelText(pp, moe_model) + " b" + std::to_string(std::max<std::int64_t>(row.prefill_batch, 1)) +
                 "] D" + std::to_string(std::max(row.decode_workers, 1)) + "x[" + ParallelText(dp, moe_model) + " b" +
                 std::to_string(decode_batch) + "]";
    const int stride = DisaggDecodeStride(row.osl);
    if (stride != kDisaggDecodeStride)
      out.notes.push_back("decode summed at stride " + std::to_string(stride) + " (at most " +
                          std::to_string(kMaxDisaggDecodeSteps) + " evaluated decode steps; stride " +
                          std::to_string(kDisaggDecodeStride) + " up to osl " +
                          std::to_string(kMaxDisaggDecodeSteps * kDisaggDecodeStride + 1) + ")");
    DisaggEstimate r;
    if (auto f = Guard("bad row", [&] {
          d->UseData(*db);
          const model::OpList pops = d->Ops(pp, oo);
          const model::OpList dops = d->Ops(dp, oo);
          DisaggInputs di;
          di.isl = row.isl;
          di.osl = row.osl;
          di.prefill_batch = std::max<std::int64_t>(row.prefill_batch, 1);
          di.decode_batch = decode_batch;
          di.prefill_workers = std::max(row.prefill_workers, 1);
          di.decode_workers = std::max(row.decode_workers, 1);
          di.stride = stride;
          r = RunDisagg(d->model(), pp, pops, dp, dops, *db, *profile, di);
        }))
      return fail(*f);
    out.ttft_ms = r.ttft_ms;
    out.tpot_ms = r.tpot_ms;
    if (res.options.simulate) {
      // The clients: the row's concurrency, else the decode ranks' running batches.
      const std::int64_t ranks = static_cast<std::int64_t>(std::max(row.decode_workers, 1)) * dp.dp * dp.pp;
      const std::int64_t concurrency =
          row.batch > 0 ? row.batch : row.source_concurrency > 0 ? row.source_concurrency : decode_batch * ranks;
      const SimWorkload w = RowWorkload(row, concurrency, res.options.sim_range_ratio);
      DisaggSimInputs si;
      si.prefill_workers = std::max(row.prefill_workers, 1);
      si.decode_workers = std::max(row.decode_workers, 1);
      si.prefill_batch = std::max<std::int64_t>(row.prefill_batch, 0);
      si.decode_batch = decode_batch;
      SimDisaggDeployment sd;
      const auto f = Guard("not simulated", [&] {
        const model::OpList pops = d->Ops(pp, oo);
        const model::OpList dops = d->Ops(dp, oo);
        sd = SimulateDisagg(d->model(), pp, pops, dp, dops, *db, *profile, si, w);
      });
      if (f) {
        out.sim_failure = f->kind + ": " + f->reason;
      } else {
        RecordSimulation(sd.result.sim, res.options.sim_median, out);
        out.sim_kv_saturated = out.sim_kv_saturated || sd.result.prefill_kv_saturated;
        out.sim_prefill_utilization = sd.result.prefill_utilization;
      }
    }
  }
  out.predicted = true;
  out.ttft_error_pct = ErrorPct(out.ttft_ms, out.measured_ttft_ms);
  out.tpot_error_pct = ErrorPct(out.tpot_ms, out.measured_tpot_ms);
}

void Summarize(PartitionStats& p, const std::vector<const RowResult*>& rows, bool sim = false) {
  std::vector<double> ta, pa, ts, ps;
  std::set<std::string> sources;
  p.rows = static_cast<int>(rows.size());
  for (const RowResult* r : rows) {
    if (!r->source.empty()) sources.insert(r->source);
    if (!(sim ? r->simulated : r->predicted)) continue;
    ++p.predicted;
    const double te = sim ? r->sim_ttft_error_pct : r->ttft_error_pct;
    const double pe = sim ? r->sim_tpot_error_pct : r->tpot_error_pct;
    ta.push_back(std::fabs(te));
    pa.push_back(std::fabs(pe));
    ts.push_back(te);
    ps.push_back(pe);
  }
  p.sources.assign(sources.begin(), sources.end());
  if (ta.empty()) return;
  p.ttft_median_abs_pct = Quantile(ta, 0.5);
  p.ttft_p90_abs_pct = Quantile(ta, 0.9);
  p.tpot_median_abs_pct = Quantile(pa, 0.5);
  p.tpot_p90_abs_pct = Quantile(pa, 0.9);
  p.ttft_median_signed_pct = Quantile(ts, 0.5);
  p.tpot_median_signed_pct = Quantile(ps, 0.5);
}

}  // namespace

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::vector<SiliconRow> ReadSiliconCsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw DataError(SourceLocation{path, 0, ""}, "cannot open the file", "a readable CSV file");
  std::string line;
  int line_no = 0;
  std::vector<std::string> header;
  while (header.empty() && std::getline(in, line)) {
    ++line_no;
    if (!Trim(line).empty()) header = SplitCsv(line);
  }
  if (header.empty()) throw DataError(SourceLocation{path, line_no, ""}, "no header line", "a CSV header");
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < header.size(); ++i) index[Lower(Trim(header[i]))] = i;
  for (const char* required : {"backend", "model_path", "system", "mode", "isl", "osl", "batch_size", "tp_size",
                               "silicon_ttft_ms", "silicon_tpot_ms"})
    if (!index.count(required))
      throw DataError(SourceLocation{path, line_no, required}, "missing column", "the silicon_sample.csv columns");

  std::vector<SiliconRow> rows;
  while (std::getline(in, line)) {
    ++line_no;
    if (Trim(line).empty()) continue;
    const std::vector<std::string> fields = SplitCsv(line);
    if (fields.size() != header.size())
      throw DataError(SourceLocation{path, line_no, ""}, std::to_string(fields.size()) + " fields",
                      std::to_string(header.size()) + " (one per header column)");
    RowReader r(path, line_no, index, fields);
    SiliconRow s;
    s.line = line_no;
    s.id = r.Text("id");
    s.backend = r.Text("backend");
    s.backend_version = r.Text("backend_version");
    s.model_path = r.Text("model_path");
    s.system = r.Text("system");
    s.precision = r.Text("precision");
    s.mode = r.Text("mode");
    s.isl = r.Count("isl");
    s.osl = r.Count("osl");
    s.batch = r.Count("batch_size", RowReader::kMaxRequests);
    s.tp = r.Size("tp_size");
    s.pp = r.Size("pp_size");
    s.dp = r.Size("attention_dp_size");
    s.moe_tp = r.Size("moe_tp_size");
    s.moe_ep = r.Size("moe_ep_size");
    if (const std::string g = r.Text("gemm_quant_mode"); !g.empty()) s.gemm_quant = g;
    if (const std::string q = r.Text("moe_quant_mode"); !q.empty()) s.moe_quant = q;
    s.prefill_batch = r.Count("prefill_batch_size", RowReader::kMaxRequests);
    s.prefill_workers = r.Size("prefill_num_workers");
    s.prefill_tp = r.Size("prefill_tp_size");
    s.prefill_pp = r.Size("prefill_pp_size");
    s.prefill_dp = r.Size("prefill_attention_dp_size");
    s.prefill_moe_tp = r.Size("prefill_moe_tp_size");
    s.prefill_moe_ep = r.Size("prefill_moe_ep_size");
    s.decode_batch = r.Count("decode_batch_size", RowReader::kMaxRequests);
    s.decode_workers = r.Size("decode_num_workers");
    s.decode_tp = r.Size("decode_tp_size");
    s.decode_pp = r.Size("decode_pp_size");
    s.decode_dp = r.Size("decode_attention_dp_size");
    s.decode_moe_tp = r.Size("decode_moe_tp_size");
    s.decode_moe_ep = r.Size("decode_moe_ep_size");
    s.source_concurrency = SourceConcurrency(r.Text("silicon_data_source"), path, line_no);
    s.ttft_ms = r.Number("silicon_ttft_ms");
    s.tpot_ms = r.Number("silicon_tpot_ms");
    rows.push_back(std::move(s));
  }
  return rows;
}

ValidateReport Validate(const std::vector<SiliconRow>& rows, const ValidateOptions& options) {
  Resources res(options);
  ValidateReport report;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const SiliconRow& row = rows[i];
    RowResult out;
    out.line = row.line;
    out.id = row.id.empty() ? "line" + std::to_string(row.line) : row.id;
    out.model = row.model_path;
    out.engine = Lower(row.backend);
    out.mode = Lower(row.mode);
    out.config = std::to_string(row.isl) + "/" + std::to_string(row.osl) + " c" + std::to_string(row.batch) + " tp" +
                 std::to_string(row.tp);
    out.measured_ttft_ms = row.ttft_ms.value_or(0);
    out.measured_tpot_ms = row.tpot_ms.value_or(0);
    PredictRow(row, res, out);
    report.simulated += out.simulated;
    if (out.predicted)
      ++report.predicted;
    else
      ++report.failed;
    report.rows.push_back(std::move(out));
  }
  // Partitions in order of first appearance.
  std::vector<std::tuple<std::string, std::string, std::string>> order;
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<const RowResult*>> groups;
  std::vector<const RowResult*> all;
  for (const RowResult& r : report.rows) {
    auto key = std::make_tuple(r.model, r.engine, r.mode);
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(&r);
    all.push_back(&r);
  }
  for (const auto& key : order) {
    PartitionStats p;
    std::tie(p.model, p.engine, p.mode) = key;
    PartitionStats q = p;
    Summarize(p, groups[key]);
    report.partitions.push_back(std::move(p));
    if (options.simulate) {
      Summarize(q, groups[key], true);
      report.sim_partitions.push_back(std::move(q));
    }
  }
  report.overall.model = report.overall.engine = report.overall.mode = "all";
  report.sim_overall = report.overall;
  Summarize(report.overall, all);
  if (options.simulate) Summarize(report.sim_overall, all, true);
  return report;
}

}  // namespace servecast::serve
