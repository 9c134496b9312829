#pragma once

// Collective tables as 1-D curves over message_size (elements) (AIC §1.3,
// docs/perfdb.md, "MoE, collective and compute_scale tables"):
//   nccl_perf:              key (dtype, op, num_gpus), column nccl_dtype;
//   custom_allreduce_perf:  key (dtype, tp = num_gpus), column allreduce_dtype.
// Inside the sweep: raw lerp (AxisCurve). Beyond it: the util of the boundary
// point held with the linear proxy SOL (Sol::NcclMs / Sol::CustomAllReduceMs,
// both proportional to the message size).
// 16-bit dtype names ("half", "float16", "bfloat16") are one key, stored as "half".
// Comm fan-out (AIC §1.6, always allowed): a GPU count above the largest
// collected for the (dtype, op) borrows that boundary slice. Its util at the
// query's message size is held against the proxy SOL at the query's GPU count,
//   latency = SOL(size, gpus_query) / util_boundary(size)
//           = latency_boundary(size) * SOL(size, gpus_query) / SOL(size, gpus_boundary),
// source extrapolated; CommEstimate::borrowed_from_gpus names the donor. The
// bandwidth change across the node boundary (Sol::P2pBandwidth) enters through
// the SOL ratio. A (dtype, op) with no slice at all is a CommGpusBeyondDataError
// (max_collected_gpus 0); a count inside the collected range but not collected
// is an InterpolationMissError.
// HYBRID (QueryHybrid): the table first; a typed miss falls back to the
// util-empirical answer (QueryEmpirical) when the (dtype, op) has any slice.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/table.h"
#include "perfdb/empirical.h"
#include "perfdb/grid.h"
#include "perfdb/perf_database.h"
#include "perfdb/sol.h"

namespace servecast::perfdb {

// "half" for the 16-bit names, else the name unchanged.
std::string CanonicalCommDtype(const std::string& dtype);

struct CommSliceKey {
  std::string dtype;  // canonical
  std::string op;     // all_reduce, all_gather, reduce_scatter, alltoall
  std::int64_t num_gpus = 0;
  auto operator<=>(const CommSliceKey&) const = default;
  std::string ToString() const;  // "dtype=half, op=all_reduce, num_gpus=8"
};

// One curve over message_size.
struct CommSlice {
  std::vector<GridPoint> points;  // sorted by message_size, first row per size
  AxisCurve::SolFn sol;           // proxy SOL (ms) at a message size
  AxisCurve curve;
  // Util-empirical view of the same points (util = SOL / latency over
  // message_size), for the EMPIRICAL database mode.
  std::shared_ptr<const UtilGrid> util;
};

// The GPU count is above every count collected for this (dtype, op).
class CommGpusBeyondDataError : public InterpolationMissError {
 public:
  CommGpusBeyondDataError(const std::string& slice, const std::string& query, const std::string& covered,
                          std::int64_t max_collected_gpus)
      : InterpolationMissError(slice, query, "num_gpus above the largest collected", covered),
        max_collected_gpus_(max_collected_gpus) {}
  std::int64_t max_collected_gpus() const { return max_collected_gpus_; }

 private:
  std::int64_t max_collected_gpus_;
};

// An Estimate plus the donor of a comm fan-out.
struct CommEstimate : Estimate {
  std::optional<std::int64_t> borrowed_from_gpus;  // set when a boundary slice was borrowed
  // HYBRID only: the table's miss when the answer is the util-empirical fallback
  // (empty when the table answered).
  std::string silicon_miss;
};

struct NcclQuery {
  std::string op = "all_reduce";
  std::string dtype = "half";
  std::int64_t num_gpus = 2;
  double message_size = 0;  // elements
};

struct CustomAllReduceQuery {
  std::int64_t tp = 2;
  double message_size = 0;  // elements
  std::string dtype = "half";
};

// Shared by both tables: slices keyed (dtype, op, num_gpus) and the query rules.
class CommTable {
 public:
  const std::map<CommSliceKey, CommSlice>& slices() const { return slices_; }
  const std::string& name() const { return name_; }

