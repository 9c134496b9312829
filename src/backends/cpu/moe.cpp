#include "backends/cpu/moe.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_timer.h"
#include "backends/cpu/openblas.h"
#include "backends/cpu/silu_and_mul.h"
#include "collect/case.h"
#include "core/error.h"

namespace servecast::cpu {

namespace {

template <class T>
void Grow(std::vector<T>& v, std::int64_t n) {
  if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
}

// Top-k of one row of logits, descending (the lower expert first on a tie), then
// softmax over the k picked.
void RouteToken(const float* logits, std::int64_t num_experts, std::int64_t k, std::int32_t* ids, float* weights) {
  std::int64_t have = 0;
  for (std::int64_t e = 0; e < num_experts; ++e) {
    float v = logits[e];
    if (have == k && !(v > weights[k - 1])) continue;
    std::int64_t pos = have < k ? have++ : k - 1;
    while (pos > 0 && v > weights[pos - 1]) {
      weights[pos] = weights[pos - 1];
      ids[pos] = ids[pos - 1];
      --pos;
    }
    weights[pos] = v;
    ids[pos] = static_cast<std::int32_t>(e);
  }
  float max_logit = weights[0], z = 0;
  for (std::int64_t j = 0; j < k; ++j) z += (weights[j] = std::exp(weights[j] - max_logit));
  for (std::int64_t j = 0; j < k; ++j) weights[j] /= z;
}

}  // namespace

void MoeForward(const MoeShape& s, const float* x, const float* logits, const float* w13, const float* w2, float* out,
                MoeWorkspace& ws) {
  const std::int64_t T = s.num_tokens, H = s.hidden, I = s.inter, K = s.topk, L = s.local_experts;
  Grow(ws.topk_ids, T * K);
  Grow(ws.topk_weights, T * K);
  for (std::int64_t t = 0; t < T; ++t)
    RouteToken(logits + t * s.num_experts, s.num_experts, K, ws.topk_ids.data() + t * K,
               ws.topk_weights.data() + t * K);

  // Permute: rows grouped by local expert, tokens in order within an expert.
  ws.expert_offsets.assign(static_cast<std::size_t>(L + 1), 0);
  for (std::int64_t a = 0; a < T * K; ++a)
    if (ws.topk_ids[a] < L) ++ws.expert_offsets[ws.topk_ids[a] + 1];
  for (std::int64_t e = 0; e < L; ++e) ws.expert_offsets[e + 1] += ws.expert_offsets[e];
  const std::int64_t rows = ws.expert_offsets[L];
  Grow(ws.row_token, rows);
  Grow(ws.row_weight, rows);
  Grow(ws.xp, rows * H);
  Grow(ws.gate_up, rows * 2 * I);
  Grow(ws.act, rows * I);
  Grow(ws.y, rows * H);
  ws.fill.assign(ws.expert_offsets.begin(), ws.expert_offsets.end() - 1);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t j = 0; j < K; ++j) {
      std::int32_t e = ws.topk_ids[t * K + j];
      if (e >= L) continue;
      std::int64_t r = ws.fill[e]++;
      ws.row_token[r] = t;
      ws.row_weight[r] = ws.topk_weights[t * K + j];
      std::memcpy(ws.xp.data() + r * H, x + t * H, static_cast<std::size_t>(H) * sizeof(float));
    }

  // Experts: gate+up GEMM, activation, down GEMM.
  const OpenBlas::SgemmFn sgemm = LoadOpenBlas().sgemm;
  const int hi = static_cast<int>(H), ii = static_cast<int>(I), i2 = static_cast<int>(2 * I);
  for (std::int64_t e = 0; e < L; ++e) {
    const std::int64_t r0 = ws.expert_offsets[e], n = ws.expert_offsets[e + 1] - r0;
    if (n == 0) continue;
    const int ni = static_cast<int>(n);
    float* gu = ws.gate_up.data() + r0 * 2 * I;
    float* act = ws.act.data() + r0 * I;
    sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, i2, hi, 1.0f, ws.xp.data() + r0 * H, hi, w13 + e * H * 2 * I,
          i2, 0.0f, gu, i2);
    SiluAndMul(gu, act, n, I);
    sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, hi, ii, 1.0f, act, ii, w2 + e * I * H, hi, 0.0f,
          ws.y.data() + r0 * H, hi);
  }

  // Un-permute with the weighted combine.
  std::memset(out, 0, static_cast<std::size_t>(T * H) * sizeof(float));
  for (std::int64_t r = 0; r < rows; ++r) {
    float* __restrict o = out + ws.row_token[r] * H;
    const float* __restrict y = ws.y.data() + r * H;
    const float w = ws.row_weight[r];
    for (std::int64_t d = 0; d < H; ++d) o[d] += w * y[d];
  }
}

