#include "perfdb/quantize.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/value.h"

namespace servecast::perfdb {

ComputeScaleTable::ComputeScaleTable(const Table& table, std::shared_ptr<const Sol> sol, const std::string& name)
    : name_(name), sol_(std::move(sol)) {
  const std::size_t quant = table.ColumnIndex("quant_dtype"), m = table.ColumnIndex("m"), k = table.ColumnIndex("k"),
                    latency = table.ColumnIndex("latency");
  const std::optional<std::size_t> power = table.FindColumn("power");
  std::map<std::string, std::vector<GridPoint>> points;
  for (std::size_t r = 0; r < table.num_rows(); ++r) {
    GridPoint p;
    p.coords = {table.GetDouble(r, m), table.GetDouble(r, k)};
    p.latency_ms = table.GetDouble(r, latency);
    if (power) p.power_w = table.GetDouble(r, *power);
    points[table.GetString(r, quant)].push_back(std::move(p));
  }
  for (auto& [q, pts] : points) {
    GridOptions o;
    o.name = name_ + "{quant_dtype=" + q + "}";
    o.axis_names = {"m", "k"};
    std::shared_ptr<const Sol> s = sol_;
    GridSolFn fn = [s](std::span<const double> x) { return s->MemMs(2 * x[0] * x[1]); };
    std::array<double, 4> env = {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                                 std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
    for (const GridPoint& p : pts) {
      env = {std::min(env[0], p.coords[0]), std::max(env[1], p.coords[0]), std::min(env[2], p.coords[1]),
             std::max(env[3], p.coords[1])};
    }
    envelopes_.emplace(q, env);
    slices_.emplace(q, Grid(std::move(o), std::move(pts), std::move(fn)));
  }
}

double ComputeScaleTable::SolMs(const ComputeScaleQuery& q) const {
  return sol_->MemMs(2 * static_cast<double>(q.m) * static_cast<double>(q.k));
}

Estimate ComputeScaleTable::Query(const ComputeScaleQuery& q) const {
  const auto it = slices_.find(q.quant_dtype);
  if (it == slices_.end()) {
    const std::string query = "{m=" + std::to_string(q.m) + ", k=" + std::to_string(q.k) + "}";
    std::string have;
    for (const auto& [name, g] : slices_) have += (have.empty() ? "" : ", ") + name;
    throw InterpolationMissError(name_ + "{quant_dtype=" + q.quant_dtype + "}", query, "no slice with this key",
                                 "quant_dtype: " + (have.empty() ? std::string("none") : have));
  }
  const Grid& g = it->second;
  const std::array<double, 4>& env = envelopes_.at(q.quant_dtype);
  const double lo[2] = {env[0], env[2]}, hi[2] = {env[1], env[3]};
  const double x[2] = {static_cast<double>(q.m), static_cast<double>(q.k)};
  double c[2];
  bool clamped = false;
  for (int a = 0; a < 2; ++a) {
    c[a] = std::clamp(x[a], lo[a], hi[a]);
    clamped = clamped || c[a] != x[a];
  }
  Estimate e = g.Query(std::span<const double>(c, 2));
  if (clamped) e.source = EstimateSource::kExtrapolated;
  e.sol_fraction = e.latency_ms > 0 ? SolMs(q) / e.latency_ms : 0;
  return e;
}

}  // namespace servecast::perfdb
