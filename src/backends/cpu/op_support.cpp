#include "backends/cpu/op_support.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "collect/table_spec.h"
#include "core/error.h"

namespace servecast::cpu {

using collect::CaseResult;
using collect::Disposition;
using collect::FailureClass;

double Gamma(std::int64_t n) {
  double nu = static_cast<double>(n) * kFloat32Roundoff;
  if (nu >= 0.5) return 1.0;  // the bound is meaningless here; 100% relative error
  return nu / (1 - nu);
}

float Rng::Uniform(float lo, float hi) {
  float unit = static_cast<float>(Next() >> 40) * 0x1.0p-24f;  // [0, 1), exact
  return lo + (hi - lo) * unit;
}

std::uint64_t SeedFromCaseId(std::string_view case_id, std::uint64_t stream) {
  SplitMix64 mix(Fnv1a64(case_id) ^ (stream * 0xD6E8FEB86659FD93ULL));
  return mix.Next();
}

void FillUniform(float* data, std::size_t n, Rng& rng, float lo, float hi) {
  for (std::size_t i = 0; i < n; ++i) data[i] = rng.Uniform(lo, hi);
}

std::vector<std::int64_t> SampleIndices(std::int64_t n, std::int64_t count, Rng& rng) {
  std::vector<std::int64_t> out;
  if (n <= 0) return out;
  if (n <= count) {
    for (std::int64_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  std::set<std::int64_t> picked = {0, n - 1};
  while (static_cast<std::int64_t>(picked.size()) < count)
    picked.insert(static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(n))));
  return {picked.begin(), picked.end()};
}

namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

std::string RefCheck::Describe(const std::string& what, const std::string& tolerance_rule) const {
  if (checked_ == 0) return "no element of " + what + " was checked";
  double abs_err = std::fabs(worst_got_ - worst_expected_);
  double rel_err = worst_expected_ != 0 ? abs_err / std::fabs(worst_expected_) : abs_err;
  return std::to_string(bad_) + " of " + std::to_string(checked_) + " checked elements of " + what +
         " out of tolerance; worst at " + worst_where_ + ": got " + Num(worst_got_) + ", expected " +
         Num(worst_expected_) + ", abs error " + Num(abs_err) + ", rel error " + Num(rel_err) + ", tolerance " +
         Num(worst_tolerance_) + " (" + tolerance_rule + ")";
}

const collect::TableSpec& TableOrThrow(std::string_view name) {
  const collect::TableSpec* spec = collect::FindTableSpec(name);
  if (!spec) throw Error("cpu backend: no table spec named '" + std::string(name) + "'");
  return *spec;
}

std::int64_t PositiveInt(const collect::Params& p, std::string_view name) {
  std::int64_t v = p.Int(name);
  if (v <= 0) throw Error("parameter '" + std::string(name) + "' is " + std::to_string(v) + "; expected > 0");
  return v;
}

std::int64_t NonNegativeInt(const collect::Params& p, std::string_view name) {
  std::int64_t v = p.Int(name);
  if (v < 0) throw Error("parameter '" + std::string(name) + "' is " + std::to_string(v) + "; expected >= 0");
  return v;
}

CaseResult InvalidParams(const std::string& op, const std::string& message) {
  return CaseResult::Failure(Disposition::kFailed, FailureClass::kUnsupportedConfig, "InvalidParameter",
                             op + ": " + message);
}

CaseResult NotSupported(const std::string& type, const std::string& message) {
  return CaseResult::Failure(Disposition::kNotSupported, FailureClass::kUnsupportedConfig, type, message);
}

CaseResult IncorrectOutput(const std::string& op, const RefCheck& check, const std::string& what,
                           const std::string& tolerance_rule) {
  return CaseResult::Failure(Disposition::kIncorrect, FailureClass::kCollectorBug, "IncorrectOutput",
                             op + ": " + check.Describe(what, tolerance_rule));
}

std::optional<CaseResult> CheckDtype(const std::string& param, const std::string& dtype,
                                     const std::vector<std::string>& supported) {
  if (std::find(supported.begin(), supported.end(), dtype) != supported.end()) return std::nullopt;
  std::string list;
  for (const auto& s : supported) list += (list.empty() ? "" : ", ") + s;
  try {
    collect::DtypeBytes(dtype);
  } catch (const Error& e) {
    return InvalidParams(param, e.what());
  }
  return NotSupported("UnsupportedDtype",
                      param + " '" + dtype + "' has no kernel on the cpu backend (supported: " + list + ")");
}

ElementwiseParams ParseElementwiseParams(const std::string& op, const collect::Params& p) {
  ElementwiseParams out;
  std::string dtype;
  try {
    dtype = p.Str("dtype");
    out.num_tokens = PositiveInt(p, "num_tokens");
    out.hidden_size = PositiveInt(p, "hidden_size");
  } catch (const Error& e) {
    out.failure = InvalidParams(op, e.what());
    return out;
  }
  out.failure = CheckDtype("dtype", dtype, {"float32"});
  return out;
}

CaseResult PassedRow(const collect::Op& op, const collect::Case& c, const collect::RunContext& ctx,
                     const std::string& kernel_source, const collect::TimingStats& stats) {
  if (!ctx.runtime) throw Error("cpu backend: RunContext without runtime info for case " + c.id);
  return CaseResult::Passed(
      {collect::MakeRow(op.table(), *ctx.runtime, op.name(), kernel_source, c.params, stats, ctx.measure_power)});
}

}  // namespace servecast::cpu
