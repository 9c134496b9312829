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

void CheckSimInputs(const SimWorkload& w) {
  const bool closed = w.arrival == SimWorkload::Arrival::kClosedLoop;
  if (closed && w.concurrency < 1)
    throw UsageError("simulation: the concurrency must be >= 1 (got " + std::to_string(w.concurrency) + ")");
  if (!closed && !(w.rate_per_s > 0)) throw UsageError("simulation: the request rate must be > 0 requests/s");
  if (w.requests < 1) throw UsageError("simulation: at least one measured request is needed");
  if (w.warmup < 0) throw UsageError("simulation: the warm-up must be >= 0 requests");
  if (w.isl < 1 || w.osl < 2) throw UsageError("simulation: needs isl >= 1 and osl >= 2");
  if (!(w.range_ratio > 0 && w.range_ratio <= 1)) throw UsageError("simulation: the range ratio must lie in (0, 1]");
}

// One simulated engine instance: its requests, its KV blocks and its clock. Run()
// steps it until every request has finished; each step schedules a batch (the
// engine's policy), costs it, advances the requests, then retires the finished.
class EngineSim {
 public:
  EngineSim(const SimProfile& e, const SimWorkload& w, std::int64_t kv_tokens, double host_ms_per_request,
            const StepCostFn& cost)
      : e_(e),
        w_(w),
        kv_tokens_(kv_tokens),
        host_ms_per_request_(host_ms_per_request),
        cost_(cost),
        closed_(w.arrival == SimWorkload::Arrival::kClosedLoop),
        B_(e.kv_block_tokens),
        total_blocks_(kv_tokens > 0 ? kv_tokens / B_ : std::numeric_limits<std::int64_t>::max() / 4),
        max_seqs_(e.max_num_seqs > 0 ? e.max_num_seqs : std::numeric_limits<std::int64_t>::max()),
        total_(w.warmup + w.requests),
        rng_(w.seed),
        isl_lo_(LowEnd(w.isl, w.range_ratio)),
        osl_lo_(LowEnd(w.osl, w.range_ratio)),
        free_blocks_(total_blocks_) {
    if (kv_tokens > 0 && CeilDiv(w.isl + w.osl, B_) > total_blocks_)
      throw UsageError("simulation: the KV cache holds " + std::to_string(total_blocks_ * B_) +
                       " tokens, fewer than one request of isl + osl = " + std::to_string(w.isl + w.osl) +
                       " needs: this deployment cannot serve the workload");
    out_.kv_blocks = kv_tokens > 0 ? total_blocks_ : 0;
    out_.kv_block_tokens = B_;
  }

  SimResult Run() {
    SeedArrivals();
    while (finished_ < total_) {
      AdmitArrivals();
      if (running_.empty() && waiting_.empty()) {
        if (next_arrival_ >= reqs_.size()) throw Error("simulation: no request left to run before all finished");
        now_ = reqs_[next_arrival_].arrival;
        continue;
      }
      CheckStepLimit();
      Schedule();
      const std::int64_t k = DecodeRunLength();
      if (k > 1)
        AdvanceDecodeRun(k);
      else
        AdvanceStep();
      RecordOccupancy();
      RetireFinished();
    }
    Summarize();
    return out_;
  }

 private:
  static constexpr std::int64_t kMaxSteps = 200'000'000;

  void Issue(double at) {
    Request r;
    r.isl = rng_.Uniform(isl_lo_, w_.isl);
    r.osl = std::max<std::int64_t>(2, rng_.Uniform(osl_lo_, w_.osl));
    r.prompt = r.isl;
    r.arrival = at;
    reqs_.push_back(r);
  }

  // Arrivals: closed loop, `concurrency` at t = 0 and one per finish; Poisson, all drawn up front.
  void SeedArrivals() {
    reqs_.reserve(static_cast<std::size_t>(total_));
    if (closed_) {
      for (std::int64_t i = 0; i < std::min(w_.concurrency, total_); ++i) Issue(0);
    } else {
      double t = 0;
      for (std::int64_t i = 0; i < total_; ++i) {
        t += -std::log(rng_.Unit()) / w_.rate_per_s * 1000.0;
        Issue(t);
      }
    }
  }

  void AdmitArrivals() {
    while (next_arrival_ < reqs_.size() && reqs_[next_arrival_].arrival <= now_)
      waiting_.push_back(static_cast<std::int64_t>(next_arrival_++));
  }

