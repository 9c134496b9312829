#include "perfdb/modes.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <iomanip>
#include <optional>
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

std::string MoeKey(const MoeQuery& q) {
  return "moe_dtype=" + q.moe_dtype + ", distribution=" + q.distribution + ", topk=" + std::to_string(q.topk) +
         ", E=" + std::to_string(q.num_experts) + ", hidden=" + std::to_string(q.hidden_size) +
         ", inter=" + std::to_string(q.inter_size) + ", tp=" + std::to_string(q.moe_tp_size) +
         ", ep=" + std::to_string(q.moe_ep_size) + ", num_tokens=" + std::to_string(q.num_tokens);
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

// latency = SOL(q) / (util * scale), with a description of the samples used.
OpEstimate FromUtil(const UtilGrid& grid, std::span<const double> q, double sol_ms, double scale = 1.0) {
  const UtilLookup l = grid.Lookup(q);
  OpEstimate e;
  e.latency_ms = sol_ms / (l.util * scale);
  e.source = "empirical";
  e.sol_ms = sol_ms;
  e.sol_fraction = l.util * scale;
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

// The byte/rate profile of an attention slice's dtypes: the peak-rate key its
// math runs at and the bytes per element it moves (FMHA input, KV cache).
// Context: (FmhaQuant(attn).flops_key, FmhaQuant(attn).mem_bytes, KvCacheBytes(kv));
// generation: (decode rate key, 0, KvCacheBytes(kv)), the decode rate key being
// tables::DecodeFlopsKey (fp8 for an fp8 KV cache on SM >= 89), as the roofline.
struct AttentionProfile {
  std::string flops_key;
  double fmha_bytes = 0;
  double kv_bytes = 0;
};
using AttentionProfileFn = std::function<AttentionProfile(const AttentionSliceKey&)>;

// Where util-empirical reads an attention query's utils from.
struct AttentionDonor {
  const Grid* grid = nullptr;  // null: none the policy allows
  bool own = false;            // the query's own slice
  std::string prefix;          // "xshape (KV-head sibling)", "xquant from ...", ...
};

// The ladder for one key: own slice, xshape (same dtypes, head_dim, window; the
// effective KV-head count nearest in log2, ties map order), xquant (same head_dim,
// window and KV-head count, other dtypes with the same AttentionProfile; first in
// map order), xprofile (same head_dim, window, KV-head count; the nearest other
// profile: same flops_key first, then the sum of |log2| byte ratios, then map
// order; util unchanged: AIC's facts give no util levels for attention). Each
// rung as `policy` allows; `why` collects the refusals.
template <typename Table>
AttentionDonor FindAttentionDonor(const Table& table, const AttentionSliceKey& key, std::int64_t num_heads,
                                  TransferPolicy policy, const AttentionProfileFn& profile, std::string& why) {
  AttentionDonor out;
  const auto it = table.slices().find(key);
  if (it != table.slices().end()) {
    out.grid = &it->second;
    out.own = true;
    return out;
  }
  auto kv = [num_heads](std::int64_t n_kv) {
    return std::log2(static_cast<double>(std::max<std::int64_t>(1, n_kv == 0 ? num_heads : n_kv)));
  };
  const Grid* sibling = nullptr;
  double sibling_d = 0;
  for (const auto& [k, g] : table.slices()) {
    if (k.attn_dtype != key.attn_dtype || k.kv_cache_dtype != key.kv_cache_dtype || k.head_dim != key.head_dim ||
        k.window_size != key.window_size)
      continue;
    const double d = std::abs(kv(k.n_kv_lookup) - kv(key.n_kv_lookup));
    if (!sibling || d < sibling_d) {
      sibling = &g;
      sibling_d = d;
    }
  }
  if (sibling && TransferAllows(policy, TransferRung::kXshape)) {
    out.grid = sibling;
    out.prefix = "xshape (KV-head sibling)";
    return out;
  }
  why += sibling ? "xshape KV-head sibling not allowed" : "xshape no KV-head sibling";
  AttentionProfile own;
  try {
    own = profile(key);
  } catch (const Error&) {
    why += "; xquant/xprofile: the query's dtypes have no profile";
    return out;
  }
  const std::pair<const AttentionSliceKey, Grid>* xquant = nullptr;
  const std::pair<const AttentionSliceKey, Grid>* xprofile = nullptr;
  bool best_other_compute = false;
  double best_d = 0;
  for (const auto& entry : table.slices()) {
    const AttentionSliceKey& k = entry.first;
    if (k.n_kv_lookup != key.n_kv_lookup || k.head_dim != key.head_dim || k.window_size != key.window_size ||
        (k.attn_dtype == key.attn_dtype && k.kv_cache_dtype == key.kv_cache_dtype))
      continue;
    AttentionProfile p;
    try {
      p = profile(k);
    } catch (const Error&) {
      continue;  // a donor that cannot be rated
    }
    const bool other_compute = p.flops_key != own.flops_key;
    auto log_ratio = [](double a, double b) { return a > 0 && b > 0 ? std::abs(std::log2(a / b)) : 0.0; };
    const double d = log_ratio(p.fmha_bytes, own.fmha_bytes) + log_ratio(p.kv_bytes, own.kv_bytes);
    if (!other_compute && d == 0) {
      if (!xquant) xquant = &entry;
    } else if (!xprofile || (other_compute != best_other_compute ? !other_compute : d < best_d)) {
      xprofile = &entry;
      best_other_compute = other_compute;
      best_d = d;
    }
  }
  if (xquant && TransferAllows(policy, TransferRung::kXquant)) {
    out.grid = &xquant->second;
    out.prefix = "xquant from {" + xquant->first.ToString() + "}";
    return out;
  }
  if (xprofile && TransferAllows(policy, TransferRung::kXprofile)) {
    out.grid = &xprofile->second;
    out.prefix = "xprofile from {" + xprofile->first.ToString() + "} \u00d71 (no attention util levels)";
    return out;
  }
  why += std::string("; xquant ") +
         (xquant ? "donor {" + xquant->first.ToString() + "} not allowed" : std::string("no same-profile slice")) +
         ", xprofile " +
         (xprofile ? "donor {" + xprofile->first.ToString() + "} not allowed" : std::string("no other-dtype slice"));
  return out;
}

// AIC's prefill head-size ratios vs head_dim 128 (§1.6, quoted for trtllm and
// used for every backend): the util of a head_dim-128 donor x this ratio.
std::optional<double> HeadSizeRatio(std::int64_t head_dim) {
  switch (head_dim) {
    case 64:
      return 0.58;
    case 192:
      return 1.10;
    case 256:
      return 1.17;
    default:
      return std::nullopt;
  }
}

// A donor dtype for xquant / xprofile: same profile -> xquant, else ranked
// compute-first (same flops_key, then nearest mem_bytes in log2, then order).
struct ProfileRank {
  bool same_profile = false;
  bool other_compute = false;
  double mem_distance = 0;
};
ProfileRank RankProfile(const QuantMode& query, const QuantMode& donor) {
  ProfileRank r;
  r.same_profile = query.mem_bytes == donor.mem_bytes && query.flops_key == donor.flops_key;
  r.other_compute = query.flops_key != donor.flops_key;
  r.mem_distance = std::abs(std::log2(donor.mem_bytes / query.mem_bytes));
  return r;
}
bool BetterProfile(const ProfileRank& a, const ProfileRank& b) {
  if (a.other_compute != b.other_compute) return !a.other_compute;
  return a.mem_distance < b.mem_distance;
}

std::string FormatRatio(double r) {
  std::ostringstream os;
  os << std::setprecision(3) << r;
  return os.str();
}

std::string NormaliseDistribution(const std::string& d) {
  return d == "uniform" ? "balanced" : d;
}

// Shape distance of a MoE slice from a query: sum of |log2| ratios.
double MoeShapeDistance(const MoeSliceKey& k, const MoeQuery& q) {
  auto d = [](std::int64_t a, std::int64_t b) {
    return std::abs(std::log2(static_cast<double>(std::max<std::int64_t>(1, a)) /
                              static_cast<double>(std::max<std::int64_t>(1, b))));
  };
  return d(k.topk, q.topk) + d(k.num_experts, q.num_experts) + d(k.hidden_size, q.hidden_size) +
         d(k.inter_size, q.inter_size) + d(k.moe_tp_size, q.moe_tp_size) + d(k.moe_ep_size, q.moe_ep_size);
}

// The slice of `dtype` nearest the query's shape (same distribution first; ties:
// map order); null when the dtype has none.
const std::pair<const MoeSliceKey, MoeSlice>* NearestMoeSlice(const MoeTable& table, const std::string& dtype,
                                                              const MoeQuery& q) {
  const std::pair<const MoeSliceKey, MoeSlice>* best = nullptr;
  bool best_other = true;
  double best_d = 0;
  const std::string dist = NormaliseDistribution(q.distribution);
  for (const auto& entry : table.slices()) {
    if (entry.first.moe_dtype != dtype || entry.second.points.empty()) continue;
    const bool other = NormaliseDistribution(entry.first.distribution) != dist;
    const double d = MoeShapeDistance(entry.first, q);
    if (!best || (other != best_other ? !other : d < best_d)) {
      best = &entry;
      best_other = other;
      best_d = d;
    }
  }
  return best;
}

UtilGrid GridUtils(const Grid& g) {
  std::vector<UtilSample> samples;
  samples.reserve(g.points().size());
  for (const GridPoint& p : g.points()) samples.push_back(UtilSample{p.coords, g.Sol(p.coords) / p.latency_ms});
  return UtilGrid(g.options().name, g.options().axis_names, std::move(samples));
}

}  // namespace

DatabaseMode ParseDatabaseMode(std::string_view given) {
  std::string name(given);  // AIC spells the modes in capitals (SILICON): any case is accepted
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (name == "silicon") return DatabaseMode::kSilicon;
  if (name == "hybrid") return DatabaseMode::kHybrid;
  if (name == "empirical") return DatabaseMode::kEmpirical;
  if (name == "sol") return DatabaseMode::kSol;
  if (name == "sol_full") {
    throw UsageError("database mode 'sol_full' is retired; expected one of: " + std::string(kModeList) +
                     " ('sol' is the pure roofline)");
  }
  throw UsageError("unknown database mode '" + std::string(given) + "'; expected one of: " + kModeList);
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
                         const GenerationAttentionTable* generation, TransferPolicy policy, const MoeTable* moe)
    : sol_(sol), mode_(mode), gemm_(gemm), context_(context), generation_(generation), policy_(policy), moe_(moe) {}

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
  OpEstimate e{r.latency_ms, EstimateSourceName(r.source), r.sol_ms, r.sol_fraction,
               "gemm_perf[" + gemm_->Slice(quant).gemm_dtype() + "]"};
  e.power_w = r.power_w;
  return e;
}

