#include "search/search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <map>
#include <set>
#include <thread>

#include "core/error.h"
#include "model/family.h"
#include "serve/agg.h"
#include "serve/session.h"
#include "serve/simulate.h"
#include "serve/static.h"

namespace servecast::search {

using model::ParallelConfig;

const char* ModeName(Mode m) { return m == Mode::kAgg ? "agg" : "disagg"; }

namespace {

std::int64_t CeilDiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Keeps in r.closest_oom the out-of-memory configuration closest to fitting.
void NoteOutOfMemory(ModeResult& r, const serve::MemoryBreakdown& mem, const std::string& parallel) {
  if (r.closest_oom && r.closest_oom->needed_gib <= mem.total / kGiB) return;
  r.closest_oom = ModeResult::OutOfMemory{parallel, mem.total / kGiB, mem.weights / kGiB, mem.capacity / kGiB};
}

// The first line of an error message, as a skip reason. The shape in parentheses
// after the op name ("context_ar_1 (all_reduce of 2.048e+07 elements over 4 GPUs):
// ...") is dropped so that one cause seen at several shapes counts as one reason.
std::string Reason(const std::string& prefix, const std::exception& e) {
  std::string what = e.what();
  const auto nl = what.find('\n');
  if (nl != std::string::npos) what.resize(nl);
  const auto open = what.find(" (");
  const auto colon = what.find("): ");
  if (open != std::string::npos && colon != std::string::npos && open < colon &&
      what.find(':') > open)  // the parenthesis belongs to the op name, before the first colon
    what.erase(open, colon + 1 - open);
  if (what.size() > 160) what = what.substr(0, 157) + "...";
  return prefix + what;
}

void FinishPoint(Point& p, const SearchInputs& in) {
  p.replicas = in.total_gpus / p.gpus_per_replica;
  p.tokens_per_s_gpu_cluster = p.tokens_per_s_gpu * p.replicas * p.gpus_per_replica / in.total_gpus;
  const bool ttft_ok = p.ttft_ms <= in.ttft_ms;
  p.meets_sla = ttft_ok && (in.request_latency_ms > 0 ? p.request_latency_ms <= in.request_latency_ms
                                                       : p.tpot_ms <= in.tpot_ms);
}

// Best point per parallel configuration, best first, at most top_n.
void Pick(ModeResult& r, const SearchInputs& in) {
  std::vector<std::size_t> pool;
  for (std::size_t i = 0; i < r.points.size(); ++i)
    if (r.points[i].meets_sla) pool.push_back(i);
  r.best_meets_sla = !pool.empty();
  if (pool.empty()) {
    // Nothing meets the limits: the points closest to them, flagged.
    for (std::size_t i = 0; i < r.points.size(); ++i) pool.push_back(i);
    const double target = in.request_latency_ms > 0 ? in.request_latency_ms : in.tpot_ms;
    auto miss = [&](const Point& p) {
      const double v = in.request_latency_ms > 0 ? p.request_latency_ms : p.tpot_ms;
      return std::max(0.0, v / target - 1.0) + std::max(0.0, p.ttft_ms / in.ttft_ms - 1.0);
    };
    std::sort(pool.begin(), pool.end(), [&](std::size_t a, std::size_t b) { return miss(r.points[a]) < miss(r.points[b]); });
    if (pool.size() > static_cast<std::size_t>(in.top_n)) pool.resize(static_cast<std::size_t>(in.top_n));
    r.best = pool;
    return;
  }
  std::map<std::string, std::size_t> best_of;
  for (std::size_t i : pool) {
    const Point& p = r.points[i];
    const std::string group = r.mode == Mode::kAgg ? p.par.Compact() : p.decode_par.Compact();
    auto it = best_of.find(group);
    if (it == best_of.end() || p.tokens_per_s_gpu_cluster > r.points[it->second].tokens_per_s_gpu_cluster)
      best_of[group] = i;
  }
  for (const auto& [g, i] : best_of) r.best.push_back(i);
  std::sort(r.best.begin(), r.best.end(), [&](std::size_t a, std::size_t b) {
    const Point &pa = r.points[a], &pb = r.points[b];
    if (pa.tokens_per_s_gpu_cluster != pb.tokens_per_s_gpu_cluster)
      return pa.tokens_per_s_gpu_cluster > pb.tokens_per_s_gpu_cluster;
    return pa.tokens_per_s_user > pb.tokens_per_s_user;
  });
  if (r.best.size() > static_cast<std::size_t>(in.top_n)) r.best.resize(static_cast<std::size_t>(in.top_n));
}

model::OpListOptions OpOptions(const SearchInputs& in, const serve::Database& db) {
  model::OpListOptions oo = serve::OpOptionsFor(in.engine, db.spec());
  oo.nextn = in.nextn;
  oo.moe_distribution = in.moe_distribution;
  return oo;
}

ModeResult SearchAgg(const model::ModelConfig& m, const serve::Database& db, const serve::EngineProfile& engine,
                     const SearchInputs& in) {
  ModeResult r;
  r.mode = Mode::kAgg;
  const auto configs = EnumerateParallel(m, in.engine, in.total_gpus, &r.skipped);
  r.parallel_configs = configs.size();
  const auto budgets = CtxTokenBudgets(in.isl);
  const model::OpListOptions oo = OpOptions(in, db);
  for (const ParallelConfig& par : configs) {
    const model::OpList ops = model::BuildOpList(m, par, oo);
    bool config_dead = false;
    for (std::int64_t b : AggBatches()) {
      std::set<std::int64_t> seen;
      bool stop_batches = false;
      bool first = true;
      for (std::int64_t C : budgets) {
        const std::int64_t left = b - CeilDiv(C, in.isl);
        if (left < 0 || (b > 1 && left < 1)) break;
        const double balance = static_cast<double>(in.isl * b) / static_cast<double>(C) / static_cast<double>(in.osl);
        if (balance > 1 && !seen.insert(static_cast<std::int64_t>(std::floor(static_cast<double>(b) / balance))).second)
          continue;
        serve::AggInputs ai;
        ai.batch = b;
        ai.ctx_tokens = C;
        ai.isl = in.isl;
        ai.osl = in.osl;
        ai.prefix = in.prefix;
        ai.nextn = in.nextn;
        ai.mtp_accepted = in.mtp_accepted;
        serve::AggEstimate e;
        try {
          ++r.evaluated;
          e = serve::RunAgg(m, par, ops, db, engine, ai);
        } catch (const perfdb::MissingDataError& ex) {
          ++r.skipped[Reason("missing data: ", ex)];
          config_dead = first && b == 1;
          stop_batches = config_dead;
          break;
        }
        if (e.memory.oom || e.memory.kv_oom) {
          ++r.skipped[e.memory.oom ? "out of memory" : "KV cache over the engine's budget"];
          if (e.memory.oom) NoteOutOfMemory(r, e.memory, par.ToString());
          stop_batches = first;  // the smallest budget of this batch does not fit: larger batches will not either
          break;
        }
        first = false;
        Point p;
        p.mode = Mode::kAgg;
        p.par = par;
        p.batch = b;
        p.ctx_tokens = C;
        p.gpus_per_replica = par.GpusPerWorker();
        p.ttft_ms = e.ttft_ms;
        p.tpot_ms = e.tpot_ms;
        p.request_latency_ms = e.request_latency_ms;
        p.tokens_per_s_gpu = e.tokens_per_s_gpu;
        p.tokens_per_s_user = e.tokens_per_s_user;
        p.seq_per_s = e.seq_per_s;
        p.concurrency = e.concurrency;
        p.memory_gib = e.memory.total / kGiB;
        FinishPoint(p, in);
        if (p.ttft_ms > in.ttft_ms) {
          ++r.skipped["TTFT over the limit"];
          continue;
        }
        r.points.push_back(p);
      }
      if (stop_batches || config_dead) break;
    }
  }
  return r;
}

// Totals of GPUs a disaggregated replica may use: 1, 2, 4, 8, then multiples of 8 up to 128
// (kSearchStableGpus).
std::vector<int> ReplicaSizes(int total) {
  std::vector<int> s;
  for (int g : {1, 2, 4})
    if (g <= total) s.push_back(g);
  for (int g = 8; g <= std::min(total, kSearchStableGpus); g += 8) s.push_back(g);
  return s;
}

struct Side {
  ParallelConfig par;
  std::int64_t batch = 0;
  double latency_ms = 0;  // prefill: TTFT pass; decode: TPOT
  double seq_per_s = 0;   // per worker
  double memory_gib = 0;
  std::int64_t concurrency = 0;
};

ModeResult SearchDisagg(const model::ModelConfig& m, const serve::Database& db, const serve::EngineProfile& engine,
                        const SearchInputs& in, const DecodeSide* other) {
  ModeResult r;
  r.mode = Mode::kDisagg;
  const auto configs = EnumerateParallel(m, in.engine, in.total_gpus, &r.skipped);
  r.parallel_configs = configs.size();
  const model::OpListOptions oo = OpOptions(in, db);
  // The decode workers' model and data: the prefill system's unless --decode-system.
  const model::ModelConfig& dm = other ? *other->model : m;
  const serve::Database& ddb = other ? *other->db : db;
  const model::OpListOptions doo = OpOptions(in, ddb);
  const serve::DisaggProfile& d = engine.disagg;

  serve::Workload w;
  w.isl = in.isl;
  w.osl = in.osl;
  w.prefix = in.prefix;
  w.nextn = in.nextn;
  w.mtp_accepted = in.mtp_accepted;
  std::vector<Side> prefill, decode;
  // Prefill worker: one request per pass.
  auto add_prefill = [&](const ParallelConfig& par, const model::OpList& ops) {
    try {
      serve::StaticOptions so;
      so.phases = serve::StaticOptions::Phases::kContextOnly;
      so.context_correction = d.prefill_latency_correction;
      w.batch = 1;
      ++r.evaluated;
      const serve::StaticEstimate e = serve::RunStatic(m, par, ops, db, engine, w, so);
      if (e.memory.oom) {
        ++r.skipped["prefill worker out of memory"];
        NoteOutOfMemory(r, e.memory, "prefill worker " + par.ToString());
      } else if (!(d.ttft_correction * e.ttft_ms < in.ttft_ms)) {
        ++r.skipped["prefill worker: TTFT over the limit"];
      } else {
        prefill.push_back({par, 1, e.ttft_ms, e.seq_per_s, e.memory.total / kGiB, 0});
      }
    } catch (const perfdb::MissingDataError& ex) {
      ++r.skipped[Reason("missing data (prefill): ", ex)];
    }
  };
  for (const ParallelConfig& par : configs) {
    const model::OpList ops = model::BuildOpList(m, par, oo);
    add_prefill(par, ops);
    // Decode workers over the batch ladder; memory grows with the batch.
    const model::OpList dops = other ? model::BuildOpList(dm, par, doo) : model::OpList();
    for (std::int64_t b : DecodeBatches()) {
      serve::StaticOptions so;
      so.phases = serve::StaticOptions::Phases::kGenerationOnly;
      so.generation_correction = d.decode_latency_correction;
      w.batch = b;
      serve::StaticEstimate e;
      try {
        ++r.evaluated;
        e = serve::RunStatic(dm, par, other ? dops : ops, ddb, engine, w, so);
      } catch (const perfdb::MissingDataError& ex) {
        ++r.skipped[Reason("missing data (decode): ", ex)];
        break;
      }
      if (e.memory.oom || e.memory.kv_oom) {
        ++r.skipped[e.memory.oom ? "decode worker out of memory" : "decode worker: KV cache over the engine's budget"];
        if (e.memory.oom) NoteOutOfMemory(r, e.memory, "decode worker " + par.ToString());
        break;
      }
      decode.push_back({par, b, e.tpot_ms, e.seq_per_s, e.memory.total / kGiB, e.concurrency});
    }
  }

  // Context-parallel prefill workers (SGLang), after the others (decode workers never split).
  const auto cp_configs = EnumerateContextParallel(m, in.engine, in.total_gpus, &r.skipped);
  r.parallel_configs += cp_configs.size();
  for (const ParallelConfig& par : cp_configs) add_prefill(par, model::BuildOpList(m, par, oo));

  // Rate matching: for each decode candidate, the prefill worker kind and worker
  // counts that give the most tokens/s per GPU within the replica sizes.
  const std::vector<int> sizes = ReplicaSizes(in.total_gpus);
  const int max_workers = 32;
  for (const Side& dc : decode) {
    Point best;
    bool found = false;
    for (const Side& pc : prefill) {
      if (in.engine == model::Engine::kSglang && pc.par.tp != dc.par.tp) continue;
      const int gp = pc.par.GpusPerWorker(), gd = dc.par.GpusPerWorker();
      const double rp = d.prefill_rate_degradation * pc.seq_per_s, rd = d.decode_rate_degradation * dc.seq_per_s;
      for (int total : sizes) {
        for (int P = 1; P <= max_workers && gp * P < total; ++P) {
          const int rest = total - gp * P;
          if (rest % gd) continue;
          const int D = rest / gd;
          if (D < 1 || D > max_workers) continue;
          const double seq = std::min(rp * P, rd * D);
          const double tps_gpu = seq * static_cast<double>(in.osl) / total;
          if (!found || tps_gpu > best.tokens_per_s_gpu ||
              (tps_gpu == best.tokens_per_s_gpu && total < best.gpus_per_replica)) {
            found = true;
            best.par = pc.par;
            best.decode_par = dc.par;
            best.prefill_batch = pc.batch;
            best.batch = dc.batch;
            best.prefill_workers = P;
            best.decode_workers = D;
            best.gpus_per_replica = total;
            best.tokens_per_s_gpu = tps_gpu;
            best.seq_per_s = seq;
            best.ttft_ms = d.ttft_correction * pc.latency_ms;
            best.memory_gib = std::max(pc.memory_gib, dc.memory_gib);
          }
        }
      }
    }
    if (!found) {
      ++r.skipped["no prefill/decode worker mix fits the replica sizes"];
      continue;
    }
    best.mode = Mode::kDisagg;
    best.tpot_ms = dc.latency_ms;
    best.request_latency_ms = best.ttft_ms + best.tpot_ms * static_cast<double>(in.osl - 1);
    best.tokens_per_s_user = best.tpot_ms > 0 ? 1000.0 / best.tpot_ms : 0;
    best.concurrency = dc.concurrency * best.decode_workers;
    FinishPoint(best, in);
    r.points.push_back(best);
  }
  return r;
}

// The point simulated (SearchInputs::simulate); see PointSim.
PointSim SimulatePoint(const Point& p, const model::ModelConfig& m, const serve::Database& db,
                       const serve::EngineProfile& engine, const SearchInputs& in, bool other_decode_system) {
  PointSim s;
  if (p.nextn > 0) {
    s.failure = "MTP is not simulated";
    return s;
  }
  if (in.prefix > 0) {
    s.failure = "prefix-cache hits are not simulated";
    return s;
  }
  if (other_decode_system) {
    s.failure = "decode workers on another system are not simulated";
    return s;
  }
  try {
    SearchInputs at = in;
    at.nextn = 0;
    const model::OpListOptions oo = OpOptions(at, db);
    serve::SimWorkload w;
    w.isl = in.isl;
    w.osl = in.osl;
    w.requests = 1000;
    const serve::SimResult* r = nullptr;
    double tps_gpu = 0;
    serve::SimDeployment agg;
    serve::SimDisaggDeployment dis;
    if (p.mode == Mode::kAgg) {
      w.concurrency = p.batch;
      w.warmup = 2 * w.concurrency;
      serve::EngineProfile e = engine;
      if (p.ctx_tokens > 0) e.sim.max_num_tokens = p.ctx_tokens;  // the point's prefill budget
      const model::OpList ops = model::BuildOpList(m, p.par, oo);
      agg = serve::SimulateAgg(m, p.par, ops, db, e, w);
      r = &agg.sim;
      tps_gpu = agg.tokens_per_s_gpu;
    } else {
      serve::DisaggSimInputs di;
      di.prefill_workers = p.prefill_workers;
      di.decode_workers = p.decode_workers;
      di.prefill_batch = p.prefill_batch;
      di.decode_batch = p.batch;
      w.concurrency = p.batch * p.decode_workers * p.decode_par.dp * p.decode_par.pp;
      w.warmup = 2 * w.concurrency;
      const model::OpList pops = model::BuildOpList(m, p.par, oo), dops = model::BuildOpList(m, p.decode_par, oo);
      dis = serve::SimulateDisagg(m, p.par, pops, p.decode_par, dops, db, engine, di, w);
      r = &dis.result.sim;
      tps_gpu = dis.tokens_per_s_gpu;
      s.prefill_utilization = dis.result.prefill_utilization;
    }
    s.simulated = true;
    s.ttft_ms = r->ttft_ms.mean;
    s.tpot_ms = r->tpot_ms.mean;
    s.request_latency_ms = r->e2e_ms.mean;
    s.tokens_per_s_user = r->tokens_per_s_user;
    // Per GPU of the cluster: the replica's rate x its replicas / all GPUs, as the closed form counts.
    s.tokens_per_s_gpu = tps_gpu * p.replicas * p.gpus_per_replica / in.total_gpus;
    s.kv_saturated = r->kv_saturated;
    s.admitted_all = r->admitted_all;
    s.meets_sla = s.ttft_ms <= in.ttft_ms && (in.request_latency_ms > 0 ? s.request_latency_ms <= in.request_latency_ms
                                                                         : s.tpot_ms <= in.tpot_ms);
  } catch (const std::exception& e) {
    s.simulated = false;
    s.failure = Reason("", e);
  }
  return s;
}

// Simulates the candidates of every mode: its frontier points within the limits
// (by the closed form) and its best points, shared out over the machine's cores
// (each candidate is independent; a worker takes the next one left).
void SimulateFrontiers(SearchResult& res, const model::ModelConfig& m, const serve::Database& db,
                       const serve::EngineProfile& engine, const SearchInputs& in, bool other_decode_system) {
  std::vector<Point*> todo;
  for (ModeResult& r : res.modes) {
    std::set<std::size_t> pick(r.best.begin(), r.best.end());
    for (std::size_t i : r.frontier)
      if (r.points[i].meets_sla) pick.insert(i);
    for (std::size_t i : pick) todo.push_back(&r.points[i]);
  }
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < todo.size(); i = next++)
      todo[i]->sim = SimulatePoint(*todo[i], m, db, engine, in, other_decode_system);
  };
  const std::size_t n = std::min<std::size_t>(todo.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(n);
  for (std::size_t k = 1; k < n; ++k)
    threads.emplace_back([&, k] {
      try {
        work();
      } catch (...) {
        errors[k] = std::current_exception();
      }
    });
  try {
    work();
  } catch (...) {
    errors[0] = std::current_exception();
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

std::string Point::Parallel() const {
  const std::string mtp = nextn > 0 ? " mtp" + std::to_string(nextn) : "";
  if (mode == Mode::kAgg) return par.Compact() + mtp;
  return "p:" + par.Compact() + " d:" + decode_par.Compact() + mtp;
}

std::vector<std::int64_t> AggBatches() {
  std::vector<std::int64_t> b;
  for (int i = 1; i <= 15; ++i) b.push_back(i);
  for (int i = 16; i <= 28; i += 4) b.push_back(i);
  for (int i = 32; i <= 56; i += 8) b.push_back(i);
  for (int i = 64; i <= 240; i += 16) b.push_back(i);
  for (int i = 256; i <= 480; i += 32) b.push_back(i);
  b.push_back(512);
  return b;
}

std::vector<std::int64_t> DecodeBatches() {
  std::vector<std::int64_t> b;
  for (int i = 1; i <= 15; ++i) b.push_back(i);
  for (int i = 16; i <= 30; i += 2) b.push_back(i);
  for (int i = 32; i <= 124; i += 4) b.push_back(i);
  for (int i = 128; i <= 504; i += 8) b.push_back(i);
  b.push_back(512);
  return b;
}

std::vector<std::int64_t> CtxTokenBudgets(std::int64_t isl) {
  if (isl < 1) throw UsageError("--isl must be >= 1");
  const std::int64_t max_ctx = std::max<std::int64_t>(8192, 2 * isl);
  // Without chunked prefill a budget is a whole number of requests: the step
  // rounds up to a multiple of isl.
  const std::int64_t stride = CeilDiv(std::max<std::int64_t>(1024, max_ctx / 8), isl) * isl;
  std::set<std::int64_t> c{isl, 2 * isl};
  for (std::int64_t v = stride; v <= max_ctx; v += stride) c.insert(v);
  return {c.begin(), c.end()};
}

std::vector<ParallelConfig> EnumerateParallel(const model::ModelConfig& m, model::Engine e, int total_gpus,
                                              std::map<std::string, std::size_t>* rejected) {
  std::vector<ParallelConfig> out;
  auto keep = [&](const ParallelConfig& p) {
    try {
      model::ValidateParallel(m, p, e);
      out.push_back(p);
    } catch (const UsageError& ex) {
      if (rejected) ++(*rejected)[Reason("parallel config not allowed: ", ex)];
    }
  };
  model::RequireSupported(m);
  const model::SearchKnobs knobs = model::FamilyOf(m).Knobs();
  std::vector<int> sizes;
  for (int g : {1, 2, 4, 8, 16})
    if (g <= total_gpus) sizes.push_back(g);
  if (!knobs.expert_parallel) {
    for (int tp : sizes)
      if (tp <= knobs.max_tp) keep({tp, 1, 1, 1, 1});
    return out;
  }
  const std::vector<int> dps = knobs.attention_dp ? sizes : std::vector<int>{1};
  for (int tp : sizes)
    for (int dp : dps)
      for (int mtp : sizes)
        for (int mep : sizes) {
          if (tp > knobs.max_tp) continue;
          if (tp * dp > total_gpus || std::find(sizes.begin(), sizes.end(), tp * dp) == sizes.end()) continue;
          if (tp * dp != mtp * mep) continue;
          if (e == model::Engine::kTrtllm && dp > 1 && tp > 1) continue;
          if (e == model::Engine::kVllm && mtp > 1 && mep > 1) continue;
          keep({tp, 1, dp, mtp, mep});
        }
  return out;
}

std::vector<ParallelConfig> EnumerateContextParallel(const model::ModelConfig& m, model::Engine e, int total_gpus,
                                                     std::map<std::string, std::size_t>* rejected) {
  std::vector<ParallelConfig> out;
  model::RequireSupported(m);
  if (e != model::Engine::kSglang || !m.prefill_cp || !model::FamilyOf(m).Knobs().context_parallel) return out;
  const bool experts = model::FamilyOf(m).Knobs().expert_parallel;
  for (int cp : {2, 4, 8}) {
    if (cp > total_gpus) break;
    for (int mtp = 1; mtp <= cp; mtp *= 2) {
      ParallelConfig p;
      p.cp = cp;
      p.moe_tp = experts ? mtp : 1;
      p.moe_ep = experts ? cp / mtp : 1;
      try {
        model::ValidateParallel(m, p, e);
        out.push_back(p);
      } catch (const UsageError& ex) {
        if (rejected) ++(*rejected)[Reason("parallel config not allowed: ", ex)];
      }
      if (!experts) break;
    }
  }
  return out;
}

std::vector<std::size_t> ParetoFrontier(const std::vector<Point>& points) {
  std::vector<std::size_t> idx(points.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  // Sort by speed per user descending; a point is on the frontier when its
  // throughput beats every point at least as fast per user.
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    if (points[a].tokens_per_s_user != points[b].tokens_per_s_user)
      return points[a].tokens_per_s_user > points[b].tokens_per_s_user;
    return points[a].tokens_per_s_gpu_cluster > points[b].tokens_per_s_gpu_cluster;
  });
  std::vector<std::size_t> front;
  double best_y = -1;
  for (std::size_t i : idx) {
    if (points[i].tokens_per_s_gpu_cluster > best_y) {
      front.push_back(i);
      best_y = points[i].tokens_per_s_gpu_cluster;
    }
  }
  std::reverse(front.begin(), front.end());
  return front;
}

std::set<serve::TableNeed> SearchNeeds(const serve::Deployment& d, const SearchInputs& in) {
  model::OpListOptions oo = serve::OpOptionsFor(in.engine, d.spec());
  oo.nextn = in.nextn;
  std::vector<ParallelConfig> configs = EnumerateParallel(d.model(), in.engine, in.total_gpus);
  for (const ParallelConfig& p : EnumerateContextParallel(d.model(), in.engine, in.total_gpus)) configs.push_back(p);
  return d.Needs(configs, oo);
}

SearchResult RunSearch(const model::ModelConfig& m, const serve::Database& db, const serve::EngineProfile& engine,
                       const SearchInputs& in, const DecodeSide* decode) {
  if (in.total_gpus < 1) throw UsageError("--total-gpus must be >= 1");
  if (in.osl < 2) throw UsageError("--osl must be >= 2 for serving estimates");
  if (in.ttft_ms <= 0 || (in.request_latency_ms <= 0 && in.tpot_ms <= 0))
    throw UsageError("latency limits must be positive");
  const auto t0 = std::chrono::steady_clock::now();
  SearchResult res;
  // The two modes are independent: search them on two threads (the database is
  // read-only apart from its internally locked caches).
  const bool run_agg = in.agg && !decode, run_disagg = in.disagg && in.total_gpus >= 2;
  // MTP (families with the knob, --nextn N > 0): every point with N draft tokens
  // and without; the two sets of points are one pool for the frontier and picking.
  // --mtp-accept-rates adds one variant per draft depth.
  std::vector<SearchInputs> variants{in};
  if (model::FamilyOf(m).Knobs().mtp) {
    if (in.nextn > 0) {
      SearchInputs plain = in;
      plain.nextn = 0;
      plain.mtp_accepted = 0;
      variants.push_back(plain);
    }
    for (const auto& [n, accepted] : in.mtp_variants) {
      if (n == in.nextn) continue;
      SearchInputs v = in;
      v.nextn = n;
      v.mtp_accepted = accepted;
      variants.push_back(v);
    }
  }
  auto search_mode = [&](auto search) {
    ModeResult merged;
    for (std::size_t v = 0; v < variants.size(); ++v) {
      ModeResult r = search(variants[v]);
      for (Point& p : r.points) p.nextn = variants[v].nextn, p.mtp_accepted = variants[v].mtp_accepted;
      if (v == 0) {
        merged = std::move(r);
        continue;
      }
      merged.points.insert(merged.points.end(), r.points.begin(), r.points.end());
      merged.evaluated += r.evaluated;
      for (const auto& [why, n] : r.skipped) merged.skipped[why] += n;
    }
    return merged;
  };
  ModeResult agg, disagg;
  std::exception_ptr agg_error;
  std::thread agg_thread;
  if (run_agg) {
    agg_thread = std::thread([&] {
      try {
        agg = search_mode([&](const SearchInputs& v) { return SearchAgg(m, db, engine, v); });
      } catch (...) {
        agg_error = std::current_exception();
      }
    });
  }
  std::exception_ptr disagg_error;
  if (run_disagg) {
    try {
      disagg = search_mode([&](const SearchInputs& v) { return SearchDisagg(m, db, engine, v, decode); });
    } catch (...) {
      disagg_error = std::current_exception();
    }
  }
  if (agg_thread.joinable()) agg_thread.join();
  if (agg_error) std::rethrow_exception(agg_error);
  if (disagg_error) std::rethrow_exception(disagg_error);
  if (run_agg) res.modes.push_back(std::move(agg));
  if (run_disagg) res.modes.push_back(std::move(disagg));
  double best = -1, second = -1;
  for (std::size_t i = 0; i < res.modes.size(); ++i) {
    ModeResult& r = res.modes[i];
    if (in.strict_sla) {
      const std::string why = in.request_latency_ms > 0 ? "request latency over the limit (--strict-sla)"
                                                        : "TPOT over the limit (--strict-sla)";
      std::vector<Point> kept;
      for (Point& p : r.points) {
        if (p.meets_sla)
          kept.push_back(std::move(p));
        else
          ++r.skipped[why];
      }
      r.points = std::move(kept);
    }
    r.frontier = ParetoFrontier(r.points);
    Pick(r, in);
    const double v = r.best.empty() ? -1 : r.points[r.best.front()].tokens_per_s_gpu_cluster;
    if (v > best) {
      second = best;
      best = v;
      res.chosen = static_cast<int>(i);
    } else if (v > second) {
      second = v;
    }
  }
  if (res.chosen >= 0 && res.modes[static_cast<std::size_t>(res.chosen)].best.empty()) res.chosen = -1;
  res.chosen_ratio = second > 0 ? best / second : 0;
  if (in.simulate) SimulateFrontiers(res, m, db, engine, in, decode != nullptr);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

const Point* ChosenPoint(const SearchResult& r) {
  if (r.chosen < 0) return nullptr;
  const ModeResult& m = r.modes[static_cast<std::size_t>(r.chosen)];
  return m.best.empty() ? nullptr : &m.points[m.best.front()];
}

const Point* MeetingPoint(const SearchResult& r) {
  if (r.chosen < 0) return nullptr;
  return r.modes[static_cast<std::size_t>(r.chosen)].best_meets_sla ? ChosenPoint(r) : nullptr;
}

bool RanksAbove(const Point& a, const Point& b) {
  if (a.tokens_per_s_gpu_cluster != b.tokens_per_s_gpu_cluster)
    return a.tokens_per_s_gpu_cluster > b.tokens_per_s_gpu_cluster;
  return a.tokens_per_s_user > b.tokens_per_s_user;
}

int PickMeeting(const std::vector<const SearchResult*>& results) {
  int best = -1;
  const Point* b = nullptr;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Point* p = results[i] ? MeetingPoint(*results[i]) : nullptr;
    if (p && (!b || RanksAbove(*p, *b))) best = static_cast<int>(i), b = p;
  }
  return best;
}

std::vector<std::string> DataNotes(const Point& p, const model::ModelConfig& m, const serve::Database& db,
                                   const SearchInputs& in) {
  // (source, table) -> op names (first seen order) and the first detail.
  struct Group {
    std::vector<std::string> ops;
    std::string detail;
  };
  std::map<std::pair<std::string, std::string>, Group> groups;
  std::vector<std::pair<std::string, std::string>> order;
  SearchInputs at = in;
  at.nextn = p.nextn;  // the point's own MTP setting
  const model::OpListOptions oo = OpOptions(at, db);
  auto scan = [&](const model::ParallelConfig& par, bool context) {
    const model::OpList ops = model::BuildOpList(m, par, oo);
    serve::PassShape shape;
    shape.context = context;
    shape.batch = context ? 1 : std::max<std::int64_t>(1, p.batch);
    shape.seq = context ? in.isl : in.isl + in.osl / 2;
    const serve::PhaseEstimate pe = serve::EvaluatePass(context ? ops.context : ops.generation, db, shape);
    for (const serve::OpLine& op : pe.ops) {
      if (op.source == "silicon" || op.source == "interpolated") continue;
      const std::string table = op.detail.substr(0, op.detail.find(':'));
      auto key = std::make_pair(op.source, table);
      auto [it, fresh] = groups.try_emplace(key);
      if (fresh) {
        order.push_back(key);
        it->second.detail = op.detail;
      }
      if (std::find(it->second.ops.begin(), it->second.ops.end(), op.name) == it->second.ops.end())
        it->second.ops.push_back(op.name);
    }
  };
  try {
    scan(p.par, true);
    scan(p.mode == Mode::kDisagg ? p.decode_par : p.par, false);
  } catch (const std::exception& e) {
    return {std::string("could not re-evaluate the chosen point for its data sources: ") + e.what()};
  }
  std::vector<std::string> out;
  for (const auto& key : order) {
    const Group& g = groups.at(key);
    std::string names;
    for (std::size_t i = 0; i < g.ops.size() && i < 3; ++i) names += (i ? ", " : "") + g.ops[i];
    if (g.ops.size() > 3) names += " and " + std::to_string(g.ops.size() - 3) + " more";
    out.push_back(key.first + ": " + names + " (" + g.detail + ")");
  }
  return out;
}

}  // namespace servecast::search