  void CheckStepLimit() const {
    if (out_.steps > kMaxSteps)
      throw UsageError("simulation: more than " + std::to_string(kMaxSteps) + " engine steps (" +
                       std::to_string(total_) + " requests, warm-up included, of up to " + std::to_string(w_.osl) +
                       " output tokens, at most " + std::to_string(out_.max_running) +
                       " running at once): the workload is too large to simulate; expected fewer requests "
                       "(--sim-requests, --sim-warmup) or a shorter --osl");
  }

  void Preempt(std::int64_t id) {
    Request& r = reqs_[static_cast<std::size_t>(id)];
    free_blocks_ += r.blocks;
    r.blocks = 0;
    r.computed = 0;
    r.prompt = r.isl + r.generated;
    waiting_.push_front(id);
    ++out_.preemptions;
    out_.kv_saturated = true;
  }

  // The step's batch: running requests first (their prefill chunks and decode
  // tokens), then waiting ones, by the engine's policy.
  void Schedule() {
    batch_.prefill.clear();
    batch_.decode = 0;
    batch_.decode_kv = 0;
    in_step_.clear();
    decoding_.clear();
    budget_ = e_.max_num_tokens;
    preempted_ = blocked_ = limit_now_ = false;
    if (e_.mixed_batches) {
      ScheduleRunning(false, false);
      if (!preempted_) ScheduleWaiting();
    } else {
      // Prefill-only steps first whenever a prompt is in progress or a request waits and fits.
      ScheduleRunning(true, false);
      if (!preempted_) ScheduleWaiting();
      if (batch_.prefill.empty()) {
        budget_ = std::numeric_limits<std::int64_t>::max();  // a decode batch holds every running request
        ScheduleRunning(false, true);
      }
    }
    if (batch_.Requests() == 0) {
      // Nothing fits: only a finish can free room, and none is running. Cannot happen
      // after the up-front capacity check unless a prompt exceeds the budget unchunked.
      throw UsageError("simulation: no request can be scheduled (a prompt of " +
                       std::to_string(waiting_.empty() ? 0 : reqs_[static_cast<std::size_t>(waiting_.front())].prompt) +
                       " tokens against a token budget of " + std::to_string(e_.max_num_tokens) +
                       " without chunked prefill)");
    }
  }

  void ScheduleRunning(bool prefill_only, bool decode_only) {
    for (std::size_t i = 0; i < running_.size() && budget_ > 0; ++i) {
      const std::int64_t id = running_[i];
      Request& r = reqs_[static_cast<std::size_t>(id)];
      const bool pre = r.prefilling();
      if ((pre && decode_only) || (!pre && prefill_only)) continue;
      std::int64_t need = pre ? std::min(r.prompt - r.computed, budget_) : 1;
      if (pre && !e_.chunked_prefill && need < r.prompt - r.computed) continue;
      std::int64_t more =
          e_.admission == SimProfile::Admission::kReserveFull ? 0 : CeilDiv(r.computed + need, B_) - r.blocks;
      bool self_preempted = false;
      while (more > free_blocks_) {
        const std::int64_t victim = running_.back();
        running_.pop_back();
        Preempt(victim);
        preempted_ = true;
        if (victim == id) {
          self_preempted = true;
          break;
        }
      }
      if (self_preempted) break;
      free_blocks_ -= more;
      r.blocks += more;
      budget_ -= need;
      if (pre) {
        batch_.prefill.push_back({need, r.computed});
        in_step_.push_back(id);
      } else {
        ++batch_.decode;
        batch_.decode_kv += r.computed;
        decoding_.push_back(id);
      }
    }
  }

  void ScheduleWaiting() {
    while (!waiting_.empty() && budget_ > 0) {
      if (static_cast<std::int64_t>(running_.size()) >= max_seqs_) {
        out_.running_limit_hit = limit_now_ = true;
        break;
      }
      const std::int64_t id = waiting_.front();
      Request& r = reqs_[static_cast<std::size_t>(id)];
      std::int64_t need = r.prompt;
      if (need > budget_) {
        if (e_.chunked_prefill)
          need = budget_;
        else if (batch_.Requests() > 0)
          break;  // a whole prompt waits for a step with room
      }
      const std::int64_t blocks =
          e_.admission == SimProfile::Admission::kReserveFull ? CeilDiv(r.isl + r.osl, B_) : CeilDiv(need, B_);
      if (blocks > free_blocks_) {
        blocked_ = true;
        out_.kv_saturated = true;
        break;
      }
      waiting_.pop_front();
      free_blocks_ -= blocks;
      r.blocks = blocks;
      budget_ -= need;
      running_.push_back(id);
      batch_.prefill.push_back({need, 0});
      in_step_.push_back(id);
    }
  }