OpEstimate OpEstimator::GemmEmpirical(std::string_view quant, std::int64_t m, std::int64_t n, std::int64_t k) const {
  if (!gemm_) throw MissingDataError("gemm_perf is not in the database");
  const double x[3] = {static_cast<double>(m), static_cast<double>(n), static_cast<double>(k)};
  std::string own_why;
  try {
    const UtilGrid& grid = GemmUtilGrid(quant);
    if (!grid.empty()) return FromUtil(grid, x, gemm_->Slice(quant).SolMs(x[0], x[1], x[2]));
    own_why = grid.name() + " has no usable samples";
  } catch (const MissingDataError& miss) {
    own_why = miss.what();
  }
  // Own slice absent or empty: xshape has nothing to add (the own grid already
  // answers every shape), so the ladder starts at xquant.
  const QuantMode own = GemmQuant(quant);
  const std::string own_dtype = quant == "fp8_static" ? "fp8" : std::string(quant);
  const UtilGrid* xquant = nullptr;
  const UtilGrid* xprofile = nullptr;
  std::string xquant_dtype, xprofile_dtype;
  ProfileRank best;
  for (const std::string& d : gemm_->gemm_dtypes()) {
    if (d == own_dtype) continue;
    QuantMode dm;
    const UtilGrid* g = nullptr;
    try {
      dm = GemmQuant(d);
      g = &GemmUtilGrid(d);
    } catch (const DataError&) {
      throw;  // a slice whose rows cannot be read is an error, not a missing donor
    } catch (const SystemError&) {
      throw;
    } catch (const Error&) {
      continue;  // a donor whose quant cannot be rated
    }
    if (g->empty()) continue;
    const ProfileRank r = RankProfile(own, dm);
    if (r.same_profile) {
      if (!xquant) {
        xquant = g;
        xquant_dtype = d;
      }
    } else if (!xprofile || BetterProfile(r, best)) {
      xprofile = g;
      xprofile_dtype = d;
      best = r;
    }
  }
  if (xquant && TransferAllows(policy_, TransferRung::kXquant)) {
    OpEstimate e = FromUtil(*xquant, x, sol_.GemmMs(quant, x[0], x[1], x[2]));
    e.detail = "xquant from " + xquant_dtype + "; " + e.detail;
    return e;
  }
  if (xprofile && TransferAllows(policy_, TransferRung::kXprofile)) {
    const double ratio = GemmUtilLevel(quant) / GemmUtilLevel(xprofile_dtype);
    OpEstimate e = FromUtil(*xprofile, x, sol_.GemmMs(quant, x[0], x[1], x[2]), ratio);
    e.detail = "xprofile from " + xprofile_dtype + " \u00d7" + FormatRatio(ratio) + "; " + e.detail;
    return e;
  }
  std::string why = own_why + "; transfer policy " + TransferPolicyName(policy_) + ": xquant " +
                    (xquant ? "donor " + xquant_dtype + " not allowed" : std::string("no same-profile dtype")) +
                    ", xprofile " +
                    (xprofile ? "donor " + xprofile_dtype + " not allowed" : std::string("no other dtype"));
  throw EmpiricalNotAvailableError("gemm_perf[" + own_dtype + "]", GemmKey(quant, m, n, k), why);
}

