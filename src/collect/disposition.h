#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace servecast::collect {

// How one case ended (CUTLASS-profiler style: every case gets exactly one).
enum class Disposition {
  kPassed,        // ran, output checked, timed; rows emitted
  kIncorrect,     // output differs from the reference; no rows
  kNotSupported,  // the runtime cannot run it (requirement unmet); evidence recorded
  kSkipped,       // a declared reason (skips.yaml, maturity, capacity)
  kFailed,        // an error while running
  kTimeout,       // exceeded its time limit; the worker was killed
  kCrashed,       // the worker died (signal or abnormal exit)
};

// Why a case failed, recorded on every error.
enum class FailureClass {
  kNone,
  kCollectorBug,       // our code is wrong (incorrect output of our own kernel, a crash in our code)
  kUnsupportedConfig,  // the case asks for something this runtime cannot do
  kFrameworkBug,       // a library rejects or crashes on a valid case
  kResource,           // OOM, capacity, graph capture
  kTimeout,            // hung or too slow
  kTransient,          // failed once, passed on retry
};

std::string_view ToString(Disposition d);
std::string_view ToString(FailureClass c);
std::optional<Disposition> ParseDisposition(std::string_view s);
std::optional<FailureClass> ParseFailureClass(std::string_view s);
// passed, skipped and not_supported do not make a run fail.
bool IsFailure(Disposition d);

}  // namespace servecast::collect