 protected:
  CommTable() = default;
  // Throws ConfigError for num_gpus < 2, CommGpusBeyondDataError or
  // InterpolationMissError when no slice has the key.
  const CommSlice& Find(const CommSliceKey& key, double message_size) const;
  // The slice a query reads without throwing: the exact one, or, for a GPU count
  // above every count collected for its (dtype, op), the largest one (borrowed);
  // null when Find would throw for another reason. The search asks for the same
  // borrowed counts thousands of times: no exception on that expected path.
  struct Pick {
    const CommSlice* slice = nullptr;
    std::int64_t borrowed_from_gpus = 0;  // > 0: borrowed
  };
  Pick PickSlice(const CommSliceKey& key) const;
  // The key's own slice, or the boundary slice borrowed beyond the collected
  // GPU counts (see the fan-out rule above). `sol_at` is the proxy SOL (ms) of
  // (size, gpus) for the key's dtype and op.
  CommEstimate Resolve(const CommSliceKey& key, double message_size,
                       const std::function<double(double, std::int64_t)>& sol_at) const;
  // Util-empirical (AIC's EMPIRICAL mode): SOL(size, gpus) / util, the util from
  // the slice's UtilGrid at the size (the boundary slice's when num_gpus is above
  // every collected count). Source kExtrapolated when a slice was borrowed.
  CommEstimate ResolveEmpirical(const CommSliceKey& key, double message_size,
                                const std::function<double(double, std::int64_t)>& sol_at) const;
  // HYBRID: Resolve; on a typed miss (slice absent, or a curve that cannot
  // anchor the size) ResolveEmpirical when the (dtype, op) has any slice, with
  // silicon_miss set. When both fail: MissingDataError carrying both reasons;
  // a (dtype, op) with no slice at all rethrows the table's miss.
  CommEstimate ResolveHybrid(const CommSliceKey& key, double message_size,
                             const std::function<double(double, std::int64_t)>& sol_at) const;
  std::string name_;
  std::shared_ptr<const Sol> sol_;
  std::map<CommSliceKey, CommSlice> slices_;
};

class NcclTable : public CommTable {
 public:
  // Columns by name: nccl_dtype, op_name, num_gpus, message_size, latency; optional power.
  NcclTable(const Table& table, std::shared_ptr<const Sol> sol, const std::string& name = "nccl_perf");
  static NcclTable FromLoaded(const LoadedTable& loaded, std::shared_ptr<const Sol> sol) {
    return NcclTable(loaded.table, std::move(sol), loaded.name);
  }
  Estimate Query(const NcclQuery& q) const { return QueryWithDonor(q); }
  // As Query, naming the donor GPU count when the boundary slice was borrowed.
  CommEstimate QueryWithDonor(const NcclQuery& q) const;
  // EMPIRICAL mode: util-empirical over the slice's message sizes.
  CommEstimate QueryEmpirical(const NcclQuery& q) const;
  // HYBRID mode: QueryWithDonor, else QueryEmpirical (see ResolveHybrid).
  CommEstimate QueryHybrid(const NcclQuery& q) const;
  double SolMs(const NcclQuery& q) const;
};

class CustomAllReduceTable : public CommTable {
 public:
  // Columns by name: allreduce_dtype, num_gpus, message_size, latency; optional
  // power. Every row is an all_reduce (key op "all_reduce").
  CustomAllReduceTable(const Table& table, std::shared_ptr<const Sol> sol,
                       const std::string& name = "custom_allreduce_perf");
  static CustomAllReduceTable FromLoaded(const LoadedTable& loaded, std::shared_ptr<const Sol> sol) {
    return CustomAllReduceTable(loaded.table, std::move(sol), loaded.name);
  }
  Estimate Query(const CustomAllReduceQuery& q) const { return QueryWithDonor(q); }
  // As Query, naming the donor tp when the boundary slice was borrowed.
  CommEstimate QueryWithDonor(const CustomAllReduceQuery& q) const;
  // EMPIRICAL mode: util-empirical over the slice's message sizes.
  CommEstimate QueryEmpirical(const CustomAllReduceQuery& q) const;
  // HYBRID mode: QueryWithDonor, else QueryEmpirical (see ResolveHybrid).
  CommEstimate QueryHybrid(const CustomAllReduceQuery& q) const;
  double SolMs(const CustomAllReduceQuery& q) const;
};

}  // namespace servecast::perfdb
