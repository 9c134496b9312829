#pragma once

// GEMM latency from the `gemm_perf` table: one slice per `gemm_dtype`, resolved
// with the scattered-site scheme of AIC §1.3-1.4 (docs/perfdb.md, "GEMM queries").
//
// A slice's sites are the collected (n, k) pairs, in the table's first-encounter
// order; each owns a curve of latency over m, sorted by m.
//   - known site: exact m -> the measured latency; inside the m sweep -> raw
//     linear interpolation in m; outside it -> util-hold: the median util
//     (SOL / latency) of the `tail_points` boundary points on that side, and
//     latency = SOL(q) / util.
//   - unknown site: the `nearest_sites` sites nearest in (log2 n, log2 k) among
//     those whose curve spans m (all sites if none does), within
//     `max_site_distance` octaves (or admitted by the frontier waiver), blended by
//     inverse-distance weights in util space. Otherwise a GemmMiss.

#include <cstddef>
#include <cstdint>
#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/table.h"
#include "perfdb/grid.h"
#include "perfdb/perf_database.h"
#include "perfdb/sol.h"

namespace servecast::perfdb {

// Where a GEMM answer came from, the sources of the other tables (grid.h):
//   kSilicon       a measured row, verbatim
//   kInterpolated  inside the data: lerp in m, or IDW over sites within the gate
//   kExtrapolated  util-hold beyond a curve, or a blend that leans on one
// EstimateSourceName names it.
using GemmSource = EstimateSource;

// Power (W) follows latency: the row's own, lerped in m, the median of the held
// boundary points beyond a sweep, the IDW-weighted mean over neighbour sites;
// absent when any point it would come from has none.
struct GemmResult {
  double latency_ms = 0;
  GemmSource source = GemmSource::kSilicon;
  double sol_ms = 0;        // SOL(m, n, k) of the slice's quant
  double sol_fraction = 0;  // sol_ms / latency_ms
  std::optional<double> power_w = std::nullopt;
};

// Resolver constants (AIC's defaults).
struct GemmResolverOptions {
  int tail_points = 3;             // k_tail: boundary points whose median util is held
  int nearest_sites = 4;           // nn_sites
  double max_site_distance = 2.0;  // gate, in octaves of (n, k)
};

// One collected (n, k) and its m-curve (sorted by m, unique m).
struct GemmSite {
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::vector<std::int64_t> m;
  std::vector<double> latency_ms;
  // Per point (W), parallel to m; NaN where a row has none (a merged source
  // without the column). Empty: no power at all.
  std::vector<double> power_w = {};
};

// A neighbour named in a miss.
struct GemmSiteDistance {
  std::int64_t n = 0;
  std::int64_t k = 0;
  double distance = 0;  // octaves in (log2 n, log2 k)
};

// Why an unknown site could not be resolved.
struct GemmMiss {
  std::string slice;  // the gemm_dtype
  std::int64_t m = 0, n = 0, k = 0;
  double gate = 0;                        // max_site_distance in force
  std::vector<GemmSiteDistance> nearest;  // up to nearest_sites, nearest first
  std::string Message() const;
};

class GemmMissError : public MissingDataError {
 public:
  explicit GemmMissError(GemmMiss miss) : MissingDataError(miss.Message()), miss_(std::move(miss)) {}
  const GemmMiss& miss() const { return miss_; }

 private:
  GemmMiss miss_;
};

// Either a result or a miss (expected outcomes are values).
struct GemmLookup {
  bool ok = false;
  GemmResult result;
  GemmMiss miss;
};

// The sites of one gemm_dtype. Immutable after construction except for the
// warm-query cache, which is thread-safe.
class GemmSlice {
 public:
  static constexpr std::size_t kCacheSlots = 32768;

  // `sites` in enumeration order; each curve is sorted by m here (a repeated m
  // keeps its first latency). Rows with latency <= 0 or non-finite are dropped.
  // Throws Error for an unknown quant, MissingSystemFlopsError when the system
  // lacks its peak rate, DataError for a site with n or k < 1 or no valid point.
  GemmSlice(std::string gemm_dtype, std::vector<GemmSite> sites, const Sol& sol, GemmResolverOptions options = {});
  GemmSlice(GemmSlice&&) noexcept;
  GemmSlice& operator=(GemmSlice&&) noexcept;
  ~GemmSlice();

  const std::string& gemm_dtype() const { return dtype_; }
  const std::vector<GemmSite>& sites() const { return sites_; }
  const GemmResolverOptions& options() const { return options_; }
  // Index of the collected site (n, k), or -1.
  int FindSite(std::int64_t n, std::int64_t k) const;