RefCheck CheckMoe(const MoeShape& s, const float* x, const collect::MoeRouting& routing, const float* w13,
                  const float* w2, const float* out, const std::vector<std::int64_t>& tokens) {
  const std::int64_t H = s.hidden, I = s.inter, K = s.topk, L = s.local_experts;
  const double u = kFloat32Roundoff;
  const double gamma_h = Gamma(H + 2), gamma_i = Gamma(I + 2), gamma_k = Gamma(K + 1);
  std::vector<double> gu(static_cast<std::size_t>(2 * I)), gu_abs(gu.size());
  std::vector<double> a(static_cast<std::size_t>(I)), a_err(a.size());
  std::vector<double> ref(static_cast<std::size_t>(H)), bound(ref.size());
  RefCheck check;
  for (std::int64_t t : tokens) {
    std::fill(ref.begin(), ref.end(), 0.0);
    std::fill(bound.begin(), bound.end(), 0.0);
    const float* xt = x + t * H;
    for (std::int64_t j = 0; j < K; ++j) {
      const std::int64_t e = routing.expert_ids[t * K + j];
      if (e >= L) continue;
      const double w = routing.weights[t * K + j];
      const float* w13e = w13 + e * H * 2 * I;
      const float* w2e = w2 + e * I * H;
      std::fill(gu.begin(), gu.end(), 0.0);
      std::fill(gu_abs.begin(), gu_abs.end(), 0.0);
      for (std::int64_t k = 0; k < H; ++k) {
        const double xk = xt[k];
        const float* row = w13e + k * 2 * I;
        for (std::int64_t c = 0; c < 2 * I; ++c) {
          double p = xk * row[c];
          gu[c] += p;
          gu_abs[c] += std::fabs(p);
        }
      }
      for (std::int64_t i = 0; i < I; ++i) {
        const double g = gu[i], up = gu[I + i];
        const double sig = 1 / (1 + std::exp(-g)), silu = g * sig;
        const double dsilu = std::fabs(sig * (1 + g * (1 - sig)));
        a[i] = silu * up;
        a_err[i] = dsilu * gamma_h * gu_abs[i] * std::fabs(up) + std::fabs(silu) * gamma_h * gu_abs[I + i] +
                   16 * u * std::fabs(a[i]);
      }
      for (std::int64_t d = 0; d < H; ++d) {
        double y = 0, y_abs = 0, y_err = 0;
        for (std::int64_t i = 0; i < I; ++i) {
          const double wv = w2e[i * H + d];
          y += a[i] * wv;
          y_abs += std::fabs(a[i] * wv);
          y_err += a_err[i] * std::fabs(wv);
        }
        ref[d] += w * y;
        bound[d] += w * (gamma_i * y_abs + y_err) + (gamma_k + 8 * u) * std::fabs(w * y);
      }
    }
    for (std::int64_t d = 0; d < H; ++d) {
      double tol = std::max(2 * bound[d], std::numeric_limits<double>::min());
      check.Add(out[t * H + d], ref[d], tol,
                [&] { return "out[" + std::to_string(t) + "," + std::to_string(d) + "]"; });
    }
  }
  return check;
}

namespace {

using collect::CaseResult;

constexpr std::int64_t kCheckTokensPerSample = 8;

struct MoeCase {
  MoeShape shape;
  collect::MoeRoutingShape routing;
  int samples = 1;
};

class MoeOp : public collect::TableOp {
 public:
  MoeOp() : TableOp("moe", TableOrThrow("moe_perf")) {}

  double MemoryBytes(const collect::Params& p) const override {
    MoeCase mc;
    if (Parse(p, mc)) return 0;  // Run reports it
    const MoeShape& s = mc.shape;
    const double T = static_cast<double>(s.num_tokens), H = static_cast<double>(s.hidden);
    const double I = static_cast<double>(s.inter), K = static_cast<double>(s.topk);
    const double E = static_cast<double>(s.num_experts), L = static_cast<double>(s.local_experts);
    const double rows = T * std::min(K, L);
    // x, out; per sample the logits (and the routing's own copy); weights; workspace.
    double floats =
        2 * T * H + mc.samples * (2 * T * E + 2 * T * K) + L * 3 * H * I + rows * (2 * H + 3 * I) + 2 * T * K;
    return 4 * floats + 8 * (mc.samples * E + 2 * rows);
  }

  CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override {
    MoeCase mc;
    if (auto bad = Parse(c.params, mc)) return *bad;
    const MoeShape& s = mc.shape;
    std::vector<collect::MoeRouting> routings;
    try {
      for (int i = 0; i < mc.samples; ++i)
        routings.push_back(collect::SynthesizeMoeRouting(mc.routing, SeedFromCaseId(c.id, 4), i));
    } catch (const Error& e) {
      return InvalidParams(name(), e.what());
    }
    std::vector<float> x(static_cast<std::size_t>(s.num_tokens * s.hidden));
    std::vector<float> w13(static_cast<std::size_t>(s.local_experts * s.hidden * 2 * s.inter));
    std::vector<float> w2(static_cast<std::size_t>(s.local_experts * s.inter * s.hidden));
    std::vector<float> out(x.size(), std::numeric_limits<float>::quiet_NaN());
    Rng rx(SeedFromCaseId(c.id, 1)), rw13(SeedFromCaseId(c.id, 2)), rw2(SeedFromCaseId(c.id, 3));
    Rng rtok(SeedFromCaseId(c.id, 5));
    FillUniform(x.data(), x.size(), rx, -1, 1);
    // Weights scaled by 1/sqrt(fan-in) keep activations of order one.
    const float s13 = 1.0f / std::sqrt(static_cast<float>(s.hidden)),
                s2 = 1.0f / std::sqrt(static_cast<float>(s.inter));
    FillUniform(w13.data(), w13.size(), rw13, -s13, s13);
    FillUniform(w2.data(), w2.size(), rw2, -s2, s2);

    MoeWorkspace ws;
    for (const auto& r : routings) {
      std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
      MoeForward(s, x.data(), r.logits.data(), w13.data(), w2.data(), out.data(), ws);
      std::vector<std::int64_t> tokens = SampleIndices(s.num_tokens, kCheckTokensPerSample, rtok);
      RefCheck check = CheckMoe(s, x.data(), r, w13.data(), w2.data(), out.data(), tokens);
      if (!check.ok())
        return IncorrectOutput(name(), check, "out",
                               "2 x first-order bound: gamma_{hidden+2}, silu, gamma_{inter+2}, combine");
    }

    auto call = [&] {
      for (const auto& r : routings) MoeForward(s, x.data(), r.logits.data(), w13.data(), w2.data(), out.data(), ws);
      ClobberMemory();
    };
    collect::TimingStats stats = TimeCpu(call, ctx.timing);
    const double per_sample = 1.0 / static_cast<double>(routings.size());
    stats.median_ms *= per_sample;
    stats.p10_ms *= per_sample;
    stats.p90_ms *= per_sample;
    return PassedRow(*this, c, ctx, "servecast_cpu_moe", stats);
  }

 private:
  // Fills `mc`; the outcome when the parameters are invalid or not float32.
  std::optional<CaseResult> Parse(const collect::Params& p, MoeCase& mc) const {
    std::string dtype;
    std::int64_t inter_size = 0, tp = 0;
    MoeShape& s = mc.shape;
    try {
      dtype = p.Str("moe_dtype");
      s.num_tokens = PositiveInt(p, "num_tokens");
      s.hidden = PositiveInt(p, "hidden_size");
      inter_size = PositiveInt(p, "inter_size");
      s.topk = PositiveInt(p, "topk");
      s.num_experts = PositiveInt(p, "num_experts");
      tp = PositiveInt(p, "moe_tp_size");
      mc.routing.moe_ep_size = PositiveInt(p, "moe_ep_size");
      mc.routing.distribution = p.Str("distribution");
    } catch (const Error& e) {
      return InvalidParams(name(), e.what());
    }
    if (inter_size % tp != 0)
      return InvalidParams(name(), "inter_size " + std::to_string(inter_size) + " is not a multiple of moe_tp_size " +
                                       std::to_string(tp));
    s.inter = inter_size / tp;
    mc.routing.num_tokens = s.num_tokens;
    mc.routing.num_experts = s.num_experts;
    mc.routing.topk = s.topk;
    if (s.topk > s.num_experts || s.num_experts % mc.routing.moe_ep_size != 0)
      return InvalidParams(name(), "topk " + std::to_string(s.topk) + " must be <= num_experts " +
                                       std::to_string(s.num_experts) + ", and num_experts a multiple of moe_ep_size " +
                                       std::to_string(mc.routing.moe_ep_size));
    s.local_experts = s.num_experts / mc.routing.moe_ep_size;
    const std::string& d = mc.routing.distribution;
    if (d != "balanced" && d.rfind("power_law_", 0) != 0)
      return InvalidParams(name(), "distribution '" + d + "'; expected \"balanced\" or \"power_law_<alpha>\"");
    mc.samples = d == "balanced" ? 1 : kMoePowerLawSamples;
    if (auto bad = CheckDtype("moe_dtype", dtype, {"float32"})) return bad;
    if (s.hidden > INT_MAX || 2 * s.inter > INT_MAX || s.num_tokens * s.topk > INT_MAX)
      return NotSupported("ShapeTooLarge",
                          "moe: hidden_size, 2 x inter_size / moe_tp_size and num_tokens x topk "
                          "must fit a 32-bit BLAS integer");
    return std::nullopt;
  }

};

}  // namespace

std::unique_ptr<collect::Op> MakeMoeOp() {
  return std::make_unique<MoeOp>();
}

}  // namespace servecast::cpu
