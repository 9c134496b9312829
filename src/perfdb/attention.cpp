#include "perfdb/attention.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "core/error.h"
#include "tables/table_spec.h"

namespace servecast::perfdb {
namespace {

// Columns of an attention table: the key columns of its declaration
// (tables/table_spec.cpp), resolved by name; window_size may be absent (0).
struct Columns {
  std::size_t batch, isl, heads, kv_heads, head_dim, attn_dtype, kv_dtype, latency;
  std::optional<std::size_t> window, step, power;
  Columns(const Table& t, bool generation) : Columns(t, generation, Spec(generation)) {}

 private:
  static const tables::TableSpec& Spec(bool generation) {
    return tables::GetTableSpec(generation ? "generation_attention_perf" : "context_attention_perf");
  }
  Columns(const Table& t, bool generation, const tables::TableSpec& spec)
      : batch(spec.KeyIndex(t, "batch_size")),
        isl(spec.KeyIndex(t, "isl")),
        heads(spec.KeyIndex(t, "num_heads")),
        kv_heads(spec.KeyIndex(t, "num_key_value_heads")),
        head_dim(spec.KeyIndex(t, "head_dim")),
        attn_dtype(generation ? 0 : spec.KeyIndex(t, "attn_dtype")),
        kv_dtype(spec.KeyIndex(t, "kv_cache_dtype")),
        latency(t.ColumnIndex("latency")),
        window(spec.FindKey(t, "window_size")),
        step(generation ? std::optional<std::size_t>(spec.KeyIndex(t, "step")) : std::nullopt),
        power(t.FindColumn("power")) {}
};

double KvHeads(std::int64_t n_kv_lookup, double num_heads) {
  return n_kv_lookup == 0 ? num_heads : static_cast<double>(n_kv_lookup);
}

std::string SliceName(const std::string& table, const AttentionSliceKey& key) {
  return table + "{" + key.ToString() + "}";
}

template <typename Key>
[[noreturn]] void NoSlice(const std::string& table, const Key& key, const std::map<AttentionSliceKey, Grid>& slices,
                          const std::string& query) {
  std::string have;
  std::size_t shown = 0;
  for (const auto& [k, g] : slices) {
    if (shown++ == 12) {
      have += "; ...";
      break;
    }
    if (!have.empty()) have += "; ";
    have += "{" + k.ToString() + "}";
  }
  throw InterpolationMissError(SliceName(table, key), query, "no slice with this key",
                               "slices: " + (have.empty() ? std::string("none") : have));
}

}  // namespace

std::int64_t KvLookup(std::int64_t num_heads, std::int64_t num_kv_heads) {
  return num_kv_heads == num_heads ? 0 : num_kv_heads;
}

std::string AttentionSliceKey::ToString() const {
  std::string s;
  if (!attn_dtype.empty()) s += "attn_dtype=" + attn_dtype + ", ";
  return s + "kv_cache_dtype=" + kv_cache_dtype + ", n_kv=" + std::to_string(n_kv_lookup) +
         ", head_dim=" + std::to_string(head_dim) + ", window=" + std::to_string(window_size);
}

// ---------------------------------------------------------------- context

ContextAttentionTable::ContextAttentionTable(const Table& table, std::shared_ptr<const Sol> sol,
                                             const std::string& name)
    : name_(name), sol_(std::move(sol)) {
  const Columns c(table, false);
  std::map<AttentionSliceKey, std::vector<GridPoint>> points;
  for (std::size_t r = 0; r < table.num_rows(); ++r) {
    const std::int64_t heads = table.GetInt(r, c.heads);
    AttentionSliceKey key{table.GetString(r, c.attn_dtype), table.GetString(r, c.kv_dtype),
                          KvLookup(heads, table.GetInt(r, c.kv_heads)), table.GetInt(r, c.head_dim),
                          c.window ? table.GetInt(r, *c.window) : 0};
    GridPoint p;
    p.coords = {static_cast<double>(heads), table.GetDouble(r, c.isl), table.GetDouble(r, c.batch)};
    p.latency_ms = table.GetDouble(r, c.latency);
    if (c.power) p.power_w = PowerCell(table.GetDouble(r, *c.power));
    points[key].push_back(std::move(p));
  }
  for (auto& [key, pts] : points) {
    GridOptions o;
    o.name = SliceName(name_, key);
    o.axis_names = {"num_heads", "seq", "batch"};
    o.transform_axis = 1;
    std::shared_ptr<const Sol> s = sol_;
    GridSolFn fn = [s, key](std::span<const double> x) {
      return s->ContextAttentionMs(x[2], x[1], 0, x[0], KvHeads(key.n_kv_lookup, x[0]),
                                   static_cast<double>(key.head_dim), static_cast<double>(key.window_size),
                                   key.attn_dtype, key.kv_cache_dtype);
    };
    slices_.emplace(key, Grid(std::move(o), std::move(pts), std::move(fn)));
  }
}

double ContextAttentionTable::SolMs(const ContextAttentionQuery& q) const {
  return sol_->ContextAttentionMs(static_cast<double>(q.batch), static_cast<double>(q.seq), 0,
                                  static_cast<double>(q.num_heads), static_cast<double>(q.num_kv_heads),
                                  static_cast<double>(q.head_dim), static_cast<double>(q.window_size), q.attn_dtype,
                                  q.kv_cache_dtype);
}

Estimate ContextAttentionTable::Query(const ContextAttentionQuery& q) const {
  sol_->PeakFlops(FmhaQuant(q.attn_dtype).flops_key);  // MissingSystemFlopsError before any lookup
  const AttentionSliceKey key{q.attn_dtype, q.kv_cache_dtype, KvLookup(q.num_heads, q.num_kv_heads), q.head_dim,
                              q.window_size};
  const double x[3] = {static_cast<double>(q.num_heads), static_cast<double>(q.seq), static_cast<double>(q.batch)};
  const auto it = slices_.find(key);
  if (it == slices_.end()) {
    NoSlice(name_, key, slices_,
            "{num_heads=" + std::to_string(q.num_heads) + ", seq=" + std::to_string(q.seq) +
                ", batch=" + std::to_string(q.batch) + "}");
  }
  return it->second.Query(std::span<const double>(x, 3));
}

// ---------------------------------------------------------------- generation

GenerationAttentionTable::GenerationAttentionTable(const Table& table, std::shared_ptr<const Sol> sol,
                                                   const std::string& name, bool clamp_to_sol)
    : name_(name), sol_(std::move(sol)) {
  const Columns c(table, true);
  std::map<AttentionSliceKey, std::vector<GridPoint>> points;
  for (std::size_t r = 0; r < table.num_rows(); ++r) {
    const std::int64_t heads = table.GetInt(r, c.heads);
    AttentionSliceKey key{"", table.GetString(r, c.kv_dtype), KvLookup(heads, table.GetInt(r, c.kv_heads)),
                          table.GetInt(r, c.head_dim), c.window ? table.GetInt(r, *c.window) : 0};
    GridPoint p;
    p.coords = {static_cast<double>(heads), table.GetDouble(r, c.batch),
                table.GetDouble(r, c.isl) + table.GetDouble(r, *c.step)};
    p.latency_ms = table.GetDouble(r, c.latency);
    if (c.power) p.power_w = PowerCell(table.GetDouble(r, *c.power));
    points[key].push_back(std::move(p));
  }
  for (auto& [key, pts] : points) {
    GridOptions o;
    o.name = SliceName(name_, key);
    o.axis_names = {"num_heads", "batch", "seq"};
    std::shared_ptr<const Sol> s = sol_;
    GridSolFn fn = [s, key](std::span<const double> x) {
      return s->GenerationAttentionMs(x[1], x[2], x[0], KvHeads(key.n_kv_lookup, x[0]),
                                      static_cast<double>(key.head_dim), static_cast<double>(key.window_size),
                                      key.kv_cache_dtype);
    };
    if (clamp_to_sol) {
      for (auto& p : pts) p.latency_ms = std::max(p.latency_ms, fn(p.coords));
    }
    slices_.emplace(key, Grid(std::move(o), std::move(pts), std::move(fn)));
  }
}

double GenerationAttentionTable::SolMs(const GenerationAttentionQuery& q) const {
  return sol_->GenerationAttentionMs(static_cast<double>(q.batch), static_cast<double>(q.seq),
                                     static_cast<double>(q.num_heads), static_cast<double>(q.num_kv_heads),
                                     static_cast<double>(q.head_dim), static_cast<double>(q.window_size),
                                     q.kv_cache_dtype);
}

const Grid& GenerationAttentionTable::Slice(const GenerationAttentionQuery& q) const {
  const AttentionSliceKey key{"", q.kv_cache_dtype, KvLookup(q.num_heads, q.num_kv_heads), q.head_dim, q.window_size};
  const auto it = slices_.find(key);
  if (it == slices_.end()) {
    NoSlice(name_, key, slices_,
            "{num_heads=" + std::to_string(q.num_heads) + ", batch=" + std::to_string(q.batch) +
                ", seq=" + std::to_string(q.seq) + "}");
  }
  return it->second;
}

Estimate GenerationAttentionTable::QueryPoint(const GenerationAttentionQuery& q) const {
  const Grid& g = Slice(q);
  const double x[3] = {static_cast<double>(q.num_heads), static_cast<double>(q.batch), static_cast<double>(q.seq)};
  return g.Query(std::span<const double>(x, 3));
}

Estimate GenerationAttentionTable::Query(const GenerationAttentionQuery& q) const {
  const Grid& g = Slice(q);
  const double lo = std::floor(0.9 * static_cast<double>(q.seq));
  const double hi = std::floor(1.1 * static_cast<double>(q.seq));
  double lat = 0, energy = 0;
  bool has_power = true;
  EstimateSource source = EstimateSource::kSilicon;
  for (int i = 0; i < 5; ++i) {
    const double s = std::max(1.0, std::floor(lo + i * (hi - lo) / 4.0));
    const double x[3] = {static_cast<double>(q.num_heads), static_cast<double>(q.batch), s};
    const Estimate e = g.Query(std::span<const double>(x, 3));
    lat += e.latency_ms;
    has_power = has_power && e.power_w.has_value();
    energy += e.power_w.value_or(0) * e.latency_ms;
    source = std::max(source, e.source);
  }
  Estimate out;
  out.latency_ms = lat / 5;
  if (has_power) out.power_w = energy / lat;  // mean energy / mean latency
  out.source = source;
  const double x[3] = {static_cast<double>(q.num_heads), static_cast<double>(q.batch), static_cast<double>(q.seq)};
  out.sol_fraction = g.Sol(std::span<const double>(x, 3)) / out.latency_ms;
  return out;
}

}  // namespace servecast::perfdb
