#include "perfdb/grid.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include "core/value.h"

namespace servecast::perfdb {
namespace {

bool Valid(double latency_ms, double sol_ms) {
  return latency_ms > 0 && sol_ms > 0 && std::isfinite(latency_ms) && std::isfinite(sol_ms);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double Log2Coord(double c) {
  return std::log2(std::max(c, 1e-12));
}

}  // namespace

const char* EstimateSourceName(EstimateSource s) {
  switch (s) {
    case EstimateSource::kSilicon:
      return "silicon";
    case EstimateSource::kInterpolated:
      return "interpolated";
    case EstimateSource::kExtrapolated:
      return "extrapolated";
  }
  return "?";
}

InterpolationMissError::InterpolationMissError(const std::string& slice, const std::string& query,
                                               const std::string& reason, const std::string& covered)
    : MissingDataError("perf_interp: no data to anchor query " + query + " in " + slice + " (" + reason +
                       "); covered: " + covered),
      slice_(slice),
      reason_(reason) {}

Grid::Grid(GridOptions options, std::vector<GridPoint> points, GridSolFn sol)
    : options_(std::move(options)), sol_(std::move(sol)) {
  const std::size_t axes = options_.axis_names.size();
  if (axes == 0) throw Error("grid " + options_.name + ": no axes");
  if (options_.k_tail < 1 || options_.nn_leaves < 1)
    throw Error("grid " + options_.name + ": k_tail and nn_leaves must be >= 1");
  std::map<std::vector<double>, bool> seen;
  points_.reserve(points.size());
  for (auto& p : points) {
    if (p.coords.size() != axes) {
      throw Error("grid " + options_.name + ": a point has " + std::to_string(p.coords.size()) +
                  " coordinates; expected " + std::to_string(axes));
    }
    if (!seen.emplace(p.coords, true).second) {
      ++duplicates_dropped_;
      continue;
    }
    points_.push_back(std::move(p));
  }
  leaf_sol_.resize(points_.size());
  for (std::size_t i = 0; i < points_.size(); ++i) leaf_sol_[i] = sol_(points_[i].coords);
  interior_.assign(points_.size(), 0);
  if (points_.empty()) return;
  std::vector<std::size_t> order(points_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return points_[a].coords < points_[b].coords; });
  nodes_.reserve(points_.size());
  Build(order.begin(), order.end(), 0, true);
}

std::size_t Grid::Build(std::vector<std::size_t>::iterator begin, std::vector<std::size_t>::iterator end,
                        std::size_t axis, bool interior) {
  const std::size_t last = options_.axis_names.size() - 1;
  // Groups of equal key on this axis (the range is sorted lexicographically).
  std::vector<std::pair<std::vector<std::size_t>::iterator, std::vector<std::size_t>::iterator>> groups;
  for (auto it = begin; it != end;) {
    const double key = points_[*it].coords[axis];
    auto stop = it;
    while (stop != end && points_[*stop].coords[axis] == key) ++stop;
    groups.emplace_back(it, stop);
    it = stop;
  }
  const std::size_t node = nodes_.size();
  nodes_.push_back(Node{keys_.size(), groups.size()});
  const std::size_t first = keys_.size();
  keys_.resize(first + groups.size());
  children_.resize(first + groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    keys_[first + g] = points_[*groups[g].first].coords[axis];
    const bool inside = interior && g > 0 && g + 1 < groups.size();
    if (axis == last) {
      children_[first + g] = *groups[g].first;
      interior_[*groups[g].first] = inside ? 1 : 0;
    } else {
      const std::size_t child = Build(groups[g].first, groups[g].second, axis + 1, inside);
      children_[first + g] = child;
    }
  }
  return node;
}

Grid::Partial Grid::Resolve(std::size_t node, std::size_t axis, std::span<const double> q,
                            std::vector<double>& scratch) const {
  const Node& n = nodes_[node];
  const double* keys = keys_.data() + n.first;
  const double c = q[axis];
  const bool last = axis + 1 == options_.axis_names.size();
  auto child = [&](std::size_t pos) -> Partial {
    const std::size_t id = children_[n.first + pos];
    if (!last) return Resolve(id, axis + 1, q, scratch);
    const GridPoint& p = points_[id];
    Partial out;
    out.status = Status::kOk;
    out.latency_ms = p.latency_ms;
    out.has_power = p.power_w.has_value();
    out.power_w = p.power_w.value_or(0);
    return out;
  };
  const double* pos = std::lower_bound(keys, keys + n.count, c);
  if (pos != keys + n.count && *pos == c) return child(static_cast<std::size_t>(pos - keys));
  if (pos == keys || pos == keys + n.count) return Partial{Status::kOutOfRange};
  const std::size_t hi = static_cast<std::size_t>(pos - keys), lo = hi - 1;
  const Partial a = child(lo), b = child(hi);
  if (a.status == Status::kOk && b.status == Status::kOk) {
    const double w = (c - keys[lo]) / (keys[hi] - keys[lo]);
    Partial out;
    out.status = Status::kOk;
    out.blended = true;
    if (static_cast<int>(axis) == options_.transform_axis) {
      const double ta = std::sqrt(std::max(a.latency_ms, 0.0)), tb = std::sqrt(std::max(b.latency_ms, 0.0));
      const double t = ta + (tb - ta) * w;
      out.latency_ms = t * t;
    } else {
      out.latency_ms = a.latency_ms + (b.latency_ms - a.latency_ms) * w;
    }
    out.has_power = a.has_power && b.has_power;
    if (out.has_power) out.power_w = a.power_w + (b.power_w - a.power_w) * w;
    return out;
  }
  if (a.status == Status::kOk || b.status == Status::kOk) {
    // Ragged branch: scale the survivor by the SOL ratio between the query and
    // the query snapped onto the survivor's key on this axis.
    const Partial& s = a.status == Status::kOk ? a : b;
    scratch.assign(q.begin(), q.end());
    scratch[axis] = keys[a.status == Status::kOk ? lo : hi];
    const double sol_q = sol_(q), sol_s = sol_(scratch);
    if (!(sol_q > 0 && sol_s > 0 && std::isfinite(sol_q) && std::isfinite(sol_s))) return Partial{Status::kMiss};
    Partial out = s;
    out.latency_ms = s.latency_ms * sol_q / sol_s;
    out.blended = true;
    return out;
  }
  if (a.status == Status::kOutOfRange || b.status == Status::kOutOfRange) return Partial{Status::kOutOfRange};
  return Partial{Status::kMiss};
}

Estimate Grid::Query(std::span<const double> q) const {
  if (q.size() != options_.axis_names.size()) {
    throw Error("grid " + options_.name + ": query has " + std::to_string(q.size()) + " coordinates; expected " +
                std::to_string(options_.axis_names.size()));
  }
  if (points_.empty()) Miss(q, "empty table");
  std::vector<double> scratch;
  const Partial p = Resolve(0, 0, q, scratch);
  const double sol_q = sol_(q);
  if (p.status == Status::kOk) {
    Estimate e;
    e.latency_ms = p.latency_ms;
    if (p.has_power) e.power_w = p.power_w;
    e.source = p.blended ? EstimateSource::kInterpolated : EstimateSource::kSilicon;
    e.sol_fraction = sol_q / p.latency_ms;
    return e;
  }
  if (p.status == Status::kOutOfRange) return Hold(q, sol_q);
  Miss(q, "no usable branch");
}

Estimate Grid::Hold(std::span<const double> q, double sol_q) const {
  if (!(sol_q > 0 && std::isfinite(sol_q))) Miss(q, "non-positive SOL");
  Estimate e;
  e.source = EstimateSource::kExtrapolated;
  bool has_power = true;
  if (options_.axis_names.size() == 1) {
    const Node& root = nodes_[0];
    const std::size_t k = std::min<std::size_t>(static_cast<std::size_t>(options_.k_tail), root.count);
    const bool below = q[0] < keys_[root.first];
    std::vector<double> utils, powers;
    for (std::size_t j = 0; j < k; ++j) {
      const std::size_t pos = below ? j : root.count - 1 - j;
      const std::size_t leaf = children_[root.first + pos];
      if (!Valid(points_[leaf].latency_ms, leaf_sol_[leaf])) continue;
      utils.push_back(leaf_sol_[leaf] / points_[leaf].latency_ms);
      has_power = has_power && points_[leaf].power_w.has_value();
      if (points_[leaf].power_w) powers.push_back(*points_[leaf].power_w);
    }
    if (utils.empty()) Miss(q, "no positive-util boundary anchor");
    const double util = Median(utils);
    e.latency_ms = sol_q / util;
    if (has_power) e.power_w = Median(powers);
    e.sol_fraction = sol_q / e.latency_ms;
    return e;
  }
  // Multi-axis: the nearest valid leaves in log2 space, weighted inside a support
  // radius set by the next-nearest one.
  std::vector<double> lq(q.size());
  for (std::size_t a = 0; a < q.size(); ++a) lq[a] = Log2Coord(q[a]);
  std::vector<std::pair<double, std::size_t>> cand;
  cand.reserve(points_.size());
  for (std::size_t i = 0; i < points_.size(); ++i) {
    if (!Valid(points_[i].latency_ms, leaf_sol_[i])) continue;
    double d2 = 0;
    for (std::size_t a = 0; a < q.size(); ++a) {
      const double d = Log2Coord(points_[i].coords[a]) - lq[a];
      d2 += d * d;
    }
    cand.emplace_back(std::sqrt(d2), i);
  }
  if (cand.empty()) Miss(q, "no valid leaf to anchor the hold");
  const std::size_t nn = static_cast<std::size_t>(options_.nn_leaves);
  const std::size_t take = std::min(cand.size(), nn + 1);
  std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(take), cand.end());
  const std::size_t used = std::min(cand.size(), nn);
  const double radius = cand.size() > nn ? cand[nn].first : std::numeric_limits<double>::infinity();
  std::vector<double> w(used);
  double wsum = 0;
  for (std::size_t j = 0; j < used; ++j) {
    const double d = cand[j].first;
    if (std::isinf(radius)) {
      w[j] = 1.0 / (d * d + 1e-12);
    } else {
      const double r = (radius - d) / (radius * d + 1e-12);
      w[j] = r * r;
    }
    wsum += w[j];
  }
  if (!(wsum > 0)) {
    std::fill(w.begin(), w.end(), 1.0);
    wsum = static_cast<double>(used);
  }
  double util = 0, power = 0;
  for (std::size_t j = 0; j < used; ++j) {
    const std::size_t i = cand[j].second;
    util += w[j] * leaf_sol_[i] / points_[i].latency_ms;
    has_power = has_power && points_[i].power_w.has_value();
    power += w[j] * points_[i].power_w.value_or(0);
  }
  util /= wsum;
  e.latency_ms = sol_q / util;
  if (has_power) e.power_w = power / wsum;
  e.sol_fraction = sol_q / e.latency_ms;
  return e;
}

