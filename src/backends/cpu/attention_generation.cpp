#include "backends/cpu/attention_generation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "backends/cpu/cpu_timer.h"
#include "collect/case.h"
#include "core/error.h"

namespace servecast::cpu {
namespace {

std::int64_t PagesFor(std::int64_t tokens) {
  return (tokens + kKvPageSize - 1) / kKvPageSize;
}

// One (sequence, KV head) at a time: its G query heads walk the visible tokens
// page by page, so each page of K and V is read from memory once and reused from
// cache by all G heads.
template <int H>
void PagedDecodeImpl(const AttentionShape& sh, const float* __restrict q, const PagedKvCache& cache,
                     float* __restrict out, DecodeWorkspace& ws) {
  const std::int64_t N = sh.num_heads, KV = sh.num_kv_heads, G = sh.group();
  const std::int64_t tokens = sh.step + 1;
  const std::int64_t first = FirstVisibleKey(tokens - 1, sh.window);
  const float scale = 1.0f / std::sqrt(static_cast<float>(H));
  ws.acc.resize(static_cast<std::size_t>(G * H));
  ws.row_max.resize(static_cast<std::size_t>(G));
  ws.row_sum.resize(static_cast<std::size_t>(G));
  ws.scores.resize(static_cast<std::size_t>(kKvPageSize));
  float* __restrict acc = ws.acc.data();
  float* __restrict row_max = ws.row_max.data();
  float* __restrict row_sum = ws.row_sum.data();
  float* __restrict scores = ws.scores.data();
  const float* k_pool = cache.k.data();
  const float* v_pool = cache.v.data();

  for (std::int64_t b = 0; b < sh.batch; ++b) {
    const std::int32_t* table = cache.page_table.data() + b * cache.pages_per_seq;
    for (std::int64_t g = 0; g < KV; ++g) {
      std::fill(acc, acc + G * H, 0.0f);
      std::fill(row_max, row_max + G, -std::numeric_limits<float>::infinity());
      std::fill(row_sum, row_sum + G, 0.0f);
      for (std::int64_t p = first / kKvPageSize; p * kKvPageSize < tokens; ++p) {
        const std::int64_t base = p * kKvPageSize;
        const std::int64_t t0 = std::max(first, base) - base;
        const std::int64_t t1 = std::min(tokens, base + kKvPageSize) - base;
        const std::int64_t head_offset = (table[p] * KV + g) * kKvPageSize * H;
        const float* k_page = k_pool + head_offset;
        const float* v_page = v_pool + head_offset;
        for (std::int64_t hh = 0; hh < G; ++hh) {
          const float* qh = q + (b * N + g * G + hh) * H;
          ScoreKeys<H>(
              qh, [&](std::int64_t j) { return k_page + (t0 + j) * H; }, t1 - t0, scale, scores);
          OnlineSoftmaxUpdate<H>(
              scores, t1 - t0, [&](std::int64_t j) { return v_page + (t0 + j) * H; }, row_max[hh], row_sum[hh],
              acc + hh * H);
        }
      }
      for (std::int64_t hh = 0; hh < G; ++hh) {
        const float inv = 1.0f / row_sum[hh];
        float* o = out + (b * N + g * G + hh) * H;
        for (int d = 0; d < H; ++d) o[d] = acc[hh * H + d] * inv;
      }
    }
  }
}

class AttentionGenerationOp : public collect::TableOp {
 public:
  AttentionGenerationOp() : TableOp("attention_generation", TableOrThrow("generation_attention_perf")) {}

  double MemoryBytes(const collect::Params& p) const override {
    AttentionParams parsed = ParseAttentionParams(p, AttentionPhase::kGeneration);
    if (parsed.failure) return 0;  // Run reports it
    const AttentionShape& s = parsed.shape;
    double q_and_out = 2.0 * 4 * static_cast<double>(s.batch * s.num_heads * s.head_dim);
    double workspace = 4.0 * static_cast<double>(s.group() * (s.head_dim + 2) + kKvPageSize);
    return q_and_out + workspace + PagedKvCacheBytes(s.batch, s.step + 1, s.num_kv_heads, s.head_dim);
  }

