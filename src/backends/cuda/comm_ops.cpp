// Collective ops (comm_ops.h): every rank fills its input with a known pattern,
// runs the collective once, checks its own output exactly against the pattern's
// reduction, agrees with the other ranks that all outputs were right, and only
// then times the collective with the harness (decisions agreed across ranks).

#include "backends/cuda/comm_ops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/comm_group.h"
#include "backends/cuda/comm_kernels.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/custom_allreduce.h"
#include "backends/cuda/device.h"
#include "backends/cuda/fill.h"
#include "backends/cuda/harness.h"
#include "backends/cuda/op_vocabulary.h"
#include "collect/case.h"
#include "collect/table_spec.h"
#include "core/error.h"

namespace servecast::cuda {
namespace {

enum class Coll { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kSendRecv };

// nccl-tests' bus-bandwidth factor: busbw = algbw * factor.
double BusFactor(Coll c, int n) {
  switch (c) {
    case Coll::kAllReduce: return 2.0 * (n - 1) / n;
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kAllToAll: return static_cast<double>(n - 1) / n;
    case Coll::kSendRecv: return 1.0;
  }
  return 1.0;
}

const char* CollName(Coll c) {
  switch (c) {
    case Coll::kAllReduce: return "all_reduce";
    case Coll::kAllGather: return "all_gather";
    case Coll::kReduceScatter: return "reduce_scatter";
    case Coll::kAllToAll: return "alltoall";
    case Coll::kSendRecv: return "send_recv";
  }
  return "?";
}

struct CommShape {
  std::int64_t count = 0;  // message_size, elements
  int gpus = 0;
  int elem = 2;
  std::string dtype_name;  // what ran: bfloat16, int8
};

CaseResult Invalid(const std::string& op, const std::string& msg) {
  return CaseResult::Failure(Disposition::kFailed, FailureClass::kUnsupportedConfig, "InvalidParams", op + ": " + msg);
}

// message_size, num_gpus and the dtype column; empty when valid.
std::optional<CaseResult> ParseShape(const std::string& op, const Params& p, const std::string& dtype_col,
                                     bool needs_split, CommShape& s) {
  try {
    s.count = p.Int(std::string("message_size"));
    s.gpus = static_cast<int>(p.Int(std::string("num_gpus")));
    const std::string& dt = p.Str(dtype_col);
    if (dt == "half" || dt == "bfloat16") {
      s.elem = 2;
      s.dtype_name = "bfloat16";
    } else if (dt == "int8") {
      s.elem = 1;
      s.dtype_name = "int8";
    } else {
      return Invalid(op, dtype_col + " '" + dt + "'; expected half (run as bfloat16), bfloat16 or int8");
    }
  } catch (const std::exception& e) {
    return Invalid(op, e.what());
  }
  if (s.count < 1) return Invalid(op, "message_size must be >= 1 element; got " + std::to_string(s.count));
  if (s.gpus < 2) return Invalid(op, "num_gpus must be >= 2; got " + std::to_string(s.gpus));
  if (needs_split && s.count % s.gpus != 0)
    return Invalid(op, "message_size " + std::to_string(s.count) + " is not a multiple of num_gpus " +
                           std::to_string(s.gpus));
  return std::nullopt;
}

// The value expected at output index i of rank r.
int Expected(Coll c, int r, int n, std::int64_t count, std::int64_t i) {
  const std::int64_t chunk = count / n;
  auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  switch (c) {
    case Coll::kAllReduce: {
      int sum = 0;
      for (int s = 0; s < n; ++s) sum += CommPattern(s, u(i));
      return sum;
    }
    case Coll::kAllGather: return CommPattern(static_cast<int>(i / chunk), u(i % chunk));
    case Coll::kReduceScatter: {
      int sum = 0;
      for (int s = 0; s < n; ++s) sum += CommPattern(s, u(r * chunk + i));
      return sum;
    }
    case Coll::kAllToAll: return CommPattern(static_cast<int>(i / chunk), u(r * chunk + i % chunk));
    case Coll::kSendRecv: return CommPattern((r - 1 + n) % n, u(i));
  }
  return 0;
}

// Compares the device output with Expected; "" when every element matches.
std::string CheckOutput(const void* dev_out, std::int64_t out_count, int elem,
                        const std::function<int(std::int64_t)>& expected, cudaStream_t st) {
  std::vector<unsigned char> host(static_cast<std::size_t>(out_count) * static_cast<std::size_t>(elem));
  SC_CUDA_CHECK(cudaMemcpyAsync(host.data(), dev_out, host.size(), cudaMemcpyDeviceToHost, st));
  SC_CUDA_CHECK(cudaStreamSynchronize(st));
  std::int64_t bad = 0, first = -1;
  double first_got = 0;
  int first_want = 0;
  for (std::int64_t i = 0; i < out_count; ++i) {
    double got;
    if (elem == 2) {
      std::uint16_t b;
      std::memcpy(&b, host.data() + 2 * i, 2);
      got = Bf16ToF32(b);
    } else {
      got = static_cast<std::int8_t>(host[static_cast<std::size_t>(i)]);
    }
    int want = expected(i);
    if (got != static_cast<double>(want)) {
      if (first < 0) {
        first = i;
        first_got = got;
        first_want = want;
      }
      ++bad;
    }
  }
  if (bad == 0) return "";
  return std::to_string(bad) + " of " + std::to_string(out_count) + " output elements wrong (first at " +
         std::to_string(first) + ": got " + std::to_string(first_got) + ", expected " + std::to_string(first_want) +
         ")";
}

// Agrees across ranks that every rank's check passed; the result names this rank's problem.
std::optional<CaseResult> AgreeCheck(CommGroup& g, const std::string& op, const std::string& local_problem) {
  const long long all_ok = g.AllMin(local_problem.empty() ? 1 : 0);
  if (all_ok == 1) return std::nullopt;
  std::string msg = local_problem.empty() ? "another rank's output was wrong (this rank's matched)"
                                          : "rank " + std::to_string(g.rank()) + ": " + local_problem;
  return CaseResult::Failure(Disposition::kIncorrect, FailureClass::kFrameworkBug, "IncorrectOutput", op + ": " + msg);
}

Params Bandwidths(double bytes, double ms, double factor) {
  Params extra;
  double algbw = ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0;
  extra.Set("algbw_gbps", algbw);
  extra.Set("busbw_gbps", algbw * factor);
  return extra;
}

TimeOptions CollectiveTiming(CommGroup& g) {
  TimeOptions topt;
  topt.copies = 1;
  topt.rotated_bytes = 0;
  topt.agree_min = [&g](long long v) { return g.AllMin(v); };
  // Each replay starts after a host-side agreement, up to a few µs apart on the
  // ranks; over >= 2 ms of calls per sample that skew stays under 0.5% of a call.
  topt.min_sample_s = 2e-3;
  return topt;
}

// What every collective op shares: its table, key parameters, and one rank per GPU.
class CommOp : public collect::Op {
 public:
  explicit CommOp(const std::string& table_name) {
    table_ = collect::FindTableSpec(table_name);
    if (!table_) throw Error("comm: table " + table_name + " is not defined");
  }
  const collect::TableSpec& table() const override { return *table_; }
  std::vector<std::string> required_params() const override { return table_->KeyColumnNames(); }
  std::vector<collect::Requirement> requirements() const override {
    collect::Requirement r;
    r.gpus_param = "num_gpus";
    return {r};
  }
  int Ranks(const Params& p) const override { return p.Has("num_gpus") ? static_cast<int>(p.Num("num_gpus")) : 1; }

  CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) final {
    CommShape s;
    if (auto bad = Parse(c.params, s)) return *bad;
    if (s.gpus != ctx.world)
      return Invalid(name(), "num_gpus " + std::to_string(s.gpus) + " but this rank's world is " +
                                 std::to_string(ctx.world));
    std::unique_ptr<collect::CasePhases> phases = MakePhases(c, ctx, s);
    return RunCudaPhases(*phases, FailureClass::kFrameworkBug);
  }

 protected:
  // The case's shape; a result when the case cannot run.
  virtual std::optional<CaseResult> Parse(const Params& p, CommShape& s) const = 0;
  // The phases of one case on this rank (every rank runs them at once, in step).
  virtual std::unique_ptr<collect::CasePhases> MakePhases(const collect::Case& c, const collect::RunContext& ctx,
                                                          const CommShape& s) const = 0;

  const collect::TableSpec* table_ = nullptr;
};

class NcclOp : public CommOp {
 public:
  explicit NcclOp(Coll c) : CommOp("nccl_perf"), coll_(c) {}
  std::string name() const override { return CollName(coll_); }

 private:
  std::optional<CaseResult> Parse(const Params& p, CommShape& s) const override {
    const bool split = coll_ == Coll::kAllGather || coll_ == Coll::kReduceScatter || coll_ == Coll::kAllToAll;
    return ParseShape(name(), p, "nccl_dtype", split, s);
  }

