#include "collect/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "core/error.h"
#include "core/hash.h"
#include "tables/table_spec.h"

namespace servecast::collect {

namespace {

// Uniform in [0, 1) with 53 random bits.
double Unit(SplitMix64& rng) {
  return static_cast<double>(rng.Next() >> 11) * 0x1.0p-53;
}

std::string ShapeText(const MoeRoutingShape& s) {
  return "num_tokens=" + std::to_string(s.num_tokens) + " num_experts=" + std::to_string(s.num_experts) +
         " topk=" + std::to_string(s.topk) + " moe_ep_size=" + std::to_string(s.moe_ep_size) + " distribution='" +
         s.distribution + "'";
}

// The exponent of "power_law_<alpha>", 0 for "balanced"; throws for anything else.
double ParseAlpha(const MoeRoutingShape& s) {
  if (std::optional<double> alpha = tables::ExpertLoadAlpha(s.distribution)) return *alpha;
  const std::string& d = s.distribution;
  throw Error("moe routing: unknown distribution '" + d +
              "'; expected \"balanced\" or \"power_law_<alpha>\" with alpha > 0 (\"power_law_1.01\", "
              "\"power_law_1.2\")");
}

void Validate(const MoeRoutingShape& s) {
  auto fail = [&](const std::string& what) { throw Error("moe routing: " + what + " (" + ShapeText(s) + ")"); };
  if (s.num_tokens < 1) fail("num_tokens must be >= 1");
  if (s.num_experts < 1) fail("num_experts must be >= 1");
  if (s.topk < 1) fail("topk must be >= 1");
  if (s.topk > s.num_experts) fail("topk must be <= num_experts (a token picks distinct experts)");
  if (s.moe_ep_size < 1) fail("moe_ep_size must be >= 1");
  if (s.num_experts % s.moe_ep_size != 0) fail("num_experts must be a multiple of moe_ep_size");
}

// Balanced: assignment a = t·topk + j goes to stride_order[a mod E], where the
// stride order lists the experts 0, s, 2s, ..., then 1, 1+s, ... with stride
// s = ceil(E / topk). Consecutive assignments are distinct experts (topk <= E),
// every expert gets floor or ceil of T·topk / E, and one token's picks are spread
// over the expert range (over all EP ranks) as with AIC's stride pattern.
std::vector<std::int32_t> BalancedExperts(const MoeRoutingShape& s) {
  const std::int64_t E = s.num_experts, stride = (E + s.topk - 1) / s.topk;
  std::vector<std::int32_t> order;
  order.reserve(static_cast<std::size_t>(E));
  for (std::int64_t r = 0; r < stride; ++r)
    for (std::int64_t e = r; e < E; e += stride) order.push_back(static_cast<std::int32_t>(e));
  std::vector<std::int32_t> ids(static_cast<std::size_t>(s.num_tokens * s.topk));
  for (std::size_t a = 0; a < ids.size(); ++a) ids[a] = order[a % static_cast<std::size_t>(E)];
  return ids;
}

// x ~ density ∝ x^-alpha on [lo, hi], by inverting the CDF.
double SamplePowerLaw(SplitMix64& rng, double alpha, double lo, double hi) {
  double u = Unit(rng);
  if (std::fabs(alpha - 1) < 1e-12) return lo * std::pow(hi / lo, u);
  double a = std::pow(lo, 1 - alpha), b = std::pow(hi, 1 - alpha);
  return std::pow(a + u * (b - a), 1 / (1 - alpha));
}

// Power-law expert loads: counts[e] >= 0, sum T·topk, each <= T, the most
// loaded EP rank's block moved to rank 0.
std::vector<std::int64_t> PowerLawCounts(const MoeRoutingShape& s, double alpha, SplitMix64& rng) {
  const std::int64_t T = s.num_tokens, E = s.num_experts, total = T * s.topk;
  const std::int64_t local = E / s.moe_ep_size;
  double lo = 1, hi = 0.8 * static_cast<double>(T);
  if (total <= E || hi <= lo) lo = 0.01, hi = 2;
  std::vector<double> x(static_cast<std::size_t>(E));
  for (auto& v : x) v = SamplePowerLaw(rng, alpha, lo, hi);
  double sum = std::accumulate(x.begin(), x.end(), 0.0);

  // Rescale to the total; largest remainders (ties to the lower expert) round it.
  std::vector<std::int64_t> counts(static_cast<std::size_t>(E));
  std::vector<std::pair<double, std::int64_t>> rem;
  std::int64_t given = 0;
  for (std::int64_t e = 0; e < E; ++e) {
    double share = x[e] / sum * static_cast<double>(total);
    counts[e] = static_cast<std::int64_t>(std::floor(share));
    given += counts[e];
    rem.emplace_back(share - static_cast<double>(counts[e]), e);
  }
  std::stable_sort(rem.begin(), rem.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t i = 0; given < total; i = (i + 1) % rem.size(), ++given) ++counts[rem[i].second];

  // An expert takes a token at most once: clamp to T, then hand the overflow out
  // round-robin over the EP ranks (local slot i of rank 0, 1, ..., then slot i + 1).
  std::int64_t overflow = 0;
  for (auto& c : counts)
    if (c > T) overflow += c - T, c = T;
  for (std::int64_t k = 0; overflow > 0; k = (k + 1) % E) {
    std::int64_t e = (k % s.moe_ep_size) * local + k / s.moe_ep_size;
    if (counts[e] < T) ++counts[e], --overflow;
  }

  // The most loaded EP rank (the lowest one on a tie) becomes rank 0.
  std::int64_t best = 0, best_load = -1;
  for (std::int64_t r = 0; r < s.moe_ep_size; ++r) {
    std::int64_t load = std::accumulate(counts.begin() + r * local, counts.begin() + (r + 1) * local, std::int64_t{0});
    if (load > best_load) best = r, best_load = load;
  }
  if (best != 0) std::swap_ranges(counts.begin(), counts.begin() + local, counts.begin() + best * local);
  return counts;
}

// Token assignment for given loads: walk the experts in order and give expert e
// the next counts[e] positions of p = 0, 1, ..., T·topk − 1, where position p is
// token p mod T. A token owns the positions t, t + T, ... (exactly topk of them),
// and one expert's run of <= T consecutive positions holds at most one of them,
// so no token picks an expert twice.
std::vector<std::int32_t> AssignColumnMajor(const MoeRoutingShape& s, const std::vector<std::int64_t>& counts) {
  const std::int64_t T = s.num_tokens;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(T * s.topk));
  std::int64_t p = 0;
  for (std::int64_t e = 0; e < s.num_experts; ++e)
    for (std::int64_t i = 0; i < counts[e]; ++i, ++p) ids[(p % T) * s.topk + p / T] = static_cast<std::int32_t>(e);
  return ids;
}

// Logits: picked experts in [1, 2), strictly decreasing with the slot j while
// topk <= 128 (so a sorted top-k returns expert_ids in order), unpicked ones in
// (−1, 0]; every value is k/128 (exact in bfloat16). Weights: softmax over the
// token's picked logits.
void FillLogitsAndWeights(MoeRouting& r, SplitMix64& rng) {
  const std::int64_t T = r.num_tokens, E = r.num_experts, K = r.topk;
  r.logits.assign(static_cast<std::size_t>(T * E), 0.0f);
  r.weights.assign(static_cast<std::size_t>(T * K), 0.0f);
  std::vector<int> levels(128);
  std::vector<double> picked(static_cast<std::size_t>(K));
  for (std::int64_t t = 0; t < T; ++t) {
    float* row = r.logits.data() + t * E;
    // Unpicked levels: 7 uniform bits each, nine from one 64-bit draw (the logits of
    // a 16384-token, 256-expert routing are 4M values; one draw each was the slowest
    // part of preparing a case).
    std::uint64_t bits = 0;
    for (std::int64_t e = 0; e < E; ++e) {
      if (e % 9 == 0) bits = rng.Next();
      row[e] = -static_cast<float>(bits & 127u) / 128.0f;
      bits >>= 7;
    }
    // topk distinct levels of 128 (a partial Fisher-Yates shuffle), sorted descending.
    std::iota(levels.begin(), levels.end(), 0);
    const std::int64_t distinct = std::min<std::int64_t>(K, 128);
    for (std::int64_t j = 0; j < distinct; ++j)
      std::swap(levels[j], levels[j + static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(128 - j)))]);
    std::sort(levels.begin(), levels.begin() + distinct, std::greater<>());
    double max_logit = 0;
    for (std::int64_t j = 0; j < K; ++j) {
      float v = 1.0f + static_cast<float>(levels[j % distinct]) / 128.0f;
      row[r.expert_ids[t * K + j]] = v;
      picked[j] = v;
      max_logit = std::max(max_logit, picked[j]);
    }
    double z = 0;
    for (auto& v : picked) z += (v = std::exp(v - max_logit));
    for (std::int64_t j = 0; j < K; ++j) r.weights[t * K + j] = static_cast<float>(picked[j] / z);
  }
}

}  // namespace

