#pragma once

// The measured elementwise table `elementwise_perf` (docs/perfdb.md,
// "elementwise_perf"): slices keyed (op_name, dtype), each a 2-axis Grid over
// (hidden_size, num_tokens) with raw blending inside the sweep and util-hold
// against the memory roofline beyond it. The SOL of a row is the bytes the op
// moves (the collector's cost model, docs/kernels.md) over peak bandwidth.
// Util-empirical (EMPIRICAL mode, and HYBRID after a table miss): a UtilGrid per
// slice over (hidden_size, num_tokens), util = SOL / latency of each row.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "core/table.h"
#include "perfdb/empirical.h"
#include "perfdb/grid.h"
#include "perfdb/perf_database.h"
#include "perfdb/sol.h"

namespace servecast::perfdb {

// Bytes one call of `op` moves at (tokens, width): rmsnorm (2TH + H)·2,
// rmsnorm_residual (4TH + H)·2, silu_and_mul and residual_add 3TH·2,
// rotary_embedding and embedding 2TH·2 (bf16). Unknown op -> Error.
double ElementwiseBytes(const std::string& op, double tokens, double width);

class ElementwiseTable {
 public:
  // Columns by name: op_name, dtype, num_tokens, hidden_size, latency; optional power.
  ElementwiseTable(const Table& table, std::shared_ptr<const Sol> sol, const std::string& name = "elementwise_perf");
  static ElementwiseTable FromLoaded(const LoadedTable& loaded, std::shared_ptr<const Sol> sol) {
    return ElementwiseTable(loaded.table, std::move(sol), loaded.name);
  }
  bool Has(const std::string& op, const std::string& dtype) const { return slices_.count({op, dtype}) > 0; }
  // InterpolationMissError when the (op, dtype) slice is absent (naming those that
  // exist) or the grid cannot anchor the query.
  Estimate Query(const std::string& op, const std::string& dtype, double tokens, double width) const;
  // Util-empirical over the slice: SolMs(q) / util (UtilGrid rules, empirical.h);
  // source kSilicon (the caller tags it empirical), no power. The same miss as
  // Query when the slice is absent; EmpiricalNotAvailableError when it has no
  // usable sample.
  Estimate QueryEmpirical(const std::string& op, const std::string& dtype, double tokens, double width) const;
  double SolMs(const std::string& op, double tokens, double width) const;
  const std::map<std::pair<std::string, std::string>, Grid>& slices() const { return slices_; }

 private:
  std::string name_;
  std::shared_ptr<const Sol> sol_;
  std::map<std::pair<std::string, std::string>, Grid> slices_;
  std::map<std::pair<std::string, std::string>, UtilGrid> utils_;  // one per slice
};

}  // namespace servecast::perfdb