OpEstimate OpEstimator::Gemm(std::string_view quant, std::int64_t m, std::int64_t n, std::int64_t k) const {
  return Dispatch(
      mode_, "gemm", GemmKey(quant, m, n, k),
      [&] { return sol_.GemmMs(quant, static_cast<double>(m), static_cast<double>(n), static_cast<double>(k)); },
      [&] { return GemmSilicon(quant, m, n, k); }, [&] { return GemmEmpirical(quant, m, n, k); });
}

// ---------------------------------------------------------------- context attention

const UtilGrid& OpEstimator::ContextUtilGrid(const AttentionSliceKey& key) const {
  if (!context_) throw MissingDataError("context_attention_perf is not in the database");
  const auto it = context_->slices().find(key);
  if (it == context_->slices().end())
    throw EmpiricalNotAvailableError("context_attention_perf{" + key.ToString() + "}", "this key",
                                     "no slice with this key");
  const Grid& g = it->second;
  return CachedGrid(&g, [&g] { return GridUtils(g); });
}

OpEstimate OpEstimator::ContextSilicon(const ContextAttentionQuery& q) const {
  if (!context_) throw MissingDataError("context_attention_perf is not in the database");
  const Estimate e = context_->Query(q);
  OpEstimate out{e.latency_ms, EstimateSourceName(e.source), context_->SolMs(q), e.sol_fraction,
                 "context_attention_perf"};
  out.power_w = e.power_w;
  return out;
}

