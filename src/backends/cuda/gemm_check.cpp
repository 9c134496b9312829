#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

#include "backends/cuda/fill.h"
#include "backends/cuda/gemm_internal.h"
#include "backends/cuda/quantize.h"
#include "core/hash.h"
#include "core/value.h"

namespace servecast::cuda::gemm {
namespace {

// A quantized value against its exact counterpart v = x / scale: e4m3 rounds to
// nearest, so the error is at most half a step of the binade v lies in (saturating at
// 448). The slack covers x * (1 / scale) differing from x / scale by a float rounding.
void AddQuantized(RefCheck& check, float got, double v, const std::function<std::string()>& where) {
  const double expected = std::clamp(v, -static_cast<double>(kFp8E4m3Max), static_cast<double>(kFp8E4m3Max));
  const double tol = 0.5 * E4m3Ulp(expected) * (1 + 1e-5) + 1e-30;
  check.Add(got, expected, tol, where);
}

}  // namespace

void RefCheck::Add(double got, double expected, double tolerance, const std::function<std::string()>& where) {
  ++checked_;
  const double err = std::fabs(got - expected);
  double ratio = std::isfinite(got) ? err / tolerance : std::numeric_limits<double>::infinity();
  if (std::isnan(ratio)) ratio = std::numeric_limits<double>::infinity();
  if (!(ratio <= 1.0)) ++bad_;
  if (ratio > worst_ratio_) {
    worst_ratio_ = ratio;
    worst_got_ = got;
    worst_expected_ = expected;
    worst_tolerance_ = tolerance;
    worst_where_ = where();
  }
}

std::string RefCheck::Describe(const std::string& what, const std::string& rule) const {
  std::string head = bad_ == 0 ? "all " + std::to_string(checked_) + " checked elements of " + what +
                                     " within tolerance; worst error/tolerance " + FormatG6(worst_ratio_)
                               : std::to_string(bad_) + " of " + std::to_string(checked_) + " checked elements of " +
                                     what + " out of tolerance";
  if (checked_ == 0) return "no elements of " + what + " were checked";
  return head + "; worst at " + worst_where_ + ": got " + FormatG6(worst_got_) + ", expected " + FormatG6(worst_expected_) +
         ", abs error " + FormatG6(std::fabs(worst_got_ - worst_expected_)) + ", tolerance " + FormatG6(worst_tolerance_) + " (" +
         rule + ")";
}

std::uint64_t SeedFor(const std::string& case_id, std::uint64_t stream) {
  return Fnv1a64(case_id) ^ (0x9e3779b97f4a7c15ULL * (stream + 1));
}

std::vector<std::int64_t> SampleIndices(std::int64_t n, std::int64_t count, std::uint64_t seed) {
  std::vector<std::int64_t> out;
  if (n <= count) {
    for (std::int64_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  std::set<std::int64_t> picked = {0, n - 1};
  SplitMix64 rng(seed);
  while (static_cast<std::int64_t>(picked.size()) < count)
    picked.insert(static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(n))));
  out.assign(picked.begin(), picked.end());
  return out;
}

collect::CaseResult InvalidParams(const std::string& op, const std::string& message) {
  return collect::CaseResult::Failure(collect::Disposition::kFailed, collect::FailureClass::kUnsupportedConfig,
                                      "InvalidParams", op + ": " + message);
}

collect::CaseResult NotSupported(const std::string& type, const std::string& message) {
  return collect::CaseResult::Failure(collect::Disposition::kNotSupported, collect::FailureClass::kUnsupportedConfig,
                                      type, message);
}

collect::CaseResult Incorrect(const std::string& op, const std::string& message) {
  return collect::CaseResult::Failure(collect::Disposition::kIncorrect, collect::FailureClass::kCollectorBug,
                                      "IncorrectOutput", op + ": " + message);
}

RefCheck CheckTensorQuant(const std::vector<std::uint16_t>& x_rows, const std::vector<std::uint8_t>& q_rows,
                          std::int64_t k, float scale, const std::vector<std::int64_t>& rows) {
  RefCheck check;
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (std::int64_t c = 0; c < k; ++c) {
      const std::size_t at = r * static_cast<std::size_t>(k) + static_cast<std::size_t>(c);
      const double v = static_cast<double>(Bf16ToF32(x_rows[at])) / static_cast<double>(scale);
      AddQuantized(check, E4m3ToFloat(q_rows[at]), v,
                   [&] { return "q[" + std::to_string(rows[r]) + "," + std::to_string(c) + "]"; });
    }
  return check;
}

RefCheck CheckGroupQuant(const std::vector<std::uint16_t>& x_rows, const std::vector<std::uint8_t>& q_rows,
                         std::int64_t k, const std::vector<float>& scales, std::int64_t rows_padded,
                         const std::vector<std::int64_t>& rows) {
  RefCheck check;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const std::int64_t i = rows[r];
    for (std::int64_t g = 0; g < k / 128; ++g) {
      const std::size_t base = r * static_cast<std::size_t>(k) + static_cast<std::size_t>(g * 128);
      float amax = 0;
      for (int c = 0; c < 128; ++c) amax = std::max(amax, std::fabs(Bf16ToF32(x_rows[base + c])));
      const float want = std::max(amax / kFp8E4m3Max, kFp8MinScale);  // the kernel's fp32 arithmetic
      const float s = scales[static_cast<std::size_t>(g * rows_padded + i)];
      check.Add(s, want, std::ldexp(static_cast<double>(want), -22),
                [&] { return "scale[row " + std::to_string(i) + ", group " + std::to_string(g) + "]"; });
      for (int c = 0; c < 128; ++c) {
        const double v = static_cast<double>(Bf16ToF32(x_rows[base + c])) / static_cast<double>(s);
        AddQuantized(check, E4m3ToFloat(q_rows[base + c]), v,
                     [&] { return "q[" + std::to_string(i) + "," + std::to_string(g * 128 + c) + "]"; });
      }
    }
  }
  return check;
}

}  // namespace servecast::cuda::gemm
