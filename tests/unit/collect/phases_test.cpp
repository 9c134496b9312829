#include "collect/phases.h"

#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"

namespace servecast::collect {
namespace {

// An error type of a pretend backend, with the two facts a backend's classifier reads.
class DeviceError : public Error {
 public:
  DeviceError(const std::string& message, bool sticky, bool out_of_memory)
      : Error(message), sticky_(sticky), out_of_memory_(out_of_memory) {}
  bool sticky() const { return sticky_; }
  bool out_of_memory() const { return out_of_memory_; }

 private:
  bool sticky_, out_of_memory_;
};

std::optional<PhaseError> ClassifyDeviceError(const std::exception& e) {
  const auto* d = dynamic_cast<const DeviceError*>(&e);
  if (!d) return std::nullopt;
  PhaseError out;
  out.failure_class = d->out_of_memory() ? FailureClass::kResource : FailureClass::kFrameworkBug;
  out.error_type = d->out_of_memory() ? "DeviceOutOfMemory" : "DeviceError";
  out.poisons_context = d->sticky();
  return out;
}

enum class At { kNowhere, kPrepare, kCheck, kTime, kEmit };

// Records the phases run; ends the case (an outcome) or throws at a chosen phase.
class Recorder : public CasePhases {
 public:
  std::vector<std::string> ran;
  At outcome_at = At::kNowhere;
  At throw_at = At::kNowhere;
  bool sticky = false, oom = false, foreign = false;

  std::optional<CaseResult> Prepare() override { return Step("prepare", At::kPrepare, Disposition::kNotSupported); }
  std::optional<CaseResult> Check() override { return Step("check", At::kCheck, Disposition::kIncorrect); }
  void Time() override { Step("time", At::kTime, Disposition::kFailed); }
  std::vector<Params> Emit() override {
    Step("emit", At::kEmit, Disposition::kFailed);
    Params row;
    row.Set("latency", 0.5);
    return {row};
  }

 private:
  std::optional<CaseResult> Step(const std::string& name, At at, Disposition d) {
    ran.push_back(name);
    if (throw_at == at) {
      if (foreign) throw std::runtime_error("not the backend's: " + name);
      throw DeviceError("device error in " + name, sticky, oom);
    }
    if (outcome_at == at) return CaseResult::Failure(d, FailureClass::kUnsupportedConfig, "Outcome", name);
    return std::nullopt;
  }
};

using Ran = std::vector<std::string>;

TEST(PhasesTest, RunsEveryPhaseInOrderAndPassesWithTheRows) {
  Recorder p;
  CaseResult r = RunPhases(p, {}, ClassifyDeviceError);
  EXPECT_EQ(p.ran, (Ran{"prepare", "check", "time", "emit"}));
  EXPECT_EQ(r.disposition, Disposition::kPassed);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].Num("latency"), 0.5);
  EXPECT_FALSE(r.poisoned);
}

TEST(PhasesTest, AnOutcomeOfPrepareEndsTheCase) {
  Recorder p;
  p.outcome_at = At::kPrepare;
  CaseResult r = RunPhases(p, {}, ClassifyDeviceError);
  EXPECT_EQ(p.ran, (Ran{"prepare"}));
  EXPECT_EQ(r.disposition, Disposition::kNotSupported);
  EXPECT_EQ(r.message, "prepare");
}

TEST(PhasesTest, AnIncorrectCheckIsNeverTimed) {
  Recorder p;
  p.outcome_at = At::kCheck;
  CaseResult r = RunPhases(p, {}, ClassifyDeviceError);
  EXPECT_EQ(p.ran, (Ran{"prepare", "check"}));
  EXPECT_EQ(r.disposition, Disposition::kIncorrect);
  EXPECT_TRUE(r.rows.empty());
}

TEST(PhasesTest, CheckOnlyStopsAfterTheCheckPassedWithoutRows) {
  Recorder p;
  PhaseOptions opt;
  opt.time = false;
  CaseResult r = RunPhases(p, opt, ClassifyDeviceError);
  EXPECT_EQ(p.ran, (Ran{"prepare", "check"}));
  EXPECT_EQ(r.disposition, Disposition::kPassed);
  EXPECT_TRUE(r.rows.empty());
}

TEST(PhasesTest, ABackendErrorInAnyPhaseIsAFailedOutcomeAndStopsThePhases) {
  const std::pair<At, Ran> cases[] = {{At::kPrepare, {"prepare"}},
                                      {At::kCheck, {"prepare", "check"}},
                                      {At::kTime, {"prepare", "check", "time"}},
                                      {At::kEmit, {"prepare", "check", "time", "emit"}}};
  for (const auto& [at, ran] : cases) {
    Recorder p;
    p.throw_at = at;
    CaseResult r = RunPhases(p, {}, ClassifyDeviceError);
    EXPECT_EQ(p.ran, ran);
    EXPECT_EQ(r.disposition, Disposition::kFailed);
    EXPECT_EQ(r.failure_class, FailureClass::kFrameworkBug);
    EXPECT_EQ(r.error_type, "DeviceError");
    EXPECT_EQ(r.message, "device error in " + ran.back());
    EXPECT_FALSE(r.poisoned);
    EXPECT_TRUE(r.rows.empty());
  }
}

TEST(PhasesTest, TheClassifiersVerdictDecidesClassTypeAndPoison) {
  Recorder oom;
  oom.throw_at = At::kPrepare;
  oom.oom = true;
  CaseResult r = RunPhases(oom, {}, ClassifyDeviceError);
  EXPECT_EQ(r.failure_class, FailureClass::kResource);
  EXPECT_EQ(r.error_type, "DeviceOutOfMemory");
  EXPECT_FALSE(r.poisoned);

  // A sticky error poisons the context: the worker records the result, then restarts.
  Recorder sticky;
  sticky.throw_at = At::kTime;
  sticky.sticky = true;
  r = RunPhases(sticky, {}, ClassifyDeviceError);
  EXPECT_EQ(r.disposition, Disposition::kFailed);
  EXPECT_TRUE(r.poisoned);
}

TEST(PhasesTest, AnExceptionTheBackendDoesNotKnowPropagates) {
  Recorder p;
  p.throw_at = At::kCheck;
  p.foreign = true;
  EXPECT_THROW(RunPhases(p, {}, ClassifyDeviceError), std::runtime_error);
  EXPECT_EQ(p.ran, (Ran{"prepare", "check"}));

  // Without a classifier (the CPU backend) every exception goes to the worker.
  Recorder q;
  q.throw_at = At::kPrepare;
  EXPECT_THROW(RunPhases(q), DeviceError);
}

}  // namespace
}  // namespace servecast::collect
