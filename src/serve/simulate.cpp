#include "serve/simulate.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <queue>

#include "core/error.h"
#include "system/system_spec.h"
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
constexpr std::int64_t kMaxSteps = 200'000'000;

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

// What an instance does with a request (docs/estimator.md, "Simulated serving"):
// agg runs it from prompt to last token; prefill, to its first token (then hands
// it off); decode receives it with its prompt's KV and runs it to its last token.
enum class Role { kAgg, kPrefill, kDecode };

// One simulated engine instance: its queues, its KV blocks and its clock, over a
// request table it shares with the driver. Requests reach it by Inject (at a
// time); Step runs one scheduling round: admit what has arrived, schedule a batch
// by the engine's policy, cost it, advance the requests, retire the finished ones
// (reported to the driver, which owns clients and hand-offs).
class Instance {
 public:
  Instance(const SimProfile& e, Role role, std::int64_t kv_tokens, double host_ms_per_request, const StepCostFn& cost,
           std::vector<Request>& reqs, std::int64_t max_request_tokens)
      : e_(e),
        role_(role),
        kv_tokens_(kv_tokens),
        host_ms_per_request_(host_ms_per_request),
        cost_(cost),
        reqs_(reqs),
        B_(e.kv_block_tokens),
        total_blocks_(kv_tokens > 0 ? kv_tokens / B_ : std::numeric_limits<std::int64_t>::max() / 4),
        max_seqs_(e.max_num_seqs > 0 ? e.max_num_seqs : std::numeric_limits<std::int64_t>::max()),
        free_blocks_(total_blocks_) {
    if (kv_tokens > 0 && CeilDiv(max_request_tokens, B_) > total_blocks_)
      throw UsageError("simulation: the KV cache holds " + std::to_string(total_blocks_ * B_) +
                       " tokens, fewer than one request of " + std::to_string(max_request_tokens) +
                       " tokens needs: this deployment cannot serve the workload");
    stats_.kv_blocks = kv_tokens > 0 ? total_blocks_ : 0;
    stats_.kv_block_tokens = B_;
  }

  // The request reaches the instance at `at` (it joins the first round that starts at or after it).
  void Inject(std::int64_t id, double at) { pending_.push({at, seq_++, id}); }

  // When the next round starts: now if work is queued or running, else at the next arrival.
  double ReadyTime() const {
    if (!running_.empty() || !waiting_.empty()) return now_;
    return pending_.empty() ? kNever : std::max(now_, pending_.top().at);
  }
  double EarliestPending() const { return pending_.empty() ? kNever : pending_.top().at; }
  // Requests routed here and not yet retired.
  std::int64_t Load() const {
    return static_cast<std::int64_t>(running_.size() + waiting_.size() + pending_.size());
  }
  double Now() const { return now_; }
  const SimResult& stats() const { return stats_; }
  double busy_ms() const { return busy_ms_; }
  double running_time() const { return running_time_; }
  std::int64_t max_waiting() const { return max_waiting_; }

  // One round. `horizon`: the earliest time a request not yet injected can reach
  // this instance (a decode run ends at the first step boundary after it). The
  // retired requests are appended to `done`, at Now().
  void Step(double horizon, std::vector<std::int64_t>& done) {
    if (running_.empty() && waiting_.empty() && !pending_.empty()) now_ = std::max(now_, pending_.top().at);
    AdmitArrivals();
    if (running_.empty() && waiting_.empty()) return;
    Schedule();
    const std::int64_t k = DecodeRunLength();
    if (k > 1)
      AdvanceDecodeRun(k, std::min(horizon, EarliestPending()));
    else
      AdvanceStep();
    RecordOccupancy();
    RetireFinished(done);
  }

