#include "perfdb/declared.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>
#include <utility>

#include "core/error.h"
#include "core/value.h"
#include "perfdb/table_modes.h"

namespace servecast::perfdb {
namespace {

ValueType ColumnType(const tables::TableSpec& spec, const std::string& column) {
  return column == "op_name" ? ValueType::kString : spec.KeyColumn(column).type;
}

// A number as the value of a key column of type `type`: an integer when the
// column is and the number is integral (so a query and a row of one key match).
Value NumberValue(ValueType type, double v) {
  if (type == ValueType::kInt64 && std::isfinite(v) && v == std::floor(v)) return Value(static_cast<std::int64_t>(v));
  return Value(v);
}

// A query's value of `column`, typed as declared.
Value QueryValue(const tables::TableSpec& spec, const Params& key, const std::string& column) {
  const ValueType type = ColumnType(spec, column);
  return type == ValueType::kString ? Value(key.Str(column)) : NumberValue(type, key.Num(column));
}

std::string QueryText(const tables::TableSpec& spec, const Params& key, const std::string& column) {
  return ToString(QueryValue(spec, key, column));
}

}  // namespace

std::string DeclaredKeyText(const tables::TableSpec& spec, const Params& key) {
  const tables::EstimatorRead& read = spec.Read();
  std::string s;
  for (const std::string& c : read.slice_keys) s += (s.empty() ? "" : ", ") + c + "=" + QueryText(spec, key, c);
  for (const tables::TableAxis& a : read.axes)
    s += (s.empty() ? "" : ", ") + a.column + "=" + QueryText(spec, key, a.column);
  return s;
}

double DeclaredSolMs(const Sol& sol, const tables::TableSpec& spec, const Params& key) {
  return sol.Ms(spec.Roofline(key));
}

DeclaredTable::DeclaredTable(const Table& table, const tables::TableSpec& spec, std::shared_ptr<const Sol> sol,
                             const std::string& name)
    : spec_(spec), name_(name.empty() ? spec.name : name), sol_(std::move(sol)) {
  const tables::EstimatorRead& read = spec_.Read();
  std::vector<std::size_t> slice_cols, axis_cols;
  std::vector<ValueType> slice_types;
  for (const std::string& c : read.slice_keys) {
    slice_cols.push_back(c == "op_name" ? table.ColumnIndex("op_name") : spec_.KeyIndex(table, c));
    slice_types.push_back(ColumnType(spec_, c));
  }
  std::vector<std::string> axis_names;
  int transform_axis = -1;
  for (std::size_t i = 0; i < read.axes.size(); ++i) {
    axis_cols.push_back(spec_.KeyIndex(table, read.axes[i].column));
    axis_names.push_back(read.axes[i].column);
    if (read.axes[i].blend == tables::AxisBlend::kSqrt) transform_axis = static_cast<int>(i);
  }
  const std::size_t lat = table.ColumnIndex("latency");
  const std::optional<std::size_t> power = table.FindColumn("power");
  const bool has_parts = !read.parts.empty();
  const std::size_t part_col = has_parts ? table.ColumnIndex(read.parts) : 0;
  std::map<SliceKey, std::vector<GridPoint>> points;
  for (std::size_t r = 0; r < table.num_rows(); ++r) {
    SliceKey key;
    key.reserve(slice_cols.size() + 1);
    for (std::size_t i = 0; i < slice_cols.size(); ++i)
      key.push_back(slice_types[i] == ValueType::kString  ? Value(table.GetString(r, slice_cols[i]))
                    : slice_types[i] == ValueType::kInt64 ? Value(table.GetInt(r, slice_cols[i]))
                                                          : Value(table.GetDouble(r, slice_cols[i])));
    slice_set_.insert(key);
    if (has_parts) key.push_back(Value(table.GetString(r, part_col)));  // the part: a grid of its own
    GridPoint p;
    p.coords.reserve(axis_cols.size());
    for (std::size_t c : axis_cols) p.coords.push_back(table.GetDouble(r, c));
    p.latency_ms = table.GetDouble(r, lat);
    p.power_w = power ? PowerCell(table.GetDouble(r, *power)) : std::nullopt;
    points[std::move(key)].push_back(std::move(p));
  }
  std::vector<ValueType> axis_types;
  for (const tables::TableAxis& a : read.axes) axis_types.push_back(ColumnType(spec_, a.column));
  for (auto& [key, pts] : points) {
    // The slice's key values, typed as declared; each SOL call adds the coordinates.
    Params base;
    for (std::size_t i = 0; i < read.slice_keys.size(); ++i) base.Set(read.slice_keys[i], key[i]);
    const Sol* s = sol_.get();
    const tables::TableSpec* sp = &spec_;
    GridSolFn sol_fn = [s, sp, base, axis_names, axis_types](std::span<const double> x) {
      Params p = base;
      for (std::size_t a = 0; a < x.size(); ++a) p.Set(axis_names[a], NumberValue(axis_types[a], x[a]));
      return s->Ms(sp->Roofline(p));
    };
    GridOptions o;
    o.name = name_ + "{" + SliceText(key) + "}";
    o.axis_names = axis_names;
    o.transform_axis = transform_axis;
    const Grid& g = grids_.emplace(key, Grid(std::move(o), std::move(pts), std::move(sol_fn))).first->second;
    std::vector<UtilSample> samples;
    samples.reserve(g.points().size());
    for (const GridPoint& p : g.points()) samples.push_back(UtilSample{p.coords, g.Sol(p.coords) / p.latency_ms});
    utils_.emplace(key, UtilGrid(g.options().name, g.options().axis_names, std::move(samples)));
  }
}

DeclaredTable DeclaredTable::FromLoaded(const LoadedTable& loaded, std::shared_ptr<const Sol> sol) {
  return DeclaredTable(loaded.table, tables::GetTableSpec(loaded.name), std::move(sol), loaded.name);
}

std::string DeclaredTable::SliceText(const SliceKey& key) const {
  const tables::EstimatorRead& read = spec_.Read();
  std::string s;
  for (std::size_t i = 0; i < key.size() && i < read.slice_keys.size(); ++i)
    s += (i ? ", " : "") + read.slice_keys[i] + "=" + ToString(key[i]);
  if (!read.parts.empty() && key.size() > read.slice_keys.size())
    s += ", " + read.parts + "=" + ToString(key.back());
  return s;
}

std::vector<double> DeclaredTable::Coords(const Params& key) const {
  std::vector<double> x;
  for (const tables::TableAxis& a : spec_.Read().axes) x.push_back(key.Num(a.column));
  return x;
}

DeclaredTable::SliceKey DeclaredTable::RowsSlice(const Params& key) const {
  const tables::EstimatorRead& read = spec_.Read();
  SliceKey own;
  for (const std::string& c : read.slice_keys) own.push_back(QueryValue(spec_, key, c));
  if (!read.fallback || slice_set_.count(own)) return own;
  const auto at = std::find(read.slice_keys.begin(), read.slice_keys.end(), read.fallback->first);
  const std::size_t n = static_cast<std::size_t>(at - read.slice_keys.begin()) + 1;
  for (const SliceKey& k : slice_set_)
    if (std::equal(k.begin(), k.begin() + static_cast<std::ptrdiff_t>(n), own.begin())) return own;
  own[n - 1] = Value(read.fallback->second);
  return own;
}

std::vector<DeclaredTable::SliceKey> DeclaredTable::Parts(const Params& key, SliceKey& rows) const {
  rows = RowsSlice(key);
  std::vector<SliceKey> parts;
  if (spec_.Read().parts.empty()) {
    if (grids_.count(rows)) parts.push_back(rows);
  } else {
    // The grids whose key is the slice's plus one part value (the map keeps them adjacent).
    for (auto it = grids_.lower_bound(rows); it != grids_.end(); ++it) {
      if (it->first.size() != rows.size() + 1 || !std::equal(rows.begin(), rows.end(), it->first.begin())) break;
      parts.push_back(it->first);
    }
  }
  if (!parts.empty()) return parts;
  std::string have, query;
  for (const SliceKey& k : slice_set_) have += (have.empty() ? "" : "; ") + ("{" + SliceText(k) + "}");
  for (const tables::TableAxis& a : spec_.Read().axes)
    query += (query.empty() ? "" : ", ") + a.column + "=" + QueryText(spec_, key, a.column);
  throw InterpolationMissError(name_ + "{" + SliceText(rows) + "}", "{" + query + "}", "no slice with this key",
                               "slices: " + (have.empty() ? std::string("none") : have));
}

double DeclaredTable::SolMs(const Params& key) const {
  return DeclaredSolMs(*sol_, spec_, key);
}

Estimate DeclaredTable::Query(const Params& key) const {
  const double sol_q = SolMs(key);  // MissingSystemFlopsError before any lookup
  SliceKey rows;
  const std::vector<SliceKey> parts = Parts(key, rows);
  const std::vector<double> x = Coords(key);
  // One part: its grid's answer; several (EstimatorRead::parts): the sum, its
  // source the least exact of theirs, its power the latency-weighted mean.
  Estimate e = grids_.at(parts.front()).Query(std::span<const double>(x));
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const Estimate p = grids_.at(parts[i]).Query(std::span<const double>(x));
    if (e.power_w && p.power_w)
      e.power_w = (*e.power_w * e.latency_ms + *p.power_w * p.latency_ms) / (e.latency_ms + p.latency_ms);
    else
      e.power_w = std::nullopt;
    e.latency_ms += p.latency_ms;
    if (static_cast<int>(p.source) > static_cast<int>(e.source)) e.source = p.source;
  }
  e.sol_fraction = sol_q / e.latency_ms;  // against the query's own key
  return e;
}