void Grid::Miss(std::span<const double> q, const std::string& reason) const {
  throw InterpolationMissError(options_.name, FormatQuery(q), reason, CoveredRange());
}

std::string Grid::FormatQuery(std::span<const double> q) const {
  std::string s = "{";
  for (std::size_t a = 0; a < q.size(); ++a) {
    if (a) s += ", ";
    s += (a < options_.axis_names.size() ? options_.axis_names[a] : "?") + "=" + FormatDouble(q[a]);
  }
  return s + "}";
}

std::string Grid::CoveredRange() const {
  if (points_.empty()) return "no leaves";
  std::string s;
  for (std::size_t a = 0; a < options_.axis_names.size(); ++a) {
    double lo = points_[0].coords[a], hi = lo;
    for (const auto& p : points_) lo = std::min(lo, p.coords[a]), hi = std::max(hi, p.coords[a]);
    if (a) s += " x ";
    s += options_.axis_names[a] + " [" + FormatDouble(lo) + ", " + FormatDouble(hi) + "]";
  }
  return s + ", " + std::to_string(points_.size()) + " leaves";
}

bool Grid::IsInterior(std::size_t i) const {
  return i < interior_.size() && interior_[i] != 0;
}

Grid Grid::Without(std::size_t i) const {
  std::vector<GridPoint> rest;
  rest.reserve(points_.size());
  for (std::size_t j = 0; j < points_.size(); ++j)
    if (j != i) rest.push_back(points_[j]);
  return Grid(options_, std::move(rest), sol_);
}

