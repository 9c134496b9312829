#include "perfdb/elementwise.h"

#include <optional>
#include <vector>

#include "core/error.h"

namespace servecast::perfdb {

double ElementwiseBytes(const std::string& op, double tokens, double width) {
  const double th = tokens * width;
  if (op == "rmsnorm") return (2 * th + width) * 2;
  if (op == "rmsnorm_residual") return (4 * th + width) * 2;
  if (op == "silu_and_mul" || op == "residual_add") return 3 * th * 2;
  if (op == "rotary_embedding" || op == "embedding") return 2 * th * 2;
  throw Error("elementwise_perf: no cost model for op '" + op +
              "' (known: rmsnorm, rmsnorm_residual, silu_and_mul, residual_add, rotary_embedding, embedding)");
}

ElementwiseTable::ElementwiseTable(const Table& table, std::shared_ptr<const Sol> sol, const std::string& name)
    : name_(name), sol_(std::move(sol)) {
  const std::size_t op_c = table.ColumnIndex("op_name"), dtype_c = table.ColumnIndex("dtype"),
                    tokens_c = table.ColumnIndex("num_tokens"), width_c = table.ColumnIndex("hidden_size"),
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
    const std::string op = key.first;
    ElementwiseBytes(op, 1, 1);  // unknown op -> Error at load, not at query
    GridOptions opt;
    opt.name = name_ + "{op_name=" + key.first + ", dtype=" + key.second + "}";
    opt.axis_names = {"hidden_size", "num_tokens"};
    auto sol = sol_;
    const Grid& g = slices_
                        .emplace(key, Grid(std::move(opt), std::move(points),
                                           [sol, op](std::span<const double> q) {
                                             return sol->MemMs(ElementwiseBytes(op, q[1], q[0]));
                                           }))
                        .first->second;
    std::vector<UtilSample> samples;
    samples.reserve(g.points().size());
    for (const GridPoint& p : g.points()) samples.push_back(UtilSample{p.coords, g.Sol(p.coords) / p.latency_ms});
    utils_.emplace(key, UtilGrid(g.options().name, g.options().axis_names, std::move(samples)));
  }
}

double ElementwiseTable::SolMs(const std::string& op, double tokens, double width) const {
  return sol_->MemMs(ElementwiseBytes(op, tokens, width));
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
  const double sol = SolMs(op, tokens, width);
  e.latency_ms = sol / util;
  e.sol_fraction = util;
  return e;
}

}  // namespace servecast::perfdb
