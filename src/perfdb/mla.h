#pragma once

// The MLA attention tables (AIC §1.3, their schemas in tables/table_spec.cpp) as Grid slices:
//   context_mla_perf:    key (mla_dtype, kv_cache_dtype), axes (num_heads, seq = isl,
//                        batch), sqrt blending on seq (prefill, unabsorbed form);
//   generation_mla_perf: key (kv_cache_dtype), axes (num_heads, batch, seq = isl + step),
//                        raw blending (absorbed decode over the latent cache).
// mla_bmm_perf has no reader here: its declaration's estimator read
// (tables/table_spec.cpp) puts it on the generic path (perfdb/declared.h).
// Head counts are local (per GPU) values; tp_size is not a key (kernels of equal
// local heads are the same kernel). Rows whose coordinates repeat in a slice: the
// first wins. Each slice also keeps its util samples (SOL / latency) for the
// util-empirical modes. SOL at a coordinate: tables/cost_model.h's MLA rooflines.

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/table.h"
#include "perfdb/empirical.h"
#include "perfdb/grid.h"
#include "perfdb/modes.h"
#include "perfdb/perf_database.h"
#include "perfdb/sol.h"

namespace servecast::perfdb {

struct ContextMlaQuery {
  std::int64_t batch = 1;
  std::int64_t seq = 1;        // full prefill length (the table's isl), no cached prefix
  std::int64_t num_heads = 1;  // local heads
  std::string mla_dtype = "bfloat16";
  std::string kv_cache_dtype = "bfloat16";
};

struct GenerationMlaQuery {
  std::int64_t batch = 1;
  std::int64_t seq = 2;  // cached + new tokens (the table's isl + step)
  std::int64_t num_heads = 1;
  std::string kv_cache_dtype = "bfloat16";
};

// One MLA table's slices and their util samples. `Key` orders the slices.
template <typename Key>
struct MlaSlices {
  std::map<Key, Grid> grids;
  std::map<Key, UtilGrid> utils;
};

class ContextMlaTable {
 public:
  using Key = std::pair<std::string, std::string>;  // (mla_dtype, kv_cache_dtype)
  // Throws DataError when a needed column is missing.
  ContextMlaTable(const Table& table, std::shared_ptr<const Sol> sol, const std::string& name = "context_mla_perf");
  static ContextMlaTable FromLoaded(const LoadedTable& loaded, std::shared_ptr<const Sol> sol) {
    return ContextMlaTable(loaded.table, std::move(sol), loaded.name);
  }
  // InterpolationMissError naming the slices there are, or the grid's miss.
  Estimate Query(const ContextMlaQuery& q) const;
  // Util-empirical over the query's own slice (empirical.h); same slice miss;
  // EmpiricalNotAvailableError without usable samples.
  Estimate QueryEmpirical(const ContextMlaQuery& q) const;
  double SolMs(const ContextMlaQuery& q) const;
  const std::map<Key, Grid>& slices() const { return s_.grids; }

 private:
  std::string name_;
  std::shared_ptr<const Sol> sol_;
  MlaSlices<Key> s_;
};

class GenerationMlaTable {
 public:
  using Key = std::string;  // kv_cache_dtype
  GenerationMlaTable(const Table& table, std::shared_ptr<const Sol> sol,
                     const std::string& name = "generation_mla_perf");
  static GenerationMlaTable FromLoaded(const LoadedTable& loaded, std::shared_ptr<const Sol> sol) {
    return GenerationMlaTable(loaded.table, std::move(sol), loaded.name);
  }
  Estimate Query(const GenerationMlaQuery& q) const;
  Estimate QueryEmpirical(const GenerationMlaQuery& q) const;
  double SolMs(const GenerationMlaQuery& q) const;
  const std::map<Key, Grid>& slices() const { return s_.grids; }

 private:
  std::string name_;
  std::shared_ptr<const Sol> sol_;
  MlaSlices<Key> s_;
};

// One MLA query in a database mode (modes.h): SOL the roofline (no table
// needed); SILICON the table; HYBRID the table, a typed miss falling back to
// util-empirical over the query's slice (detail "...; silicon miss: ..."); EMPIRICAL
// util-empirical. `table` null: a MissingDataError naming the table and what to
// collect (except in SOL mode); a miss the mode cannot answer: OpMissError.
// `op` names the op in messages.
OpEstimate EstimateContextMla(DatabaseMode mode, const Sol& sol, const ContextMlaTable* table, const ContextMlaQuery& q,
                              const std::string& op = "context_mla");
OpEstimate EstimateGenerationMla(DatabaseMode mode, const Sol& sol, const GenerationMlaTable* table,
                                 const GenerationMlaQuery& q, const std::string& op = "generation_mla");

// "collect it on the GPU with servecast collect --backend cuda --ops mla_context, ..."
// for context_mla_perf or generation_mla_perf.
std::string MlaCollectHint(const std::string& table);

}  // namespace servecast::perfdb
