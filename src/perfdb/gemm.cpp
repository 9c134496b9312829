#include "perfdb/gemm.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <numeric>
#include <optional>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "tables/table_spec.h"

namespace servecast::perfdb {
namespace {

std::uint64_t SiteKey(std::int64_t n, std::int64_t k) {
  return (static_cast<std::uint64_t>(n) << 32) ^ static_cast<std::uint64_t>(k);
}

// Median of a few values (mean of the middle two for an even count).
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

std::size_t CacheSlot(std::int64_t m, std::int64_t n, std::int64_t k) {
  std::uint64_t h = static_cast<std::uint64_t>(m) * 0x9E3779B97F4A7C15ull;
  h ^= static_cast<std::uint64_t>(n) * 0xC2B2AE3D27D4EB4Full + (h >> 29);
  h ^= static_cast<std::uint64_t>(k) * 0x165667B19E3779F9ull + (h >> 31);
  h ^= h >> 32;
  return static_cast<std::size_t>(h) & (GemmSlice::kCacheSlots - 1);
}

GemmResult Finish(double latency_ms, GemmSource source, double sol_ms, std::optional<double> power_w) {
  return {latency_ms, source, sol_ms, sol_ms / latency_ms, power_w};
}

// A point's power, absent when the site has no power column or the row none.
std::optional<double> PointPower(const GemmSite& s, std::size_t i) {
  if (i >= s.power_w.size() || !std::isfinite(s.power_w[i])) return std::nullopt;
  return s.power_w[i];
}

}  // namespace

std::string GemmMiss::Message() const {
  std::ostringstream os;
  os << "gemm_perf slice '" << slice << "': no collected (n, k) site near (n=" << n << ", k=" << k << ") at m=" << m
     << " (gate " << gate << " octaves in (log2 n, log2 k); the frontier waiver does not apply)";
  if (nearest.empty()) {
    os << "; the slice has no sites";
  } else {
    os << "; nearest sites:";
    for (std::size_t i = 0; i < nearest.size(); ++i)
      os << (i ? "," : "") << " (n=" << nearest[i].n << ", k=" << nearest[i].k << ", d=" << nearest[i].distance << ")";
  }
  return os.str();
}

GemmSlice::GemmSlice(std::string gemm_dtype, std::vector<GemmSite> sites, const Sol& sol, GemmResolverOptions options)
    : dtype_(std::move(gemm_dtype)), sol_(sol), options_(options), cache_(std::make_unique<Cache>()) {
  (void)sol_.GemmMs(dtype_, 1, 1, 1);  // unknown quant / missing peak rate: fail before any lookup
  if (options_.tail_points < 1 || options_.nearest_sites < 1)
    throw Error("GEMM resolver options: tail_points and nearest_sites must be >= 1");
  sites_.reserve(sites.size());
  for (auto& s : sites) {
    if (s.n < 1 || s.k < 1 || s.n >= (std::int64_t{1} << 32) || s.k >= (std::int64_t{1} << 32))
      throw DataError("gemm_perf slice '" + dtype_ + "': site (n=" + std::to_string(s.n) +
                      ", k=" + std::to_string(s.k) + ") is out of range; expected 1 <= n, k < 2^32");
    if (site_index_.count(SiteKey(s.n, s.k)))
      throw DataError("gemm_perf slice '" + dtype_ + "': site (n=" + std::to_string(s.n) +
                      ", k=" + std::to_string(s.k) + ") given twice");
    // Sort by m, stable so a repeated m keeps its first latency; drop invalid points.
    std::vector<std::size_t> order(s.m.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return s.m[a] < s.m[b]; });
    const bool with_power = !s.power_w.empty();
    GemmSite c{s.n, s.k, {}, {}, {}};
    for (std::size_t i : order) {
      double lat = s.latency_ms[i];
      if (s.m[i] < 1 || !(lat > 0) || !std::isfinite(lat)) continue;
      if (!c.m.empty() && c.m.back() == s.m[i]) continue;
      c.m.push_back(s.m[i]);
      c.latency_ms.push_back(lat);
      if (with_power) c.power_w.push_back(i < s.power_w.size() ? s.power_w[i] : std::nan(""));
    }
    if (c.m.empty())
      throw DataError("gemm_perf slice '" + dtype_ + "': site (n=" + std::to_string(s.n) +
                      ", k=" + std::to_string(s.k) + ") has no row with m >= 1 and a positive latency");
    // Held utils: median of the tail_points boundary utils on each side.
    std::size_t t = std::min<std::size_t>(options_.tail_points, c.m.size());
    std::vector<double> lo, hi, power_lo, power_hi;
    for (std::size_t i = 0; i < t; ++i) {
      std::size_t j = c.m.size() - 1 - i;
      lo.push_back(SolMs(c.m[i], c.n, c.k) / c.latency_ms[i]);
      hi.push_back(SolMs(c.m[j], c.n, c.k) / c.latency_ms[j]);
      if (auto p = PointPower(c, i)) power_lo.push_back(*p);
      if (auto p = PointPower(c, j)) power_hi.push_back(*p);
    }
    Tail tail{Median(lo), Median(hi), std::nullopt, std::nullopt};
    if (power_lo.size() == t) tail.power_lo = Median(power_lo);
    if (power_hi.size() == t) tail.power_hi = Median(power_hi);
    tails_.push_back(tail);
    log2_n_.push_back(std::log2(static_cast<double>(c.n)));
    log2_k_.push_back(std::log2(static_cast<double>(c.k)));
    site_index_.emplace(SiteKey(c.n, c.k), static_cast<int>(sites_.size()));
    sites_.push_back(std::move(c));
  }
}