  // The pattern in, poison out, one call, an exact check on every rank, then the
  // collective timed with decisions agreed across ranks.
  class Phases : public collect::CasePhases {
   public:
    Phases(const NcclOp& op, const collect::Case& c, const collect::RunContext& ctx, const CommShape& s)
        : op_(op), c_(c), ctx_(ctx), s_(s), st_(Context().stream) {}

    std::optional<CaseResult> Prepare() override {
      g_ = &JoinGroup(ctx_);
      const int n = s_.gpus, r = g_->rank();
      const std::int64_t chunk = s_.count / n;
      in_count_ = s_.count;
      out_count_ = s_.count;
      if (op_.coll_ == Coll::kAllGather) in_count_ = chunk;
      if (op_.coll_ == Coll::kReduceScatter) out_count_ = chunk;
      const std::size_t elem = static_cast<std::size_t>(s_.elem);
      in_ = DeviceBuffer(static_cast<std::size_t>(in_count_) * elem);
      out_ = DeviceBuffer(static_cast<std::size_t>(out_count_) * elem);
      const ncclDataType_t dt = s_.elem == 2 ? ncclBfloat16 : ncclInt8;
      ncclComm_t comm = g_->comm();
      char* src = in_.as<char>();
      char* dst = out_.as<char>();
      const Coll coll = op_.coll_;
      const std::int64_t count = s_.count;
      launch_ = [=](cudaStream_t stream, int) {
        switch (coll) {
          case Coll::kAllReduce:
            SC_NCCL_CHECK(ncclAllReduce(src, dst, static_cast<std::size_t>(count), dt, ncclSum, comm, stream));
            break;
          case Coll::kAllGather:
            SC_NCCL_CHECK(ncclAllGather(src, dst, static_cast<std::size_t>(chunk), dt, comm, stream));
            break;
          case Coll::kReduceScatter:
            SC_NCCL_CHECK(ncclReduceScatter(src, dst, static_cast<std::size_t>(chunk), dt, ncclSum, comm, stream));
            break;
          case Coll::kAllToAll: {
            const std::size_t bytes = static_cast<std::size_t>(chunk) * elem;
            SC_NCCL_CHECK(ncclGroupStart());
            for (int p = 0; p < n; ++p) {
              SC_NCCL_CHECK(ncclSend(src + p * bytes, static_cast<std::size_t>(chunk), dt, p, comm, stream));
              SC_NCCL_CHECK(ncclRecv(dst + p * bytes, static_cast<std::size_t>(chunk), dt, p, comm, stream));
            }
            SC_NCCL_CHECK(ncclGroupEnd());
            break;
          }
          case Coll::kSendRecv:
            SC_NCCL_CHECK(ncclGroupStart());
            SC_NCCL_CHECK(ncclSend(src, static_cast<std::size_t>(count), dt, (r + 1) % n, comm, stream));
            SC_NCCL_CHECK(ncclRecv(dst, static_cast<std::size_t>(count), dt, (r - 1 + n) % n, comm, stream));
            SC_NCCL_CHECK(ncclGroupEnd());
            break;
        }
      };
      return std::nullopt;
    }