OpEstimate OpEstimator::ContextEmpirical(const ContextAttentionQuery& q) const {
  if (!context_) throw MissingDataError("context_attention_perf is not in the database");
  const AttentionSliceKey key{q.attn_dtype, q.kv_cache_dtype, KvLookup(q.num_heads, q.num_kv_heads), q.head_dim,
                              q.window_size};
  const AttentionProfileFn profile = [](const AttentionSliceKey& k) {
    const QuantMode fmha = FmhaQuant(k.attn_dtype);
    return AttentionProfile{fmha.flops_key, fmha.mem_bytes, KvCacheBytes(k.kv_cache_dtype)};
  };
  const double x[3] = {static_cast<double>(q.num_heads), static_cast<double>(q.seq), static_cast<double>(q.batch)};
  std::string why = "no slice with this key; transfer policy " + std::string(TransferPolicyName(policy_)) + ": ";
  AttentionDonor donor = FindAttentionDonor(*context_, key, q.num_heads, policy_, profile, why);
  double scale = 1.0;
  if (!donor.grid) {
    // Head-size transfer (prefill only): no slice has this head_dim at all ->
    // the head_dim-128 donor's util x AIC's ratio vs 128, gated as a shape transfer.
    const bool head_dim_absent = std::none_of(context_->slices().begin(), context_->slices().end(),
                                              [&](const auto& e) { return e.first.head_dim == q.head_dim; });
    const std::optional<double> ratio = HeadSizeRatio(q.head_dim);
    if (!head_dim_absent) {
      why += "; head-size transfer: the table has head_dim " + std::to_string(q.head_dim);
    } else if (!ratio) {
      why +=
          "; head-size transfer: no ratio vs 128 for head_dim " + std::to_string(q.head_dim) + " (AIC's: 64, 192, 256)";
    } else if (!TransferAllows(policy_, TransferRung::kXshape)) {
      why += "; head-size transfer not allowed";
    } else {
      AttentionSliceKey key128 = key;
      key128.head_dim = 128;
      std::string why128;
      AttentionDonor d128 = FindAttentionDonor(*context_, key128, q.num_heads, policy_, profile, why128);
      if (d128.grid) {
        donor = d128;
        scale = *ratio;
        donor.own = false;
        donor.prefix = "head-size transfer from head_dim 128 \u00d7" + FormatRatio(*ratio) +
                       (d128.prefix.empty() ? std::string() : ", " + d128.prefix);
      } else {
        why += "; head-size transfer: head_dim 128 has no usable donor (" + why128 + ")";
      }
    }
  }
  if (!donor.grid)
    throw EmpiricalNotAvailableError("context_attention_perf{" + key.ToString() + "}", ContextKey(q), why);
  const Grid& g = *donor.grid;
  const UtilGrid& grid = CachedGrid(&g, [&g] { return GridUtils(g); });
  const double sol_ms = donor.own ? g.Sol(x) : ContextSol(sol_, q);
  OpEstimate e = FromUtil(grid, x, sol_ms, scale);
  if (!donor.prefix.empty()) e.detail = donor.prefix + "; " + e.detail;
  return e;
}

