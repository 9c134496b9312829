#pragma once

// Attention tables as Grid slices (AIC §1.3, docs/perfdb.md, "The grid resolver"):
//   context_attention_perf:    key (attn_dtype, kv_cache_dtype, n_kv_lookup, head_dim, window_size),
//                              axes (num_heads, seq = isl, batch), sqrt blending on seq;
//   generation_attention_perf: key (kv_cache_dtype, n_kv_lookup, head_dim, window_size),
//                              axes (num_heads, batch, seq = isl + step), raw blending.
// n_kv_lookup = 0 when num_key_value_heads == num_heads (MHA), else num_key_value_heads.
// Head counts are per-GPU values.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/table.h"
#include "perfdb/grid.h"
#include "perfdb/perf_database.h"
#include "perfdb/sol.h"

namespace servecast::perfdb {

std::int64_t KvLookup(std::int64_t num_heads, std::int64_t num_kv_heads);

struct AttentionSliceKey {
  std::string attn_dtype;  // empty for generation slices
  std::string kv_cache_dtype;
  std::int64_t n_kv_lookup = 0;
  std::int64_t head_dim = 0;
  std::int64_t window_size = 0;
  auto operator<=>(const AttentionSliceKey&) const = default;
  std::string ToString() const;  // "attn_dtype=bfloat16, kv_cache_dtype=fp8, n_kv=8, head_dim=128, window=0"
};

struct ContextAttentionQuery {
  std::int64_t batch = 1;
  std::int64_t seq = 1;  // isl: full prefill length, no cached prefix
  std::int64_t num_heads = 1;
  std::int64_t num_kv_heads = 1;
  std::int64_t head_dim = 128;
  std::int64_t window_size = 0;
  std::string attn_dtype = "bfloat16";
  std::string kv_cache_dtype = "bfloat16";
};

struct GenerationAttentionQuery {
  std::int64_t batch = 1;
  std::int64_t seq = 2;  // isl + step: cached + new tokens
  std::int64_t num_heads = 1;
  std::int64_t num_kv_heads = 1;
  std::int64_t head_dim = 128;
  std::int64_t window_size = 0;
  std::string kv_cache_dtype = "bfloat16";
};

// Slices of one attention table. Rows whose coordinates repeat within a slice:
// the first row wins. Optional columns: window_size (0), power (W).
class ContextAttentionTable {
 public:
  // Throws DataError when a needed column is missing.
  ContextAttentionTable(const Table& table, std::shared_ptr<const Sol> sol,
                        const std::string& name = "context_attention_perf");
  static ContextAttentionTable FromLoaded(const LoadedTable& loaded, std::shared_ptr<const Sol> sol) {
    return ContextAttentionTable(loaded.table, std::move(sol), loaded.name);
  }
  // Throws InterpolationMissError when no slice has the key (naming the keys that
  // exist) or the grid cannot anchor the query; MissingSystemFlopsError from SOL.
  Estimate Query(const ContextAttentionQuery& q) const;
  const std::map<AttentionSliceKey, Grid>& slices() const { return slices_; }
  double SolMs(const ContextAttentionQuery& q) const;

 private:
  std::string name_;
  std::shared_ptr<const Sol> sol_;
  std::map<AttentionSliceKey, Grid> slices_;
};

class GenerationAttentionTable {
 public:
  // clamp_to_sol: the load-time clamp latency = max(latency, SOL(coords)) (AIC §1.1).
  GenerationAttentionTable(const Table& table, std::shared_ptr<const Sol> sol,
                           const std::string& name = "generation_attention_perf", bool clamp_to_sol = true);
  static GenerationAttentionTable FromLoaded(const LoadedTable& loaded, std::shared_ptr<const Sol> sol,
                                             bool clamp_to_sol = true) {
    return GenerationAttentionTable(loaded.table, std::move(sol), loaded.name, clamp_to_sol);
  }
  // The estimator's query: mean over 5 samples of seq in [floor(0.9 s), floor(1.1 s)]
  // (sample i = floor(lo + i (hi - lo) / 4), at least 1). Latency is the mean;
  // power is the mean energy over the mean latency (sum p_i l_i / sum l_i), so
  // power x latency is the mean of the samples' energies, as AIC's goldens have
  // it (docs/parity.md); the source is the least exact of the samples;
  // sol_fraction is SOL(q at s) / mean latency.
  Estimate Query(const GenerationAttentionQuery& q) const;
  // One grid resolution at exactly q.seq.
  Estimate QueryPoint(const GenerationAttentionQuery& q) const;
  const std::map<AttentionSliceKey, Grid>& slices() const { return slices_; }
  double SolMs(const GenerationAttentionQuery& q) const;

 private:
  const Grid& Slice(const GenerationAttentionQuery& q) const;
  std::string name_;
  std::shared_ptr<const Sol> sol_;
  std::map<AttentionSliceKey, Grid> slices_;
};

}  // namespace servecast::perfdb