  // Decode-only steps that leave the schedule unchanged are taken k at a time:
  // up to the next finish, the next arrival, the KV blocks free, and a 1/64 change
  // of the mean KV length (the cost is that of the segment's middle step). The
  // arrival bound is applied in AdvanceDecodeRun, once the step's cost is known.
  std::int64_t DecodeRunLength() const {
    std::int64_t k = 1;
    const bool steady = waiting_.empty() || blocked_ || limit_now_ || budget_ <= 0;
    if (batch_.prefill.empty() && !preempted_ && steady) {
      std::int64_t to_finish = std::numeric_limits<std::int64_t>::max();
      for (std::int64_t id : decoding_) {
        const Request& r = reqs_[static_cast<std::size_t>(id)];
        to_finish = std::min(to_finish, r.osl - r.generated);
      }
      k = std::max<std::int64_t>(1, to_finish);
      const std::int64_t mean_kv = batch_.decode_kv / batch_.decode;
      k = std::min<std::int64_t>(k, std::max<std::int64_t>(1, mean_kv / 64));
      if (e_.admission == SimProfile::Admission::kOnDemand) {
        const std::int64_t room = (free_blocks_ / batch_.decode - 1) * B_;
        k = std::min<std::int64_t>(k, std::max<std::int64_t>(1, room));
      }
    }
    return k;
  }

