#pragma once

// The database-mode rules of a table read by one reader with a silicon query and
// a util-empirical query (the MLA readers, perfdb/mla.h, and the generic reader
// of declared tables, perfdb/declared.h):
//   SOL        the roofline (source "sol"); no table needed;
//   SILICON    the table; a typed miss (MissingDataError) -> OpMissError;
//   HYBRID     the table, a typed miss falling back to util-empirical over the
//              query's slice (detail "...; silicon miss: ...");
//   EMPIRICAL  util-empirical over the query's slice.
// A null table (absent from the source): a MissingDataError naming the table,
// `hint` (what to collect) and the query, except in SOL mode. A miss the mode
// cannot answer: OpMissError naming `op`, `key` and the reason.

#include <string>
#include <utility>

#include "perfdb/grid.h"
#include "perfdb/modes.h"

namespace servecast::perfdb {

template <typename Silicon, typename Empirical>
OpEstimate EstimateByMode(DatabaseMode mode, double sol_ms, bool has_table, const std::string& table_name,
                          const std::string& hint, const std::string& op, const std::string& key, Silicon silicon,
                          Empirical empirical) {
  if (mode == DatabaseMode::kSol) return OpEstimate{sol_ms, "sol", sol_ms, 1.0, "roofline"};
  if (!has_table)
    throw MissingDataError(table_name + " is not in the data source; " + hint + "; query " + op + " {" + key + "}");
  auto answer = [&](const Estimate& e, const std::string& source, std::string detail) {
    OpEstimate out;
    out.latency_ms = e.latency_ms;
    out.source = source;
    out.sol_fraction = e.sol_fraction;
    out.sol_ms = e.sol_fraction * e.latency_ms;
    out.detail = std::move(detail);
    out.power_w = e.power_w;
    return out;
  };
  std::string silicon_miss;
  if (mode != DatabaseMode::kEmpirical) {
    try {
      const Estimate e = silicon();
      return answer(e, EstimateSourceName(e.source), table_name + ": {" + key + "}");
    } catch (const MissingDataError& miss) {
      if (mode != DatabaseMode::kHybrid) throw OpMissError(op, key, mode, miss.what());
      silicon_miss = miss.what();
    }
  }
  try {
    OpEstimate out = answer(empirical(), "empirical", "util-empirical over " + table_name + ": {" + key + "}");
    out.power_w = std::nullopt;
    if (!silicon_miss.empty()) out.detail += "; silicon miss: " + silicon_miss;
    return out;
  } catch (const MissingDataError& miss) {
    throw OpMissError(
        op, key, mode,
        silicon_miss.empty() ? std::string(miss.what()) : "silicon: " + silicon_miss + "; empirical: " + miss.what());
  }
}

}  // namespace servecast::perfdb
