#pragma once

// The activation-quantization table `computescale_perf` (fp8 compute_scale) as
// a 2-D raw Grid over (m, k) (AIC §1.3, docs/perfdb_curves.md):
//   key  quant_dtype;
//   axes m (outer), k (inner), raw blending inside the envelope;
//   beyond the envelope the query is clamped per axis to [min, max] of its slice
//   and the latency of the clamped point is held FLAT (source extrapolated).
// Zero latencies are legal rows. sol_fraction = SOL(query) / latency, and 0 when
// the latency is 0 (the fraction is undefined there).
// SOL: one read of the bf16 input, MemMs(2 m k).

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/table.h"
#include "perfdb/grid.h"
#include "perfdb/perf_database.h"
#include "perfdb/sol.h"

namespace servecast::perfdb {

struct ComputeScaleQuery {
  std::int64_t m = 1;
  std::int64_t k = 1;
  std::string quant_dtype = "fp8";
};

class ComputeScaleTable {
 public:
  // Columns by name: quant_dtype, m, k, latency; optional power.
  ComputeScaleTable(const Table& table, std::shared_ptr<const Sol> sol, const std::string& name = "computescale_perf");
  static ComputeScaleTable FromLoaded(const LoadedTable& loaded, std::shared_ptr<const Sol> sol) {
    return ComputeScaleTable(loaded.table, std::move(sol), loaded.name);
  }
  // InterpolationMissError when no slice has the quant (naming those that exist)
  // or the grid cannot resolve the clamped point.
  Estimate Query(const ComputeScaleQuery& q) const;
  double SolMs(const ComputeScaleQuery& q) const;
  const std::map<std::string, Grid>& slices() const { return slices_; }

 private:
  std::string name_;
  std::shared_ptr<const Sol> sol_;
  std::map<std::string, Grid> slices_;
  std::map<std::string, std::array<double, 4>> envelopes_;  // per slice: m min, m max, k min, k max
};

}  // namespace servecast::perfdb