  collect::CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override {
    AttentionParams parsed = ParseAttentionParams(c.params, AttentionPhase::kGeneration);
    if (parsed.failure) return *parsed.failure;
    const AttentionShape& s = parsed.shape;
    if (s.batch * PagesFor(s.step + 1) > std::numeric_limits<std::int32_t>::max())
      return NotSupported("ShapeTooLarge", "attention_generation: the KV cache needs more than 2^31 pages");

    const auto q_elems = static_cast<std::size_t>(s.batch * s.num_heads * s.head_dim);
    std::vector<float> q(q_elems);
    std::vector<float> out(q_elems, std::numeric_limits<float>::quiet_NaN());
    Rng rq(SeedFromCaseId(c.id, 1)), rk(SeedFromCaseId(c.id, 2)), rv(SeedFromCaseId(c.id, 3));
    Rng rpages(SeedFromCaseId(c.id, 4));
    FillUniform(q.data(), q.size(), rq, -kQueryRange, kQueryRange);
    PagedKvCache cache = MakePagedKvCache(s.batch, s.step + 1, s.num_kv_heads, s.head_dim, rpages);
    // Every slot, used or not: a kernel that reads past a sequence's end reads noise.
    FillUniform(cache.k.data(), cache.k.size(), rk, -kKeyValueRange, kKeyValueRange);
    FillUniform(cache.v.data(), cache.v.size(), rv, -kKeyValueRange, kKeyValueRange);

    DecodeWorkspace ws;
    if (!PagedDecode(s, q.data(), cache, out.data(), ws))
      return NotSupported("UnsupportedHeadDim", "attention_generation: head_dim " + std::to_string(s.head_dim));
    RefCheck check = CheckDecode(s, q.data(), cache, out.data(), SeedFromCaseId(c.id, 5));
    if (!check.ok()) return IncorrectOutput(name(), check, "out", kAttentionToleranceRule);

    collect::TimingStats stats = TimeCpu([&] { PagedDecode(s, q.data(), cache, out.data(), ws); }, ctx.timing);
    return PassedRow(*this, c, ctx, "servecast_cpu_paged_decode", stats);
  }

};

}  // namespace

double PagedKvCacheBytes(std::int64_t batch, std::int64_t tokens, std::int64_t num_kv_heads, std::int64_t head_dim) {
  double pages = static_cast<double>(batch * PagesFor(tokens));
  double page_floats = static_cast<double>(num_kv_heads * kKvPageSize * head_dim);
  return 2 * 4 * pages * page_floats + 4 * pages;
}

PagedKvCache MakePagedKvCache(std::int64_t batch, std::int64_t tokens, std::int64_t num_kv_heads, std::int64_t head_dim,
                              Rng& rng) {
  PagedKvCache cache;
  cache.num_kv_heads = num_kv_heads;
  cache.head_dim = head_dim;
  cache.pages_per_seq = PagesFor(tokens);
  cache.num_pages = batch * cache.pages_per_seq;
  const auto floats = static_cast<std::size_t>(cache.num_pages * num_kv_heads * kKvPageSize * head_dim);
  cache.k.assign(floats, 0.0f);
  cache.v.assign(floats, 0.0f);
  cache.page_table.resize(static_cast<std::size_t>(cache.num_pages));
  std::iota(cache.page_table.begin(), cache.page_table.end(), 0);
  for (std::size_t i = cache.page_table.size(); i > 1; --i)  // Fisher–Yates
    std::swap(cache.page_table[i - 1], cache.page_table[rng.Below(i)]);
  return cache;
}

bool PagedDecode(const AttentionShape& shape, const float* q, const PagedKvCache& cache, float* out,
                 DecodeWorkspace& ws) {
  if (shape.num_kv_heads <= 0 || shape.num_heads % shape.num_kv_heads != 0)
    throw Error("PagedDecode: num_heads " + std::to_string(shape.num_heads) + " is not a multiple of " +
                std::to_string(shape.num_kv_heads) + " KV heads");
  if (cache.num_kv_heads != shape.num_kv_heads || cache.head_dim != shape.head_dim ||
      cache.pages_per_seq * kKvPageSize < shape.step + 1 ||
      static_cast<std::int64_t>(cache.page_table.size()) < shape.batch * cache.pages_per_seq)
    throw Error("PagedDecode: the KV cache does not match the shape (batch " + std::to_string(shape.batch) + ", " +
                std::to_string(shape.step + 1) + " tokens, " + std::to_string(shape.num_kv_heads) +
                " KV heads, head_dim " + std::to_string(shape.head_dim) + ")");
  return DispatchHeadDim(shape.head_dim,
                         [&](auto h) { PagedDecodeImpl<decltype(h)::value>(shape, q, cache, out, ws); });
}

RefCheck CheckDecode(const AttentionShape& sh, const float* q, const PagedKvCache& cache, const float* out,
                     std::uint64_t seed, std::int64_t samples) {
  const std::int64_t N = sh.num_heads, H = sh.head_dim, G = sh.group();
  const std::int64_t pos = sh.step;  // the query's own position; keys 0..pos
  Rng rng(seed);
  std::vector<std::int64_t> rows = SampleIndices(sh.batch * N, samples, rng);  // row = b·N + head
  RefCheck check;
  for (std::int64_t row : rows) {
    const std::int64_t b = row / N, h = row % N, g = h / G;
    ReferenceRow ref = ReferenceAttentionRow(
        q + row * H, H, pos, sh.window, [&](std::int64_t j) { return cache.Key(b, j, g); },
        [&](std::int64_t j) { return cache.Value(b, j, g); });
    for (std::int64_t d = 0; d < H; ++d) {
      double tol = kAttentionRtol * ref.scale[d] + kAttentionAtol;
      check.Add(out[row * H + d], ref.out[d], tol, [&] {
        return "out[b=" + std::to_string(b) + ",head=" + std::to_string(h) + ",d=" + std::to_string(d) + "]";
      });
    }
  }
  return check;
}

std::unique_ptr<collect::Op> MakeAttentionGenerationOp() {
  return std::make_unique<AttentionGenerationOp>();
}

}  // namespace servecast::cpu
