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
      "", kRangeCheck);
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
      "", kRangeCheck);
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

CLI::Validator NonEmpty(const std::string& expected) {
  return CLI::Validator(
      [expected](std::string& text) -> std::string { return text.empty() ? "empty; expected " + expected : ""; }, "");
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

namespace {

void CollectUnchecked(CLI::App& app, const std::string& path, std::vector<std::string>& out) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_size() == 0) continue;  // a flag
    const std::string type = opt->get_type_name();
    if (type.rfind("INT", 0) != 0 && type.rfind("UINT", 0) != 0 && type.rfind("FLOAT", 0) != 0) continue;
    try {
      opt->get_validator(kRangeCheck);
    } catch (const CLI::OptionNotFound&) {
      out.push_back(path + " " + opt->get_name());
    }
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    if (!sub->get_group().empty()) CollectUnchecked(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), out);
}

}  // namespace

void RefuseEmptyPaths(CLI::App& app) {
  static const char* const kPathOptions[] = {
      "--out",    "--run-dir", "--cases",   "--systems", "--models", "--engines", "--save-dir", "--gaps",
      "--plan",   "--against", "--silicon", "--data-root", "--systems-path", "--model", "--yaml-path",
      "in",       "out",       "roots",     "data_dir",  "file"};
  for (CLI::Option* opt : app.get_options())
    for (const char* name : kPathOptions)
      if (opt->get_type_size() != 0 && opt->check_name(name)) opt->check(NonEmpty("a path"));
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    if (!sub->get_group().empty()) RefuseEmptyPaths(*sub);
}

std::vector<std::string> UncheckedNumericOptions(CLI::App& app) {
  std::vector<std::string> out;
  CollectUnchecked(app, "", out);
  return out;
}

}  // namespace servecast::cli