 private:
  struct Pending {
    double at;
    std::uint64_t seq;
    std::int64_t id;
    bool operator>(const Pending& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  Request& R(std::int64_t id) { return reqs_[static_cast<std::size_t>(id)]; }
  const Request& R(std::int64_t id) const { return reqs_[static_cast<std::size_t>(id)]; }

  void AdmitArrivals() {
    while (!pending_.empty() && pending_.top().at <= now_) {
      waiting_.push_back(pending_.top().id);
      pending_.pop();
    }
    max_waiting_ = std::max<std::int64_t>(max_waiting_, static_cast<std::int64_t>(waiting_.size()));
  }

  void Preempt(std::int64_t id) {
    Request& r = R(id);
    free_blocks_ += r.blocks;
    r.blocks = 0;
    r.computed = 0;
    r.prompt = r.isl + r.generated;
    waiting_.push_front(id);
    ++stats_.preemptions;
    stats_.kv_saturated = true;
  }

  // The step's batch: running requests first (their prefill chunks and decode
  // tokens), then waiting ones, by the engine's policy. A decode instance first
  // admits the requests whose KV has arrived (they decode in this step).
  void Schedule() {
    batch_.prefill.clear();
    batch_.decode = 0;
    batch_.decode_kv = 0;
    in_step_.clear();
    decoding_.clear();
    budget_ = e_.max_num_tokens;
    preempted_ = blocked_ = limit_now_ = false;
    min_left_ = std::numeric_limits<std::int64_t>::max();
    if (role_ == Role::kDecode) AdmitTransferred();
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
                       std::to_string(waiting_.empty() ? 0 : R(waiting_.front()).prompt) +
                       " tokens against a token budget of " + std::to_string(e_.max_num_tokens) +
                       " without chunked prefill)");
    }
  }

  // A waiting request's blocks at admission: `on_demand` of them (the tokens it
  // computes first), or for isl + osl under reserve_full. False (the admission
  // waits, the KV cache is saturated) when too few are free.
  bool Admit(Request& r, std::int64_t on_demand) {
    const std::int64_t blocks =
        e_.admission == SimProfile::Admission::kReserveFull ? CeilDiv(r.isl + r.osl, B_) : on_demand;
    if (blocks > free_blocks_) {
      blocked_ = true;
      stats_.kv_saturated = true;
      return false;
    }
    free_blocks_ -= blocks;
    r.blocks = blocks;
    return true;
  }

  // Transferred requests (their prompt's KV computed elsewhere) join the running
  // set in arrival order, each with blocks for its KV (reserve_full: for isl + osl).
  void AdmitTransferred() {
    while (!waiting_.empty()) {
      const std::int64_t id = waiting_.front();
      Request& r = R(id);
      if (r.computed == 0 || r.prefilling()) break;
      if (static_cast<std::int64_t>(running_.size()) >= max_seqs_) {
        stats_.running_limit_hit = limit_now_ = true;
        break;
      }
      if (!Admit(r, CeilDiv(r.computed, B_))) break;
      waiting_.pop_front();
      running_.push_back(id);
    }
  }