Estimate DeclaredTable::QueryEmpirical(const Params& key) const {
  SliceKey rows;
  const std::vector<SliceKey> parts = Parts(key, rows);
  const std::vector<double> x = Coords(key);
  // The rows' utils over the rows' own SOL (fallback rows stand in as in SILICON).
  Params rows_key = key;
  const tables::EstimatorRead& read = spec_.Read();
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (QueryValue(spec_, key, read.slice_keys[i]) != rows[i]) rows_key.Set(read.slice_keys[i], rows[i]);
  const double sol = SolMs(rows_key);
  Estimate e;
  for (const SliceKey& part : parts) e.latency_ms += sol / utils_.at(part).Lookup(std::span<const double>(x)).util;
  e.sol_fraction = sol / e.latency_ms;
  return e;
}

OpEstimate EstimateDeclared(DatabaseMode mode, const Sol& sol, const tables::TableSpec& spec,
                            const DeclaredTable* table, const Params& key, const std::string& op) {
  const double s = DeclaredSolMs(sol, spec, key);
  std::string text = DeclaredKeyText(spec, key);
  if (table != nullptr && mode != DatabaseMode::kSol) {
    const DeclaredTable::SliceKey rows = table->RowsSlice(key);
    const tables::EstimatorRead& read = spec.Read();
    if (read.fallback) {
      const auto at = std::find(read.slice_keys.begin(), read.slice_keys.end(), read.fallback->first);
      const std::size_t i = static_cast<std::size_t>(at - read.slice_keys.begin());
      if (rows[i] != QueryValue(spec, key, read.fallback->first))
        text += " (read from the " + ToString(rows[i]) + " rows)";
    }
  }
  // A table servecast cannot collect yet, absent from the source: its roofline,
  // labelled (EstimatorRead::uncollected).
  if (table == nullptr && mode != DatabaseMode::kSol && !spec.Read().uncollected.empty())
    return OpEstimate{s, "roofline", s, 1.0,
                      spec.name + ": {" + text + "} not measured: the table is not in the data source (" +
                          spec.Read().uncollected + "); the declared roofline max(FLOPs / peak, bytes / bandwidth)"};
  const std::string hint =
      "collect it " +
      (spec.Read().collect.empty() ? "with servecast collect (the op that writes " + spec.name + ")"
                                   : spec.Read().collect) +
      ", add a data root that has it, or estimate from rooflines with --database-mode sol";
  return EstimateByMode(
      mode, s, table != nullptr, spec.name, hint, op.empty() ? spec.name : op, text, [&] { return table->Query(key); },
      [&] { return table->QueryEmpirical(key); });
}

}  // namespace servecast::perfdb
