#include "perfdb/quantize.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/value.h"
#include "tables/table_spec.h"

namespace servecast::perfdb {
namespace {

QuantizeGrids BuildGrids(const Table& table, const std::shared_ptr<const Sol>& sol, const std::string& name) {
  QuantizeGrids out;
  out.name = name;
  // computescale_perf's key columns; AIC's scale_matrix_perf has the same ones.
  const tables::TableSpec& spec = tables::GetTableSpec("computescale_perf");
  const std::size_t quant = spec.KeyIndex(table, "quant_dtype"), m = spec.KeyIndex(table, "m"),
                    k = spec.KeyIndex(table, "k"), latency = table.ColumnIndex("latency");
  const std::optional<std::size_t> power = table.FindColumn("power");
  std::map<std::string, std::vector<GridPoint>> points;
  for (std::size_t r = 0; r < table.num_rows(); ++r) {
    GridPoint p;
    p.coords = {table.GetDouble(r, m), table.GetDouble(r, k)};
    p.latency_ms = table.GetDouble(r, latency);
    if (power) p.power_w = PowerCell(table.GetDouble(r, *power));
    points[table.GetString(r, quant)].push_back(std::move(p));
  }
  for (auto& [q, pts] : points) {
    GridOptions o;
    o.name = name + "{quant_dtype=" + q + "}";
    o.axis_names = {"m", "k"};
    std::shared_ptr<const Sol> s = sol;
    GridSolFn fn = [s](std::span<const double> x) { return s->MemMs(tables::QuantizeRooflineBytes(x[0], x[1])); };
    std::array<double, 4> env = {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                                 std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
    for (const GridPoint& p : pts) {
      env = {std::min(env[0], p.coords[0]), std::max(env[1], p.coords[0]), std::min(env[2], p.coords[1]),
             std::max(env[3], p.coords[1])};
    }
    out.envelopes.emplace(q, env);
    out.slices.emplace(q, Grid(std::move(o), std::move(pts), std::move(fn)));
  }
  return out;
}

// The estimate at the query clamped per axis onto its slice's envelope;
// `clamped` receives the clamped (m, k), `was_clamped` whether it moved.
Estimate QueryClamped(const QuantizeGrids& g, const ComputeScaleQuery& q, double clamped[2], bool& was_clamped) {
  const auto it = g.slices.find(q.quant_dtype);
  if (it == g.slices.end()) {
    const std::string query = "{m=" + std::to_string(q.m) + ", k=" + std::to_string(q.k) + "}";
    std::string have;
    for (const auto& [name, grid] : g.slices) have += (have.empty() ? "" : ", ") + name;
    throw InterpolationMissError(g.name + "{quant_dtype=" + q.quant_dtype + "}", query, "no slice with this key",
                                 "quant_dtype: " + (have.empty() ? std::string("none") : have));
  }
  const std::array<double, 4>& env = g.envelopes.at(q.quant_dtype);
  const double lo[2] = {env[0], env[2]}, hi[2] = {env[1], env[3]};
  const double x[2] = {static_cast<double>(q.m), static_cast<double>(q.k)};
  was_clamped = false;
  for (int a = 0; a < 2; ++a) {
    clamped[a] = std::clamp(x[a], lo[a], hi[a]);
    was_clamped = was_clamped || clamped[a] != x[a];
  }
  Estimate e = it->second.Query(std::span<const double>(clamped, 2));
  if (was_clamped) e.source = EstimateSource::kExtrapolated;
  return e;
}

}  // namespace

// ---------------------------------------------------------------- compute_scale

ComputeScaleTable::ComputeScaleTable(const Table& table, std::shared_ptr<const Sol> sol, const std::string& name)
    : sol_(std::move(sol)), grids_(BuildGrids(table, sol_, name)) {}

double ComputeScaleTable::SolMs(const ComputeScaleQuery& q) const {
  return sol_->MemMs(tables::QuantizeRooflineBytes(static_cast<double>(q.m), static_cast<double>(q.k)));
}

Estimate ComputeScaleTable::Query(const ComputeScaleQuery& q) const {
  double c[2];
  bool clamped = false;
  Estimate e = QueryClamped(grids_, q, c, clamped);  // held flat beyond the envelope
  e.sol_fraction = e.latency_ms > 0 ? SolMs(q) / e.latency_ms : 0;
  return e;
}

// ---------------------------------------------------------------- scale_matrix

ScaleMatrixTable::ScaleMatrixTable(const Table& table, std::shared_ptr<const Sol> sol, const std::string& name)
    : sol_(std::move(sol)), grids_(BuildGrids(table, sol_, name)) {}

double ScaleMatrixTable::SolMs(const ScaleMatrixQuery& q) const {
  return sol_->MemMs(tables::QuantizeRooflineBytes(static_cast<double>(q.m), static_cast<double>(q.k)));
}

Estimate ScaleMatrixTable::Query(const ScaleMatrixQuery& q) const {
  double c[2];
  bool clamped = false;
  Estimate e = QueryClamped(grids_, q, c, clamped);
  const double sol_q = SolMs(q);
  if (clamped) {
    const double sol_c = sol_->MemMs(tables::QuantizeRooflineBytes(c[0], c[1]));
    if (sol_c > 0) e.latency_ms *= sol_q / sol_c;
  }
  e.sol_fraction = e.latency_ms > 0 ? sol_q / e.latency_ms : 0;
  return e;
}

}  // namespace servecast::perfdb