  void ScheduleRunning(bool prefill_only, bool decode_only) {
    for (std::size_t i = 0; i < running_.size() && budget_ > 0; ++i) {
      const std::int64_t id = running_[i];
      Request& r = R(id);
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
        min_left_ = std::min(min_left_, r.osl - r.generated);
      }
    }
  }

  void ScheduleWaiting() {
    while (!waiting_.empty() && budget_ > 0) {
      if (static_cast<std::int64_t>(running_.size()) >= max_seqs_) {
        stats_.running_limit_hit = limit_now_ = true;
        break;
      }
      const std::int64_t id = waiting_.front();
      Request& r = R(id);
      if (!r.prefilling()) break;  // a transferred request waiting for blocks (AdmitTransferred)
      std::int64_t need = r.prompt;
      if (need > budget_) {
        if (e_.chunked_prefill)
          need = budget_;
        else if (batch_.Requests() > 0)
          break;  // a whole prompt waits for a step with room
      }
      if (!Admit(r, CeilDiv(need, B_))) break;
      waiting_.pop_front();
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
      k = std::max<std::int64_t>(1, min_left_);
      const std::int64_t mean_kv = batch_.decode_kv / batch_.decode;
      k = std::min<std::int64_t>(k, std::max<std::int64_t>(1, mean_kv / 64));
      if (e_.admission == SimProfile::Admission::kOnDemand) {
        const std::int64_t room = (free_blocks_ / batch_.decode - 1) * B_;
        k = std::min<std::int64_t>(k, std::max<std::int64_t>(1, room));
      }
    }
    return k;
  }

  double StepMs(double gpu) const {
    return std::max(gpu, host_ms_per_request_ * static_cast<double>(batch_.Requests()));
  }

  void AdvanceDecodeRun(std::int64_t k, double next_arrival) {
    // The run's middle step (an even run: the mean of its two middle steps).
    StepBatch mid = batch_;
    mid.decode_kv += batch_.decode * ((k - 1) / 2);
    double gpu = cost_(mid);
    if (k % 2 == 0) {
      mid.decode_kv += batch_.decode;
      gpu = (gpu + cost_(mid)) / 2;
    }
    const double step = StepMs(gpu);
    // Stop at the next arrival: the steps that start before it.
    if (next_arrival < kNever && step > 0) {
      const double gap = next_arrival - now_;
      k = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(gap / step)), 1, k);
    }
    // Blocks for the k tokens of each request (the first token's were allocated when scheduling).
    const bool on_demand = e_.admission == SimProfile::Admission::kOnDemand;
    for (std::int64_t id : decoding_) {
      Request& r = R(id);
      if (on_demand) {
        const std::int64_t more = CeilDiv(r.computed + k, B_) - r.blocks;
        free_blocks_ -= more;
        r.blocks += more;
      }
      r.computed += k;
      r.generated += k;
    }
    retire_ = k >= min_left_;
    now_ += step * static_cast<double>(k);
    busy_ms_ += step * static_cast<double>(k);
    running_time_ += step * static_cast<double>(k) * static_cast<double>(running_.size());
    stats_.steps += k;
  }

  void AdvanceStep() {
    const double step = StepMs(cost_(batch_));
    now_ += step;
    busy_ms_ += step;
    running_time_ += step * static_cast<double>(running_.size());
    ++stats_.steps;
    retire_ = min_left_ <= 1;
    for (std::size_t i = 0; i < in_step_.size(); ++i) {
      Request& r = R(in_step_[i]);
      r.computed += batch_.prefill[i].tokens;
      if (!r.prefilling()) {
        ++r.generated;  // the step that ends a prefill samples a token
        if (r.first_token < 0) r.first_token = now_;
        retire_ = true;
      }
    }
    for (std::int64_t id : decoding_) {
      Request& r = R(id);
      ++r.computed;
      ++r.generated;
    }
  }

  void RecordOccupancy() {
    stats_.max_running = std::max<std::int64_t>(stats_.max_running, static_cast<std::int64_t>(running_.size()));
    const double used = static_cast<double>(total_blocks_ - free_blocks_) / static_cast<double>(total_blocks_);
    stats_.kv_peak_fraction = std::max(stats_.kv_peak_fraction, kv_tokens_ > 0 ? used : 0.0);
  }

  // Finished requests (prefill: prompt done) free their blocks and go to `done`.
  // One pass, when the step can have finished one (retire_); the running ones keep their order.
  void RetireFinished(std::vector<std::int64_t>& done) {
    if (!retire_) return;
    std::size_t kept = 0;
    for (const std::int64_t id : running_) {
      Request& r = R(id);
      const bool finished = !r.prefilling() && (role_ == Role::kPrefill || r.generated >= r.osl);
      if (finished) {
        free_blocks_ += r.blocks;
        r.blocks = 0;
        done.push_back(id);
      } else {
        running_[kept++] = id;
      }
    }
    running_.resize(kept);
  }

  const SimProfile& e_;
  const Role role_;
  const std::int64_t kv_tokens_;
  const double host_ms_per_request_;
  const StepCostFn& cost_;
  std::vector<Request>& reqs_;
  const std::int64_t B_, total_blocks_, max_seqs_;

  SimResult stats_;  // the instance's counters (steps, KV, preemptions, running)
  std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> pending_;
  std::uint64_t seq_ = 0;
  std::deque<std::int64_t> waiting_;
  std::vector<std::int64_t> running_;  // in admission order
  std::int64_t free_blocks_;
  double now_ = 0, running_time_ = 0, busy_ms_ = 0;
  std::int64_t max_waiting_ = 0;

  // The step being scheduled.
  StepBatch batch_;
  std::vector<std::int64_t> in_step_;  // reqs of the step's prefill chunks, in batch order
  std::vector<std::int64_t> decoding_;
  std::int64_t budget_ = 0;
  bool preempted_ = false, blocked_ = false, limit_now_ = false;
  std::int64_t min_left_ = 0;  // the fewest output tokens a decoding request of the step has left
  bool retire_ = false;        // the step ended a prompt or brought a request to its last token
};

