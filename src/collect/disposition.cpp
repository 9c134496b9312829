#include "collect/disposition.h"

#include <array>
#include <utility>

namespace servecast::collect {
namespace {

constexpr std::array<std::pair<Disposition, std::string_view>, 7> kDispositions{{
    {Disposition::kPassed, "passed"},
    {Disposition::kIncorrect, "incorrect"},
    {Disposition::kNotSupported, "not_supported"},
    {Disposition::kSkipped, "skipped"},
    {Disposition::kFailed, "failed"},
    {Disposition::kTimeout, "timeout"},
    {Disposition::kCrashed, "crashed"},
}};

constexpr std::array<std::pair<FailureClass, std::string_view>, 7> kClasses{{
    {FailureClass::kNone, "none"},
    {FailureClass::kCollectorBug, "collector_bug"},
    {FailureClass::kUnsupportedConfig, "unsupported_config"},
    {FailureClass::kFrameworkBug, "framework_bug"},
    {FailureClass::kResource, "resource"},
    {FailureClass::kTimeout, "timeout"},
    {FailureClass::kTransient, "transient"},
}};

}  // namespace

std::string_view ToString(Disposition d) {
  for (const auto& [k, v] : kDispositions)
    if (k == d) return v;
  return "?";
}

std::string_view ToString(FailureClass c) {
  for (const auto& [k, v] : kClasses)
    if (k == c) return v;
  return "?";
}

std::optional<Disposition> ParseDisposition(std::string_view s) {
  for (const auto& [k, v] : kDispositions)
    if (v == s) return k;
  return std::nullopt;
}

std::optional<FailureClass> ParseFailureClass(std::string_view s) {
  for (const auto& [k, v] : kClasses)
    if (v == s) return k;
  return std::nullopt;
}

bool IsFailure(Disposition d) {
  return d != Disposition::kPassed && d != Disposition::kSkipped && d != Disposition::kNotSupported;
}

}  // namespace servecast::collect