  void AdvanceDecodeRun(std::int64_t k) {
    // The run's middle step (an even run: the mean of its two middle steps).
    StepBatch mid = batch_;
    mid.decode_kv += batch_.decode * ((k - 1) / 2);
    double gpu = cost_(mid);
    if (k % 2 == 0) {
      mid.decode_kv += batch_.decode;
      gpu = (gpu + cost_(mid)) / 2;
    }
    const double step = std::max(gpu, host_ms_per_request_ * static_cast<double>(batch_.Requests()));
    // Stop at the next arrival (Poisson): the steps that start before it.
    if (next_arrival_ < reqs_.size() && step > 0) {
      const double gap = reqs_[next_arrival_].arrival - now_;
      k = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(gap / step)), 1, k);
    }
    // Blocks for the k tokens of each request.
    if (e_.admission == SimProfile::Admission::kOnDemand)
      for (std::int64_t id : decoding_) {
        Request& r = reqs_[static_cast<std::size_t>(id)];
        const std::int64_t more = CeilDiv(r.computed + k, B_) - r.blocks;
        free_blocks_ -= more;
        r.blocks += more;
      }
    // (The first of the k tokens' blocks were allocated when scheduling.)
    for (std::int64_t id : decoding_) {
      Request& r = reqs_[static_cast<std::size_t>(id)];
      r.computed += k;
      r.generated += k;
    }
    now_ += step * static_cast<double>(k);
    running_time_ += step * static_cast<double>(k) * static_cast<double>(running_.size());
    out_.steps += k;
  }

  void AdvanceStep() {
    const double step = std::max(cost_(batch_), host_ms_per_request_ * static_cast<double>(batch_.Requests()));
    now_ += step;
    running_time_ += step * static_cast<double>(running_.size());
    ++out_.steps;
    for (std::size_t i = 0; i < in_step_.size(); ++i) {
      Request& r = reqs_[static_cast<std::size_t>(in_step_[i])];
      r.computed += batch_.prefill[i].tokens;
      if (!r.prefilling()) {
        ++r.generated;  // the step that ends a prefill samples a token
        if (r.first_token < 0) r.first_token = now_;
      }
    }
    for (std::int64_t id : decoding_) {
      Request& r = reqs_[static_cast<std::size_t>(id)];
      ++r.computed;
      ++r.generated;
    }
  }

  void RecordOccupancy() {
    out_.max_running = std::max<std::int64_t>(out_.max_running, static_cast<std::int64_t>(running_.size()));
    const double used = static_cast<double>(total_blocks_ - free_blocks_) / static_cast<double>(total_blocks_);
    out_.kv_peak_fraction = std::max(out_.kv_peak_fraction, kv_tokens_ > 0 ? used : 0.0);
  }

  // Finishes free their blocks; a closed-loop client sends its next request at once.
  void RetireFinished() {
    for (std::size_t i = 0; i < running_.size();) {
      Request& r = reqs_[static_cast<std::size_t>(running_[i])];
      if (!r.prefilling() && r.generated >= r.osl) {
        r.finish = now_;
        free_blocks_ += r.blocks;
        r.blocks = 0;
        ++finished_;
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
        if (closed_ && static_cast<std::int64_t>(reqs_.size()) < total_) Issue(now_);
      } else {
        ++i;
      }
    }
  }

  // The statistics over the measured requests (after the warm-up) and the notes.
  void Summarize() {
    std::vector<double> ttft, tpot, e2e;
    double first_arrival = kNever, last_finish = 0, tokens = 0;
    for (std::int64_t i = w_.warmup; i < total_; ++i) {
      const Request& r = reqs_[static_cast<std::size_t>(i)];
      ttft.push_back(r.first_token - r.arrival);
      e2e.push_back(r.finish - r.arrival);
      tpot.push_back((r.finish - r.first_token) / static_cast<double>(r.osl - 1));
      first_arrival = std::min(first_arrival, r.arrival);
      last_finish = std::max(last_finish, r.finish);
      tokens += static_cast<double>(r.osl);
    }
    out_.measured = static_cast<std::int64_t>(ttft.size());
    out_.ttft_ms = Stats(ttft);
    out_.tpot_ms = Stats(tpot);
    out_.e2e_ms = Stats(e2e);
    out_.duration_ms = last_finish - first_arrival;
    out_.tokens_per_s = out_.duration_ms > 0 ? tokens / out_.duration_ms * 1000.0 : 0;
    out_.seq_per_s = out_.duration_ms > 0 ? static_cast<double>(out_.measured) / out_.duration_ms * 1000.0 : 0;
    out_.tokens_per_s_user = out_.tpot_ms.mean > 0 ? 1000.0 / out_.tpot_ms.mean : 0;
    out_.mean_running = now_ > 0 ? running_time_ / now_ : 0;
    if (closed_) out_.admitted_all = out_.max_running >= std::min(w_.concurrency, total_);
    if (!out_.admitted_all)
      out_.notes.push_back("the engine never ran all " + std::to_string(w_.concurrency) +
                           " requests at once (at most " + std::to_string(out_.max_running) +
                           "): " + (out_.running_limit_hit ? "its running-request limit" : "its KV cache") +
                           " holds fewer; the others queue");
    if (out_.preemptions > 0)
      out_.notes.push_back(std::to_string(out_.preemptions) + " preemption(s): the KV cache ran out while decoding");
  }

  const SimProfile& e_;
  const SimWorkload& w_;
  const std::int64_t kv_tokens_;
  const double host_ms_per_request_;
  const StepCostFn& cost_;
  const bool closed_;
  const std::int64_t B_, total_blocks_, max_seqs_, total_;
  Lengths rng_;
  const std::int64_t isl_lo_, osl_lo_;

  SimResult out_;
  std::vector<Request> reqs_;
  std::deque<std::int64_t> waiting_;
  std::vector<std::int64_t> running_;  // in admission order
  std::size_t next_arrival_ = 0;       // reqs_ index not yet in `waiting_`
  std::int64_t free_blocks_, finished_ = 0;
  double now_ = 0, running_time_ = 0;

  // The step being scheduled.
  StepBatch batch_;
  std::vector<std::int64_t> in_step_;  // reqs of the step's prefill chunks, in batch order
  std::vector<std::int64_t> decoding_;
  std::int64_t budget_ = 0;
  bool preempted_ = false, blocked_ = false, limit_now_ = false;
};

}  // namespace

SimResult Simulate(const SimProfile& e, const SimWorkload& w, std::int64_t kv_tokens, double host_ms_per_request,
                   const StepCostFn& cost) {
  CheckSimInputs(w);
  return EngineSim(e, w, kv_tokens, host_ms_per_request, cost).Run();
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
