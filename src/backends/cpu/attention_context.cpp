#include "backends/cpu/attention_context.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "backends/cpu/cpu_timer.h"
#include "collect/case.h"
#include "core/error.h"

namespace servecast::cpu {
namespace {

// One (batch, KV head, query tile) at a time: the G query heads that share the KV
// head and kPrefillQueryTile positions each (G·tile rows of online-softmax state),
// walking the visible keys in tiles of kPrefillKeyTile so that a key/value tile is
// reused from cache by all rows.
template <int H>
void FlashPrefillImpl(const AttentionShape& sh, const float* __restrict q, const float* __restrict k,
                      const float* __restrict v, float* __restrict out, PrefillWorkspace& ws) {
  const std::int64_t S = sh.isl, N = sh.num_heads, KV = sh.num_kv_heads, G = sh.group(), W = sh.window;
  const float scale = 1.0f / std::sqrt(static_cast<float>(H));
  const std::int64_t state_rows = G * kPrefillQueryTile;
  ws.acc.resize(static_cast<std::size_t>(state_rows * H));
  ws.row_max.resize(static_cast<std::size_t>(state_rows));
  ws.row_sum.resize(static_cast<std::size_t>(state_rows));
  ws.scores.resize(static_cast<std::size_t>(kPrefillKeyTile));
  float* __restrict acc = ws.acc.data();
  float* __restrict row_max = ws.row_max.data();
  float* __restrict row_sum = ws.row_sum.data();
  float* __restrict scores = ws.scores.data();

  for (std::int64_t b = 0; b < sh.batch; ++b) {
    for (std::int64_t g = 0; g < KV; ++g) {
      for (std::int64_t q0 = 0; q0 < S; q0 += kPrefillQueryTile) {
        const std::int64_t rows = std::min(kPrefillQueryTile, S - q0);
        std::fill(acc, acc + state_rows * H, 0.0f);
        std::fill(row_max, row_max + state_rows, -std::numeric_limits<float>::infinity());
        std::fill(row_sum, row_sum + state_rows, 0.0f);

        const std::int64_t k_end = q0 + rows;  // causal: no query of the tile sees beyond it
        for (std::int64_t k0 = FirstVisibleKey(q0, W); k0 < k_end; k0 += kPrefillKeyTile) {
          const std::int64_t k1 = std::min(k0 + kPrefillKeyTile, k_end);
          for (std::int64_t hh = 0; hh < G; ++hh) {
            const std::int64_t hq = g * G + hh;
            for (std::int64_t i = 0; i < rows; ++i) {
              const std::int64_t pos = q0 + i;
              const std::int64_t lo = std::max(k0, FirstVisibleKey(pos, W));
              const std::int64_t hi = std::min(k1, pos + 1);
              if (lo >= hi) continue;
              const float* qi = q + ((b * S + pos) * N + hq) * H;
              ScoreKeys<H>(
                  qi, [&](std::int64_t j) { return k + ((b * S + lo + j) * KV + g) * H; }, hi - lo, scale, scores);
              const std::int64_t r = hh * kPrefillQueryTile + i;
              OnlineSoftmaxUpdate<H>(
                  scores, hi - lo, [&](std::int64_t j) { return v + ((b * S + lo + j) * KV + g) * H; }, row_max[r],
                  row_sum[r], acc + r * H);
            }
          }
        }

        for (std::int64_t hh = 0; hh < G; ++hh) {
          for (std::int64_t i = 0; i < rows; ++i) {
            const std::int64_t r = hh * kPrefillQueryTile + i;
            const float inv = 1.0f / row_sum[r];
            float* o = out + ((b * S + q0 + i) * N + g * G + hh) * H;
            for (int d = 0; d < H; ++d) o[d] = acc[r * H + d] * inv;
          }
        }
      }
    }
  }
}

class AttentionContextOp : public collect::TableOp {
 public:
  AttentionContextOp() : TableOp("attention_context", TableOrThrow("context_attention_perf")) {}

  double MemoryBytes(const collect::Params& p) const override {
    AttentionParams parsed = ParseAttentionParams(p, AttentionPhase::kContext);
    if (parsed.failure) return 0;  // Run reports it
    const AttentionShape& s = parsed.shape;
    double tokens = static_cast<double>(s.batch * s.isl);
    double hd = static_cast<double>(s.head_dim);
    double tensors = tokens * hd * static_cast<double>(2 * s.num_heads + 2 * s.num_kv_heads);
    double workspace = static_cast<double>(s.group() * kPrefillQueryTile * (s.head_dim + 2) + kPrefillKeyTile);
    return 4 * (tensors + workspace);
  }

