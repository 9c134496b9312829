#include "perfdb/comm.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <utility>

#include "core/error.h"
#include "core/value.h"
#include "tables/table_spec.h"

namespace servecast::perfdb {
namespace {

std::string SliceName(const std::string& table, const CommSliceKey& key) {
  return table + "{" + key.ToString() + "}";
}

std::string SizeQuery(double message_size) {
  return "{message_size=" + FormatDouble(message_size) + "}";
}

using SolFactory = std::function<AxisCurve::SolFn(const CommSliceKey&)>;

// The slices of a collective table; its key columns (the dtype column named by
// the declaration `spec`, num_gpus, message_size) resolved through the spec.
std::map<CommSliceKey, CommSlice> BuildSlices(const Table& t, const std::string& name, const tables::TableSpec& spec,
                                              const std::string& dtype_column, std::optional<std::size_t> op_col,
                                              const SolFactory& make_sol) {
  const std::size_t dtype_col = spec.KeyIndex(t, dtype_column), gpus = spec.KeyIndex(t, "num_gpus"),
                    size = spec.KeyIndex(t, "message_size"), latency = t.ColumnIndex("latency");
  const std::optional<std::size_t> power = t.FindColumn("power");
  std::map<CommSliceKey, std::vector<GridPoint>> points;
  for (std::size_t r = 0; r < t.num_rows(); ++r) {
    CommSliceKey key{CanonicalCommDtype(t.GetString(r, dtype_col)),
                     op_col ? t.GetString(r, *op_col) : std::string("all_reduce"), t.GetInt(r, gpus)};
    GridPoint p;
    p.coords = {t.GetDouble(r, size)};
    p.latency_ms = t.GetDouble(r, latency);
    if (power) p.power_w = PowerCell(t.GetDouble(r, *power));
    points[key].push_back(std::move(p));
  }
  std::map<CommSliceKey, CommSlice> slices;
  for (auto& [key, pts] : points) {
    std::stable_sort(pts.begin(), pts.end(),
                     [](const GridPoint& a, const GridPoint& b) { return a.coords[0] < b.coords[0]; });
    pts.erase(std::unique(pts.begin(), pts.end(),
                          [](const GridPoint& a, const GridPoint& b) { return a.coords[0] == b.coords[0]; }),
              pts.end());
    AxisCurve::SolFn fn = make_sol(key);
    AxisCurve curve(SliceName(name, key), "message_size", pts, fn);
    std::vector<UtilSample> samples;
    samples.reserve(pts.size());
    for (const GridPoint& p : pts) samples.push_back(UtilSample{{p.coords[0]}, fn(p.coords[0]) / p.latency_ms});
    auto util = std::make_shared<const UtilGrid>(SliceName(name, key), std::vector<std::string>{"message_size"},
                                                 std::move(samples));
    slices.emplace(key, CommSlice{std::move(pts), std::move(fn), std::move(curve), std::move(util)});
  }
  return slices;
}

}  // namespace

std::string CanonicalCommDtype(const std::string& dtype) {
  if (dtype == "half" || dtype == "float16" || dtype == "bfloat16") return "half";
  return dtype;
}

std::string CommSliceKey::ToString() const {
  return "dtype=" + dtype + ", op=" + op + ", num_gpus=" + std::to_string(num_gpus);
}

const CommSlice& CommTable::Find(const CommSliceKey& key, double message_size) const {
  if (key.num_gpus < 2) {
    throw ConfigError(name_ + "{" + key.ToString() + "}: a collective needs at least 2 GPUs");
  }
  const auto it = slices_.find(key);
  if (it != slices_.end()) return it->second;
  std::string counts;
  std::int64_t max_gpus = 0;
  for (const auto& [k, s] : slices_) {
    if (k.dtype != key.dtype || k.op != key.op) continue;
    counts += (counts.empty() ? "" : ", ") + std::to_string(k.num_gpus);
    max_gpus = std::max(max_gpus, k.num_gpus);
  }
  if (max_gpus > 0 && key.num_gpus > max_gpus) {
    throw CommGpusBeyondDataError(SliceName(name_, key), SizeQuery(message_size),
                                  "num_gpus collected for dtype=" + key.dtype + ", op=" + key.op + ": " + counts,
                                  max_gpus);
  }
  if (max_gpus == 0) {
    std::string covered = "no slice for dtype=" + key.dtype + ", op=" + key.op + "; slices:";
    for (const auto& [k, s] : slices_) covered += " {" + k.ToString() + "}";
    if (slices_.empty()) covered += " none";
    throw CommGpusBeyondDataError(SliceName(name_, key), SizeQuery(message_size), covered, 0);
  }
  throw InterpolationMissError(SliceName(name_, key), SizeQuery(message_size), "no slice with this key",
                               "num_gpus collected for dtype=" + key.dtype + ", op=" + key.op + ": " + counts);
}

CommTable::Pick CommTable::PickSlice(const CommSliceKey& key) const {
  if (key.num_gpus < 2) return {};
  if (const auto it = slices_.find(key); it != slices_.end()) return {&it->second, 0};
  std::int64_t max_gpus = 0;
  for (const auto& [k, s] : slices_)
    if (k.dtype == key.dtype && k.op == key.op) max_gpus = std::max(max_gpus, k.num_gpus);
  if (max_gpus == 0 || key.num_gpus <= max_gpus) return {};
  CommSliceKey donor = key;
  donor.num_gpus = max_gpus;
  return {&slices_.at(donor), max_gpus};
}

CommEstimate CommTable::Resolve(const CommSliceKey& key, double message_size,
                                const std::function<double(double, std::int64_t)>& sol_at) const {
  CommEstimate out;
  const Pick pick = PickSlice(key);
  if (!pick.slice) (void)Find(key, message_size);  // throws the miss, naming what was collected
  static_cast<Estimate&>(out) = pick.slice->curve.Query(message_size);
  if (pick.borrowed_from_gpus == 0) return out;
  const std::int64_t donor_gpus = pick.borrowed_from_gpus;
  const double sol_donor = sol_at(message_size, donor_gpus), sol_query = sol_at(message_size, key.num_gpus);
  if (!(sol_donor > 0)) {
    throw InterpolationMissError(SliceName(name_, key), SizeQuery(message_size),
                                 "non-positive SOL at the borrowed boundary slice",
                                 "boundary num_gpus=" + std::to_string(donor_gpus));
  }
  // lat = SOL_q / util_b with util_b = SOL_b / lat_b.
  out.latency_ms *= sol_query / sol_donor;
  out.sol_fraction = out.latency_ms > 0 ? sol_query / out.latency_ms : 0;
  out.source = EstimateSource::kExtrapolated;
  out.borrowed_from_gpus = donor_gpus;
  return out;
}

CommEstimate CommTable::ResolveEmpirical(const CommSliceKey& key, double message_size,
                                         const std::function<double(double, std::int64_t)>& sol_at) const {
  CommEstimate out;
  const Pick pick = PickSlice(key);
  const CommSlice* slice = pick.slice ? pick.slice : &Find(key, message_size);  // Find throws the miss
  if (pick.borrowed_from_gpus > 0) {
    out.borrowed_from_gpus = pick.borrowed_from_gpus;
    out.source = EstimateSource::kExtrapolated;
  }
  const double q[1] = {message_size};
  const double util = slice->util->Lookup(q).util;
  const double sol = sol_at(message_size, key.num_gpus);
  out.latency_ms = sol / util;
  out.sol_fraction = out.latency_ms > 0 ? sol / out.latency_ms : 0;
  return out;
}

CommEstimate CommTable::ResolveHybrid(const CommSliceKey& key, double message_size,
                                      const std::function<double(double, std::int64_t)>& sol_at) const {
  try {
    return Resolve(key, message_size, sol_at);
  } catch (const MissingDataError& miss) {
    const bool any = std::any_of(slices_.begin(), slices_.end(),
                                 [&](const auto& e) { return e.first.dtype == key.dtype && e.first.op == key.op; });
    if (!any) throw;
    CommEstimate out;
    try {
      out = ResolveEmpirical(key, message_size, sol_at);
    } catch (const MissingDataError& empirical) {
      throw MissingDataError(SliceName(name_, key) + " at " + SizeQuery(message_size) + ": silicon: " + miss.what() +
                             "; empirical: " + empirical.what());
    }
    out.silicon_miss = miss.what();
    return out;
  }
}

// ---------------------------------------------------------------- nccl

CommEstimate NcclTable::QueryHybrid(const NcclQuery& q) const {
  const CommSliceKey key{CanonicalCommDtype(q.dtype), q.op, q.num_gpus};
  return ResolveHybrid(key, q.message_size, [this, &key](double size, std::int64_t gpus) {
    return sol_->NcclMs(key.op, size, static_cast<int>(gpus), key.dtype);
  });
}

NcclTable::NcclTable(const Table& table, std::shared_ptr<const Sol> sol, const std::string& name) {
  name_ = name;
  sol_ = std::move(sol);
  std::shared_ptr<const Sol> s = sol_;
  slices_ = BuildSlices(table, name_, tables::GetTableSpec("nccl_perf"), "nccl_dtype", table.ColumnIndex("op_name"),
                        [s](const CommSliceKey& key) -> AxisCurve::SolFn {
                          return [s, key](double size) {
                            return s->NcclMs(key.op, size, static_cast<int>(key.num_gpus), key.dtype);
                          };
                        });
}

CommEstimate NcclTable::QueryEmpirical(const NcclQuery& q) const {
  const CommSliceKey key{CanonicalCommDtype(q.dtype), q.op, q.num_gpus};
  return ResolveEmpirical(key, q.message_size, [this, &key](double size, std::int64_t gpus) {
    return sol_->NcclMs(key.op, size, static_cast<int>(gpus), key.dtype);
  });
}

double NcclTable::SolMs(const NcclQuery& q) const {
  return sol_->NcclMs(q.op, q.message_size, static_cast<int>(q.num_gpus), q.dtype);
}

CommEstimate NcclTable::QueryWithDonor(const NcclQuery& q) const {
  const CommSliceKey key{CanonicalCommDtype(q.dtype), q.op, q.num_gpus};
  return Resolve(key, q.message_size, [this, &key](double size, std::int64_t gpus) {
    return sol_->NcclMs(key.op, size, static_cast<int>(gpus), key.dtype);
  });
}

// ---------------------------------------------------------------- custom all-reduce

CustomAllReduceTable::CustomAllReduceTable(const Table& table, std::shared_ptr<const Sol> sol,
                                           const std::string& name) {
  name_ = name;
  sol_ = std::move(sol);
  std::shared_ptr<const Sol> s = sol_;
  slices_ = BuildSlices(table, name_, tables::GetTableSpec("custom_allreduce_perf"), "allreduce_dtype", std::nullopt,
                        [s](const CommSliceKey& key) -> AxisCurve::SolFn {
                          return [s, key](double size) {
                            return s->CustomAllReduceMs(size, static_cast<int>(key.num_gpus), key.dtype);
                          };
                        });
}

double CustomAllReduceTable::SolMs(const CustomAllReduceQuery& q) const {
  return sol_->CustomAllReduceMs(q.message_size, static_cast<int>(q.tp), q.dtype);
}

CommEstimate CustomAllReduceTable::QueryWithDonor(const CustomAllReduceQuery& q) const {
  const CommSliceKey key{CanonicalCommDtype(q.dtype), "all_reduce", q.tp};
  return Resolve(key, q.message_size, [this, &key](double size, std::int64_t tp) {
    return sol_->CustomAllReduceMs(size, static_cast<int>(tp), key.dtype);
  });
}

CommEstimate CustomAllReduceTable::QueryHybrid(const CustomAllReduceQuery& q) const {
  const CommSliceKey key{CanonicalCommDtype(q.dtype), "all_reduce", q.tp};
  return ResolveHybrid(key, q.message_size, [this, &key](double size, std::int64_t tp) {
    return sol_->CustomAllReduceMs(size, static_cast<int>(tp), key.dtype);
  });
}

CommEstimate CustomAllReduceTable::QueryEmpirical(const CustomAllReduceQuery& q) const {
  const CommSliceKey key{CanonicalCommDtype(q.dtype), "all_reduce", q.tp};
  return ResolveEmpirical(key, q.message_size, [this, &key](double size, std::int64_t tp) {
    return sol_->CustomAllReduceMs(size, static_cast<int>(tp), key.dtype);
  });
}

}  // namespace servecast::perfdb
