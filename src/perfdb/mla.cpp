#include "perfdb/mla.h"

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "core/error.h"
#include "perfdb/table_modes.h"
#include "tables/table_spec.h"

namespace servecast::perfdb {
namespace {

// Builds each slice's Grid and its util samples.
template <typename Key, typename SolOf>
void BuildSlices(MlaSlices<Key>& out, std::map<Key, std::vector<GridPoint>>& points, const std::string& table,
                 const std::vector<std::string>& axes, int transform_axis,
                 const std::function<std::string(const Key&)>& key_text, SolOf sol_of) {
  for (auto& [key, pts] : points) {
    GridOptions o;
    o.name = table + "{" + key_text(key) + "}";
    o.axis_names = axes;
    o.transform_axis = transform_axis;
    const Grid& g = out.grids.emplace(key, Grid(std::move(o), std::move(pts), sol_of(key))).first->second;
    std::vector<UtilSample> samples;
    samples.reserve(g.points().size());
    for (const GridPoint& p : g.points()) samples.push_back(UtilSample{p.coords, g.Sol(p.coords) / p.latency_ms});
    out.utils.emplace(key, UtilGrid(g.options().name, g.options().axis_names, std::move(samples)));
  }
}

template <typename Key>
[[noreturn]] void NoSlice(const std::string& table, const std::string& key, const MlaSlices<Key>& s,
                          const std::function<std::string(const Key&)>& key_text, const std::string& query) {
  std::string have;
  for (const auto& [k, g] : s.grids) have += (have.empty() ? "" : "; ") + ("{" + key_text(k) + "}");
  throw InterpolationMissError(table + "{" + key + "}", query, "no slice with this key",
                               "slices: " + (have.empty() ? std::string("none") : have));
}

std::optional<double> Power(const Table& t, std::optional<std::size_t> c, std::size_t r) {
  return c ? PowerCell(t.GetDouble(r, *c)) : std::nullopt;
}

// latency = SOL(q) / util over one slice's samples (no power, source kSilicon:
// the caller tags the answer empirical).
Estimate FromUtil(const UtilGrid& g, std::span<const double> q, double sol) {
  const double util = g.Lookup(q).util;
  Estimate e;
  e.latency_ms = sol / util;
  e.sol_fraction = util;
  return e;
}

std::string ContextKeyText(const ContextMlaTable::Key& k) {
  return "mla_dtype=" + k.first + ", kv_cache_dtype=" + k.second;
}
std::string GenerationKeyText(const GenerationMlaTable::Key& k) {
  return "kv_cache_dtype=" + k;
}

}  // namespace

// ---------------------------------------------------------------- context

ContextMlaTable::ContextMlaTable(const Table& table, std::shared_ptr<const Sol> sol, const std::string& name)
    : name_(name), sol_(std::move(sol)) {
  const tables::TableSpec& spec = tables::GetTableSpec("context_mla_perf");
  const std::size_t dt = spec.KeyIndex(table, "mla_dtype"), kv = spec.KeyIndex(table, "kv_cache_dtype"),
                    heads = spec.KeyIndex(table, "num_heads"), batch = spec.KeyIndex(table, "batch_size"),
                    isl = spec.KeyIndex(table, "isl"), lat = table.ColumnIndex("latency");
  const std::optional<std::size_t> power = table.FindColumn("power");
  std::map<Key, std::vector<GridPoint>> points;
  for (std::size_t r = 0; r < table.num_rows(); ++r) {
    GridPoint p;
    p.coords = {table.GetDouble(r, heads), table.GetDouble(r, isl), table.GetDouble(r, batch)};
    p.latency_ms = table.GetDouble(r, lat);
    p.power_w = Power(table, power, r);
    points[{table.GetString(r, dt), table.GetString(r, kv)}].push_back(std::move(p));
  }
  auto s = sol_;
  BuildSlices<Key>(s_, points, name_, {"num_heads", "seq", "batch"}, 1, ContextKeyText, [s](const Key& key) {
    FmhaQuant(key.first);  // an unknown dtype is an Error at load, not at query
    KvCacheBytes(key.second);
    return GridSolFn(
        [s, key](std::span<const double> x) { return s->ContextMlaMs(x[2], x[1], 0, x[0], key.first, key.second); });
  });
}

double ContextMlaTable::SolMs(const ContextMlaQuery& q) const {
  return sol_->ContextMlaMs(static_cast<double>(q.batch), static_cast<double>(q.seq), 0,
                            static_cast<double>(q.num_heads), q.mla_dtype, q.kv_cache_dtype);
}

Estimate ContextMlaTable::Query(const ContextMlaQuery& q) const {
  sol_->PeakFlops(FmhaQuant(q.mla_dtype).flops_key);  // MissingSystemFlopsError before any lookup
  const Key key{q.mla_dtype, q.kv_cache_dtype};
  const double x[3] = {static_cast<double>(q.num_heads), static_cast<double>(q.seq), static_cast<double>(q.batch)};
  const auto it = s_.grids.find(key);
  if (it == s_.grids.end())
    NoSlice<Key>(name_, ContextKeyText(key), s_, ContextKeyText,
                 "{num_heads=" + std::to_string(q.num_heads) + ", seq=" + std::to_string(q.seq) +
                     ", batch=" + std::to_string(q.batch) + "}");
  return it->second.Query(std::span<const double>(x, 3));
}

Estimate ContextMlaTable::QueryEmpirical(const ContextMlaQuery& q) const {
  const Key key{q.mla_dtype, q.kv_cache_dtype};
  const auto it = s_.utils.find(key);
  if (it == s_.utils.end())
    NoSlice<Key>(name_, ContextKeyText(key), s_, ContextKeyText, "{num_heads=" + std::to_string(q.num_heads) + "}");
  const double x[3] = {static_cast<double>(q.num_heads), static_cast<double>(q.seq), static_cast<double>(q.batch)};
  return FromUtil(it->second, x, SolMs(q));
}

// ---------------------------------------------------------------- generation

GenerationMlaTable::GenerationMlaTable(const Table& table, std::shared_ptr<const Sol> sol, const std::string& name)
    : name_(name), sol_(std::move(sol)) {
  const tables::TableSpec& spec = tables::GetTableSpec("generation_mla_perf");
  const std::size_t kv = spec.KeyIndex(table, "kv_cache_dtype"), heads = spec.KeyIndex(table, "num_heads"),
                    batch = spec.KeyIndex(table, "batch_size"), isl = spec.KeyIndex(table, "isl"),
                    step = spec.KeyIndex(table, "step"), lat = table.ColumnIndex("latency");
  const std::optional<std::size_t> power = table.FindColumn("power");
  std::map<Key, std::vector<GridPoint>> points;
  for (std::size_t r = 0; r < table.num_rows(); ++r) {
    GridPoint p;
    p.coords = {table.GetDouble(r, heads), table.GetDouble(r, batch),
                table.GetDouble(r, isl) + table.GetDouble(r, step)};
    p.latency_ms = table.GetDouble(r, lat);
    p.power_w = Power(table, power, r);
    points[table.GetString(r, kv)].push_back(std::move(p));
  }
  auto s = sol_;
  BuildSlices<Key>(s_, points, name_, {"num_heads", "batch", "seq"}, -1, GenerationKeyText, [s](const Key& key) {
    KvCacheBytes(key);
    return GridSolFn([s, key](std::span<const double> x) { return s->GenerationMlaMs(x[1], x[2], x[0], key); });
  });
}

double GenerationMlaTable::SolMs(const GenerationMlaQuery& q) const {
  return sol_->GenerationMlaMs(static_cast<double>(q.batch), static_cast<double>(q.seq),
                               static_cast<double>(q.num_heads), q.kv_cache_dtype);
}

Estimate GenerationMlaTable::Query(const GenerationMlaQuery& q) const {
  const auto it = s_.grids.find(q.kv_cache_dtype);
  if (it == s_.grids.end())
    NoSlice<Key>(name_, GenerationKeyText(q.kv_cache_dtype), s_, GenerationKeyText,
                 "{num_heads=" + std::to_string(q.num_heads) + ", batch=" + std::to_string(q.batch) +
                     ", seq=" + std::to_string(q.seq) + "}");
  const double x[3] = {static_cast<double>(q.num_heads), static_cast<double>(q.batch), static_cast<double>(q.seq)};
  return it->second.Query(std::span<const double>(x, 3));
}

Estimate GenerationMlaTable::QueryEmpirical(const GenerationMlaQuery& q) const {
  const auto it = s_.utils.find(q.kv_cache_dtype);
  if (it == s_.utils.end())
    NoSlice<Key>(name_, GenerationKeyText(q.kv_cache_dtype), s_, GenerationKeyText,
                 "{num_heads=" + std::to_string(q.num_heads) + "}");
  const double x[3] = {static_cast<double>(q.num_heads), static_cast<double>(q.batch), static_cast<double>(q.seq)};
  return FromUtil(it->second, x, SolMs(q));
}

// ---------------------------------------------------------------- modes

std::string MlaCollectHint(const std::string& table) {
  const char* op = table == "context_mla_perf" ? "mla_context" : "mla_generation";
  return "collect it on the GPU with servecast collect --backend cuda --ops " + std::string(op) +
         ", add a data root that has it, or estimate from rooflines with --database-mode sol";
}

namespace {

template <typename TableT, typename Q>
OpEstimate EstimateMla(DatabaseMode mode, double sol_ms, const TableT* table, const Q& q, const std::string& table_name,
                       const std::string& op, const std::string& key) {
  return EstimateByMode(
      mode, sol_ms, table != nullptr, table_name, MlaCollectHint(table_name), op, key, [&] { return table->Query(q); },
      [&] { return table->QueryEmpirical(q); });
}

}  // namespace

OpEstimate EstimateContextMla(DatabaseMode mode, const Sol& sol, const ContextMlaTable* table, const ContextMlaQuery& q,
                              const std::string& op) {
  const double s = sol.ContextMlaMs(static_cast<double>(q.batch), static_cast<double>(q.seq), 0,
                                    static_cast<double>(q.num_heads), q.mla_dtype, q.kv_cache_dtype);
  const std::string key = "mla_dtype=" + q.mla_dtype + ", kv_cache_dtype=" + q.kv_cache_dtype +
                          ", num_heads=" + std::to_string(q.num_heads) + ", batch=" + std::to_string(q.batch) +
                          ", seq=" + std::to_string(q.seq);
  return EstimateMla(mode, s, table, q, "context_mla_perf", op, key);
}

OpEstimate EstimateGenerationMla(DatabaseMode mode, const Sol& sol, const GenerationMlaTable* table,
                                 const GenerationMlaQuery& q, const std::string& op) {
  const double s = sol.GenerationMlaMs(static_cast<double>(q.batch), static_cast<double>(q.seq),
                                       static_cast<double>(q.num_heads), q.kv_cache_dtype);
  const std::string key = "kv_cache_dtype=" + q.kv_cache_dtype + ", num_heads=" + std::to_string(q.num_heads) +
                          ", batch=" + std::to_string(q.batch) + ", seq=" + std::to_string(q.seq);
  return EstimateMla(mode, s, table, q, "generation_mla_perf", op, key);
}

}  // namespace servecast::perfdb
