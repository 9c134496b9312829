#include "cli/value_checks.h"

#include <cmath>
#include <sstream>
#include <string_view>

#include "core/error.h"
#include "core/value.h"
#include "tables/table_spec.h"

namespace servecast::cli {
namespace {

std::string Num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

bool ParseFinite(std::string_view text, double& v) { return ParseNumber(text, v) && std::isfinite(v); }

}  // namespace

CLI::Validator IntIn(std::int64_t lo, std::int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        std::int64_t v = 0;
        const std::string want = "; expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
        if (!ParseInt64(text, v)) return "'" + text + "' is not an integer" + want;
        if (v < lo || v > hi) return text + " is out of range" + want;
        return "";
      },
      "");
}

CLI::Validator NumberIn(double lo, double hi, bool open_low) {
  return CLI::Validator(
      [lo, hi, open_low](std::string& text) -> std::string {
        double v = 0;
        const std::string want =
            std::string("; expected a finite number in ") + (open_low ? "(" : "[") + Num(lo) + ", " + Num(hi) + "]";
        if (!ParseFinite(text, v)) return "'" + text + "' is not a finite number" + want;
        if ((open_low ? v <= lo : v < lo) || v > hi) return text + " is out of range" + want;
        return "";
      },
      "");
}

void RequireDecodeSteps(std::int64_t osl, std::int64_t stride) {
  const std::int64_t steps = osl > 1 ? (osl - 2) / stride + 1 : 0;  // i = 0, stride, ... < osl - 1
  if (steps <= kMaxDecodeSteps) return;
  const std::int64_t min_stride = (osl - 2) / kMaxDecodeSteps + 1;
  throw UsageError("--osl " + std::to_string(osl) + " at --stride " + std::to_string(stride) + " evaluates " +
                   std::to_string(steps) + " decode steps; at most " + std::to_string(kMaxDecodeSteps) +
                   " are evaluated (--stride " + std::to_string(min_stride) + " or more, or --osl " +
                   std::to_string(kMaxDecodeSteps * stride + 1) + " or less)");
}

CLI::Validator ExpertLoad() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        // the estimator also takes "uniform", AIC's name of the balanced load
        if (text == "uniform" || tables::ExpertLoadAlpha(text)) return "";
        return "unknown expert load '" + text +
               "'; expected balanced (or uniform) or power_law_<alpha> with alpha > 0 (power_law_1.01, power_law_1.2)";
      },
      "");
}

}  // namespace servecast::cli
