#include "serve/simulate.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>

#include "core/error.h"
#include "serve/static.h"
#include "serve/validate.h"

namespace servecast::serve {

// ---------------------------------------------------------------- step cost

std::int64_t ShapeBucket(std::int64_t x) {
  if (x <= 128) return x;
  int e = 0;
  while ((x >> (e + 1)) > 0) ++e;  // 2^e <= x < 2^(e+1)
  const std::int64_t step = std::int64_t{1} << (e - 6);
  return (x + step / 2) / step * step;
}

TableStepCost::TableStepCost(const model::OpList& ops, const Database& db, const AggProfile& agg)
    : ops_(ops), db_(db), mix_efficiency_(agg.mix_efficiency) {}

namespace {
enum PartKind { kDecodePass = 0, kContextShared = 1, kChunkAttention = 2, kDecodeAttention = 3 };
}

double TableStepCost::Part(int kind, std::int64_t a, std::int64_t b) {
  const std::uint64_t key = (static_cast<std::uint64_t>(kind) << 62) | (static_cast<std::uint64_t>(a) << 31) |
                            static_cast<std::uint64_t>(b);
  const auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  PassShape s;
  double ms = 0;
  switch (kind) {
    case kDecodePass:
    case kDecodeAttention:
      s.context = false;
      s.batch = a;
      s.seq = b;
      ms = EvaluatePass(ops_.generation, db_, s, 1.0,
                        kind == kDecodePass ? OpFilter::kAll : OpFilter::kGenerationAttentionOnly)
               .latency_ms;
      break;
    case kContextShared:
      s.context = true;
      s.batch = 1;
      s.seq = a;
      ms = EvaluatePass(ops_.context, db_, s, 1.0, OpFilter::kExceptAttention).latency_ms;
      break;
    default:
      s.context = true;
      s.batch = 1;
      s.seq = a;
      s.prefix = b;
      ms = EvaluatePass(ops_.context, db_, s, 1.0, OpFilter::kContextAttentionOnly).latency_ms;
  }
  ++evaluations_;
  memo_.emplace(key, ms);
  return ms;
}

double TableStepCost::operator()(const StepBatch& b) {
  const std::int64_t kv = b.decode > 0 ? ShapeBucket((b.decode_kv + b.decode / 2) / b.decode + 1) : 0;
  if (b.prefill.empty()) return b.decode > 0 ? Part(kDecodePass, b.decode, kv) : 0.0;
  double ms = Part(kContextShared, ShapeBucket(b.Tokens()), 0);
  for (const PrefillChunk& c : b.prefill)
    ms += Part(kChunkAttention, ShapeBucket(c.tokens), c.done > 0 ? ShapeBucket(c.done) : 0);
  if (b.decode > 0) ms += Part(kDecodeAttention, b.decode, kv);
  return ms * mix_efficiency_;
}

// ---------------------------------------------------------------- simulation

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

struct Request {
  std::int64_t isl = 0, osl = 0;
  double arrival = 0, first_token = -1, finish = -1;
  std::int64_t prompt = 0;     // tokens to prefill: isl, or isl + generated after a preemption
  std::int64_t computed = 0;   // tokens with KV in the cache
  std::int64_t generated = 0;  // output tokens so far
  std::int64_t blocks = 0;     // KV blocks held
  bool prefilling() const { return computed < prompt; }
};

std::int64_t CeilDiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Lengths uniform in [ceil(ratio x L), L], from a splitmix64 stream (the same on every platform).
class Lengths {
 public:
  explicit Lengths(std::uint64_t seed) : state_(seed) {}
  std::uint64_t Next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::int64_t Uniform(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(Next() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  double Unit() { return (static_cast<double>(Next() >> 11) + 0.5) / 9007199254740992.0; }  // (0, 1)

 private:
  std::uint64_t state_;
};

std::int64_t LowEnd(std::int64_t L, double ratio) {
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(ratio * static_cast<double>(L) - 1e-9)), 1, L);
}

SimStats Stats(const std::vector<double>& v) {
  SimStats s;
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  s.median = Quantile(v, 0.5);
  s.p90 = Quantile(v, 0.9);
  return s;
}

}  // namespace

