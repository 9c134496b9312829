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
#include "collect/case.h"
#include "collect/table_spec.h"
#include "core/error.h"

namespace servecast::cuda {
namespace {

using collect::CaseResult;
using collect::Disposition;
using collect::FailureClass;
using collect::Params;

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
    try {
      return RunChecked(c, ctx, s);
    } catch (const CudaError& e) {
      return CaseResultFromCudaError(e, FailureClass::kFrameworkBug);
    }
  }

 protected:
  // The case's shape; a result when the case cannot run.
  virtual std::optional<CaseResult> Parse(const Params& p, CommShape& s) const = 0;
  // Check, then time, on this rank (every rank runs it at once).
  virtual CaseResult RunChecked(const collect::Case& c, const collect::RunContext& ctx, const CommShape& s) = 0;

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

  CaseResult RunChecked(const collect::Case& c, const collect::RunContext& ctx, const CommShape& s) override {
    CommGroup& g = JoinGroup(ctx);
    cudaStream_t st = Context().stream;
    const int n = s.gpus, r = g.rank();
    const std::int64_t chunk = s.count / n;
    std::int64_t in_count = s.count, out_count = s.count;
    if (coll_ == Coll::kAllGather) in_count = chunk;
    if (coll_ == Coll::kReduceScatter) out_count = chunk;
    const std::size_t elem = static_cast<std::size_t>(s.elem);
    DeviceBuffer in(static_cast<std::size_t>(in_count) * elem), out(static_cast<std::size_t>(out_count) * elem);
    const ncclDataType_t dt = s.elem == 2 ? ncclBfloat16 : ncclInt8;
    ncclComm_t comm = g.comm();
    char* src = in.as<char>();
    char* dst = out.as<char>();
    const Coll coll = coll_;
    LaunchFn launch = [=](cudaStream_t stream, int) {
      switch (coll) {
        case Coll::kAllReduce:
          SC_NCCL_CHECK(ncclAllReduce(src, dst, static_cast<std::size_t>(s.count), dt, ncclSum, comm, stream));
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
          SC_NCCL_CHECK(ncclSend(src, static_cast<std::size_t>(s.count), dt, (r + 1) % n, comm, stream));
          SC_NCCL_CHECK(ncclRecv(dst, static_cast<std::size_t>(s.count), dt, (r - 1 + n) % n, comm, stream));
          SC_NCCL_CHECK(ncclGroupEnd());
          break;
      }
    };

    // Correctness first: the pattern in, poison out, one call, an exact check on every rank.
    FillCommPattern(in.get(), static_cast<std::size_t>(in_count), s.elem, r, st);
    FillPoison(out.get(), out.bytes(), st);
    launch(st, 0);
    SC_CUDA_CHECK(cudaStreamSynchronize(st));
    const std::string problem = CheckOutput(
        out.get(), out_count, s.elem, [&](std::int64_t i) { return Expected(coll_, r, n, s.count, i); }, st);
    if (auto bad = AgreeCheck(g, name(), problem)) return *bad;

    const collect::TimingStats stats = TimeOnDevice(launch, ctx.timing, CollectiveTiming(g), ctx.measure_power);
    const double bytes = static_cast<double>(s.count) * s.elem;
    Params extra = Bandwidths(bytes, stats.median_ms, BusFactor(coll_, n));
    return CaseResult::Passed({collect::MakeRow(*table_, *ctx.runtime, name(), "nccl:" + s.dtype_name, c.params,
                                                stats, ctx.measure_power, extra)});
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

  CaseResult RunChecked(const collect::Case& c, const collect::RunContext& ctx, const CommShape& s) override {
    CommGroup& g = JoinGroup(ctx);
    if (g.SpansNodes())
      return CaseResult::Failure(Disposition::kNotSupported, FailureClass::kUnsupportedConfig, "NotSupported",
                                 "custom_allreduce shares memory through CUDA IPC, which works within one node; "
                                 "this group spans several");
    cudaStream_t st = Context().stream;
    const std::size_t bytes = static_cast<std::size_t>(s.count) * 2;
    CustomAllReduce car(g.rank(), g.world(), bytes, [&g](const std::string& mine) { return g.AllGather(mine); });
    DeviceBuffer out(bytes);
    const int n = s.gpus;

    struct Candidate {
      CustomArAlgo algo;
      collect::TimingStats stats;
    };
    std::vector<Candidate> timed;
    for (CustomArAlgo algo : {CustomArAlgo::kOneShot, CustomArAlgo::kTwoShot}) {
      // Every rank sees the same Supports answer (same world, size, max_bytes).
      if (!car.Supports(algo, static_cast<std::size_t>(s.count))) continue;
      FillCommPattern(car.input(), static_cast<std::size_t>(s.count), 2, g.rank(), st);
      FillPoison(out.get(), out.bytes(), st);
      car.Run(algo, static_cast<std::size_t>(s.count), out.get(), st);
      SC_CUDA_CHECK(cudaStreamSynchronize(st));
      std::string problem = CheckOutput(
          out.get(), s.count, 2, [&](std::int64_t i) { return Expected(Coll::kAllReduce, g.rank(), n, s.count, i); },
          st);
      if (!problem.empty()) problem = std::string(ToString(algo)) + ": " + problem;
      if (auto bad = AgreeCheck(g, name(), problem)) return *bad;
      LaunchFn launch = [&car, algo, &s, &out](cudaStream_t stream, int) {
        car.Run(algo, static_cast<std::size_t>(s.count), out.get(), stream);
      };
      timed.push_back({algo, TimeOnDevice(launch, ctx.timing, CollectiveTiming(g), ctx.measure_power)});
    }
    if (timed.empty())
      return CaseResult::Failure(Disposition::kNotSupported, FailureClass::kUnsupportedConfig, "NotSupported",
                                 "custom_allreduce: no algorithm takes " + std::to_string(s.count) +
                                     " bfloat16 elements on " + std::to_string(n) + " GPUs");
    // The faster on rank 0's clock decides; every rank takes rank 0's choice.
    std::size_t best = 0;
    for (std::size_t i = 1; i < timed.size(); ++i)
      if (timed[i].stats.median_ms < timed[best].stats.median_ms) best = i;
    best = static_cast<std::size_t>(g.AllMin(g.rank() == 0 ? static_cast<long long>(best) : 1LL << 40));
    // Nobody may free its IPC-shared buffers while a peer still reads them.
    SC_CUDA_CHECK(cudaStreamSynchronize(st));
    g.AllMin(0);
    const Candidate& w = timed[best];
    Params extra = Bandwidths(static_cast<double>(bytes), w.stats.median_ms, BusFactor(Coll::kAllReduce, n));
    extra.Set("implementation", std::string(ToString(w.algo)));
    return CaseResult::Passed({collect::MakeRow(*table_, *ctx.runtime, name(),
                                                std::string("servecast_custom_ar:") + ToString(w.algo), c.params,
                                                w.stats, ctx.measure_power, extra)});
  }

};

}  // namespace

void RegisterCommOps(collect::Registry& r) {
  for (Coll c : {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kAllToAll, Coll::kSendRecv})
    r.AddOp("cuda", std::make_unique<NcclOp>(c));
  r.AddOp("cuda", std::make_unique<CustomAllReduceOp>());
}

}  // namespace servecast::cuda
