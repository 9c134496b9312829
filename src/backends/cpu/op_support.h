#pragma once

// Helpers shared by the CPU ops: deterministic inputs, parameter checks, the
// comparison against a higher-precision reference, and the row of a passed case.

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collect/case.h"
#include "collect/op.h"
#include "core/hash.h"

namespace servecast::cpu {

// Unit roundoff of float32 (2^-24).
inline constexpr double kFloat32Roundoff = 5.9604644775390625e-08;

// Higham's gamma_n = n·u / (1 − n·u): a rigorous bound on the relative error of a
// sum or dot product of n float32 terms in any summation order (it bounds the
// error by gamma_n · Σ|term|).
double Gamma(std::int64_t n);

// Deterministic inputs: core's SplitMix64 plus uniform floats, the same sequence
// on every machine, so a case's inputs depend only on its ID.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : gen_(seed) {}
  std::uint64_t Next() { return gen_.Next(); }
  // Uniform in [lo, hi) with 24 random bits.
  float Uniform(float lo, float hi);
  // Uniform in [0, n); n > 0.
  std::uint64_t Below(std::uint64_t n) { return gen_.Below(n); }

 private:
  SplitMix64 gen_;
};

// The seed of one input stream of a case: FNV-1a of the case ID, mixed with `stream`
// so that each buffer of a case gets its own sequence.
std::uint64_t SeedFromCaseId(std::string_view case_id, std::uint64_t stream);

void FillUniform(float* data, std::size_t n, Rng& rng, float lo, float hi);

// `count` distinct indices in [0, n), sorted, always containing 0 and n − 1
// (all of [0, n) when n <= count).
std::vector<std::int64_t> SampleIndices(std::int64_t n, std::int64_t count, Rng& rng);

// Compares computed values with a reference, each element with its own absolute
// tolerance, and remembers the worst element (largest error / tolerance). A NaN or
// infinite value is always out of tolerance.
class RefCheck {
 public:
  // `where` is a callable returning a description of the element ("C[3,7]"); it is
  // called only for a new worst element.
  template <class Where>
  void Add(double got, double expected, double tolerance, Where&& where) {
    ++checked_;
    double err = std::fabs(got - expected);
    double ratio = std::isfinite(got) ? err / tolerance : std::numeric_limits<double>::infinity();
    if (!(ratio <= 1.0)) {
      ++bad_;
      if (std::isnan(ratio)) ratio = std::numeric_limits<double>::infinity();
    }
    if (ratio > worst_ratio_ || checked_ == 1) {
      worst_ratio_ = ratio;
      worst_got_ = got;
      worst_expected_ = expected;
      worst_tolerance_ = tolerance;
      worst_where_ = where();
    }
  }

  bool ok() const { return bad_ == 0 && checked_ > 0; }
  std::int64_t checked() const { return checked_; }
  std::int64_t bad() const { return bad_; }
  double worst_ratio() const { return worst_ratio_; }
  // "3 of 260 checked elements of <what> out of tolerance; worst at C[1,2]: got ..,
  // expected .., abs error .., rel error .., tolerance .. (<tolerance_rule>)".
  std::string Describe(const std::string& what, const std::string& tolerance_rule) const;

 private:
  std::int64_t checked_ = 0;
  std::int64_t bad_ = 0;
  double worst_ratio_ = 0;
  double worst_got_ = 0;
  double worst_expected_ = 0;
  double worst_tolerance_ = 0;
  std::string worst_where_;
};

// The table spec of an op; throws Error when servecast does not know the table.
const collect::TableSpec& TableOrThrow(std::string_view name);

// Parameter readers: throw Error naming the parameter and what was expected.
std::int64_t PositiveInt(const collect::Params& p, std::string_view name);
std::int64_t NonNegativeInt(const collect::Params& p, std::string_view name);

// Outcomes of a case.
// A parameter that is missing or malformed: failed / unsupported_config.
collect::CaseResult InvalidParams(const std::string& op, const std::string& message);
// A valid configuration this backend cannot run: not_supported / unsupported_config.
collect::CaseResult NotSupported(const std::string& type, const std::string& message);
// Output differs from the reference: incorrect / collector_bug.
collect::CaseResult IncorrectOutput(const std::string& op, const RefCheck& check, const std::string& what,
                                    const std::string& tolerance_rule);
// A dtype check: nothing when `dtype` is one of `supported`; else not_supported for a
// dtype servecast knows and failed for an unknown name.
std::optional<collect::CaseResult> CheckDtype(const std::string& param, const std::string& dtype,
                                              const std::vector<std::string>& supported);

// The parameters of an elementwise_perf case (dtype, num_tokens, hidden_size; an
// op_name in the params is ignored), or the outcome when they are invalid or the
// dtype is not float32.
struct ElementwiseParams {
  std::int64_t num_tokens = 0;
  std::int64_t hidden_size = 0;
  std::optional<collect::CaseResult> failure;
};
ElementwiseParams ParseElementwiseParams(const std::string& op, const collect::Params& p);

// The passed outcome with one row of `op`'s table.
collect::CaseResult PassedRow(const collect::Op& op, const collect::Case& c, const collect::RunContext& ctx,
                              const std::string& kernel_source, const collect::TimingStats& stats);

}  // namespace servecast::cpu