// The clients: the requests they send (lengths drawn in order of issue) and when.
// Closed loop: `concurrency` at t = 0 and one per finish; Poisson: all drawn up front.
class Clients {
 public:
  Clients(const SimWorkload& w, std::vector<Request>& reqs)
      : w_(w),
        reqs_(reqs),
        closed_(w.arrival == SimWorkload::Arrival::kClosedLoop),
        total_(w.warmup + w.requests),
        rng_(w.seed),
        isl_lo_(LowEnd(w.isl, w.range_ratio)),
        osl_lo_(LowEnd(w.osl, w.range_ratio)) {
    reqs_.reserve(static_cast<std::size_t>(total_));
  }
  std::int64_t total() const { return total_; }
  bool closed() const { return closed_; }

  // The first requests (ids appended to `out`).
  void Seed(std::vector<std::int64_t>& out) {
    if (closed_) {
      for (std::int64_t i = 0; i < std::min(w_.concurrency, total_); ++i) out.push_back(Issue(0));
    } else {
      double t = 0;
      for (std::int64_t i = 0; i < total_; ++i) {
        t += -std::log(rng_.Unit()) / w_.rate_per_s * 1000.0;
        out.push_back(Issue(t));
      }
    }
  }
  // A request finished at `at`: closed loop, its client sends the next one (-1: none).
  std::int64_t OnFinish(double at) {
    if (!closed_ || static_cast<std::int64_t>(reqs_.size()) >= total_) return -1;
    return Issue(at);
  }

 private:
  std::int64_t Issue(double at) {
    Request r;
    r.isl = rng_.Uniform(isl_lo_, w_.isl);
    r.osl = std::max<std::int64_t>(2, rng_.Uniform(osl_lo_, w_.osl));
    r.prompt = r.isl;
    r.arrival = at;
    reqs_.push_back(r);
    return static_cast<std::int64_t>(reqs_.size()) - 1;
  }

  const SimWorkload& w_;
  std::vector<Request>& reqs_;
  const bool closed_;
  const std::int64_t total_;
  Lengths rng_;
  const std::int64_t isl_lo_, osl_lo_;
};

void CheckStepLimit(std::int64_t steps, const SimWorkload& w, std::int64_t max_running) {
  if (steps > kMaxSteps)
    throw UsageError("simulation: more than " + std::to_string(kMaxSteps) + " engine steps (" +
                     std::to_string(w.warmup + w.requests) + " requests, warm-up included, of up to " +
                     std::to_string(w.osl) + " output tokens, at most " + std::to_string(max_running) +
                     " running at once): the workload is too large to simulate; expected fewer requests "
                     "(--sim-requests, --sim-warmup) or a shorter --osl");
}

// The request statistics over the measured requests (after the warm-up) into `out`.
void SummarizeRequests(const std::vector<Request>& reqs, const SimWorkload& w, SimResult& out) {
  std::vector<double> ttft, tpot, e2e;
  double first_arrival = kNever, last_finish = 0, tokens = 0;
  const std::int64_t total = w.warmup + w.requests;
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
}

}  // namespace

