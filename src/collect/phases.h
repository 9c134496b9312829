#pragma once

// The op phase driver (the CUTLASS profiler's shape). An op writes the phases of one
// case, what is specific to it; RunPhases runs them in their fixed order and owns
// what every op shares:
//   prepare -> check (one call against the reference) -> time -> emit rows;
//   a phase's outcome (not_supported, incorrect, ...) ends the case with it;
//   check-only runs (tests of the check) stop after the check, passed with no rows;
//   an exception the backend knows (PhaseError: a CUDA error, say) becomes the case's
//   failed outcome here and only here, poisoned when it left the device context
//   unusable (the worker records the case, then exits for a fresh context);
//   any other exception propagates to the worker, which records it as its own.
// Parsing the parameters stays with the op (its MemoryBytes needs the same parse);
// its outcomes (invalid, not_supported) come before a phases object exists.

#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "collect/op.h"

namespace servecast::collect {

// The phases of one case, in the order RunPhases calls them.
class CasePhases {
 public:
  virtual ~CasePhases() = default;
  // Buffers, inputs, library set-up (plans, algorithm choice). An outcome ends the
  // case (e.g. not_supported when a library has no algorithm for the shape).
  virtual std::optional<CaseResult> Prepare() = 0;
  // One call checked against the reference (computed and compared here). An outcome
  // (incorrect) ends the case: an incorrect kernel's time never enters a table.
  virtual std::optional<CaseResult> Check() = 0;
  // Times the checked call; what it measured stays in the object for Emit.
  virtual void Time() = 0;
  // The rows of the passed case, in the table's column order (MakeRow).
  virtual std::vector<Params> Emit() = 0;
};

struct PhaseOptions {
  bool time = true;  // false: stop after the check, passed with no rows (tests of the check)
};

// What a backend says of an exception that escaped a phase.
struct PhaseError {
  FailureClass failure_class = FailureClass::kCollectorBug;
  std::string error_type;         // "CudaError", "CudaOutOfMemory", ...
  bool poisons_context = false;   // the device context is unusable after it
};

// Classifies an exception of the backend's; nothing for one it does not know.
using ClassifyError = std::function<std::optional<PhaseError>(const std::exception&)>;

// Runs the phases. The result of a classified exception is failed with its class and
// type, the exception's message, and `poisoned` = poisons_context. An unclassified
// exception (or any, when `classify` is empty) is rethrown.
CaseResult RunPhases(CasePhases& phases, const PhaseOptions& opt = {}, const ClassifyError& classify = {});

}  // namespace servecast::collect