GemmSlice::GemmSlice(GemmSlice&&) noexcept = default;
GemmSlice& GemmSlice::operator=(GemmSlice&&) noexcept = default;
GemmSlice::~GemmSlice() = default;

int GemmSlice::FindSite(std::int64_t n, std::int64_t k) const {
  if (n < 1 || k < 1 || n >= (std::int64_t{1} << 32) || k >= (std::int64_t{1} << 32)) return -1;
  auto it = site_index_.find(SiteKey(n, k));
  return it == site_index_.end() ? -1 : it->second;
}

double GemmSlice::SolMs(double m, double n, double k) const {
  return sol_.GemmMs(dtype_, m, n, k);
}

GemmResult GemmSlice::EvaluateSite(std::size_t i, std::int64_t m) const {
  const GemmSite& s = sites_[i];
  double sol = SolMs(m, s.n, s.k);
  if (m < s.m.front()) return Finish(sol / tails_[i].util_lo, GemmSource::kExtrapolated, sol, tails_[i].power_lo);
  if (m > s.m.back()) return Finish(sol / tails_[i].util_hi, GemmSource::kExtrapolated, sol, tails_[i].power_hi);
  auto it = std::lower_bound(s.m.begin(), s.m.end(), m);
  std::size_t j = static_cast<std::size_t>(it - s.m.begin());
  if (*it == m) return Finish(s.latency_ms[j], GemmSource::kSilicon, sol, PointPower(s, j));
  double m0 = static_cast<double>(s.m[j - 1]), m1 = static_cast<double>(s.m[j]);
  double l0 = s.latency_ms[j - 1], l1 = s.latency_ms[j];
  const double w = (static_cast<double>(m) - m0) / (m1 - m0);
  double lat = l0 + (l1 - l0) * w;
  std::optional<double> power;
  const auto p0 = PointPower(s, j - 1), p1 = PointPower(s, j);
  if (p0 && p1) power = *p0 + (*p1 - *p0) * w;
  return Finish(lat, GemmSource::kInterpolated, sol, power);
}