SimResult Simulate(const SimProfile& e, const SimWorkload& w, std::int64_t kv_tokens, double host_ms_per_request,
                   const StepCostFn& cost) {
  CheckSimInputs(w);
  std::vector<Request> reqs;
  Clients clients(w, reqs);
  Instance inst(e, Role::kAgg, kv_tokens, host_ms_per_request, cost, reqs, w.isl + w.osl);
  std::vector<std::int64_t> ids;
  clients.Seed(ids);
  for (std::int64_t id : ids) inst.Inject(id, reqs[static_cast<std::size_t>(id)].arrival);
  std::int64_t finished = 0;
  while (finished < clients.total()) {
    if (inst.ReadyTime() == kNever) throw Error("simulation: no request left to run before all finished");
    CheckStepLimit(inst.stats().steps, w, inst.stats().max_running);
    ids.clear();
    inst.Step(kNever, ids);
    for (std::int64_t id : ids) {
      reqs[static_cast<std::size_t>(id)].finish = inst.Now();
      ++finished;
      const std::int64_t next = clients.OnFinish(inst.Now());
      if (next >= 0) inst.Inject(next, inst.Now());
    }
  }
  SimResult out = inst.stats();
  SummarizeRequests(reqs, w, out);
  out.mean_running = inst.Now() > 0 ? inst.running_time() / inst.Now() : 0;
  if (clients.closed()) out.admitted_all = out.max_running >= std::min(w.concurrency, clients.total());
  if (!out.admitted_all)
    out.notes.push_back("the engine never ran all " + std::to_string(w.concurrency) + " requests at once (at most " +
                        std::to_string(out.max_running) + "): " +
                        (out.running_limit_hit ? "its running-request limit" : "its KV cache") +
                        " holds fewer; the others queue");
  if (out.preemptions > 0)
    out.notes.push_back(std::to_string(out.preemptions) + " preemption(s): the KV cache ran out while decoding");
  return out;
}

