#pragma once

// Database modes (AIC §1.6, docs/perfdb_modes.md): how one op's latency is found.
//
//   kSilicon   table lookups only; a miss raises OpMissError (op, key, coverage)
//   kHybrid    silicon first; a typed miss (MissingDataError) falls back to
//              util-empirical from the same slice (source "empirical")
//   kEmpirical util-empirical always
//   kSol       pure roofline (source "sol", sol_fraction 1); no table needed
//
// Every answer is an OpEstimate with its source tag (silicon, interpolated,
// extrapolated, empirical, sol), its SOL time and SOL fraction.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "perfdb/attention.h"
#include "perfdb/empirical.h"
#include "perfdb/gemm.h"
#include "perfdb/perf_database.h"
#include "perfdb/sol.h"

namespace servecast::perfdb {

enum class DatabaseMode { kSilicon, kHybrid, kEmpirical, kSol };

// "silicon", "hybrid", "empirical", "sol". Anything else (including the retired
// "sol_full") -> UsageError listing the four.
DatabaseMode ParseDatabaseMode(std::string_view name);
const char* DatabaseModeName(DatabaseMode mode);

struct OpEstimate {
  double latency_ms = 0;
  std::string source;  // silicon, interpolated, extrapolated, empirical, sol
  double sol_ms = 0;
  double sol_fraction = 0;  // sol_ms / latency_ms
  std::string detail;       // how the answer was found (table slice, fallback reason)
};

// A query the selected mode cannot answer: names the op, the key and what the
// data covers (the underlying miss's message).
class OpMissError : public MissingDataError {
 public:
  OpMissError(std::string op, std::string key, DatabaseMode mode, const std::string& why);
  const std::string& op() const { return op_; }
  const std::string& key() const { return key_; }
  DatabaseMode mode() const { return mode_; }

 private:
  std::string op_, key_;
  DatabaseMode mode_;
};

// The mode layer over GEMM and the two attention tables. Table pointers may be
// null (table absent: SILICON/EMPIRICAL miss, HYBRID miss, SOL answers). The
// tables and `sol` must outlive the estimator. Util grids are built lazily per
// slice on first use and cached (thread-safe).
class OpEstimator {
 public:
  OpEstimator(const Sol& sol, DatabaseMode mode, const GemmPerf* gemm, const ContextAttentionTable* context,
              const GenerationAttentionTable* generation);
  OpEstimator(const OpEstimator&) = delete;
  OpEstimator& operator=(const OpEstimator&) = delete;

  DatabaseMode mode() const { return mode_; }

  // Op names in messages: "gemm", "context_attention", "generation_attention".
  OpEstimate Gemm(std::string_view quant, std::int64_t m, std::int64_t n, std::int64_t k) const;
  OpEstimate ContextAttention(const ContextAttentionQuery& q) const;
  // Silicon: the table's 5-sample mean (GenerationAttentionTable::Query);
  // empirical: one util lookup at q.seq.
  // Attention util-empirical reads the query's own slice; when that slice is
  // absent it borrows (xshape) the utils of the sibling slice with the same
  // dtypes, head_dim and window whose KV-head count is nearest in log2, with
  // the query's own SOL (detail starts "xshape").
  OpEstimate GenerationAttention(const GenerationAttentionQuery& q) const;

  // The util grid of a GEMM dtype (every site's every m) or of an attention
  // slice (its leaves, own slice only); MissingDataError when the table or slice is absent.
  const UtilGrid& GemmUtilGrid(std::string_view quant) const;
  const UtilGrid& ContextUtilGrid(const AttentionSliceKey& key) const;
  const UtilGrid& GenerationUtilGrid(const AttentionSliceKey& key) const;

 private:
  OpEstimate GemmSilicon(std::string_view quant, std::int64_t m, std::int64_t n, std::int64_t k) const;
  OpEstimate GemmEmpirical(std::string_view quant, std::int64_t m, std::int64_t n, std::int64_t k) const;
  OpEstimate ContextSilicon(const ContextAttentionQuery& q) const;
  OpEstimate ContextEmpirical(const ContextAttentionQuery& q) const;
  OpEstimate GenerationSilicon(const GenerationAttentionQuery& q) const;
  OpEstimate GenerationEmpirical(const GenerationAttentionQuery& q) const;
  const UtilGrid& CachedGrid(const void* slice, const std::function<UtilGrid()>& build) const;

  const Sol& sol_;
  DatabaseMode mode_;
  const GemmPerf* gemm_;
  const ContextAttentionTable* context_;
  const GenerationAttentionTable* generation_;
  mutable std::mutex mu_;
  mutable std::map<const void*, std::unique_ptr<UtilGrid>> grids_;  // by slice address
};

}  // namespace servecast::perfdb