  collect::CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override {
    AttentionParams parsed = ParseAttentionParams(c.params, AttentionPhase::kContext);
    if (parsed.failure) return *parsed.failure;
    const AttentionShape& s = parsed.shape;
    const auto q_elems = static_cast<std::size_t>(s.batch * s.isl * s.num_heads * s.head_dim);
    const auto kv_elems = static_cast<std::size_t>(s.batch * s.isl * s.num_kv_heads * s.head_dim);
    std::vector<float> q(q_elems), k(kv_elems), v(kv_elems);
    std::vector<float> out(q_elems, std::numeric_limits<float>::quiet_NaN());
    Rng rq(SeedFromCaseId(c.id, 1)), rk(SeedFromCaseId(c.id, 2)), rv(SeedFromCaseId(c.id, 3));
    FillUniform(q.data(), q.size(), rq, -kQueryRange, kQueryRange);
    FillUniform(k.data(), k.size(), rk, -kKeyValueRange, kKeyValueRange);
    FillUniform(v.data(), v.size(), rv, -kKeyValueRange, kKeyValueRange);

    PrefillWorkspace ws;
    if (!FlashPrefill(s, q.data(), k.data(), v.data(), out.data(), ws))
      return NotSupported("UnsupportedHeadDim", "attention_context: head_dim " + std::to_string(s.head_dim));
    RefCheck check = CheckPrefill(s, q.data(), k.data(), v.data(), out.data(), SeedFromCaseId(c.id, 4));
    if (!check.ok()) return IncorrectOutput(name(), check, "out", kAttentionToleranceRule);

    collect::TimingStats stats =
        TimeCpu([&] { FlashPrefill(s, q.data(), k.data(), v.data(), out.data(), ws); }, ctx.timing);
    return PassedRow(*this, c, ctx, "servecast_cpu_flash_prefill", stats);
  }

};

}  // namespace

bool FlashPrefill(const AttentionShape& shape, const float* q, const float* k, const float* v, float* out,
                  PrefillWorkspace& ws) {
  if (shape.num_kv_heads <= 0 || shape.num_heads % shape.num_kv_heads != 0)
    throw Error("FlashPrefill: num_heads " + std::to_string(shape.num_heads) + " is not a multiple of " +
                std::to_string(shape.num_kv_heads) + " KV heads");
  return DispatchHeadDim(shape.head_dim,
                         [&](auto h) { FlashPrefillImpl<decltype(h)::value>(shape, q, k, v, out, ws); });
}

RefCheck CheckPrefill(const AttentionShape& sh, const float* q, const float* k, const float* v, const float* out,
                      std::uint64_t seed, std::int64_t samples) {
  struct Point {
    std::int64_t b, h, pos;
  };
  const std::int64_t S = sh.isl, N = sh.num_heads, KV = sh.num_kv_heads, H = sh.head_dim, G = sh.group();
  Rng rng(seed);
  auto any_b = [&] { return static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(sh.batch))); };
  auto any_h = [&] { return static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(N))); };
  std::vector<Point> points = {{0, 0, 0}, {sh.batch - 1, N - 1, S - 1}, {any_b(), any_h(), S - 1}};
  if (sh.window > 0 && sh.window < S) {
    points.push_back({any_b(), any_h(), sh.window - 1});  // the last position that sees key 0
    points.push_back({any_b(), any_h(), sh.window});      // the first that does not
  }
  while (static_cast<std::int64_t>(points.size()) < samples)
    points.push_back({any_b(), any_h(), static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(S)))});

  RefCheck check;
  for (const Point& pt : points) {
    const std::int64_t g = pt.h / G;
    const float* qi = q + ((pt.b * S + pt.pos) * N + pt.h) * H;
    ReferenceRow ref = ReferenceAttentionRow(
        qi, H, pt.pos, sh.window, [&](std::int64_t j) { return k + ((pt.b * S + j) * KV + g) * H; },
        [&](std::int64_t j) { return v + ((pt.b * S + j) * KV + g) * H; });
    const float* o = out + ((pt.b * S + pt.pos) * N + pt.h) * H;
    for (std::int64_t d = 0; d < H; ++d) {
      double tol = kAttentionRtol * ref.scale[d] + kAttentionAtol;
      check.Add(o[d], ref.out[d], tol, [&] {
        return "out[b=" + std::to_string(pt.b) + ",s=" + std::to_string(pt.pos) + ",head=" + std::to_string(pt.h) +
               ",d=" + std::to_string(d) + "]";
      });
    }
  }
  return check;
}

std::unique_ptr<collect::Op> MakeAttentionContextOp() {
  return std::make_unique<AttentionContextOp>();
}

}  // namespace servecast::cpu