DisaggSimResult SimulateDisaggInstances(const DisaggSimSetup& s, const SimWorkload& w) {
  CheckSimInputs(w);
  if (s.prefill_instances < 1 || s.decode_instances < 1)
    throw UsageError("simulation: disaggregated serving needs at least one prefill and one decode instance");
  if (!(s.transfer_ms_per_token >= 0) || !(s.handoff_ms >= 0))
    throw UsageError("simulation: the KV transfer time and the hand-off latency must be >= 0");
  std::vector<Request> reqs;
  Clients clients(w, reqs);
  std::vector<Instance> prefill, decode;
  prefill.reserve(static_cast<std::size_t>(s.prefill_instances));
  decode.reserve(static_cast<std::size_t>(s.decode_instances));
  for (int i = 0; i < s.prefill_instances; ++i)
    prefill.emplace_back(s.prefill_engine, Role::kPrefill, s.prefill_kv_tokens, s.prefill_host_ms_per_request,
                         s.prefill_cost, reqs, w.isl);
  for (int i = 0; i < s.decode_instances; ++i)
    decode.emplace_back(s.decode_engine, Role::kDecode, s.decode_kv_tokens, s.decode_host_ms_per_request,
                        s.decode_cost, reqs, w.isl + w.osl);
  // Routing: the instance with the fewest requests routed to it and not retired (ties: the first).
  auto least_loaded = [](std::vector<Instance>& v) -> Instance& {
    std::size_t best = 0;
    for (std::size_t i = 1; i < v.size(); ++i)
      if (v[i].Load() < v[best].Load()) best = i;
    return v[best];
  };
  std::vector<std::int64_t> ids;
  clients.Seed(ids);
  for (std::int64_t id : ids) least_loaded(prefill).Inject(id, reqs[static_cast<std::size_t>(id)].arrival);

  std::int64_t finished = 0, steps = 0, max_running = 0;
  while (finished < clients.total()) {
    // The instance whose next round starts first; rounds are taken in start order, so
    // every request that reaches an instance before a round starts is injected by then.
    Instance* next = nullptr;
    bool next_is_decode = false;
    double t = kNever, prefill_ready = kNever, decode_ready = kNever;
    for (Instance& x : prefill) {
      const double at = x.ReadyTime();
      prefill_ready = std::min(prefill_ready, at);
      if (at < t) t = at, next = &x, next_is_decode = false;
    }
    for (Instance& x : decode) {
      const double at = x.ReadyTime();
      decode_ready = std::min(decode_ready, at);
      if (at < t) t = at, next = &x, next_is_decode = true;
    }
    if (!next) throw Error("simulation: no request left to run before all finished");
    CheckStepLimit(steps, w, max_running);
    const std::int64_t before = next->stats().steps;
    ids.clear();
    // A decode instance's next request is handed off by a prefill round not yet
    // taken (it starts no earlier than prefill_ready); a prefill instance's, by a
    // decode finish (closed loop).
    next->Step(next_is_decode ? prefill_ready + s.handoff_ms : decode_ready, ids);
    steps += next->stats().steps - before;
    max_running = std::max(max_running, next->stats().max_running);
    const double now = next->Now();
    for (std::int64_t id : ids) {
      Request& r = reqs[static_cast<std::size_t>(id)];
      if (!next_is_decode) {
        // Hand-off: the first token reaches the client and the decode instance
        // receives the prompt's KV after the hand-off latency and the transfer.
        const double arrive = now + s.handoff_ms + s.transfer_ms_per_token * static_cast<double>(r.isl);
        r.first_token = arrive;
        least_loaded(decode).Inject(id, arrive);
      } else {
        r.finish = now;
        ++finished;
        const std::int64_t again = clients.OnFinish(now);
        if (again >= 0) least_loaded(prefill).Inject(again, now);
      }
    }
  }

  DisaggSimResult out;
  SimResult& sim = out.sim;
  double end = 0;
  for (const Instance& x : decode) end = std::max(end, x.Now());
  for (const Instance& x : prefill) end = std::max(end, x.Now());
  double running_time = 0;
  for (const Instance& x : decode) {
    const SimResult& st = x.stats();
    sim.steps += st.steps;
    sim.preemptions += st.preemptions;
    sim.max_running = std::max(sim.max_running, st.max_running);
    sim.kv_peak_fraction = std::max(sim.kv_peak_fraction, st.kv_peak_fraction);
    sim.kv_saturated = sim.kv_saturated || st.kv_saturated;
    sim.running_limit_hit = sim.running_limit_hit || st.running_limit_hit;
    sim.kv_blocks = st.kv_blocks;
    sim.kv_block_tokens = st.kv_block_tokens;
    running_time += x.running_time();
  }
  SummarizeRequests(reqs, w, sim);
  sim.mean_running = end > 0 ? running_time / end / static_cast<double>(decode.size()) : 0;
  // Decode admits every request that reaches it unless its limit or its KV cache stops it.
  sim.admitted_all = !sim.running_limit_hit && !sim.kv_saturated;
  double busy = 0;
  for (const Instance& x : prefill) {
    out.prefill_steps += x.stats().steps;
    out.prefill_max_queue = std::max(out.prefill_max_queue, x.max_waiting());
    out.prefill_max_running = std::max(out.prefill_max_running, x.stats().max_running);
    out.prefill_kv_saturated = out.prefill_kv_saturated || x.stats().kv_saturated;
    busy += x.busy_ms();
  }
  out.prefill_utilization = end > 0 ? busy / end / static_cast<double>(prefill.size()) : 0;
  if (out.prefill_utilization > 0.95)
    sim.notes.push_back("the prefill instances were busy " + std::to_string(static_cast<int>(std::lround(100 * out.prefill_utilization))) + "%" +
                        " of the time: prefill is the bottleneck and its queue sets TTFT");
  if (!sim.admitted_all)
    sim.notes.push_back(std::string("decode admissions waited for ") +
                        (sim.running_limit_hit ? "the running-request limit" : "KV-cache blocks") +
                        ": handed-off requests queue on the decode side");
  if (sim.preemptions > 0)
    sim.notes.push_back(std::to_string(sim.preemptions) +
                        " decode preemption(s): the KV cache ran out while decoding (recomputed on the decode instance)");
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

namespace {
// The KV cache of one instance in tokens, from the memory model (the engine's KV
// budget / bytes per token); UsageError when none is left.
std::int64_t KvTokens(const MemoryBreakdown& mem, const char* who) {
  const std::int64_t t = mem.kv_bytes_per_token > 0
                             ? static_cast<std::int64_t>(std::floor(mem.kv_budget / mem.kv_bytes_per_token))
                             : 0;
  if (t < 1)
    throw UsageError(std::string("simulation: the memory model leaves no KV cache on the ") + who +
                     " workers (weights and activations fill the GPU): they cannot serve");
  return t;
}
}  // namespace

SimDisaggDeployment SimulateDisagg(const model::ModelConfig& m, const model::ParallelConfig& prefill_par,
                                   const model::OpList& prefill_ops, const model::ParallelConfig& decode_par,
                                   const model::OpList& decode_ops, const Database& db, const EngineProfile& engine,
                                   const DisaggSimInputs& in, const SimWorkload& w) {
  if (!engine.sim.present)
    throw ConfigError(SourceLocation{engine.source_file, 0, "sim"}, "no sim section: this profile cannot be simulated",
                      "a sim: section (max_num_tokens, max_num_seqs, kv_block_tokens, admission)");
  if (in.prefill_workers < 1 || in.decode_workers < 1)
    throw UsageError("disagg needs at least one worker of each kind");
  if (decode_par.cp > 1)
    throw UsageError("decode workers run no context parallelism (" + decode_par.ToString() + "): only prefill is split");
  SimDisaggDeployment d;
  DisaggSimSetup s;
  s.prefill_engine = engine.sim;
  s.decode_engine = engine.sim;
  if (in.prefill_batch > 0) s.prefill_engine.max_num_seqs = in.prefill_batch;
  if (in.decode_batch > 0) s.decode_engine.max_num_seqs = in.decode_batch;
  s.prefill_instances = in.prefill_workers * prefill_par.dp * prefill_par.pp;
  s.decode_instances = in.decode_workers * decode_par.dp * decode_par.pp;

  MemoryInputs pm;
  pm.batch = std::max<std::int64_t>(in.prefill_batch, 1);
  pm.tokens = s.prefill_engine.max_num_tokens;
  pm.seq_len = w.isl;
  d.prefill_memory = EstimateMemory(m, prefill_par, prefill_ops, db.spec(), engine, pm);
  d.prefill_kv_tokens = KvTokens(d.prefill_memory, "prefill");
  MemoryInputs dm;
  dm.batch = in.decode_batch > 0 ? in.decode_batch
                                 : std::max<std::int64_t>(1, (w.concurrency + s.decode_instances - 1) /
                                                                 s.decode_instances);
  dm.tokens = s.decode_engine.max_num_tokens;
  dm.seq_len = w.isl + w.osl;
  d.decode_memory = EstimateMemory(m, decode_par, decode_ops, db.spec(), engine, dm);
  d.decode_kv_tokens = KvTokens(d.decode_memory, "decode");
  s.prefill_kv_tokens = d.prefill_kv_tokens;
  s.decode_kv_tokens = d.decode_kv_tokens;

  // The KV transfer: each prefill GPU sends its share of a request's cache (the
  // memory model's bytes per token per GPU) over its own link, NVLink when every
  // worker fits one node, else the network.
  const systems::NodeSpec& node = db.spec().node;
  d.gpus = prefill_par.GpusPerWorker() * in.prefill_workers + decode_par.GpusPerWorker() * in.decode_workers;
  d.intra_node = d.gpus <= node.gpus_per_node;
  const double bw = d.intra_node ? node.intra_node_bw_bytes_per_s : node.inter_node_bw_bytes_per_s;
  s.transfer_ms_per_token = bw > 0 ? d.prefill_memory.kv_bytes_per_token / bw * 1000.0 : 0;
  s.handoff_ms = engine.sim.disagg_handoff_ms;
  d.transfer_ms = s.transfer_ms_per_token * static_cast<double>(w.isl);

  // Each side's steps x the profile's disagg latency corrections, as the closed form
  // (RunDisagg) scales its prefill pass and decode phase.
  TableStepCost pcost(prefill_ops, db, engine.agg), dcost(decode_ops, db, engine.agg);
  const double pc = engine.disagg.prefill_latency_correction, dc = engine.disagg.decode_latency_correction;
  s.prefill_cost = [&](const StepBatch& b) { return pc * pcost(b); };
  s.decode_cost = [&](const StepBatch& b) { return dc * dcost(b); };
  s.prefill_host_ms_per_request = engine.agg.step_ms_per_request;
  s.decode_host_ms_per_request = engine.agg.step_ms_per_request;
  d.result = SimulateDisaggInstances(s, w);
  d.cost_evaluations = pcost.Evaluations() + dcost.Evaluations();
  d.tokens_per_s = d.result.sim.tokens_per_s;
  d.seq_per_s = d.result.sim.seq_per_s;
  d.tokens_per_s_gpu = d.tokens_per_s / d.gpus;
  d.concurrency = w.concurrency;
  return d;
}

}  // namespace servecast::serve
