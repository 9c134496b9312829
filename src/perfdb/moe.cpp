#include "perfdb/moe.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "core/error.h"
#include "core/value.h"
#include "tables/table_spec.h"

namespace servecast::perfdb {
namespace {

// Columns of moe_perf: the key columns of its declaration (tables/table_spec.cpp).
struct Columns {
  std::size_t dtype, tokens, hidden, inter, topk, experts, tp, ep, distribution, latency;
  std::optional<std::size_t> kernel_source, power;
  explicit Columns(const Table& t) : Columns(t, tables::GetTableSpec("moe_perf")) {}

 private:
  Columns(const Table& t, const tables::TableSpec& spec)
      : dtype(spec.KeyIndex(t, "moe_dtype")),
        tokens(spec.KeyIndex(t, "num_tokens")),
        hidden(spec.KeyIndex(t, "hidden_size")),
        inter(spec.KeyIndex(t, "inter_size")),
        topk(spec.KeyIndex(t, "topk")),
        experts(spec.KeyIndex(t, "num_experts")),
        tp(spec.KeyIndex(t, "moe_tp_size")),
        ep(spec.KeyIndex(t, "moe_ep_size")),
        distribution(spec.KeyIndex(t, "distribution")),
        latency(t.ColumnIndex("latency")),
        kernel_source(t.FindColumn("kernel_source")),
        power(t.FindColumn("power")) {}
};

bool IsBalanced(const std::string& d) {
  return d == "uniform" || d == "balanced";
}

std::string SliceName(const std::string& table, const MoeSliceKey& key) {
  return table + "{" + key.ToString() + "}";
}

MoeSliceKey KeyOf(const MoeQuery& q, const std::string& distribution) {
  return MoeSliceKey{q.moe_dtype,   distribution, q.topk,        q.num_experts,
                     q.hidden_size, q.inter_size, q.moe_tp_size, q.moe_ep_size};
}

AxisCurve::SolFn MakeSol(std::shared_ptr<const Sol> sol, const MoeSliceKey& key, bool gated) {
  return [sol = std::move(sol), key, gated](double tokens) {
    return sol->MoeMs(key.moe_dtype, tokens, static_cast<double>(key.hidden_size), static_cast<double>(key.inter_size),
                      static_cast<double>(key.topk), static_cast<double>(key.num_experts),
                      static_cast<double>(key.moe_tp_size), static_cast<double>(key.moe_ep_size), gated);
  };
}

}  // namespace

std::string MoeSliceKey::ToString() const {
  return "moe_dtype=" + moe_dtype + ", distribution=" + distribution + ", topk=" + std::to_string(topk) +
         ", E=" + std::to_string(num_experts) + ", hidden=" + std::to_string(hidden_size) +
         ", inter=" + std::to_string(inter_size) + ", tp=" + std::to_string(moe_tp_size) +
         ", ep=" + std::to_string(moe_ep_size);
}

MoeTable::MoeTable(const Table& table, std::shared_ptr<const Sol> sol, const std::string& name)
    : name_(name), sol_(std::move(sol)) {
  const Columns c(table);
  struct Pending {
    bool gated = true;
    std::vector<GridPoint> points;
  };
  std::map<MoeSliceKey, Pending> pending;
  for (std::size_t r = 0; r < table.num_rows(); ++r) {
    MoeSliceKey key{table.GetString(r, c.dtype), table.GetString(r, c.distribution),
                    table.GetInt(r, c.topk),     table.GetInt(r, c.experts),
                    table.GetInt(r, c.hidden),   table.GetInt(r, c.inter),
                    table.GetInt(r, c.tp),       table.GetInt(r, c.ep)};
    auto [it, inserted] = pending.try_emplace(std::move(key));
    if (inserted && c.kernel_source) {
      it->second.gated = !tables::IsNongatedMoeKernel(table.GetString(r, *c.kernel_source));
    }
    GridPoint p;
    p.coords = {table.GetDouble(r, c.tokens)};
    p.latency_ms = table.GetDouble(r, c.latency);
    if (c.power) p.power_w = PowerCell(table.GetDouble(r, *c.power));
    it->second.points.push_back(std::move(p));
  }
  for (auto& [key, pend] : pending) {
    // Sorted, first row per token count (the rule AxisCurve applies too).
    std::stable_sort(pend.points.begin(), pend.points.end(),
                     [](const GridPoint& a, const GridPoint& b) { return a.coords[0] < b.coords[0]; });
    pend.points.erase(std::unique(pend.points.begin(), pend.points.end(),
                                  [](const GridPoint& a, const GridPoint& b) { return a.coords[0] == b.coords[0]; }),
                      pend.points.end());
    AxisCurve::SolFn fn = MakeSol(sol_, key, pend.gated);
    AxisCurve curve(SliceName(name_, key), "num_tokens", pend.points, fn);
    slices_.emplace(key, MoeSlice{pend.gated, std::move(pend.points), std::move(fn), std::move(curve)});
  }
}

const std::pair<const MoeSliceKey, MoeSlice>& MoeTable::Find(const MoeQuery& q) const {
  auto it = slices_.find(KeyOf(q, q.distribution));
  if (it == slices_.end()) it = slices_.find(KeyOf(q, "balanced"));
  if (it == slices_.end()) it = slices_.find(KeyOf(q, "uniform"));
  if (it != slices_.end()) return *it;

  // Name what exists for this dtype and expert shape (any tp, ep, distribution).
  const MoeSliceKey want = KeyOf(q, q.distribution);
  std::string have;
  std::size_t shown = 0, same_shape = 0;
  for (const auto& [k, s] : slices_) {
    if (k.moe_dtype != q.moe_dtype || k.hidden_size != q.hidden_size || k.inter_size != q.inter_size ||
        k.topk != q.topk || k.num_experts != q.num_experts)
      continue;
    ++same_shape;
    if (shown++ < 12) have += (have.empty() ? "{" : "; {") + k.ToString() + "}";
  }
  if (same_shape > 12) have += "; ... (" + std::to_string(same_shape) + " in all)";
  if (have.empty()) {
    std::vector<std::string> dtypes;
    for (const auto& [k, s] : slices_) {
      if (std::find(dtypes.begin(), dtypes.end(), k.moe_dtype) == dtypes.end()) dtypes.push_back(k.moe_dtype);
    }
    have = "no slice of this dtype and expert shape; " + std::to_string(slices_.size()) + " slices, dtypes:";
    for (const auto& d : dtypes) have += " " + d;
  } else {
    have = "slices of this dtype and expert shape: " + have;
  }
  throw InterpolationMissError(SliceName(name_, want), "{num_tokens=" + std::to_string(q.num_tokens) + "}",
                               IsBalanced(q.distribution) ? "MoE data missing for this key"
                                                          : "MoE data missing for this key (and its balanced fallback)",
                               have);
}

const MoeSliceKey& MoeTable::ResolveKey(const MoeQuery& q) const {
  return Find(q).first;
}

double MoeTable::SolMs(const MoeQuery& q) const {
  bool gated = true;
  try {
    gated = Find(q).second.gated;
  } catch (const InterpolationMissError&) {
  }
  return MakeSol(sol_, KeyOf(q, q.distribution), gated)(static_cast<double>(q.num_tokens));
}

Estimate MoeTable::Query(const MoeQuery& q) const {
  sol_->PeakFlops(MoeQuant(q.moe_dtype).flops_key);  // MissingSystemFlopsError before any lookup
  const auto& [key, slice] = Find(q);
  const double x = static_cast<double>(q.num_tokens);
  if (slice.points.size() == 1 && x < slice.points.front().coords[0]) {
    throw InterpolationMissError(SliceName(name_, key), "{num_tokens=" + std::to_string(q.num_tokens) + "}",
                                 "singleton curve queried below its point",
                                 "num_tokens [" + FormatDouble(slice.points.front().coords[0]) + "], 1 leaf");
  }
  return slice.curve.Query(x);
}

}  // namespace servecast::perfdb
