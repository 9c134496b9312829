#include "perfdb/empirical.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <sstream>
#include <utility>

#include "core/error.h"

namespace servecast::perfdb {
namespace {

double LnAxis(double v) {
  return std::log(std::max(v, 1e-9));
}

}  // namespace

const char* TransferRungName(TransferRung rung) {
  switch (rung) {
    case TransferRung::kXshape:
      return "xshape";
    case TransferRung::kXquant:
      return "xquant";
    case TransferRung::kXprofile:
      return "xprofile";
    case TransferRung::kXop:
      return "xop";
  }
  return "?";
}

TransferPolicy ParseTransferPolicy(std::string_view given) {
  std::string name(given);  // any case, as for the database modes
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (name == "off") return TransferPolicy::kOff;
  if (name == "conservative") return TransferPolicy::kConservative;
  if (name == "balanced") return TransferPolicy::kBalanced;
  if (name == "aggressive" || name == "all") return TransferPolicy::kAggressive;
  throw UsageError("unknown transfer policy '" + std::string(given) +
                   "'; expected one of: off, conservative, balanced, aggressive, all");
}

const char* TransferPolicyName(TransferPolicy policy) {
  switch (policy) {
    case TransferPolicy::kOff:
      return "off";
    case TransferPolicy::kConservative:
      return "conservative";
    case TransferPolicy::kBalanced:
      return "balanced";
    case TransferPolicy::kAggressive:
      return "aggressive";
  }
  return "?";
}

bool TransferAllows(TransferPolicy policy, TransferRung rung) {
  int rungs = 0;  // how many rungs of the ladder, from the bottom, the preset allows
  switch (policy) {
    case TransferPolicy::kOff:
      rungs = 0;
      break;
    case TransferPolicy::kConservative:
      rungs = 1;
      break;
    case TransferPolicy::kBalanced:
      rungs = 2;
      break;
    case TransferPolicy::kAggressive:
      rungs = 4;
      break;
  }
  return static_cast<int>(rung) < rungs;
}

double GemmUtilLevel(std::string_view q) {
  if (q == "bfloat16" || q == "float16") return 0.70;
  if (q == "int8_wo") return 0.55;
  if (q == "int4_wo") return 0.45;
  if (q == "fp8" || q == "fp8_block" || q == "fp8_static" || q == "fp8_ootb") return 0.45;
  if (q == "nvfp4") return 0.30;
  return 0.45;
}

double MoeUtilLevel(std::string_view q) {
  if (q == "bfloat16" || q == "float16") return 0.53;
  if (q == "int8_wo") return 0.45;
  if (q == "int4_wo" || q == "w4a16_mxfp4" || q == "w4a16_mxfp4_cutlass") return 0.07;
  if (q == "fp8" || q == "fp8_block") return 0.40;
  if (q == "w4afp8" || q == "w4a8_mxfp4_mxfp8" || q == "w4a8_mxfp4_mxfp8_trtllm") return 0.15;
  if (q == "nvfp4") return 0.23;
  return 0.30;
}

EmpiricalNotAvailableError::EmpiricalNotAvailableError(const std::string& slice, const std::string& query,
                                                       const std::string& reason)
    : MissingDataError("util-empirical cannot answer " + slice + " at " + query + ": " + reason), slice_(slice) {}

UtilGrid::UtilGrid(std::string name, std::vector<std::string> axis_names, std::vector<UtilSample> samples)
    : name_(std::move(name)), axis_names_(std::move(axis_names)) {
  const std::size_t na = axis_names_.size();
  samples_.reserve(samples.size());
  for (auto& s : samples) {
    if (s.coords.size() != na || !std::isfinite(s.util) || s.util <= 0) {
      ++dropped_;
      continue;
    }
    samples_.push_back(std::move(s));
  }
  min_.assign(na, 0);
  span_.assign(na, 0);
  for (std::size_t a = 0; a < na && !samples_.empty(); ++a) {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const auto& s : samples_) {
      const double t = LnAxis(s.coords[a]);
      lo = std::min(lo, t);
      hi = std::max(hi, t);
    }
    min_[a] = lo;
    span_[a] = hi - lo;
  }
  norm_.resize(samples_.size() * na);
  for (std::size_t i = 0; i < samples_.size(); ++i) {
    const std::vector<double> n = Normalise(samples_[i].coords);
    std::copy(n.begin(), n.end(), norm_.begin() + static_cast<std::ptrdiff_t>(i * na));
  }
}

std::vector<double> UtilGrid::Normalise(std::span<const double> q) const {
  if (q.size() != axis_names_.size()) {
    throw Error(name_ + ": util-empirical query has " + std::to_string(q.size()) + " coordinates; expected " +
                std::to_string(axis_names_.size()));
  }
  std::vector<double> out(q.size(), 0);
  for (std::size_t a = 0; a < q.size(); ++a) {
    if (span_[a] <= 0) continue;
    out[a] = std::clamp((LnAxis(q[a]) - min_[a]) / span_[a], 0.0, 1.0);
  }
  return out;
}

UtilLookup UtilGrid::Lookup(std::span<const double> q) const {
  if (samples_.empty()) {
    throw EmpiricalNotAvailableError(name_, FormatQuery(q),
                                     "the slice has no usable samples (" + std::to_string(dropped_) + " dropped)");
  }
  const std::vector<double> x = Normalise(q);
  const std::size_t na = x.size();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double d0 = kInf, d1 = kInf;
  std::size_t i0 = 0, i1 = 0;
  for (std::size_t i = 0; i < samples_.size(); ++i) {
    const double* p = norm_.data() + i * na;
    double d2 = 0;
    for (std::size_t a = 0; a < na; ++a) d2 += (p[a] - x[a]) * (p[a] - x[a]);
    if (d2 < d0) {
      d1 = d0;
      i1 = i0;
      d0 = d2;
      i0 = i;
    } else if (d2 < d1) {
      d1 = d2;
      i1 = i;
    }
  }
  UtilLookup out;
  out.nearest[0] = i0;
  if (d0 == 0 || samples_.size() == 1) {
    out.exact = d0 == 0;
    out.used = 1;
    out.util = samples_[i0].util;
    return out;
  }
  out.nearest[1] = i1;
  out.used = 2;
  const double w0 = 1 / std::sqrt(d0), w1 = 1 / std::sqrt(d1);
  out.util = (w0 * samples_[i0].util + w1 * samples_[i1].util) / (w0 + w1);
  return out;
}

std::string UtilGrid::CoveredRange() const {
  std::ostringstream os;
  for (std::size_t a = 0; a < axis_names_.size(); ++a) {
    if (a) os << " x ";
    os << axis_names_[a];
    if (!samples_.empty()) {
      double lo = std::numeric_limits<double>::infinity(), hi = -lo;
      for (const auto& s : samples_) {
        lo = std::min(lo, s.coords[a]);
        hi = std::max(hi, s.coords[a]);
      }
      os << " [" << lo << ", " << hi << "]";
    }
  }
  os << ", " << samples_.size() << " samples";
  return os.str();
}

std::string UtilGrid::FormatQuery(std::span<const double> q) const {
  std::ostringstream os;
  os << "{";
  for (std::size_t a = 0; a < q.size(); ++a) {
    if (a) os << ", ";
    os << (a < axis_names_.size() ? axis_names_[a] : "?") << "=" << q[a];
  }
  os << "}";
  return os.str();
}

}  // namespace servecast::perfdb
