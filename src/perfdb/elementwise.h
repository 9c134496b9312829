#pragma once

// The measured elementwise table `elementwise_perf` (docs/perfdb.md,
// "elementwise_perf"): slices keyed (op_name, dtype), each a 2-axis Grid over
// (hidden_size, num_tokens) with raw blending inside the sweep and util-hold
// against the memory roofline beyond it. The SOL of a row is the bytes the op
// moves in the slice's dtype (tables::ElementwiseCost, the collector's cost
// model) over peak bandwidth.
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

class ElementwiseTable {
 public:
  // Columns by name: op_name, the key columns of elementwise_perf's declaration
  // (dtype, num_tokens, hidden_size), latency; optional power. An op or dtype
  // without a cost model -> Error at load.
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
  double SolMs(const std::string& op, const std::string& dtype, double tokens, double width) const;
  const std::map<std::pair<std::string, std::string>, Grid>& slices() const { return slices_; }

 private:
  std::string name_;
  std::shared_ptr<const Sol> sol_;
  std::map<std::pair<std::string, std::string>, Grid> slices_;
  std::map<std::pair<std::string, std::string>, UtilGrid> utils_;  // one per slice
};

}  // namespace servecast::perfdb