MoeRouting SynthesizeMoeRouting(const MoeRoutingShape& shape, std::uint64_t seed, int sample) {
  Validate(shape);
  const double alpha = ParseAlpha(shape);
  if (sample < 0) throw Error("moe routing: sample must be >= 0; got " + std::to_string(sample));
  MoeRouting r;
  r.num_tokens = shape.num_tokens;
  r.num_experts = shape.num_experts;
  r.topk = shape.topk;
  r.local_experts = shape.num_experts / shape.moe_ep_size;

  // One stream per sample: the counts of sample s do not depend on other samples.
  SplitMix64 mix(seed ^ (static_cast<std::uint64_t>(sample) + 1) * 0x9E3779B97F4A7C15ULL);
  SplitMix64 rng(mix.Next());
  if (alpha == 0) {
    r.expert_ids = BalancedExperts(shape);
  } else {
    r.expert_ids = AssignColumnMajor(shape, PowerLawCounts(shape, alpha, rng));
  }
  r.tokens_per_expert.assign(static_cast<std::size_t>(shape.num_experts), 0);
  for (std::int32_t e : r.expert_ids) ++r.tokens_per_expert[e];
  r.local_assignments =
      std::accumulate(r.tokens_per_expert.begin(), r.tokens_per_expert.begin() + r.local_experts, std::int64_t{0});
  FillLogitsAndWeights(r, rng);
  return r;
}

}  // namespace servecast::collect
