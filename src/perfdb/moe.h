#pragma once

// The MoE expert-compute table `moe_perf` as exact-shape 1-D curves (AIC §1.3,
// docs/perfdb.md, "MoE, collective and compute_scale tables"):
//   key  (moe_dtype, distribution, topk, num_experts, hidden_size, inter_size,
//         moe_tp_size, moe_ep_size), matched exactly;
//   axis num_tokens, raw lerp inside the sweep (AxisCurve), util-hold with the MoE
//        SOL beyond it (k_tail = 1).
// A distribution with no slice falls back to the balanced one ("uniform" and
// "balanced" name the same routing). A curve of one point queried below that
// point is a miss (there is nothing to hold from on that side).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/table.h"
#include "perfdb/grid.h"
#include "perfdb/perf_database.h"
#include "perfdb/sol.h"

namespace servecast::perfdb {

struct MoeSliceKey {
  std::string moe_dtype;
  std::string distribution;  // as stored: "balanced", "power_law_1.01", ...
  std::int64_t topk = 0;
  std::int64_t num_experts = 0;
  std::int64_t hidden_size = 0;
  std::int64_t inter_size = 0;
  std::int64_t moe_tp_size = 1;
  std::int64_t moe_ep_size = 1;
  auto operator<=>(const MoeSliceKey&) const = default;
  // "moe_dtype=fp8, distribution=balanced, topk=8, E=256, hidden=7168, inter=2048, tp=1, ep=8"
  std::string ToString() const;
};

struct MoeQuery {
  std::int64_t num_tokens = 1;
  std::int64_t hidden_size = 0;
  std::int64_t inter_size = 0;
  std::int64_t topk = 1;
  std::int64_t num_experts = 1;
  std::int64_t moe_tp_size = 1;
  std::int64_t moe_ep_size = 1;
  std::string moe_dtype = "bfloat16";
  std::string distribution = "uniform";  // "uniform"/"balanced", "power_law_1.01", "power_law_1.2"
};

// One exact-shape curve over num_tokens.
struct MoeSlice {
  bool gated = true;              // false when the rows' kernel_source says "nongated" (SOL with 2 projections)
  std::vector<GridPoint> points;  // sorted by num_tokens, first row per token count
  AxisCurve::SolFn sol;           // MoE SOL (ms) at a token count for this key
  AxisCurve curve;
};

class MoeTable {
 public:
  // Columns by name: moe_dtype, num_tokens, hidden_size, inter_size, topk,
  // num_experts, moe_tp_size, moe_ep_size, distribution, latency; optional
  // kernel_source and power. Throws DataError when a needed column is missing.
  MoeTable(const Table& table, std::shared_ptr<const Sol> sol, const std::string& name = "moe_perf");
  static MoeTable FromLoaded(const LoadedTable& loaded, std::shared_ptr<const Sol> sol) {
    return MoeTable(loaded.table, std::move(sol), loaded.name);
  }

  // MissingSystemFlopsError when the system lacks the dtype's peak rate (before
  // any lookup); InterpolationMissError when no slice has the shape (naming the
  // slices of the same dtype and shape that exist), when a singleton curve is
  // queried below its point, or when the curve cannot anchor a hold.
  Estimate Query(const MoeQuery& q) const;
  // The slice key the query resolves to, after the distribution fallback.
  // Throws InterpolationMissError like Query when there is none.
  const MoeSliceKey& ResolveKey(const MoeQuery& q) const;
  double SolMs(const MoeQuery& q) const;  // SOL at the query, gated unless its slice is non-gated

  const std::map<MoeSliceKey, MoeSlice>& slices() const { return slices_; }
  const std::string& name() const { return name_; }

 private:
  const std::pair<const MoeSliceKey, MoeSlice>& Find(const MoeQuery& q) const;
  std::string name_;
  std::shared_ptr<const Sol> sol_;
  std::map<MoeSliceKey, MoeSlice> slices_;
};

}  // namespace servecast::perfdb
