#include "cli/value_checks.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace servecast::cli {
namespace {

std::string Num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// The whole text as a finite double, or nullopt.
bool ParseFinite(const std::string& text, double& v) {
  if (text.empty()) return false;
  char* end = nullptr;
  v = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(v);
}

}  // namespace

CLI::Validator IntIn(std::int64_t lo, std::int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        std::int64_t v = 0;
        const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
        const std::string want = "; expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
        if (r.ec != std::errc() || r.ptr != text.data() + text.size()) return "'" + text + "' is not an integer" + want;
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

CLI::Validator ExpertLoad() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text == "balanced" || text == "uniform") return "";
        const std::string prefix = "power_law_";
        double alpha = 0;
        if (text.rfind(prefix, 0) == 0 && ParseFinite(text.substr(prefix.size()), alpha) && alpha > 0) return "";
        return "unknown expert load '" + text +
               "'; expected balanced (or uniform) or power_law_<alpha> with alpha > 0 (power_law_1.01, power_law_1.2)";
      },
      "");
}

}  // namespace servecast::cli