OpEstimate OpEstimator::ContextAttention(const ContextAttentionQuery& q) const {
  return Dispatch(
      mode_, "context_attention", ContextKey(q), [&] { return ContextSol(sol_, q); }, [&] { return ContextSilicon(q); },
      [&] { return ContextEmpirical(q); });
}

// ---------------------------------------------------------------- generation attention

const UtilGrid& OpEstimator::GenerationUtilGrid(const AttentionSliceKey& key) const {
  if (!generation_) throw MissingDataError("generation_attention_perf is not in the database");
  const auto it = generation_->slices().find(key);
  if (it == generation_->slices().end())
    throw EmpiricalNotAvailableError("generation_attention_perf{" + key.ToString() + "}", "this key",
                                     "no slice with this key");
  const Grid& g = it->second;
  return CachedGrid(&g, [&g] { return GridUtils(g); });
}

OpEstimate OpEstimator::GenerationSilicon(const GenerationAttentionQuery& q) const {
  if (!generation_) throw MissingDataError("generation_attention_perf is not in the database");
  const Estimate e = generation_->Query(q);
  OpEstimate out{e.latency_ms, EstimateSourceName(e.source), generation_->SolMs(q), e.sol_fraction,
                 "generation_attention_perf"};
  out.power_w = e.power_w;
  return out;
}