    std::optional<CaseResult> Check() override {
      const int n = s_.gpus, r = g_->rank();
      FillCommPattern(in_.get(), static_cast<std::size_t>(in_count_), s_.elem, r, st_);
      FillPoison(out_.get(), out_.bytes(), st_);
      launch_(st_, 0);
      SC_CUDA_CHECK(cudaStreamSynchronize(st_));
      const std::string problem = CheckOutput(
          out_.get(), out_count_, s_.elem, [&](std::int64_t i) { return Expected(op_.coll_, r, n, s_.count, i); }, st_);
      return AgreeCheck(*g_, op_.name(), problem);
    }

    void Time() override { stats_ = TimeOnDevice(launch_, ctx_.timing, CollectiveTiming(*g_), ctx_.measure_power); }

    std::vector<Params> Emit() override {
      const double bytes = static_cast<double>(s_.count) * s_.elem;
      Params extra = Bandwidths(bytes, stats_.median_ms, BusFactor(op_.coll_, s_.gpus));
      return {collect::MakeRow(*op_.table_, *ctx_.runtime, op_.name(), "nccl:" + s_.dtype_name, c_.params, stats_,
                               ctx_.measure_power, extra)};
    }

   private:
    const NcclOp& op_;
    const collect::Case& c_;
    const collect::RunContext& ctx_;
    const CommShape s_;
    cudaStream_t st_;
    CommGroup* g_ = nullptr;
    std::int64_t in_count_ = 0, out_count_ = 0;
    DeviceBuffer in_, out_;
    LaunchFn launch_;
    collect::TimingStats stats_;
  };

  std::unique_ptr<collect::CasePhases> MakePhases(const collect::Case& c, const collect::RunContext& ctx,
                                                  const CommShape& s) const override {
    return std::make_unique<Phases>(*this, c, ctx, s);
  }

  Coll coll_;
};

class CustomAllReduceOp : public CommOp {
 public:
  CustomAllReduceOp() : CommOp("custom_allreduce_perf") {}
  std::string name() const override { return "custom_allreduce"; }

 private:
  std::optional<CaseResult> Parse(const Params& p, CommShape& s) const override {
    if (auto bad = ParseShape(name(), p, "allreduce_dtype", false, s)) return bad;
    if (s.elem != 2)
      return CaseResult::Failure(Disposition::kNotSupported, FailureClass::kUnsupportedConfig, "NotSupported",
                                 "custom_allreduce reduces bfloat16 only; got " + s.dtype_name);
    return std::nullopt;
  }

  // Each algorithm that takes the size (one-shot, two-shot) checked exactly on every
  // rank, then each timed; the faster on rank 0's clock makes the row.
  class Phases : public collect::CasePhases {
   public:
    Phases(const CustomAllReduceOp& op, const collect::Case& c, const collect::RunContext& ctx, const CommShape& s)
        : op_(op), c_(c), ctx_(ctx), s_(s), st_(Context().stream), bytes_(static_cast<std::size_t>(s.count) * 2) {}

    std::optional<CaseResult> Prepare() override {
      g_ = &JoinGroup(ctx_);
      if (g_->SpansNodes())
        return CaseResult::Failure(Disposition::kNotSupported, FailureClass::kUnsupportedConfig, "NotSupported",
                                   "custom_allreduce shares memory through CUDA IPC, which works within one node; "
                                   "this group spans several");
      CommGroup& g = *g_;
      car_ = std::make_unique<CustomAllReduce>(g.rank(), g.world(), bytes_,
                                               [&g](const std::string& mine) { return g.AllGather(mine); });
      out_ = DeviceBuffer(bytes_);
      // Every rank sees the same Supports answer (same world, size, max_bytes).
      for (CustomArAlgo algo : {CustomArAlgo::kOneShot, CustomArAlgo::kTwoShot})
        if (car_->Supports(algo, static_cast<std::size_t>(s_.count))) algos_.push_back(algo);
      if (algos_.empty())
        return CaseResult::Failure(Disposition::kNotSupported, FailureClass::kUnsupportedConfig, "NotSupported",
                                   "custom_allreduce: no algorithm takes " + std::to_string(s_.count) +
                                       " bfloat16 elements on " + std::to_string(s_.gpus) + " GPUs");
      return std::nullopt;
    }

