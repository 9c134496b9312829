#include "perfdb/elementwise.h"

#include <optional>
#include <vector>

#include "core/error.h"
#include "tables/table_spec.h"

namespace servecast::perfdb {

namespace {
double BytesOf(const std::string& op, const std::string& dtype, double tokens, double width) {
  return tables::ElementwiseCost(op, dtype, tokens, width).bytes;
}
}  // namespace

ElementwiseTable::ElementwiseTable(const Table& table, std::shared_ptr<const Sol> sol, const std::string& name)
    : name_(name), sol_(std::move(sol)) {
  const tables::TableSpec& spec = tables::GetTableSpec("elementwise_perf");
  const std::size_t op_c = table.ColumnIndex("op_name"), dtype_c = spec.KeyIndex(table, "dtype"),
                    tokens_c = spec.KeyIndex(table, "num_tokens"), width_c = spec.KeyIndex(table, "hidden_size"),
                    lat_c = table.ColumnIndex("latency");
  const std::optional<std::size_t> power_c = table.FindColumn("power");
  std::map<std::pair<std::string, std::string>, std::vector<GridPoint>> pending;
  for (std::size_t r = 0; r < table.num_rows(); ++r) {
    GridPoint p;
    p.coords = {table.GetDouble(r, width_c), table.GetDouble(r, tokens_c)};
    p.latency_ms = table.GetDouble(r, lat_c);
    if (power_c) p.power_w = PowerCell(table.GetDouble(r, *power_c));
    pending[{table.GetString(r, op_c), table.GetString(r, dtype_c)}].push_back(std::move(p));
  }
  for (auto& [key, points] : pending) {
    const std::string op = key.first, dtype = key.second;
    BytesOf(op, dtype, 1, 1);  // unknown op or dtype -> Error at load, not at query
    GridOptions opt;
    opt.name = name_ + "{op_name=" + key.first + ", dtype=" + key.second + "}";
    opt.axis_names = {"hidden_size", "num_tokens"};
    auto sol = sol_;
    const Grid& g = slices_
                        .emplace(key, Grid(std::move(opt), std::move(points),
                                           [sol, op, dtype](std::span<const double> q) {
                                             return sol->MemMs(BytesOf(op, dtype, q[1], q[0]));
                                           }))
                        .first->second;
    std::vector<UtilSample> samples;
    samples.reserve(g.points().size());
    for (const GridPoint& p : g.points()) samples.push_back(UtilSample{p.coords, g.Sol(p.coords) / p.latency_ms});
    utils_.emplace(key, UtilGrid(g.options().name, g.options().axis_names, std::move(samples)));
  }
}

double ElementwiseTable::SolMs(const std::string& op, const std::string& dtype, double tokens, double width) const {
  return sol_->MemMs(BytesOf(op, dtype, tokens, width));
}

namespace {

[[noreturn]] void NoElementwiseSlice(const std::string& name,
                                     const std::map<std::pair<std::string, std::string>, Grid>& slices,
                                     const std::string& op, const std::string& dtype, double tokens, double width) {
  std::string have;
  for (const auto& [k, g] : slices) have += (have.empty() ? "" : ", ") + k.first + "/" + k.second;
  throw InterpolationMissError(name + "{op_name=" + op + ", dtype=" + dtype + "}",
                               "{num_tokens=" + std::to_string(tokens) + ", hidden_size=" + std::to_string(width) + "}",
                               "no slice for this op and dtype", have.empty() ? "no slices" : "slices: " + have);
}

}  // namespace

Estimate ElementwiseTable::Query(const std::string& op, const std::string& dtype, double tokens, double width) const {
  auto it = slices_.find({op, dtype});
  if (it == slices_.end()) NoElementwiseSlice(name_, slices_, op, dtype, tokens, width);
  return it->second.Query({width, tokens});
}

Estimate ElementwiseTable::QueryEmpirical(const std::string& op, const std::string& dtype, double tokens,
                                          double width) const {
  auto it = utils_.find({op, dtype});
  if (it == utils_.end()) NoElementwiseSlice(name_, slices_, op, dtype, tokens, width);
  const double q[2] = {width, tokens};
  const double util = it->second.Lookup(q).util;
  Estimate e;
  const double sol = SolMs(op, dtype, tokens, width);
  e.latency_ms = sol / util;
  e.sol_fraction = util;
  return e;
}

}  // namespace servecast::perfdb