OpEstimate OpEstimator::GenerationEmpirical(const GenerationAttentionQuery& q) const {
  if (!generation_) throw MissingDataError("generation_attention_perf is not in the database");
  const AttentionSliceKey key{"", q.kv_cache_dtype, KvLookup(q.num_heads, q.num_kv_heads), q.head_dim, q.window_size};
  const int sm = sol_.spec().gpu.sm_version;
  const AttentionProfileFn profile = [sm](const AttentionSliceKey& k) {
    const double kv_bytes = KvCacheBytes(k.kv_cache_dtype);
    return AttentionProfile{tables::DecodeFlopsKey(k.kv_cache_dtype, sm), 0, kv_bytes};
  };
  std::string why = "no slice with this key; transfer policy " + std::string(TransferPolicyName(policy_)) + ": ";
  const AttentionDonor donor = FindAttentionDonor(*generation_, key, q.num_heads, policy_, profile, why);
  if (!donor.grid) {
    throw EmpiricalNotAvailableError("generation_attention_perf{" + key.ToString() + "}", GenerationKey(q),
                                     why + "; no head-size transfer for generation (prefill only)");
  }
  const Grid& g = *donor.grid;
  const UtilGrid& grid = CachedGrid(&g, [&g] { return GridUtils(g); });
  const double x[3] = {static_cast<double>(q.num_heads), static_cast<double>(q.batch), static_cast<double>(q.seq)};
  const double sol_ms = donor.own ? g.Sol(x) : GenerationSol(sol_, q);
  OpEstimate e = FromUtil(grid, x, sol_ms);
  if (!donor.prefix.empty()) e.detail = donor.prefix + "; " + e.detail;
  return e;
}

OpEstimate OpEstimator::GenerationAttention(const GenerationAttentionQuery& q) const {
  return Dispatch(
      mode_, "generation_attention", GenerationKey(q), [&] { return GenerationSol(sol_, q); },
      [&] { return GenerationSilicon(q); }, [&] { return GenerationEmpirical(q); });
}

// ---------------------------------------------------------------- MoE

const UtilGrid& OpEstimator::MoeUtilGrid(const MoeSliceKey& key, const MoeSlice& slice) const {
  return CachedGrid(&slice, [&key, &slice] {
    std::vector<UtilSample> samples;
    samples.reserve(slice.points.size());
    for (const GridPoint& p : slice.points)
      samples.push_back(UtilSample{{p.coords[0]}, slice.sol(p.coords[0]) / p.latency_ms});
    return UtilGrid("moe_perf{" + key.ToString() + "}", {"num_tokens"}, std::move(samples));
  });
}

OpEstimate OpEstimator::MoeSilicon(const MoeQuery& q) const {
  if (!moe_) throw MissingDataError("moe_perf is not in the database");
  const Estimate e = moe_->Query(q);
  OpEstimate out{e.latency_ms, EstimateSourceName(e.source), moe_->SolMs(q), e.sol_fraction,
                 moe_->name() + "{" + moe_->ResolveKey(q).ToString() + "}"};
  out.power_w = e.power_w;
  return out;
}

