#include "collect/timing.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace servecast::collect {
namespace {

double Quantile(const std::vector<double>& sorted, double q) {
  double pos = q * static_cast<double>(sorted.size() - 1);
  auto lo = static_cast<std::size_t>(std::floor(pos));
  auto hi = static_cast<std::size_t>(std::ceil(pos));
  double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

}  // namespace

double RelativeStdDev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  if (mean == 0) return 0;
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  var /= static_cast<double>(v.size() - 1);
  return std::sqrt(var) / mean;
}

void ComputeStats(std::vector<double> ms, TimingStats& out) {
  if (ms.empty()) throw Error("no timing samples");
  out.rsd = RelativeStdDev(ms);
  std::sort(ms.begin(), ms.end());
  out.median_ms = Quantile(ms, 0.5);
  out.p10_ms = Quantile(ms, 0.1);
  out.p90_ms = Quantile(ms, 0.9);
  out.samples = static_cast<int>(ms.size());
}

}  // namespace servecast::collect