  double SolMs(double m, double n, double k) const;
  // Uncached resolution. m, n, k must be >= 1 (else Error).
  GemmLookup Resolve(std::int64_t m, std::int64_t n, std::int64_t k) const;
  // Cached; throws GemmMissError on a miss (misses are not cached).
  GemmResult Query(std::int64_t m, std::int64_t n, std::int64_t k) const;
  // Latency of site `i`'s own curve at m (exact, lerp or its hold).
  GemmResult EvaluateSite(std::size_t i, std::int64_t m) const;

 private:
  struct Tail {
    double util_lo = 0, util_hi = 0;           // held utils below / above the sweep
    std::optional<double> power_lo, power_hi;  // held powers (median of the same points)
  };
  struct CacheEntry {
    std::int64_t m = -1, n = 0, k = 0;
    GemmResult result;
  };
  struct Cache {
    std::mutex mu;
    std::unique_ptr<CacheEntry[]> slots;
  };

  std::string dtype_;
  Sol sol_;
  GemmResolverOptions options_;
  std::vector<GemmSite> sites_;
  std::vector<Tail> tails_;
  std::vector<double> log2_n_, log2_k_;
  std::unordered_map<std::uint64_t, int> site_index_;
  std::unique_ptr<Cache> cache_;
};

// Load-time SOL clamp (AIC §1.1): every leaf latency becomes
// max(latency, SOL(m, n, k)) before the slices are built, so no measured row
// beats physics. A slice whose quant the system cannot rate is left as-is.
enum class GemmLoadClamp {
  kSol,   // AIC's default
  kNone,  // the rows verbatim
};

// Every gemm_dtype slice of a gemm_perf table (columns by name: gemm_dtype, m,
// n, k, latency; optional power).
class GemmPerf {
 public:
  // `origin` names the table in errors. Slices whose quant the system cannot
  // rate keep their error and raise it when queried.
  GemmPerf(const Table& table, const Sol& sol, std::string origin = "gemm_perf", GemmResolverOptions options = {},
           GemmLoadClamp clamp = GemmLoadClamp::kSol);
  // Lazy: the slices are `dtypes` (first-encounter order), each built on first
  // use from `load(dtype)`, a gemm_perf table of that dtype's rows, exactly as
  // the eager constructor builds it from the whole table. Thread-safe; a load or
  // a DataError while building is raised by that Slice() call and by every later
  // one (kept, not retried: the file is the same).
  using SliceLoader = std::function<const Table&(const std::string& gemm_dtype)>;
  GemmPerf(std::vector<std::string> dtypes, SliceLoader load, const Sol& sol, std::string origin = "gemm_perf",
           GemmResolverOptions options = {}, GemmLoadClamp clamp = GemmLoadClamp::kSol);
  GemmPerf(GemmPerf&&) noexcept;
  GemmPerf& operator=(GemmPerf&&) noexcept;
  ~GemmPerf();

  std::vector<std::string> gemm_dtypes() const;  // first-encounter order
  // The slice a quant reads: fp8_static -> fp8, any other quant its own name.
  // MissingDataError naming the dtypes present when absent.
  const GemmSlice& Slice(std::string_view quant) const;
  // Cached query; GemmMissError on a miss.
  GemmResult Query(std::string_view quant, std::int64_t m, std::int64_t n, std::int64_t k) const;

 private:
  struct Entry {
    std::string dtype;
    std::atomic<const GemmSlice*> ready{nullptr};  // set once built
    std::mutex mu;                                 // guards the build
    bool built = false;
    std::unique_ptr<GemmSlice> slice;  // null when building failed
    std::exception_ptr error;          // why, raised by Slice()
  };
  // Builds `e` from rows of its dtype (and only those).
  void Build(Entry& e, const Table& rows) const;
  // Clamps `sites` to SOL (per clamp_) and makes them `e`'s slice, or keeps why
  // the system cannot rate its quant; a DataError (a malformed row) propagates.
  void Install(Entry& e, std::vector<GemmSite> sites, const Sol& sol) const;

  std::string origin_;
  std::unique_ptr<Sol> sol_;  // for lazy slices
  GemmResolverOptions options_;
  GemmLoadClamp clamp_ = GemmLoadClamp::kSol;
  SliceLoader load_;
  std::vector<std::unique_ptr<Entry>> slices_;
};

// Splits a gemm_perf table into sites per gemm_dtype (first-encounter order).
std::vector<std::pair<std::string, std::vector<GemmSite>>> GemmSitesFromTable(const Table& table);

// Raises every positive, finite leaf with m >= 1 to SOL(m, n, k) of `gemm_dtype`
// in place; returns the number raised. Returns 0 and changes nothing when the
// system cannot rate the quant (unknown quant or missing peak rate).
std::size_t ClampGemmSitesToSol(const std::string& gemm_dtype, std::vector<GemmSite>& sites, const Sol& sol);

}  // namespace servecast::perfdb