    std::optional<CaseResult> Check() override {
      for (CustomArAlgo algo : algos_) {
        FillCommPattern(car_->input(), static_cast<std::size_t>(s_.count), 2, g_->rank(), st_);
        FillPoison(out_.get(), out_.bytes(), st_);
        car_->Run(algo, static_cast<std::size_t>(s_.count), out_.get(), st_);
        SC_CUDA_CHECK(cudaStreamSynchronize(st_));
        std::string problem = CheckOutput(
            out_.get(), s_.count, 2,
            [&](std::int64_t i) { return Expected(Coll::kAllReduce, g_->rank(), s_.gpus, s_.count, i); }, st_);
        if (!problem.empty()) problem = std::string(ToString(algo)) + ": " + problem;
        if (auto bad = AgreeCheck(*g_, op_.name(), problem)) return bad;
      }
      return std::nullopt;
    }

    void Time() override {
      for (CustomArAlgo algo : algos_) {
        CustomAllReduce& car = *car_;
        const std::int64_t count = s_.count;
        void* out = out_.get();
        LaunchFn launch = [&car, algo, count, out](cudaStream_t stream, int) {
          car.Run(algo, static_cast<std::size_t>(count), out, stream);
        };
        stats_.push_back(TimeOnDevice(launch, ctx_.timing, CollectiveTiming(*g_), ctx_.measure_power));
      }
      // The faster on rank 0's clock decides; every rank takes rank 0's choice.
      std::size_t best = 0;
      for (std::size_t i = 1; i < stats_.size(); ++i)
        if (stats_[i].median_ms < stats_[best].median_ms) best = i;
      best_ = static_cast<std::size_t>(g_->AllMin(g_->rank() == 0 ? static_cast<long long>(best) : 1LL << 40));
      // Nobody may free its IPC-shared buffers while a peer still reads them.
      SC_CUDA_CHECK(cudaStreamSynchronize(st_));
      g_->AllMin(0);
    }

    std::vector<Params> Emit() override {
      const CustomArAlgo algo = algos_[best_];
      const collect::TimingStats& stats = stats_[best_];
      Params extra = Bandwidths(static_cast<double>(bytes_), stats.median_ms, BusFactor(Coll::kAllReduce, s_.gpus));
      extra.Set("implementation", std::string(ToString(algo)));
      return {collect::MakeRow(*op_.table_, *ctx_.runtime, op_.name(),
                               std::string("servecast_custom_ar:") + ToString(algo), c_.params, stats,
                               ctx_.measure_power, extra)};
    }

   private:
    const CustomAllReduceOp& op_;
    const collect::Case& c_;
    const collect::RunContext& ctx_;
    const CommShape s_;
    cudaStream_t st_;
    const std::size_t bytes_;
    CommGroup* g_ = nullptr;
    std::unique_ptr<CustomAllReduce> car_;
    DeviceBuffer out_;
    std::vector<CustomArAlgo> algos_;             // the algorithms that take this size
    std::vector<collect::TimingStats> stats_;     // one per algorithm, in algos_ order
    std::size_t best_ = 0;
  };

  std::unique_ptr<collect::CasePhases> MakePhases(const collect::Case& c, const collect::RunContext& ctx,
                                                  const CommShape& s) const override {
    return std::make_unique<Phases>(*this, c, ctx, s);
  }
};

}  // namespace

void RegisterCommOps(collect::Registry& r) {
  for (Coll c : {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kAllToAll, Coll::kSendRecv})
    r.AddOp("cuda", std::make_unique<NcclOp>(c));
  r.AddOp("cuda", std::make_unique<CustomAllReduceOp>());
}

}  // namespace servecast::cuda