GemmLookup GemmSlice::Resolve(std::int64_t m, std::int64_t n, std::int64_t k) const {
  if (m < 1 || n < 1 || k < 1)
    throw Error("GEMM query (m=" + std::to_string(m) + ", n=" + std::to_string(n) + ", k=" + std::to_string(k) +
                "): every dimension must be >= 1");
  GemmLookup out;
  int known = FindSite(n, k);
  if (known >= 0) {
    out.ok = true;
    out.result = EvaluateSite(static_cast<std::size_t>(known), m);
    return out;
  }

  // Candidates: sites whose curve spans m, else every site.
  std::vector<int> cand;
  for (std::size_t i = 0; i < sites_.size(); ++i)
    if (sites_[i].m.front() <= m && m <= sites_[i].m.back()) cand.push_back(static_cast<int>(i));
  bool spanned = !cand.empty();
  if (!spanned) {
    cand.resize(sites_.size());
    std::iota(cand.begin(), cand.end(), 0);
  }
  double qn = std::log2(static_cast<double>(n)), qk = std::log2(static_cast<double>(k));
  std::vector<double> dist(sites_.size(), 0);
  for (int i : cand) dist[i] = std::hypot(log2_n_[i] - qn, log2_k_[i] - qk);
  auto nearer = [&](int a, int b) { return dist[a] < dist[b] || (dist[a] == dist[b] && a < b); };

  const double gate = options_.max_site_distance;
  const double eps = 1e-9;  // log2 of exact powers of two may land a hair off
  std::vector<int> kept;
  for (int i : cand)
    if (dist[i] <= gate + eps) kept.push_back(i);
  bool waived = false;
  if (kept.empty() && !cand.empty()) {
    // Frontier waiver: the query lies beyond the candidates on exactly one axis
    // (above their max, never below their min on either); keep the candidates
    // within the gate on the other axis.
    double max_n = -INFINITY, min_n = INFINITY, max_k = -INFINITY, min_k = INFINITY;
    for (int i : cand) {
      max_n = std::max(max_n, log2_n_[i]);
      min_n = std::min(min_n, log2_n_[i]);
      max_k = std::max(max_k, log2_k_[i]);
      min_k = std::min(min_k, log2_k_[i]);
    }
    bool above_n = qn > max_n, above_k = qk > max_k;
    bool below = qn < min_n || qk < min_k;
    if (above_n != above_k && !below) {
      for (int i : cand) {
        double residual = above_n ? std::abs(log2_k_[i] - qk) : std::abs(log2_n_[i] - qn);
        if (residual <= gate + eps) kept.push_back(i);
      }
      waived = !kept.empty();
    }
  }
  std::size_t take = static_cast<std::size_t>(options_.nearest_sites);
  if (kept.empty()) {
    std::size_t t = std::min(take, cand.size());
    std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(t), cand.end(), nearer);
    out.miss.slice = dtype_;
    out.miss.m = m;
    out.miss.n = n;
    out.miss.k = k;
    out.miss.gate = gate;
    for (std::size_t j = 0; j < t; ++j)
      out.miss.nearest.push_back({sites_[cand[j]].n, sites_[cand[j]].k, dist[cand[j]]});
    return out;
  }
  std::size_t t = std::min(take, kept.size());
  std::partial_sort(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(t), kept.end(), nearer);

  double wsum = 0, usum = 0, psum = 0;
  bool held = false, has_power = true;
  for (std::size_t j = 0; j < t; ++j) {
    GemmResult r = EvaluateSite(static_cast<std::size_t>(kept[j]), m);
    held = held || r.source == GemmSource::kExtrapolated;
    double d = dist[kept[j]];
    double w = 1.0 / (d * d + 1e-12);
    wsum += w;
    usum += w * r.sol_fraction;
    has_power = has_power && r.power_w.has_value();
    psum += w * r.power_w.value_or(0);
  }
  double sol = SolMs(m, n, k);
  out.ok = true;
  const GemmSource source = (held || waived || !spanned) ? GemmSource::kExtrapolated : GemmSource::kInterpolated;
  out.result = Finish(sol / (usum / wsum), source, sol, has_power ? std::optional<double>(psum / wsum) : std::nullopt);
  return out;
}

GemmResult GemmSlice::Query(std::int64_t m, std::int64_t n, std::int64_t k) const {
  std::size_t slot = CacheSlot(m, n, k);
  {
    std::lock_guard<std::mutex> lock(cache_->mu);
    if (cache_->slots) {
      const CacheEntry& e = cache_->slots[slot];
      if (e.m == m && e.n == n && e.k == k) return e.result;
    }
  }
  GemmLookup r = Resolve(m, n, k);
  if (!r.ok) throw GemmMissError(std::move(r.miss));
  std::lock_guard<std::mutex> lock(cache_->mu);
  if (!cache_->slots) cache_->slots = std::make_unique<CacheEntry[]>(kCacheSlots);
  cache_->slots[slot] = {m, n, k, r.result};
  return r.result;
}

std::vector<std::pair<std::string, std::vector<GemmSite>>> GemmSitesFromTable(const Table& table) {
  const tables::TableSpec& spec = tables::GetTableSpec("gemm_perf");
  std::size_t cd = spec.KeyIndex(table, "gemm_dtype"), cm = spec.KeyIndex(table, "m"), cn = spec.KeyIndex(table, "n"),
              ck = spec.KeyIndex(table, "k"), cl = table.ColumnIndex("latency");
  const std::optional<std::size_t> cp = table.FindColumn("power");
  std::vector<std::pair<std::string, std::vector<GemmSite>>> out;
  std::unordered_map<std::string, std::size_t> dtype_index;
  std::vector<std::unordered_map<std::uint64_t, std::size_t>> site_index;
  for (std::size_t r = 0; r < table.num_rows(); ++r) {
    const std::string& dt = table.GetString(r, cd);
    auto [dit, dnew] = dtype_index.emplace(dt, out.size());
    if (dnew) {
      out.emplace_back(dt, std::vector<GemmSite>{});
      site_index.emplace_back();
    }
    auto& sites = out[dit->second].second;
    std::int64_t n = table.GetInt(r, cn), k = table.GetInt(r, ck);
    auto [sit, snew] = site_index[dit->second].emplace(SiteKey(n, k), sites.size());
    if (snew) sites.push_back(GemmSite{n, k, {}, {}, {}});
    GemmSite& s = sites[sit->second];
    s.m.push_back(table.GetInt(r, cm));
    s.latency_ms.push_back(table.GetDouble(r, cl));
    if (cp) s.power_w.push_back(table.GetDouble(r, *cp));
  }
  return out;
}