OpEstimate OpEstimator::MoeEmpirical(const MoeQuery& q) const {
  if (!moe_) throw MissingDataError("moe_perf is not in the database");
  const double x[1] = {static_cast<double>(q.num_tokens)};
  auto query_sol = [&](bool gated) {
    return sol_.MoeMs(q.moe_dtype, x[0], static_cast<double>(q.hidden_size), static_cast<double>(q.inter_size),
                      static_cast<double>(q.topk), static_cast<double>(q.num_experts),
                      static_cast<double>(q.moe_tp_size), static_cast<double>(q.moe_ep_size), gated);
  };
  auto answer = [&](const std::pair<const MoeSliceKey, MoeSlice>& donor, double scale, const std::string& prefix) {
    const UtilGrid& grid = MoeUtilGrid(donor.first, donor.second);
    OpEstimate e = FromUtil(grid, x, query_sol(donor.second.gated), scale);
    if (!prefix.empty()) e.detail = prefix + "; " + e.detail;
    return e;
  };
  // Own slice (after the distribution fallback).
  try {
    const MoeSliceKey& key = moe_->ResolveKey(q);
    const auto it = moe_->slices().find(key);
    if (it != moe_->slices().end() && !it->second.points.empty()) return answer(*it, 1.0, "");
  } catch (const InterpolationMissError&) {
  }
  std::string why = "no slice with this key; transfer policy " + std::string(TransferPolicyName(policy_));
  if (TransferAllows(policy_, TransferRung::kXshape)) {
    if (const auto* donor = NearestMoeSlice(*moe_, q.moe_dtype, q))
      return answer(*donor, 1.0, "xshape from {" + donor->first.ToString() + "}");
    why += ": xshape no slice of " + q.moe_dtype;
  }
  // Donor dtypes in map order.
  const QuantMode own = MoeQuant(q.moe_dtype);
  std::string xquant_dtype, xprofile_dtype;
  ProfileRank best;
  for (const auto& [key, slice] : moe_->slices()) {
    const std::string& d = key.moe_dtype;
    if (d == q.moe_dtype || d == xquant_dtype || d == xprofile_dtype || slice.points.empty()) continue;
    QuantMode dm;
    try {
      dm = MoeQuant(d);
    } catch (const Error&) {
      continue;
    }
    const ProfileRank r = RankProfile(own, dm);
    if (r.same_profile) {
      if (xquant_dtype.empty()) xquant_dtype = d;
    } else if (xprofile_dtype.empty() || BetterProfile(r, best)) {
      xprofile_dtype = d;
      best = r;
    }
  }
  if (!xquant_dtype.empty() && TransferAllows(policy_, TransferRung::kXquant)) {
    const auto* donor = NearestMoeSlice(*moe_, xquant_dtype, q);
    return answer(*donor, 1.0, "xquant from " + xquant_dtype + " {" + donor->first.ToString() + "}");
  }
  if (!xprofile_dtype.empty() && TransferAllows(policy_, TransferRung::kXprofile)) {
    const auto* donor = NearestMoeSlice(*moe_, xprofile_dtype, q);
    const double ratio = MoeUtilLevel(q.moe_dtype) / MoeUtilLevel(xprofile_dtype);
    return answer(
        *donor, ratio,
        "xprofile from " + xprofile_dtype + " \u00d7" + FormatRatio(ratio) + " {" + donor->first.ToString() + "}");
  }
  why += "; xquant " + (xquant_dtype.empty() ? std::string("no same-profile dtype") : xquant_dtype + " not allowed") +
         ", xprofile " + (xprofile_dtype.empty() ? std::string("no other dtype") : xprofile_dtype + " not allowed");
  throw EmpiricalNotAvailableError(moe_->name(), MoeKey(q), why);
}

OpEstimate OpEstimator::Moe(const MoeQuery& q) const {
  return Dispatch(
      mode_, "moe", MoeKey(q),
      [&] {
        return sol_.MoeMs(q.moe_dtype, static_cast<double>(q.num_tokens), static_cast<double>(q.hidden_size),
                          static_cast<double>(q.inter_size), static_cast<double>(q.topk),
                          static_cast<double>(q.num_experts), static_cast<double>(q.moe_tp_size),
                          static_cast<double>(q.moe_ep_size));
      },
      [&] { return MoeSilicon(q); }, [&] { return MoeEmpirical(q); });
}

}  // namespace servecast::perfdb
