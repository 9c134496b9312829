#pragma once

// Database modes (AIC §1.6, docs/perfdb.md, "Database modes"): how one op's latency is found.
//
//   kSilicon   table lookups only; a miss raises OpMissError (op, key, coverage)
//   kHybrid    silicon first; a typed miss (MissingDataError) falls back to
//              util-empirical (source "empirical"): the op's own slice, else the
//              transfer ladder xshape -> xquant -> xprofile as the policy allows
//   kEmpirical util-empirical always (same ladder)
//   kSol       pure roofline (source "sol", sol_fraction 1); no table needed
//
// Every answer is an OpEstimate with its source tag (silicon, interpolated,
// extrapolated, empirical, sol), its SOL time and SOL fraction.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "perfdb/attention.h"
#include "perfdb/empirical.h"
#include "perfdb/gemm.h"
#include "perfdb/moe.h"
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
  // Mean power (W) while the op runs, from the table's optional power column
  // (blended as latency is); absent for util-empirical and SOL answers and for
  // rows without power. Energy = power x latency.
  std::optional<double> power_w = std::nullopt;
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

// The mode layer over GEMM, the two attention tables and MoE. Table pointers may
// be null (table absent: SILICON/EMPIRICAL miss, HYBRID miss, SOL answers). The
// tables and `sol` must outlive the estimator. Util grids are built lazily per
// slice on first use and cached (thread-safe). `policy` gates the transfer
// rungs of util-empirical (default: every rung, as AIC).
class OpEstimator {
 public:
  OpEstimator(const Sol& sol, DatabaseMode mode, const GemmPerf* gemm, const ContextAttentionTable* context,
              const GenerationAttentionTable* generation, TransferPolicy policy = TransferPolicy::kAggressive,
              const MoeTable* moe = nullptr);
  OpEstimator(const OpEstimator&) = delete;
  OpEstimator& operator=(const OpEstimator&) = delete;

  DatabaseMode mode() const { return mode_; }
  TransferPolicy policy() const { return policy_; }

  // Op names in messages: "gemm", "context_attention", "generation_attention", "moe".
  // GEMM util-empirical reads the quant's own slice; when it is absent or has no
  // usable samples: xquant (the first other dtype of the table, in table order,
  // with the same GemmQuant (mem_bytes, flops_key)), then xprofile (the nearest
  // other dtype ordered compute-first: same flops_key first, then nearest
  // mem_bytes in log2, then table order) with util x e(quant) / e(donor). The
  // query's own SOL is used; detail starts "xquant from D" / "xprofile from D xR".
  OpEstimate Gemm(std::string_view quant, std::int64_t m, std::int64_t n, std::int64_t k) const;
  OpEstimate ContextAttention(const ContextAttentionQuery& q) const;
  // Silicon: the table's 5-sample mean (GenerationAttentionTable::Query);
  // empirical: one util lookup at q.seq.
  // Attention util-empirical reads the query's own slice; when that slice is
  // absent it borrows utils, with the query's own SOL, from (each rung as the
  // policy allows):
  //   xshape   the sibling with the same dtypes, head_dim and window whose
  //            KV-head count is nearest in log2 (detail "xshape (KV-head sibling)");
  //   xquant   a slice with the same head_dim, window and KV-head count whose
  //            dtypes have the same profile: context (FMHA flops_key, FMHA bytes,
  //            KV bytes), generation (decode flops_key, KV bytes); first in map order;
  //   xprofile the same, nearest other profile (same flops_key first, then the
  //            sum of |log2| byte ratios); util unchanged (AIC gives no attention
  //            util levels);
  //   head size (context only; gated as xshape) no slice has the query's
  //            head_dim: the head_dim-128 donor (via the rungs above) with util x
  //            AIC's ratio vs 128: 64 .58, 192 1.10, 256 1.17; other sizes miss.
  OpEstimate GenerationAttention(const GenerationAttentionQuery& q) const;
  // SILICON: MoeTable::Query. Util-empirical (1 axis, num_tokens; MoE SOL from
  // Sol::MoeMs with the slice's gated flag): the query's own slice, else xshape
  // (the slice of the same dtype nearest in shape: same distribution first, then
  // the sum of |log2| ratios of topk, experts, hidden, inter, tp, ep), xquant (same
  // MoeQuant (mem_bytes, flops_key)) and xprofile (compute-first, MoE util
  // levels), each from the donor dtype's nearest-shape slice. SOL: Sol::MoeMs.
  OpEstimate Moe(const MoeQuery& q) const;

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
  OpEstimate MoeSilicon(const MoeQuery& q) const;
  OpEstimate MoeEmpirical(const MoeQuery& q) const;
  const UtilGrid& MoeUtilGrid(const MoeSliceKey& key, const MoeSlice& slice) const;
  const UtilGrid& CachedGrid(const void* slice, const std::function<UtilGrid()>& build) const;

  const Sol& sol_;
  DatabaseMode mode_;
  const GemmPerf* gemm_;
  const ContextAttentionTable* context_;
  const GenerationAttentionTable* generation_;
  TransferPolicy policy_;
  const MoeTable* moe_;
  mutable std::mutex mu_;
  mutable std::map<const void*, std::unique_ptr<UtilGrid>> grids_;  // by slice address
};

}  // namespace servecast::perfdb