SimResult Simulate(const SimProfile& e, const SimWorkload& w, std::int64_t kv_tokens, double host_ms_per_request,
                   const StepCostFn& cost) {
  const bool closed = w.arrival == SimWorkload::Arrival::kClosedLoop;
  if (closed && w.concurrency < 1)
    throw UsageError("simulation: the concurrency must be >= 1 (got " + std::to_string(w.concurrency) + ")");
  if (!closed && !(w.rate_per_s > 0)) throw UsageError("simulation: the request rate must be > 0 requests/s");
  if (w.requests < 1) throw UsageError("simulation: at least one measured request is needed");
  if (w.warmup < 0) throw UsageError("simulation: the warm-up must be >= 0 requests");
  if (w.isl < 1 || w.osl < 2) throw UsageError("simulation: needs isl >= 1 and osl >= 2");
  if (!(w.range_ratio > 0 && w.range_ratio <= 1)) throw UsageError("simulation: the range ratio must lie in (0, 1]");
  const std::int64_t B = e.kv_block_tokens;
  const std::int64_t total_blocks =
      kv_tokens > 0 ? kv_tokens / B : std::numeric_limits<std::int64_t>::max() / 4;
  if (kv_tokens > 0 && CeilDiv(w.isl + w.osl, B) > total_blocks)
    throw UsageError("simulation: the KV cache holds " + std::to_string(total_blocks * B) +
                     " tokens, fewer than one request of isl + osl = " + std::to_string(w.isl + w.osl) +
                     " needs: this deployment cannot serve the workload");
  const std::int64_t max_seqs = e.max_num_seqs > 0 ? e.max_num_seqs : std::numeric_limits<std::int64_t>::max();

  SimResult out;
  out.kv_blocks = kv_tokens > 0 ? total_blocks : 0;
  out.kv_block_tokens = B;
  const std::int64_t total = w.warmup + w.requests;
  std::vector<Request> reqs;
  reqs.reserve(static_cast<std::size_t>(total));
  Lengths rng(w.seed);
  const std::int64_t isl_lo = LowEnd(w.isl, w.range_ratio), osl_lo = LowEnd(w.osl, w.range_ratio);
  auto issue = [&](double at) {
    Request r;
    r.isl = rng.Uniform(isl_lo, w.isl);
    r.osl = std::max<std::int64_t>(2, rng.Uniform(osl_lo, w.osl));
    r.prompt = r.isl;
    r.arrival = at;
    reqs.push_back(r);
  };
  // Arrivals: closed loop, `concurrency` at t = 0 and one per finish; Poisson, all drawn up front.
  if (closed) {
    for (std::int64_t i = 0; i < std::min(w.concurrency, total); ++i) issue(0);
  } else {
    double t = 0;
    for (std::int64_t i = 0; i < total; ++i) {
      t += -std::log(rng.Unit()) / w.rate_per_s * 1000.0;
      issue(t);
    }
  }

  std::deque<std::int64_t> waiting;
  std::vector<std::int64_t> running;  // in admission order
  std::size_t next_arrival = 0;       // reqs index not yet in `waiting`
  std::int64_t free_blocks = total_blocks, finished = 0;
  double now = 0, running_time = 0;
  StepBatch batch;
  std::vector<std::int64_t> in_step;  // reqs of the step's prefill chunks, in batch order
  std::vector<std::int64_t> decoding;
  const std::int64_t kMaxSteps = 200'000'000;

  auto preempt = [&](std::int64_t id) {
    Request& r = reqs[static_cast<std::size_t>(id)];
    free_blocks += r.blocks;
    r.blocks = 0;
    r.computed = 0;
    r.prompt = r.isl + r.generated;
    waiting.push_front(id);
    ++out.preemptions;
    out.kv_saturated = true;
  };
  auto admit_arrivals = [&] {
    while (next_arrival < reqs.size() && reqs[next_arrival].arrival <= now)
      waiting.push_back(static_cast<std::int64_t>(next_arrival++));
  };

  while (finished < total) {
    admit_arrivals();
    if (running.empty() && waiting.empty()) {
      if (next_arrival >= reqs.size()) throw Error("simulation: no request left to run before all finished");
      now = reqs[next_arrival].arrival;
      continue;
    }
    if (out.steps > kMaxSteps)
      throw UsageError("simulation: more than " + std::to_string(kMaxSteps) + " engine steps (" +
                       std::to_string(total) + " requests, warm-up included, of up to " + std::to_string(w.osl) +
                       " output tokens, at most " + std::to_string(out.max_running) +
                       " running at once): the workload is too large to simulate; expected fewer requests "
                       "(--sim-requests, --sim-warmup) or a shorter --osl");
    batch.prefill.clear();
    batch.decode = 0;
    batch.decode_kv = 0;
    in_step.clear();
    decoding.clear();
    std::int64_t budget = e.max_num_tokens;
    bool preempted = false, blocked = false, limit_now = false;

    // Running requests first (their prefill chunks and decode tokens), then waiting ones.
    auto schedule_running = [&](bool prefill_only, bool decode_only) {
      for (std::size_t i = 0; i < running.size() && budget > 0; ++i) {
        const std::int64_t id = running[i];
        Request& r = reqs[static_cast<std::size_t>(id)];
        const bool pre = r.prefilling();
        if ((pre && decode_only) || (!pre && prefill_only)) continue;
        std::int64_t need = pre ? std::min(r.prompt - r.computed, budget) : 1;
        if (pre && !e.chunked_prefill && need < r.prompt - r.computed) continue;
        std::int64_t more = e.admission == SimProfile::Admission::kReserveFull
                                ? 0
                                : CeilDiv(r.computed + need, B) - r.blocks;
        bool self_preempted = false;
        while (more > free_blocks) {
          const std::int64_t victim = running.back();
          running.pop_back();
          preempt(victim);
          preempted = true;
          if (victim == id) {
            self_preempted = true;
            break;
          }
        }
        if (self_preempted) break;
        free_blocks -= more;
        r.blocks += more;
        budget -= need;
        if (pre) {
          batch.prefill.push_back({need, r.computed});
          in_step.push_back(id);
        } else {
          ++batch.decode;
          batch.decode_kv += r.computed;
          decoding.push_back(id);
        }
      }
    };
    auto schedule_waiting = [&] {
      while (!waiting.empty() && budget > 0) {
        if (static_cast<std::int64_t>(running.size()) >= max_seqs) {
          out.running_limit_hit = limit_now = true;
          break;
        }
        const std::int64_t id = waiting.front();
        Request& r = reqs[static_cast<std::size_t>(id)];
        std::int64_t need = r.prompt;
        if (need > budget) {
          if (e.chunked_prefill) need = budget;
          else if (batch.Requests() > 0) break;  // a whole prompt waits for a step with room
        }
        const std::int64_t blocks = e.admission == SimProfile::Admission::kReserveFull ? CeilDiv(r.isl + r.osl, B)
                                                                                       : CeilDiv(need, B);
        if (blocks > free_blocks) {
          blocked = true;
          out.kv_saturated = true;
          break;
        }
        waiting.pop_front();
        free_blocks -= blocks;
        r.blocks = blocks;
        budget -= need;
        running.push_back(id);
        batch.prefill.push_back({need, 0});
        in_step.push_back(id);
      }
    };

    if (e.mixed_batches) {
      schedule_running(false, false);
      if (!preempted) schedule_waiting();
    } else {
      // Prefill-only steps first whenever a prompt is in progress or a request waits and fits.
      schedule_running(true, false);
      if (!preempted) schedule_waiting();
      if (batch.prefill.empty()) {
        budget = std::numeric_limits<std::int64_t>::max();  // a decode batch holds every running request
        schedule_running(false, true);
      }
    }
    if (batch.Requests() == 0) {
      // Nothing fits: only a finish can free room, and none is running. Cannot happen
      // after the up-front capacity check unless a prompt exceeds the budget unchunked.
      throw UsageError("simulation: no request can be scheduled (a prompt of " +
                       std::to_string(waiting.empty() ? 0 : reqs[static_cast<std::size_t>(waiting.front())].prompt) +
                       " tokens against a token budget of " + std::to_string(e.max_num_tokens) +
                       " without chunked prefill)");
    }

    // Decode-only steps that leave the schedule unchanged are taken k at a time:
    // up to the next finish, the next arrival, the KV blocks free, and a 1/64 change
    // of the mean KV length (the cost is that of the segment's middle step).
    std::int64_t k = 1;
    const bool steady = waiting.empty() || blocked || limit_now || budget <= 0;
    if (batch.prefill.empty() && !preempted && steady) {
      std::int64_t to_finish = std::numeric_limits<std::int64_t>::max();
      for (std::int64_t id : decoding) {
        const Request& r = reqs[static_cast<std::size_t>(id)];
        to_finish = std::min(to_finish, r.osl - r.generated);
      }
      k = std::max<std::int64_t>(1, to_finish);
      const std::int64_t mean_kv = batch.decode_kv / batch.decode;
      k = std::min<std::int64_t>(k, std::max<std::int64_t>(1, mean_kv / 64));
      if (e.admission == SimProfile::Admission::kOnDemand) {
        const std::int64_t room = (free_blocks / batch.decode - 1) * B;
        k = std::min<std::int64_t>(k, std::max<std::int64_t>(1, room));
      }
    }
    if (k > 1) {
      // The run's middle step (an even run: the mean of its two middle steps).
      StepBatch mid = batch;
      mid.decode_kv += batch.decode * ((k - 1) / 2);
      double gpu = cost(mid);
      if (k % 2 == 0) {
        mid.decode_kv += batch.decode;
        gpu = (gpu + cost(mid)) / 2;
      }
      const double step = std::max(gpu, host_ms_per_request * static_cast<double>(batch.Requests()));
      // Stop at the next arrival (Poisson): the steps that start before it.
      if (next_arrival < reqs.size() && step > 0) {
        const double gap = reqs[next_arrival].arrival - now;
        k = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(gap / step)), 1, k);
      }
      // Blocks for the k tokens of each request.
      if (e.admission == SimProfile::Admission::kOnDemand)
        for (std::int64_t id : decoding) {
          Request& r = reqs[static_cast<std::size_t>(id)];
          const std::int64_t more = CeilDiv(r.computed + k, B) - r.blocks;
          free_blocks -= more;
          r.blocks += more;
        }
      // (The first of the k tokens' blocks were allocated when scheduling.)
      for (std::int64_t id : decoding) {
        Request& r = reqs[static_cast<std::size_t>(id)];
        r.computed += k;
        r.generated += k;
      }
      now += step * static_cast<double>(k);
      running_time += step * static_cast<double>(k) * static_cast<double>(running.size());
      out.steps += k;
    } else {
      const double step = std::max(cost(batch), host_ms_per_request * static_cast<double>(batch.Requests()));
      now += step;
      running_time += step * static_cast<double>(running.size());
      ++out.steps;
      for (std::size_t i = 0; i < in_step.size(); ++i) {
        Request& r = reqs[static_cast<std::size_t>(in_step[i])];
        r.computed += batch.prefill[i].tokens;
        if (!r.prefilling()) {
          ++r.generated;  // the step that ends a prefill samples a token
          if (r.first_token < 0) r.first_token = now;
        }
      }
      for (std::int64_t id : decoding) {
        Request& r = reqs[static_cast<std::size_t>(id)];
        ++r.computed;
        ++r.generated;
      }
    }
    out.max_running = std::max<std::int64_t>(out.max_running, static_cast<std::int64_t>(running.size()));
    const double used = static_cast<double>(total_blocks - free_blocks) / static_cast<double>(total_blocks);
    out.kv_peak_fraction = std::max(out.kv_peak_fraction, kv_tokens > 0 ? used : 0.0);

    // Finishes free their blocks; a closed-loop client sends its next request at once.
    for (std::size_t i = 0; i < running.size();) {
      Request& r = reqs[static_cast<std::size_t>(running[i])];
      if (!r.prefilling() && r.generated >= r.osl) {
        r.finish = now;
        free_blocks += r.blocks;
        r.blocks = 0;
        ++finished;
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
        if (closed && static_cast<std::int64_t>(reqs.size()) < total) issue(now);
      } else {
        ++i;
      }
    }
  }

  std::vector<double> ttft, tpot, e2e;
  double first_arrival = kNever, last_finish = 0, tokens = 0;
  for (std::int64_t i = w.warmup; i < total; ++i) {
    const Request& r = reqs[static_cast<std::size_t>(i)];
    ttft.push_back(r.first_token - r.arrival);
    e2e.push_back(r.finish - r.arrival);
    tpot.push_back((r.finish - r.first_token) / static_cast<double>(r.osl - 1));
    first_arrival = std::min(first_arrival, r.arrival);
    last_finish = std::max(last_finish, r.finish);
    tokens += static_cast<double>(r.osl);
  }
  out.measured = static_cast<std::int64_t>(ttft.size());
  out.ttft_ms = Stats(ttft);
  out.tpot_ms = Stats(tpot);
  out.e2e_ms = Stats(e2e);
  out.duration_ms = last_finish - first_arrival;
  out.tokens_per_s = out.duration_ms > 0 ? tokens / out.duration_ms * 1000.0 : 0;
  out.seq_per_s = out.duration_ms > 0 ? static_cast<double>(out.measured) / out.duration_ms * 1000.0 : 0;
  out.tokens_per_s_user = out.tpot_ms.mean > 0 ? 1000.0 / out.tpot_ms.mean : 0;
  out.mean_running = now > 0 ? running_time / now : 0;
  if (closed) out.admitted_all = out.max_running >= std::min(w.concurrency, total);
  if (!out.admitted_all)
    out.notes.push_back("the engine never ran all " + std::to_string(w.concurrency) + " requests at once (at most " +
                        std::to_string(out.max_running) + "): " +
                        (out.running_limit_hit ? "its running-request limit" : "its KV cache") +
                        " holds fewer; the others queue");
  if (out.preemptions > 0)
    out.notes.push_back(std::to_string(out.preemptions) + " preemption(s): the KV cache ran out while decoding");
  return out;
}

