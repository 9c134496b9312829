#include "fault_ops.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "backends/cpu/cpu_timer.h"
#include "backends/cpu/custom_allreduce.h"
#include "collect/case.h"
#include "core/error.h"
#include "toy_op.h"

namespace servecast::testing {
namespace {

using collect::CaseResult;
using collect::Disposition;
using collect::FailureClass;

const collect::TableSpec& FaultTable() {
  static const collect::TableSpec* spec = [] {
    if (!collect::FindTableSpec("fault_perf")) {
      collect::TableSpec t{"fault_perf", "test", {{"mode", ValueType::kString}, {"i", ValueType::kInt64}}, false,
                           [](const collect::Params&) { return collect::OpCost{0, 0, "float32"}; }};
      t.key_minimum = {{"i", 0}};  // the tests number their cases from 0
      collect::AddTableSpec(std::move(t));
    }
    return collect::FindTableSpec("fault_perf");
  }();
  return *spec;
}

const collect::TableSpec& TrivialTable() {
  static const collect::TableSpec* spec = [] {
    if (!collect::FindTableSpec("trivial_perf")) {
      collect::TableSpec t{"trivial_perf", "test", {{"i", ValueType::kInt64}}, false,
                           [](const collect::Params&) { return collect::OpCost{0, 0, "float32"}; }};
      t.key_minimum = {{"i", 0}};  // numbered from 0
      collect::AddTableSpec(std::move(t));
    }
    return collect::FindTableSpec("trivial_perf");
  }();
  return *spec;
}

// Sums 1..n and checks the closed form: a real computation with a real check.
CaseResult TimedSum(const collect::Case& c, const collect::RunContext& ctx, const collect::TableSpec& table,
                    const std::string& op, bool time_it) {
  std::vector<double> v(4096);
  std::iota(v.begin(), v.end(), 1.0);
  double sum = 0;
  auto fn = [&] {
    sum = std::accumulate(v.begin(), v.end(), 0.0);
    cpu::DoNotOptimize(sum);
  };
  fn();
  if (sum != 4096.0 * 4097.0 / 2)
    return CaseResult::Failure(Disposition::kIncorrect, FailureClass::kCollectorBug, "IncorrectOutput", "bad sum");
  collect::TimingStats stats;
  if (time_it) {
    collect::TimingConfig cfg = ctx.timing;
    cfg.budget_s = 0.005;
    cfg.min_samples = 3;
    stats = cpu::TimeCpu(fn, cfg);
  } else {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    collect::ComputeStats({ms}, stats);
    stats.method = "cpu";
    stats.l2 = "warm";
  }
  return CaseResult::Passed({collect::MakeRow(table, *ctx.runtime, op, "test:accumulate", c.params, stats, false)});
}

class FaultOp : public collect::Op {
 public:
  std::string name() const override { return "fault"; }
  const collect::TableSpec& table() const override { return FaultTable(); }
  std::vector<std::string> required_params() const override { return {"mode", "i"}; }
  double default_timeout_s() const override { return 5; }

  CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override {
    const std::string& mode = c.params.Str("mode");
    if (mode == "segv") std::raise(SIGSEGV);
    if (mode == "abort") std::abort();
    if (mode == "hang")
      for (;;) ::pause();
    if (mode == "throw") throw std::runtime_error("fault op threw on purpose");
    if (mode == "oom") {
      std::vector<std::unique_ptr<char[]>> blocks;
      for (;;) {
        blocks.emplace_back(new char[256u << 20]);
        for (std::size_t i = 0; i < (256u << 20); i += 4096) blocks.back()[i] = 1;
      }
    }
    if (mode == "incorrect")
      return CaseResult::Failure(Disposition::kIncorrect, FailureClass::kCollectorBug, "IncorrectOutput",
                                 "fault op reports a mismatch on purpose");
    // Passes, except in a run whose environment sets SERVECAST_TEST_FAIL_NOW (a
    // kernel that broke between two runs).
    if (mode == "fail_on_env" && std::getenv("SERVECAST_TEST_FAIL_NOW"))
      return CaseResult::Failure(Disposition::kFailed, FailureClass::kFrameworkBug, "Broken",
                                 "fault op fails on purpose (SERVECAST_TEST_FAIL_NOW is set)");
    // Passes, except in a run whose environment sets SERVECAST_TEST_HANG_NOW: then it
    // hangs (a case an interrupt finds in flight).
    if (mode == "hang_on_env" && std::getenv("SERVECAST_TEST_HANG_NOW"))
      for (;;) ::pause();
    return TimedSum(c, ctx, table(), name(), true);
  }
};

class TrivialOp : public collect::Op {
 public:
  std::string name() const override { return "trivial"; }
  const collect::TableSpec& table() const override { return TrivialTable(); }
  std::vector<std::string> required_params() const override { return {"i"}; }
  CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override {
    return TimedSum(c, ctx, table(), name(), false);
  }
};

// The real custom_allreduce, except that on the case whose message_size is
// `fault_size` the rank `fault_rank` misbehaves (`fault`: segv or hang) before it
// joins the collective, leaving its peers waiting in it.
class AllReduceFaultOp : public collect::Op {
 public:
  AllReduceFaultOp() : inner_(cpu::MakeCustomAllReduceOp()) {}
  std::string name() const override { return "allreduce_fault"; }
  const collect::TableSpec& table() const override { return inner_->table(); }
  std::vector<std::string> required_params() const override {
    auto p = inner_->required_params();
    p.insert(p.end(), {"fault", "fault_size", "fault_rank"});
    return p;
  }
  double default_timeout_s() const override { return 5; }
  std::vector<collect::Requirement> requirements() const override { return inner_->requirements(); }
  int Ranks(const collect::Params& p) const override { return inner_->Ranks(p); }

  CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override {
    if (c.params.Int("message_size") == c.params.Int("fault_size") && ctx.rank == c.params.Int("fault_rank")) {
      const std::string& fault = c.params.Str("fault");
      if (fault == "segv") std::raise(SIGSEGV);
      if (fault == "hang")
        for (;;) ::pause();
    }
    return inner_->Run(c, ctx);
  }

 private:
  std::unique_ptr<collect::Op> inner_;
};

// A backend whose workers can never set up their device (a dead GPU, say).
class BrokenBackend : public collect::Backend {
 public:
  std::string name() const override { return "broken"; }
  collect::RuntimeInfo DetectRuntime() const override {
    collect::RuntimeInfo rt;
    rt.backend = "broken";
    rt.version = "none1.0";
    rt.device_name = "unusable device";
    rt.arch = "none";
    return rt;
  }
  std::vector<int> DefaultDevices() const override { return {0, 1}; }
  std::string DefaultSystem(const collect::RuntimeInfo&) const override { return "cpu_host"; }
  void InitWorker(int device) const override {
    throw Error("device " + std::to_string(device) + " cannot be initialized (test backend)");
  }
};

}  // namespace

void RegisterTestOps(collect::Registry& registry) {
  registry.AddOp("cpu", std::make_unique<FaultOp>());
  registry.AddOp("cpu", std::make_unique<TrivialOp>());
  registry.AddOp("cpu", std::make_unique<AllReduceFaultOp>());
  registry.AddOp("cpu", MakeToyAxpyOp());  // docs/extending.md: the toy op's one registration line
  registry.AddBackend(std::make_unique<BrokenBackend>());
  registry.AddOp("broken", std::make_unique<TrivialOp>());
}

}  // namespace servecast::testing
