#pragma once

// The generic reader of a declared table (tables/table_spec.h, EstimatorRead): a
// table whose declaration says how the estimator reads it needs no reader of its
// own. Its rows are cut into slices by exact match on the read's slice keys; each
// slice is a Grid (perfdb/grid.h) over the read's axes, blended raw or in sqrt
// space per axis, with util samples (SOL / latency) for the util-empirical modes
// (perfdb/empirical.h). The SOL at a coordinate is Sol::Ms of the declared
// roofline at the slice's key values and the coordinate. Rows whose coordinates
// repeat in a slice: the first wins.

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/params.h"
#include "core/table.h"
#include "perfdb/empirical.h"
#include "perfdb/grid.h"
#include "perfdb/modes.h"
#include "perfdb/perf_database.h"
#include "perfdb/sol.h"
#include "tables/table_spec.h"

namespace servecast::perfdb {

class DeclaredTable {
 public:
  // One value per slice key, in the read's order, typed as declared (integers
  // order numerically).
  using SliceKey = std::vector<Value>;
  // Error when the declaration has no valid estimator read; DataError when a
  // column is missing; the roofline's Error for a row it refuses (an unknown dtype).
  DeclaredTable(const Table& table, const tables::TableSpec& spec, std::shared_ptr<const Sol> sol,
                const std::string& name = "");
  // The declaration of loaded.name.
  static DeclaredTable FromLoaded(const LoadedTable& loaded, std::shared_ptr<const Sol> sol);

  const tables::TableSpec& spec() const { return spec_; }
  const std::string& name() const { return name_; }
  // `key` gives every slice key and axis column of the read (Params' Error names
  // the one it lacks). The slice that answers it: its own, else the fallback's
  // (EstimatorRead::fallback).
  SliceKey RowsSlice(const Params& key) const;
  // InterpolationMissError naming the slices there are, or the grid's miss. The
  // SOL fraction is against the query's own key.
  Estimate Query(const Params& key) const;
  // Util-empirical over the rows' slice: latency = SOL(rows' key) / util; same
  // slice miss; EmpiricalNotAvailableError without usable samples.
  Estimate QueryEmpirical(const Params& key) const;
  double SolMs(const Params& key) const;
  // The grids by slice (with EstimatorRead::parts, the part's value last).
  const std::map<SliceKey, Grid>& slices() const { return grids_; }
  // "op_name=x, dtype=y" for a slice key.
  std::string SliceText(const SliceKey& key) const;

 private:
  // The grids answering `key` (one, or one per part), `rows` set to its slice;
  // InterpolationMissError naming the slices when none does.
  std::vector<SliceKey> Parts(const Params& key, SliceKey& rows) const;
  std::vector<double> Coords(const Params& key) const;
  const tables::TableSpec& spec_;
  std::string name_;
  std::shared_ptr<const Sol> sol_;
  std::set<SliceKey> slice_set_;    // the slices (without a part)
  std::map<SliceKey, Grid> grids_;  // by slice, plus the part's value with EstimatorRead::parts
  std::map<SliceKey, UtilGrid> utils_;
};

// The text of a query key: every slice key then every axis, "a=x, b=y".
std::string DeclaredKeyText(const tables::TableSpec& spec, const Params& key);
// The SOL of a query of a declared table (its roofline on `sol`).
double DeclaredSolMs(const Sol& sol, const tables::TableSpec& spec, const Params& key);

// A declared table's query in a database mode (perfdb/table_modes.h): `table`
// null when the source lacks it. `op` names the op in messages (default: the
// table's name). A query answered from the fallback's rows says so in its key.
OpEstimate EstimateDeclared(DatabaseMode mode, const Sol& sol, const tables::TableSpec& spec,
                            const DeclaredTable* table, const Params& key, const std::string& op = "");

}  // namespace servecast::perfdb