AxisCurve::AxisCurve(std::string name, std::string axis_name, std::vector<GridPoint> points, SolFn sol)
    : name_(std::move(name)), axis_name_(std::move(axis_name)), sol_(std::move(sol)) {
  std::vector<std::size_t> order(points.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (points[i].coords.size() != 1) throw Error("curve " + name_ + ": a point has other than one coordinate");
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return points[a].coords[0] < points[b].coords[0]; });
  for (std::size_t i : order) {
    const double x = points[i].coords[0];
    if (!keys_.empty() && keys_.back() == x) continue;  // first point wins
    keys_.push_back(x);
    lat_.push_back(points[i].latency_ms);
    has_power_ = has_power_ && points[i].power_w.has_value();
    power_.push_back(points[i].power_w.value_or(0));
    sol_at_.push_back(sol_(x));
  }
}

Estimate AxisCurve::Query(double x) const {
  auto miss = [&](const std::string& reason) {
    std::string covered = keys_.empty()
                              ? "no leaves"
                              : axis_name_ + " [" + FormatDouble(keys_.front()) + ", " + FormatDouble(keys_.back()) +
                                    "], " + std::to_string(keys_.size()) + " leaves";
    throw InterpolationMissError(name_, "{" + axis_name_ + "=" + FormatDouble(x) + "}", reason, covered);
  };
  if (keys_.empty()) miss("empty table");
  const double sol_q = sol_(x);
  Estimate e;
  const auto it = std::lower_bound(keys_.begin(), keys_.end(), x);
  const std::size_t n = keys_.size();
  if (it != keys_.end() && *it == x) {
    const std::size_t i = static_cast<std::size_t>(it - keys_.begin());
    e.latency_ms = lat_[i];
    if (has_power_) e.power_w = power_[i];
    e.source = EstimateSource::kSilicon;
  } else if (it != keys_.begin() && it != keys_.end()) {
    const std::size_t hi = static_cast<std::size_t>(it - keys_.begin()), lo = hi - 1;
    const double w = (x - keys_[lo]) / (keys_[hi] - keys_[lo]);
    e.latency_ms = lat_[lo] + (lat_[hi] - lat_[lo]) * w;
    if (has_power_) e.power_w = power_[lo] + (power_[hi] - power_[lo]) * w;
    e.source = EstimateSource::kInterpolated;
  } else {
    if (!(sol_q > 0 && std::isfinite(sol_q))) miss("non-positive SOL");
    const std::size_t i = it == keys_.begin() ? 0 : n - 1;
    if (!Valid(lat_[i], sol_at_[i])) miss("no positive-util boundary anchor");
    const double util = sol_at_[i] / lat_[i];
    e.latency_ms = sol_q / util;
    if (has_power_) e.power_w = power_[i];
    e.source = EstimateSource::kExtrapolated;
  }
  e.sol_fraction = sol_q / e.latency_ms;
  return e;
}

}  // namespace servecast::perfdb