std::size_t ClampGemmSitesToSol(const std::string& gemm_dtype, std::vector<GemmSite>& sites, const Sol& sol) {
  try {
    (void)sol.GemmMs(gemm_dtype, 1, 1, 1);
  } catch (const Error&) {
    return 0;  // a quant the system cannot rate stays as-is
  }
  std::size_t raised = 0;
  for (GemmSite& s : sites) {
    for (std::size_t i = 0; i < s.m.size() && i < s.latency_ms.size(); ++i) {
      double& lat = s.latency_ms[i];
      if (s.m[i] < 1 || s.n < 1 || s.k < 1 || !(lat > 0) || !std::isfinite(lat)) continue;  // dropped later anyway
      const double floor_ms =
          sol.GemmMs(gemm_dtype, static_cast<double>(s.m[i]), static_cast<double>(s.n), static_cast<double>(s.k));
      if (lat < floor_ms) {
        lat = floor_ms;
        ++raised;
      }
    }
  }
  return raised;
}

GemmPerf::GemmPerf(const Table& table, const Sol& sol, std::string origin, GemmResolverOptions options,
                   GemmLoadClamp clamp)
    : origin_(std::move(origin)), options_(options), clamp_(clamp) {
  for (auto& [dtype, sites] : GemmSitesFromTable(table)) {
    auto e = std::make_unique<Entry>();
    e->dtype = dtype;
    Install(*e, std::move(sites), sol);
    slices_.push_back(std::move(e));
  }
}

GemmPerf::GemmPerf(std::vector<std::string> dtypes, SliceLoader load, const Sol& sol, std::string origin,
                   GemmResolverOptions options, GemmLoadClamp clamp)
    : origin_(std::move(origin)),
      sol_(std::make_unique<Sol>(sol)),
      options_(options),
      clamp_(clamp),
      load_(std::move(load)) {
  for (auto& dtype : dtypes) {
    auto e = std::make_unique<Entry>();
    e->dtype = std::move(dtype);
    slices_.push_back(std::move(e));
  }
}

GemmPerf::GemmPerf(GemmPerf&&) noexcept = default;
GemmPerf& GemmPerf::operator=(GemmPerf&&) noexcept = default;
GemmPerf::~GemmPerf() = default;

void GemmPerf::Build(Entry& e, const Table& rows) const {
  auto sliced = GemmSitesFromTable(rows);
  std::vector<GemmSite> sites;
  for (auto& [dtype, s] : sliced) {
    if (dtype != e.dtype)
      throw Error(origin_ + ": the rows loaded for gemm_dtype '" + e.dtype + "' hold gemm_dtype '" + dtype + "'");
    sites = std::move(s);
  }
  Install(e, std::move(sites), *sol_);
}

void GemmPerf::Install(Entry& e, std::vector<GemmSite> sites, const Sol& sol) const {
  if (clamp_ == GemmLoadClamp::kSol) ClampGemmSitesToSol(e.dtype, sites, sol);
  try {
    e.slice = std::make_unique<GemmSlice>(e.dtype, std::move(sites), sol, options_);
  } catch (const DataError&) {
    throw;  // a malformed row: an error of the table
  } catch (const Error&) {  // a quant SOL cannot rate: raised when the slice is asked for
    e.error = std::current_exception();
  }
  e.built = true;
  if (e.slice) e.ready.store(e.slice.get(), std::memory_order_release);
}

std::vector<std::string> GemmPerf::gemm_dtypes() const {
  std::vector<std::string> out;
  for (const auto& e : slices_) out.push_back(e->dtype);
  return out;
}

const GemmSlice& GemmPerf::Slice(std::string_view quant) const {
  std::string_view dtype = quant == "fp8_static" ? std::string_view("fp8") : quant;
  for (const auto& e : slices_) {
    if (e->dtype != dtype) continue;
    if (const GemmSlice* ready = e->ready.load(std::memory_order_acquire)) return *ready;
    std::lock_guard<std::mutex> lock(e->mu);
    if (!e->built) {
      // A load or build that fails fails the same way next time (the same file):
      // keep the error and raise it on every call rather than re-reading.
      try {
        Build(*e, load_(e->dtype));
      } catch (...) {
        e->error = std::current_exception();
        e->built = true;
      }
    }
    if (!e->slice) std::rethrow_exception(e->error);
    return *e->slice;
  }
  std::string have;
  for (const auto& e : slices_) have += (have.empty() ? "" : ", ") + e->dtype;
  throw MissingDataError(origin_ + ": no rows with gemm_dtype '" + std::string(dtype) + "' (quant '" +
                         std::string(quant) + "'); present: " + (have.empty() ? "none" : have));
}

GemmResult GemmPerf::Query(std::string_view quant, std::int64_t m, std::int64_t n, std::int64_t k) const {
  return Slice(quant).Query(m, n, k);
}

}  // namespace servecast::perfdb
