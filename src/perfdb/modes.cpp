#include "perfdb/modes.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>
#include <vector>

#include "core/error.h"

namespace servecast::perfdb {
namespace {

constexpr const char* kModeList = "silicon, hybrid, empirical, sol";

std::string FormatNumber(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string GemmKey(std::string_view quant, std::int64_t m, std::int64_t n, std::int64_t k) {
  return "quant=" + std::string(quant) + ", m=" + std::to_string(m) + ", n=" + std::to_string(n) +
         ", k=" + std::to_string(k);
}

std::string ContextKey(const ContextAttentionQuery& q) {
  return "attn_dtype=" + q.attn_dtype + ", kv_cache_dtype=" + q.kv_cache_dtype +
         ", num_heads=" + std::to_string(q.num_heads) + ", num_kv_heads=" + std::to_string(q.num_kv_heads) +
         ", head_dim=" + std::to_string(q.head_dim) + ", window=" + std::to_string(q.window_size) +
         ", batch=" + std::to_string(q.batch) + ", seq=" + std::to_string(q.seq);
}

std::string GenerationKey(const GenerationAttentionQuery& q) {
  return "kv_cache_dtype=" + q.kv_cache_dtype + ", num_heads=" + std::to_string(q.num_heads) +
         ", num_kv_heads=" + std::to_string(q.num_kv_heads) + ", head_dim=" + std::to_string(q.head_dim) +
         ", window=" + std::to_string(q.window_size) + ", batch=" + std::to_string(q.batch) +
         ", seq=" + std::to_string(q.seq);
}

double ContextSol(const Sol& sol, const ContextAttentionQuery& q) {
  return sol.ContextAttentionMs(static_cast<double>(q.batch), static_cast<double>(q.seq), 0,
                                static_cast<double>(q.num_heads), static_cast<double>(q.num_kv_heads),
                                static_cast<double>(q.head_dim), static_cast<double>(q.window_size), q.attn_dtype,
                                q.kv_cache_dtype);
}

double GenerationSol(const Sol& sol, const GenerationAttentionQuery& q) {
  return sol.GenerationAttentionMs(static_cast<double>(q.batch), static_cast<double>(q.seq),
                                   static_cast<double>(q.num_heads), static_cast<double>(q.num_kv_heads),
                                   static_cast<double>(q.head_dim), static_cast<double>(q.window_size),
                                   q.kv_cache_dtype);
}

OpEstimate SolAnswer(double sol_ms) {
  return OpEstimate{sol_ms, "sol", sol_ms, 1.0, "roofline"};
}

// The mode switch shared by every op.
template <typename SolFn, typename SiliconFn, typename EmpiricalFn>
OpEstimate Dispatch(DatabaseMode mode, const std::string& op, const std::string& key, SolFn sol, SiliconFn silicon,
                    EmpiricalFn empirical) {
  switch (mode) {
    case DatabaseMode::kSol:
      return SolAnswer(sol());
    case DatabaseMode::kSilicon:
      try {
        return silicon();
      } catch (const MissingDataError& miss) {
        throw OpMissError(op, key, mode, miss.what());
      }
    case DatabaseMode::kEmpirical:
      try {
        return empirical();
      } catch (const MissingDataError& miss) {
        throw OpMissError(op, key, mode, miss.what());
      }
    case DatabaseMode::kHybrid:
      break;
  }
  std::string silicon_why;
  try {
    return silicon();
  } catch (const MissingDataError& miss) {
    silicon_why = miss.what();
  }
  try {
    OpEstimate e = empirical();
    e.detail += "; silicon miss: " + silicon_why;
    return e;
  } catch (const MissingDataError& miss) {
    throw OpMissError(op, key, mode, "silicon: " + silicon_why + "; empirical: " + miss.what());
  }
}

// latency = SOL(q) / util, with a description of the samples used.
OpEstimate FromUtil(const UtilGrid& grid, std::span<const double> q, double sol_ms) {
  const UtilLookup l = grid.Lookup(q);
  OpEstimate e;
  e.latency_ms = sol_ms / l.util;
  e.source = "empirical";
  e.sol_ms = sol_ms;
  e.sol_fraction = l.util;
  std::ostringstream os;
  os << "util-empirical over " << grid.name() << " (" << grid.samples().size() << " samples): ";
  auto coords = [&](std::size_t i) {
    std::string s = "(";
    for (std::size_t a = 0; a < grid.samples()[i].coords.size(); ++a)
      s += (a ? ", " : "") + FormatNumber(grid.samples()[i].coords[a]);
    return s + ")";
  };
  if (l.used == 1) {
    os << (l.exact ? "exact sample " : "single sample ") << coords(l.nearest[0]);
  } else {
    os << "IDW of " << coords(l.nearest[0]) << " and " << coords(l.nearest[1]);
  }
  os << ", util " << l.util;
  e.detail = os.str();
  return e;
}

// The slice util-empirical reads for an attention key: its own, else (xshape)
// the sibling with the same dtypes, head_dim and window whose effective KV-head
// count is nearest in log2 (ties: map order). `transferred` says which.
template <typename Table>
const Grid& FindSlice(const Table* table, const std::string& table_name, const AttentionSliceKey& key,
                      std::int64_t num_heads, bool& transferred) {
  if (!table) throw MissingDataError(table_name + " is not in the database");
  transferred = false;
  const auto it = table->slices().find(key);
  if (it != table->slices().end()) return it->second;
  auto kv = [num_heads](std::int64_t n_kv) {
    return std::log2(static_cast<double>(std::max<std::int64_t>(1, n_kv == 0 ? num_heads : n_kv)));
  };
  const Grid* best = nullptr;
  double best_d = 0;
  for (const auto& [k, g] : table->slices()) {
    if (k.attn_dtype != key.attn_dtype || k.kv_cache_dtype != key.kv_cache_dtype || k.head_dim != key.head_dim ||
        k.window_size != key.window_size)
      continue;
    const double d = std::abs(kv(k.n_kv_lookup) - kv(key.n_kv_lookup));
    if (!best || d < best_d) {
      best = &g;
      best_d = d;
    }
  }
  if (!best) {
    throw EmpiricalNotAvailableError(table_name + "{" + key.ToString() + "}", "this key",
                                     "no slice with this key or a KV-head sibling (" +
                                         std::to_string(table->slices().size()) +
                                         " slices present); other transfers are not built");
  }
  transferred = true;
  return *best;
}

UtilGrid GridUtils(const Grid& g) {
  std::vector<UtilSample> samples;
  samples.reserve(g.points().size());
  for (const GridPoint& p : g.points()) samples.push_back(UtilSample{p.coords, g.Sol(p.coords) / p.latency_ms});
  return UtilGrid(g.options().name, g.options().axis_names, std::move(samples));
}

}  // namespace

DatabaseMode ParseDatabaseMode(std::string_view name) {
  if (name == "silicon") return DatabaseMode::kSilicon;
  if (name == "hybrid") return DatabaseMode::kHybrid;
  if (name == "empirical") return DatabaseMode::kEmpirical;
  if (name == "sol") return DatabaseMode::kSol;
  if (name == "sol_full") {
    throw UsageError("database mode 'sol_full' is retired; expected one of: " + std::string(kModeList) +
                     " ('sol' is the pure roofline)");
  }
  throw UsageError("unknown database mode '" + std::string(name) + "'; expected one of: " + kModeList);
}

const char* DatabaseModeName(DatabaseMode mode) {
  switch (mode) {
    case DatabaseMode::kSilicon:
      return "silicon";
    case DatabaseMode::kHybrid:
      return "hybrid";
    case DatabaseMode::kEmpirical:
      return "empirical";
    case DatabaseMode::kSol:
      return "sol";
  }
  return "?";
}

OpMissError::OpMissError(std::string op, std::string key, DatabaseMode mode, const std::string& why)
    : MissingDataError(op + " {" + key + "} has no " + DatabaseModeName(mode) + "-mode estimate: " + why),
      op_(std::move(op)),
      key_(std::move(key)),
      mode_(mode) {}

OpEstimator::OpEstimator(const Sol& sol, DatabaseMode mode, const GemmPerf* gemm, const ContextAttentionTable* context,
                         const GenerationAttentionTable* generation)
    : sol_(sol), mode_(mode), gemm_(gemm), context_(context), generation_(generation) {}

const UtilGrid& OpEstimator::CachedGrid(const void* slice, const std::function<UtilGrid()>& build) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = grids_.find(slice);
  if (it == grids_.end()) it = grids_.emplace(slice, std::make_unique<UtilGrid>(build())).first;
  return *it->second;
}

// ---------------------------------------------------------------- GEMM

const UtilGrid& OpEstimator::GemmUtilGrid(std::string_view quant) const {
  if (!gemm_) throw MissingDataError("gemm_perf is not in the database");
  const GemmSlice& slice = gemm_->Slice(quant);
  return CachedGrid(&slice, [&slice] {
    std::vector<UtilSample> samples;
    for (const GemmSite& s : slice.sites()) {
      const double n = static_cast<double>(s.n), k = static_cast<double>(s.k);
      for (std::size_t j = 0; j < s.m.size(); ++j) {
        const double m = static_cast<double>(s.m[j]);
        samples.push_back(UtilSample{{m, n, k}, slice.SolMs(m, n, k) / s.latency_ms[j]});
      }
    }
    return UtilGrid("gemm_perf[" + slice.gemm_dtype() + "]", {"m", "n", "k"}, std::move(samples));
  });
}

OpEstimate OpEstimator::GemmSilicon(std::string_view quant, std::int64_t m, std::int64_t n, std::int64_t k) const {
  if (!gemm_) throw MissingDataError("gemm_perf is not in the database");
  const GemmResult r = gemm_->Query(quant, m, n, k);
  return OpEstimate{r.latency_ms, GemmSourceName(r.source), r.sol_ms, r.sol_fraction,
                    "gemm_perf[" + gemm_->Slice(quant).gemm_dtype() + "]"};
}

OpEstimate OpEstimator::GemmEmpirical(std::string_view quant, std::int64_t m, std::int64_t n, std::int64_t k) const {
  const UtilGrid& grid = GemmUtilGrid(quant);
  const double x[3] = {static_cast<double>(m), static_cast<double>(n), static_cast<double>(k)};
  return FromUtil(grid, x, gemm_->Slice(quant).SolMs(x[0], x[1], x[2]));
}

OpEstimate OpEstimator::Gemm(std::string_view quant, std::int64_t m, std::int64_t n, std::int64_t k) const {
  return Dispatch(
      mode_, "gemm", GemmKey(quant, m, n, k),
      [&] { return sol_.GemmMs(quant, static_cast<double>(m), static_cast<double>(n), static_cast<double>(k)); },
      [&] { return GemmSilicon(quant, m, n, k); }, [&] { return GemmEmpirical(quant, m, n, k); });
}

// ---------------------------------------------------------------- context attention

const UtilGrid& OpEstimator::ContextUtilGrid(const AttentionSliceKey& key) const {
  bool transferred = false;
  const Grid& g = FindSlice(context_, "context_attention_perf", key, 0, transferred);
  if (transferred)
    throw EmpiricalNotAvailableError("context_attention_perf{" + key.ToString() + "}", "this key",
                                     "no slice with this key");
  return CachedGrid(&g, [&g] { return GridUtils(g); });
}

OpEstimate OpEstimator::ContextSilicon(const ContextAttentionQuery& q) const {
  if (!context_) throw MissingDataError("context_attention_perf is not in the database");
  const Estimate e = context_->Query(q);
  return OpEstimate{e.latency_ms, EstimateSourceName(e.source), context_->SolMs(q), e.sol_fraction,
                    "context_attention_perf"};
}

OpEstimate OpEstimator::ContextEmpirical(const ContextAttentionQuery& q) const {
  const AttentionSliceKey key{q.attn_dtype, q.kv_cache_dtype, KvLookup(q.num_heads, q.num_kv_heads), q.head_dim,
                              q.window_size};
  bool transferred = false;
  const Grid& g = FindSlice(context_, "context_attention_perf", key, q.num_heads, transferred);
  const UtilGrid& grid = CachedGrid(&g, [&g] { return GridUtils(g); });
  const double x[3] = {static_cast<double>(q.num_heads), static_cast<double>(q.seq), static_cast<double>(q.batch)};
  const double sol_ms = transferred ? ContextSol(sol_, q) : g.Sol(x);
  OpEstimate e = FromUtil(grid, x, sol_ms);
  if (transferred) e.detail = "xshape (KV-head sibling) " + e.detail;
  return e;
}

OpEstimate OpEstimator::ContextAttention(const ContextAttentionQuery& q) const {
  return Dispatch(
      mode_, "context_attention", ContextKey(q), [&] { return ContextSol(sol_, q); }, [&] { return ContextSilicon(q); },
      [&] { return ContextEmpirical(q); });
}

// ---------------------------------------------------------------- generation attention

const UtilGrid& OpEstimator::GenerationUtilGrid(const AttentionSliceKey& key) const {
  bool transferred = false;
  const Grid& g = FindSlice(generation_, "generation_attention_perf", key, 0, transferred);
  if (transferred)
    throw EmpiricalNotAvailableError("generation_attention_perf{" + key.ToString() + "}", "this key",
                                     "no slice with this key");
  return CachedGrid(&g, [&g] { return GridUtils(g); });
}

OpEstimate OpEstimator::GenerationSilicon(const GenerationAttentionQuery& q) const {
  if (!generation_) throw MissingDataError("generation_attention_perf is not in the database");
  const Estimate e = generation_->Query(q);
  return OpEstimate{e.latency_ms, EstimateSourceName(e.source), generation_->SolMs(q), e.sol_fraction,
                    "generation_attention_perf"};
}

OpEstimate OpEstimator::GenerationEmpirical(const GenerationAttentionQuery& q) const {
  const AttentionSliceKey key{"", q.kv_cache_dtype, KvLookup(q.num_heads, q.num_kv_heads), q.head_dim, q.window_size};
  bool transferred = false;
  const Grid& g = FindSlice(generation_, "generation_attention_perf", key, q.num_heads, transferred);
  const UtilGrid& grid = CachedGrid(&g, [&g] { return GridUtils(g); });
  const double x[3] = {static_cast<double>(q.num_heads), static_cast<double>(q.batch), static_cast<double>(q.seq)};
  const double sol_ms = transferred ? GenerationSol(sol_, q) : g.Sol(x);
  OpEstimate e = FromUtil(grid, x, sol_ms);
  if (transferred) e.detail = "xshape (KV-head sibling) " + e.detail;
  return e;
}

OpEstimate OpEstimator::GenerationAttention(const GenerationAttentionQuery& q) const {
  return Dispatch(
      mode_, "generation_attention", GenerationKey(q), [&] { return GenerationSol(sol_, q); },
      [&] { return GenerationSilicon(q); }, [&] { return GenerationEmpirical(q); });
}

}  // namespace servecast::perfdb
