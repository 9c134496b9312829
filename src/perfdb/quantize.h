#pragma once

// The activation-quantization table `computescale_perf` (fp8 compute_scale) as
// a 2-D raw Grid over (m, k) (AIC §1.3, docs/perfdb.md, "MoE, collective and compute_scale tables"):
//   key  quant_dtype;
//   axes m (outer), k (inner), raw blending inside the envelope;
//   beyond the envelope the query is clamped per axis to [min, max] of its slice
//   and the latency of the clamped point is held FLAT (source extrapolated).
// Zero latencies are legal rows. sol_fraction = SOL(query) / latency, and 0 when
// the latency is 0 (the fraction is undefined there).
// SOL: one read of the bf16 input, MemMs(2 m k).
//
// `scale_matrix_perf` (the static-quant scaling of fp8_static inputs) is the
// same 2-D raw Grid over (m, k) keyed by quant_dtype, except beyond the envelope:
// the clamped point's latency is scaled by the SOL ratio,
//   latency(q) = latency(clamped) * SOL(q) / SOL(clamped),  SOL = 2 m k / mem_bw
// (AIC §1.3), source extrapolated. A zero leaf stays zero.

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

// Slices of a quant_dtype-keyed (m, k) table and their envelopes (shared by the
// two quantize tables).
struct QuantizeGrids {
  std::string name;
  std::map<std::string, Grid> slices;
  std::map<std::string, std::array<double, 4>> envelopes;  // per slice: m min, m max, k min, k max
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
  const std::map<std::string, Grid>& slices() const { return grids_.slices; }

 private:
  std::shared_ptr<const Sol> sol_;
  QuantizeGrids grids_;
};

using ScaleMatrixQuery = ComputeScaleQuery;

class ScaleMatrixTable {
 public:
  // Columns by name: quant_dtype, m, k, latency; optional power.
  ScaleMatrixTable(const Table& table, std::shared_ptr<const Sol> sol, const std::string& name = "scale_matrix_perf");
  static ScaleMatrixTable FromLoaded(const LoadedTable& loaded, std::shared_ptr<const Sol> sol) {
    return ScaleMatrixTable(loaded.table, std::move(sol), loaded.name);
  }
  // InterpolationMissError when no slice has the quant (naming those that exist)
  // or the grid cannot resolve the clamped point.
  Estimate Query(const ScaleMatrixQuery& q) const;
  double SolMs(const ScaleMatrixQuery& q) const;
  const std::map<std::string, Grid>& slices() const { return grids_.slices; }

 private:
  std::shared_ptr<const Sol> sol_;
  QuantizeGrids grids_;
};

}  // namespace servecast::perfdb
