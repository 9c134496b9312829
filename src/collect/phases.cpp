#include "collect/phases.h"

namespace servecast::collect {

CaseResult RunPhases(CasePhases& phases, const PhaseOptions& opt, const ClassifyError& classify) {
  try {
    if (std::optional<CaseResult> out = phases.Prepare()) return *out;
    if (std::optional<CaseResult> out = phases.Check()) return *out;
    if (!opt.time) return CaseResult::Passed({});
    phases.Time();
    return CaseResult::Passed(phases.Emit());
  } catch (const std::exception& e) {
    const std::optional<PhaseError> known = classify ? classify(e) : std::nullopt;
    if (!known) throw;
    CaseResult r = CaseResult::Failure(Disposition::kFailed, known->failure_class, known->error_type, e.what());
    // The context is unusable: the worker records this result first, then restarts.
    r.poisoned = known->poisons_context;
    return r;
  }
}

}  // namespace servecast::collect