SimDeployment SimulateAgg(const model::ModelConfig& m, const model::ParallelConfig& p, const model::OpList& ops,
                          const Database& db, const EngineProfile& engine, const SimWorkload& w) {
  if (!engine.sim.present)
    throw ConfigError(SourceLocation{engine.source_file, 0, "sim"}, "no sim section: this profile cannot be simulated",
                      "a sim: section (max_num_tokens, max_num_seqs, kv_block_tokens, admission)");
  SimDeployment d;
  MemoryInputs mi;
  mi.batch = w.arrival == SimWorkload::Arrival::kClosedLoop ? w.concurrency : 1;
  mi.tokens = engine.sim.max_num_tokens;
  mi.seq_len = w.isl + w.osl;
  d.memory = EstimateMemory(m, p, ops, db.spec(), engine, mi);
  d.kv_tokens = d.memory.kv_bytes_per_token > 0
                    ? static_cast<std::int64_t>(std::floor(d.memory.kv_budget / d.memory.kv_bytes_per_token))
                    : 0;
  if (d.kv_tokens < 1)
    throw UsageError("simulation: the memory model leaves no KV cache on this deployment (weights and activations " +
                     std::string("fill the GPU): it cannot serve"));
  TableStepCost cost(ops, db, engine.agg);
  d.sim = Simulate(engine.sim, w, d.kv_tokens, engine.agg.step_ms_per_request,
                   [&](const StepBatch& b) { return cost(b); });
  d.cost_evaluations = cost.Evaluations();
  d.gpus = p.GpusPerWorker();
  d.tokens_per_s = d.sim.tokens_per_s * p.pp * p.dp;
  d.seq_per_s = d.sim.seq_per_s * p.pp * p.dp;
  d.tokens_per_s_gpu = d.tokens_per_s / d.gpus;
  d.concurrency = w.concurrency * p.pp * p.dp;
  return d;
}

}  // namespace servecast::serve
