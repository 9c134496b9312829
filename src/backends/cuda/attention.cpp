// The CUDA backend's attention ops (attention_ops.h). Each case: parse and
// validate the parameters -> prepare deterministic inputs (poisoned outputs) ->
// one call checked against a double-precision host reference (sampled rows, and
// a whole-output scan for unwritten NaN poison) -> time with TimeOnDevice,
// rotating copies of the inputs (KV cache / Q,K,V) so repeated calls miss in L2
// -> one row.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/attention_check.h"
#include "backends/cuda/attention_cudnn.h"
#include "backends/cuda/attention_kernels.h"
#include "backends/cuda/attention_ops.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/elementwise_kernels.h"
#include "backends/cuda/fill.h"
#include "backends/cuda/harness.h"
#include "backends/cuda/kv_cache_append.h"
#include "backends/cuda/op_vocabulary.h"
#include "backends/cuda/quantize.h"
#include "collect/case.h"
#include "collect/table_spec.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/value.h"

namespace servecast::cuda {
namespace {

constexpr float kQueryRange = 3.0f;  // wider than K so the softmax is not flat
constexpr float kKeyValueRange = 1.0f;
// fp8 KV scales other than 1, so that a kernel ignoring them fails the check.
constexpr float kFp8KScale = 0.5f;
constexpr float kFp8VScale = 1.5f;
// fp8 context FMHA (attn_dtype fp8): the other per-tensor scales of cuDNN's fp8
// SDPA graph, fixed (an engine quantizes with calibrated static scales), none 1.
// Q's dequantization multiplier (Q in [-3, 3] becomes e4m3 in [-12, 12]); K and V
// use kFp8KScale / kFp8VScale, the KV cache's, so the FMHA reads the cached values.
constexpr float kFp8QScale = 0.25f;
// scale_s: P in [0, 1] is stored as e4m3(P x 256) (the largest power of two that
// keeps 1 x scale under e4m3's 448); descale_s = 1 / 256.
constexpr float kFp8PScale = 256.0f;
// scale_o, used only where cuDNN gives the fp8 graph an e4m3 O (|O| <= max |v| = 1).
constexpr float kFp8OScale = 16.0f;

enum class Phase { kContext, kGeneration };

struct AttnShape {
  std::int64_t batch = 1, isl = 1, num_heads = 1, num_kv_heads = 1, head_dim = 128, window = 0, step = 0;
  bool kv_fp8 = false;
  bool attn_fp8 = false;  // context only: fp8 Q/K/V into cuDNN's fp8 SDPA
  std::int64_t group() const { return num_heads / num_kv_heads; }
};

CaseResult Invalid(const std::string& op, const std::string& msg) {
  return CaseResult::Failure(Disposition::kFailed, FailureClass::kUnsupportedConfig, "InvalidParams", op + ": " + msg);
}
CaseResult Unsupported(const std::string& type, const std::string& msg) {
  return CaseResult::Failure(Disposition::kNotSupported, FailureClass::kUnsupportedConfig, type, msg);
}

// The case's shape, or the outcome when it is invalid or not supported here.
std::optional<CaseResult> ParseAttention(const Params& p, Phase phase, AttnShape& s) {
  const std::string op = phase == Phase::kContext ? "attention_context" : "attention_generation";
  std::int64_t beam = 0;
  std::string attn_dtype, kv_dtype;
  try {
    s.batch = p.Int("batch_size");
    s.isl = p.Int("isl");
    s.num_heads = p.Int("num_heads");
    s.num_kv_heads = p.Int("num_key_value_heads");
    s.head_dim = p.Int("head_dim");
    s.window = p.Int("window_size");
    s.step = p.Int("step");
    beam = p.Int("beam_width");
    attn_dtype = p.Str("attn_dtype");
    kv_dtype = p.Str("kv_cache_dtype");
  } catch (const Error& e) {
    return Invalid(op, e.what());
  }
  if (s.batch <= 0 || s.isl <= 0 || s.num_heads <= 0 || s.num_kv_heads < 0 || s.head_dim <= 0 || s.window < 0 ||
      s.step < 0)
    return Invalid(op,
                   "batch_size, isl, num_heads and head_dim must be positive, num_key_value_heads, window_size "
                   "and step non-negative (got " +
                       p.Canonical() + ")");
  if (s.num_kv_heads == 0) s.num_kv_heads = s.num_heads;  // AIC's tables write 0 for MHA
  if (s.num_heads % s.num_kv_heads != 0)
    return Invalid(op, "num_heads " + std::to_string(s.num_heads) + " is not a multiple of num_key_value_heads " +
                           std::to_string(s.num_kv_heads));
  if (beam != 1) return Unsupported("UnsupportedConfig", op + ": beam_width " + std::to_string(beam) + " (only 1)");
  for (const std::string* dt : {&attn_dtype, &kv_dtype})
    if (*dt != "bfloat16" && *dt != "fp8")
      return Unsupported("UnsupportedDtype", op + " on cuda: dtype '" + *dt + "' (have bfloat16, fp8)");
  s.kv_fp8 = kv_dtype == "fp8";
  if (phase == Phase::kContext) {
    if (s.step != 0)
      return Unsupported("UnsupportedConfig", op + ": step " + std::to_string(s.step) +
                                                  " (prefill over a cached prefix) is not supported; step 0 only");
    if (attn_dtype == "fp8" && !s.kv_fp8)
      return Unsupported("UnsupportedDtype",
                         op +
                             " on cuda: fp8 context FMHA (attn_dtype fp8) runs with an fp8 KV cache only (AIC's "
                             "fp8_kv_cache + fp8_context_fmha case); the case asks for kv_cache_dtype " +
                             kv_dtype);
    s.attn_fp8 = attn_dtype == "fp8";
    if (s.head_dim % 8 != 0)
      return Unsupported("UnsupportedHeadDim", op + ": head_dim " + std::to_string(s.head_dim) +
                                                   " (the KV-cache write moves 8 values at a time)");
    if (static_cast<double>(s.batch) * s.isl * std::max(s.num_heads, s.num_kv_heads) * s.head_dim >= 2147483647.0)
      return Unsupported("ShapeTooLarge", op + ": a tensor of more than 2^31 elements");
  } else {
    if (s.isl != 1)
      return Unsupported("UnsupportedConfig", op + ": isl " + std::to_string(s.isl) +
                                                  " is not supported; one query token per sequence (isl 1)");
    if (attn_dtype != "bfloat16")
      return Unsupported("UnsupportedDtype", op +
                                                 " on cuda computes in bfloat16/fp32 (attn_dtype bfloat16); the case "
                                                 "asks for attn_dtype " +
                                                 attn_dtype);
    if (!PagedDecodeSupportsHeadDim(s.head_dim))
      return Unsupported("UnsupportedHeadDim", op + ": head_dim " + std::to_string(s.head_dim) +
                                                   " has no kernel instantiation (64, 128, 256)");
    if (s.step + 1 > std::numeric_limits<std::int32_t>::max() / 2)
      return Unsupported("ShapeTooLarge", op + ": step " + std::to_string(s.step) + " beyond int32 positions");
  }
  return std::nullopt;
}

class AttentionOpBase : public collect::Op {
 public:
  AttentionOpBase(std::string name, const char* table, Phase phase, double reference_scale)
      : name_(std::move(name)),
        table_(*collect::FindTableSpec(table)),
        phase_(phase),
        reference_scale_(reference_scale) {}
  std::string name() const override { return name_; }
  const collect::TableSpec& table() const override { return table_; }
  std::vector<std::string> required_params() const override {
    return {"batch_size",  "isl",        "num_heads",  "num_key_value_heads", "head_dim",
            "window_size", "beam_width", "attn_dtype", "kv_cache_dtype",      "step"};
  }

  CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override {
    AttnShape s;
    if (std::optional<CaseResult> bad = ParseAttention(c.params, phase_, s)) return *bad;
    if (!ctx.runtime)
      return CaseResult::Failure(Disposition::kFailed, FailureClass::kCollectorBug, "MissingRuntime",
                                 name_ + ": the run context carries no runtime");
    std::unique_ptr<collect::CasePhases> phases = MakePhases(c, ctx, s);
    return RunCudaPhases(*phases, FailureClass::kCollectorBug);
  }

 protected:
  // The phases of one case of a valid shape (ctx.runtime set).
  virtual std::unique_ptr<collect::CasePhases> MakePhases(const collect::Case& c, const collect::RunContext& ctx,
                                                          const AttnShape& s) const = 0;

  CaseResult Incorrect(const std::string& source, const RefCheck& check, const std::string& rule) const {
    return CaseResult::Failure(Disposition::kIncorrect, FailureClass::kCollectorBug, "IncorrectOutput",
                               name_ + " (" + source + "): " + check.Describe(rule));
  }
  std::vector<Params> Row(const collect::Case& c, const collect::RunContext& ctx, const std::string& source,
                          const collect::TimingStats& stats) const {
    return {collect::MakeRow(table_, *ctx.runtime, name_, source, c.params, stats, ctx.measure_power)};
  }

  std::string name_;
  const collect::TableSpec& table_;
  Phase phase_;
  double reference_scale_;
};

// ---- attention_context: cuDNN fused SDPA --------------------------------------------

class AttentionContextOp : public AttentionOpBase {
 public:
  AttentionContextOp(double reference_scale, const SdpaFp8Options& fp8_options)
      : AttentionOpBase("attention_context", "context_attention_perf", Phase::kContext, reference_scale),
        fp8_options_(fp8_options) {}
  double default_timeout_s() const override { return 300; }

  double MemoryBytes(const Params& p) const override {
    AttnShape s;
    if (ParseAttention(p, Phase::kContext, s)) return 0;  // Run reports it
    return SetBytes(s) + 256.0 * 1024 * 1024;             // + cuDNN workspace allowance
  }

 protected:
  static KvAppendShape Append(const AttnShape& s) { return KvAppendShape{s.batch, s.isl, s.num_kv_heads, s.head_dim}; }
  static std::size_t PoolElems(const AttnShape& s) {
    return static_cast<std::size_t>(s.batch * Append(s).pages_per_seq() * s.num_kv_heads * kPagedKvPageSize *
                                    s.head_dim);
  }
  // Q, K, V, O (bf16), the softmax stats, and the paged K and V pools with their page
  // table; with fp8 FMHA also the e4m3 copies of Q, K and V the FMHA reads.
  static double SetBytes(const AttnShape& s) {
    const double tokens = static_cast<double>(s.batch * s.isl);
    return tokens * s.head_dim * 2.0 * (2 * s.num_heads + 2 * s.num_kv_heads) + tokens * s.num_heads * 4.0 +
           2.0 * static_cast<double>(PoolElems(s)) * (s.kv_fp8 ? 1 : 2) +
           4.0 * static_cast<double>(s.batch * Append(s).pages_per_seq()) +
           (s.attn_fp8 ? tokens * s.head_dim * 1.0 * (s.num_heads + 2 * s.num_kv_heads) : 0.0);
  }

  // q8, k8, v8: the e4m3 Q, K, V of fp8 FMHA (empty for bf16).
  struct Set {
    DeviceBuffer q, k, v, o, stats, k_pool, v_pool, table, q8, k8, v8;
    std::vector<std::int32_t> host_table;
  };

  // The fp8 graph's device scalars, 16 bytes apart (cuDNN's alignment for them):
  // descale_q, descale_k, descale_v, descale_s, scale_s, scale_o, then amax_s, amax_o.
  enum Fp8Slot {
    kSlotDescaleQ,
    kSlotDescaleK,
    kSlotDescaleV,
    kSlotDescaleS,
    kSlotScaleS,
    kSlotScaleO,
    kSlotAmaxS,
    kSlotAmaxO,
    kSlotCount
  };
  static float* Slot(const DeviceBuffer& scalars, Fp8Slot slot) { return scalars.as<float>() + 4 * slot; }

  class Phases;
  std::unique_ptr<collect::CasePhases> MakePhases(const collect::Case& c, const collect::RunContext& ctx,
                                                  const AttnShape& s) const override;
  const SdpaFp8Options fp8_options_;  // SdpaFp8Options{} for the registered op

  // e4m3 NaN bytes among the first n bytes at `dev` (FillPoison's 0xFF is one).
  static std::uint64_t CountNanE4m3Host(const void* dev, std::size_t n, cudaStream_t stream) {
    DeviceBuffer count(sizeof(unsigned long long));
    CountNanE4m3(dev, n, count.as<unsigned long long>(), stream);
    return Download<unsigned long long>(count.get(), 1, 0, stream)[0];
  }

  // The paged cache of the first and the last sequence against K and V: the first and
  // the last page's tokens and 64 drawn ones, every KV head and column (bf16: the same
  // bits; fp8: stored * scale within half an e4m3 step of x, and never NaN).
  void CheckCache(const AttnShape& s, const Set& set, float k_scale, float v_scale, std::uint64_t seed,
                  RefCheck& check, cudaStream_t stream) const {
    const std::int64_t S = s.isl, KV = s.num_kv_heads, D = s.head_dim;
    const std::int64_t pages_per_seq = Append(s).pages_per_seq();
    const std::size_t eb = s.kv_fp8 ? 1 : 2;
    SplitMix64 rng(seed);
    std::set<std::int64_t> tokens;
    for (std::int64_t t = 0; t < std::min<std::int64_t>(S, kPagedKvPageSize); ++t) tokens.insert(t);
    for (std::int64_t t = std::max<std::int64_t>(0, S - kPagedKvPageSize); t < S; ++t) tokens.insert(t);
    for (int i = 0; i < 64; ++i) tokens.insert(static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(S))));
    for (std::int64_t b : std::set<std::int64_t>{0, s.batch - 1}) {
      const std::size_t n = static_cast<std::size_t>(S * KV * D), off = static_cast<std::size_t>(b) * n;
      for (int which = 0; which < 2; ++which) {
        const auto x = Download<std::uint16_t>(which ? set.v.get() : set.k.get(), n, off, stream);
        const auto* pool = (which ? set.v_pool : set.k_pool).as<std::uint8_t>();
        const double sc = which ? v_scale : k_scale;
        std::int64_t loaded_page = -1;
        std::vector<std::uint8_t> page_bytes;
        const std::size_t page_elems = static_cast<std::size_t>(KV * kPagedKvPageSize * D);
        for (std::int64_t t : tokens) {  // ascending: each page read once
          const std::int64_t page = set.host_table[static_cast<std::size_t>(b * pages_per_seq + t / kPagedKvPageSize)];
          if (page != loaded_page) {
            page_bytes = Download<std::uint8_t>(pool, page_elems * eb, static_cast<std::size_t>(page) * page_elems * eb,
                                                stream);
            loaded_page = page;
          }
          for (std::int64_t g = 0; g < KV; ++g) {
            const std::size_t slot = static_cast<std::size_t>((g * kPagedKvPageSize + t % kPagedKvPageSize) * D);
            for (std::int64_t d = 0; d < D; ++d) {
              const std::size_t at = slot + static_cast<std::size_t>(d);
              const double want = Bf16(x[static_cast<std::size_t>((t * KV + g) * D + d)]);
              const auto where = [&] {
                return std::string(which ? "v" : "k") + "_cache[b=" + std::to_string(b) + ",t=" + std::to_string(t) +
                       ",kv=" + std::to_string(g) + ",d=" + std::to_string(d) + "]";
              };
              if (s.kv_fp8) {
                const double stored = Fp8E4m3(page_bytes[at]) * sc;
                check.Add(where(), stored, want, 0.5 * E4m3Ulp(want / sc) * sc * (1 + 1e-6));
              } else {
                std::uint16_t bits;
                std::memcpy(&bits, page_bytes.data() + 2 * at, 2);
                check.Add(where(), Bf16(bits), want, std::fabs(want) * 1e-12 + 1e-30);
              }
            }
          }
        }
      }
    }
  }

  // The 24 (batch, head, position) points the prefill checks recompute: position 0 of
  // the first head, the last position of the last head, position 1, the window's two
  // edges, the rest drawn from `rng` (first or last batch entry).
  struct SamplePoint {
    std::int64_t b, h, pos;
  };
  static std::vector<SamplePoint> SamplePoints(const AttnShape& s, SplitMix64& rng) {
    const std::int64_t S = s.isl, N = s.num_heads;
    auto any = [&](std::int64_t n) { return static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(n))); };
    std::vector<SamplePoint> pts = {
        {0, 0, 0}, {s.batch - 1, N - 1, S - 1}, {0, any(N), std::min<std::int64_t>(1, S - 1)}};
    if (s.window > 0 && s.window < S) {
      pts.push_back({s.batch - 1, any(N), s.window - 1});
      pts.push_back({s.batch - 1, any(N), s.window});
    }
    while (pts.size() < 24) pts.push_back({rng.Below(2) ? 0 : s.batch - 1, any(N), any(S)});
    return pts;
  }

  // Sampled points (SamplePoints, from `seed`) recomputed in double precision; K and V
  // of a sampled batch entry are read once.
  void CheckSampled(const AttnShape& s, const Set& set, std::uint64_t seed, RefCheck& check,
                    cudaStream_t stream) const {
    const std::int64_t S = s.isl, N = s.num_heads, KV = s.num_kv_heads, D = s.head_dim, G = s.group();
    SplitMix64 rng(seed);
    const std::vector<SamplePoint> pts = SamplePoints(s, rng);
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    for (std::int64_t b : {std::int64_t{0}, s.batch - 1}) {
      std::vector<std::uint16_t> k, v;
      bool loaded = false;
      for (const SamplePoint& pt : pts) {
        if (pt.b != b) continue;
        if (!loaded) {
          const std::size_t n = static_cast<std::size_t>(S * KV * D), off = static_cast<std::size_t>(b) * n;
          k = Download<std::uint16_t>(set.k.get(), n, off, stream);
          v = Download<std::uint16_t>(set.v.get(), n, off, stream);
          loaded = true;
        }
        const std::int64_t g = pt.h / G;
        auto q = Download<std::uint16_t>(set.q.get(), static_cast<std::size_t>(D),
                                         static_cast<std::size_t>(((b * S + pt.pos) * N + pt.h) * D), stream);
        auto o = Download<std::uint16_t>(set.o.get(), static_cast<std::size_t>(D),
                                         static_cast<std::size_t>(((b * S + pt.pos) * N + pt.h) * D), stream);
        const std::int64_t first = s.window > 0 ? std::max<std::int64_t>(0, pt.pos - s.window + 1) : 0;
        std::vector<double> scores;
        for (std::int64_t j = first; j <= pt.pos; ++j) {
          double dot = 0;
          for (std::int64_t d = 0; d < D; ++d)
            dot += Bf16(q[static_cast<std::size_t>(d)]) * Bf16(k[static_cast<std::size_t>((j * KV + g) * D + d)]);
          scores.push_back(dot * scale);
        }
        std::vector<double> ref, mag;
        ReferenceRow(
            scores,
            [&](std::size_t i, std::int64_t d) {
              return Bf16(v[static_cast<std::size_t>(((first + static_cast<std::int64_t>(i)) * KV + g) * D + d)]);
            },
            D, ref, mag);
        for (std::int64_t d = 0; d < D; ++d) {
          const double tol = 4 * kBf16Roundoff * mag[static_cast<std::size_t>(d)] + 1e-5;
          check.Add("out[b=" + std::to_string(b) + ",s=" + std::to_string(pt.pos) + ",head=" + std::to_string(pt.h) +
                        ",d=" + std::to_string(d) + "]",
                    Bf16(o[static_cast<std::size_t>(d)]), ref[static_cast<std::size_t>(d)], tol);
        }
      }
      if (s.batch == 1) break;
    }
  }

  // fp8 FMHA: the sampled points of CheckSampled, recomputed in double precision from
  // the e4m3 Q, K, V the FMHA read (dequantized with their scales). `inputs` checks
  // those bytes against the bf16 Q, K, V (within half an e4m3 step; the sampled rows
  // of Q, 64 to 192 tokens of K and V of a sampled sequence), so a wrong quantization
  // scale fails even though the reference reads the same bytes.
  //
  // Tolerance per output element: P goes through e4m3 (x scale_s = 256) before P·V,
  // half an e4m3 step is 2^-4 of |P| for normal values, so the error is at most
  // 2^-4 * sum_j p_j |v_jd|; doubled (2^-3) in case the engine normalizes by the sum
  // of the rounded P rather than the fp32 one. P x 256 below e4m3's smallest normal
  // (2^-6) rounds to within 2^-10 absolute, 2^-18 in P over the row sum l >= 1 of
  // exp(s - max): + 2^-18 * sum_j |v_jd| / l. Plus O's rounding (bf16: 2^-8 |O|,
  // twice its half step; e4m3: half a step of O x 16, / 16) and 1e-5 for fp32 math.
  // A kernel that ignored a descale (0.25, 0.5, 1.5, 1/256) is off by 25% or more of
  // |O| at position 0 (one key, p = 1, an exactly representable P), so it fails.
  void CheckSampledFp8(const AttnShape& s, const Set& set, bool o_fp8, std::uint64_t seed, RefCheck& check,
                       RefCheck& inputs, cudaStream_t stream) const {
    const std::int64_t S = s.isl, N = s.num_heads, KV = s.num_kv_heads, D = s.head_dim, G = s.group();
    SplitMix64 rng(seed);
    auto any = [&](std::int64_t n) { return static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(n))); };
    const std::vector<SamplePoint> pts = SamplePoints(s, rng);
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    const double q_scale = kFp8QScale, k_scale = kFp8KScale, v_scale = kFp8VScale;
    auto e4m3 = [](std::uint8_t bits) { return static_cast<double>(E4m3ToFloat(bits)); };  // table lookup
    // x against the e4m3 byte that should hold it: |stored * sc - x| <= half a step.
    auto check_input = [&](const auto& where, std::uint8_t stored, std::uint16_t x_bits, double sc) {
      const double x = Bf16(x_bits);
      inputs.AddLazy(where, e4m3(stored) * sc, x, 0.5 * E4m3Ulp(x / sc) * sc * (1 + 1e-6));
    };
    const std::size_t eo = o_fp8 ? 1 : 2;
    // The e4m3 K and V checked: the first and the last 64 tokens and 64 drawn ones.
    std::set<std::int64_t> tokens;
    for (std::int64_t t = 0; t < std::min<std::int64_t>(S, 64); ++t) tokens.insert(t);
    for (std::int64_t t = std::max<std::int64_t>(0, S - 64); t < S; ++t) tokens.insert(t);
    for (int i = 0; i < 64; ++i) tokens.insert(any(S));
    for (std::int64_t b : {std::int64_t{0}, s.batch - 1}) {
      std::vector<std::uint8_t> k8, v8;
      bool loaded = false;
      for (const SamplePoint& pt : pts) {
        if (pt.b != b) continue;
        if (!loaded) {
          const std::size_t n = static_cast<std::size_t>(S * KV * D), off = static_cast<std::size_t>(b) * n;
          k8 = Download<std::uint8_t>(set.k8.get(), n, off, stream);
          v8 = Download<std::uint8_t>(set.v8.get(), n, off, stream);
          const auto k16 = Download<std::uint16_t>(set.k.get(), n, off, stream);
          const auto v16 = Download<std::uint16_t>(set.v.get(), n, off, stream);
          for (std::int64_t t : tokens)
            for (std::int64_t i = t * KV * D; i < (t + 1) * KV * D; ++i) {
              const std::size_t u = static_cast<std::size_t>(i);
              auto where = [&, i, t](const char* name) {
                return std::string(name) + "[b=" + std::to_string(b) + ",t=" + std::to_string(t) +
                       ",kv=" + std::to_string(i / D % KV) + ",d=" + std::to_string(i % D) + "]";
              };
              check_input([&] { return where("k8"); }, k8[u], k16[u], k_scale);
              check_input([&] { return where("v8"); }, v8[u], v16[u], v_scale);
            }
          loaded = true;
        }
        const std::int64_t g = pt.h / G;
        const std::size_t row = static_cast<std::size_t>(((b * S + pt.pos) * N + pt.h) * D);
        const auto q8 = Download<std::uint8_t>(set.q8.get(), static_cast<std::size_t>(D), row, stream);
        const auto q16 = Download<std::uint16_t>(set.q.get(), static_cast<std::size_t>(D), row, stream);
        const auto o = Download<std::uint8_t>(set.o.get(), static_cast<std::size_t>(D) * eo, row * eo, stream);
        const std::string at =
            "b=" + std::to_string(b) + ",s=" + std::to_string(pt.pos) + ",head=" + std::to_string(pt.h);
        for (std::int64_t d = 0; d < D; ++d)
          check_input([&] { return "q8[" + at + ",d=" + std::to_string(d) + "]"; }, q8[static_cast<std::size_t>(d)],
                      q16[static_cast<std::size_t>(d)], q_scale);
        const std::int64_t first = s.window > 0 ? std::max<std::int64_t>(0, pt.pos - s.window + 1) : 0;
        auto vv = [&](std::int64_t j, std::int64_t d) {
          return e4m3(v8[static_cast<std::size_t>((j * KV + g) * D + d)]) * v_scale;
        };
        std::vector<double> scores;
        for (std::int64_t j = first; j <= pt.pos; ++j) {
          double dot = 0;
          for (std::int64_t d = 0; d < D; ++d)
            dot += e4m3(q8[static_cast<std::size_t>(d)]) * q_scale *
                   (e4m3(k8[static_cast<std::size_t>((j * KV + g) * D + d)]) * k_scale);
          scores.push_back(dot * scale);
        }
        std::vector<double> ref, mag;
        ReferenceRow(
            scores, [&](std::size_t i, std::int64_t d) { return vv(first + static_cast<std::int64_t>(i), d); }, D, ref,
            mag);
        double m = -INFINITY, l = 0;
        for (double x : scores) m = std::max(m, x);
        for (double x : scores) l += std::exp(x - m);
        for (std::int64_t d = 0; d < D; ++d) {
          double abs_sum = 0;
          for (std::int64_t j = first; j <= pt.pos; ++j) abs_sum += std::fabs(vv(j, d));
          const double r = ref[static_cast<std::size_t>(d)];
          double got, out_tol;
          if (o_fp8) {
            got = e4m3(o[static_cast<std::size_t>(d)]) / kFp8OScale;
            out_tol = 0.5 * E4m3Ulp(r * kFp8OScale) / kFp8OScale;
          } else {
            std::uint16_t bits;
            std::memcpy(&bits, o.data() + 2 * d, 2);
            got = Bf16(bits);
            out_tol = 0x1p-8 * std::fabs(r);
          }
          const double tol = 0x1p-3 * mag[static_cast<std::size_t>(d)] + 0x1p-18 * abs_sum / l + out_tol + 1e-5;
          check.AddLazy([&] { return "out[" + at + ",d=" + std::to_string(d) + "]"; }, got, r, tol);
        }
      }
      if (s.batch == 1) break;
    }
  }
};

// One call of the row: the new tokens' K and V written into the paged KV cache
// (bf16, or e4m3 with one scale per tensor), then cuDNN's fused SDPA over the
// contiguous Q, K, V. With fp8 FMHA (attn_dtype fp8, always with an fp8 cache) the
// call also quantizes Q, K and V to e4m3 with fixed per-tensor scales (three
// quant_fp8_tensor_apply launches: what an engine's QKV preprocessing does before
// its fp8 FMHA) and the SDPA is cuDNN's fp8 graph reading them; O is bf16 where
// cuDNN builds that graph, else e4m3 (kernel_source says which).
class AttentionContextOp::Phases : public collect::CasePhases {
 public:
  Phases(const AttentionContextOp& op, const collect::Case& c, const collect::RunContext& ctx, const AttnShape& s)
      : op_(op),
        c_(c),
        ctx_(ctx),
        s_(s),
        stream_(Context().stream),
        base_seed_(Fnv1a64(c.id)),
        q_elems_(static_cast<std::size_t>(s.batch * s.isl * s.num_heads * s.head_dim)),
        kv_elems_(static_cast<std::size_t>(s.batch * s.isl * s.num_kv_heads * s.head_dim)),
        append_(Append(s)),
        kv_(s.kv_fp8 ? KvDtype::kFp8E4m3 : KvDtype::kBf16),
        k_scale_(s.kv_fp8 ? kFp8KScale : 1.0f),
        v_scale_(s.kv_fp8 ? kFp8VScale : 1.0f),
        pool_(PoolElems(s)),
        eb_(s.kv_fp8 ? 1 : 2),
        table_n_(static_cast<std::size_t>(s.batch * append_.pages_per_seq())) {}

  // The cuDNN graph (not supported / failed when cuDNN refuses it), its workspace,
  // the fp8 graph's scalars, and the first set of inputs bound to it.
  std::optional<CaseResult> Prepare() override {
    SdpaShape shape{s_.batch, s_.isl, s_.num_heads, s_.num_kv_heads, s_.head_dim, s_.window};
    shape.dtype = s_.attn_fp8 ? SdpaDtype::kFp8 : SdpaDtype::kBf16;
    std::string why;
    bool unsupported = false;
    sdpa_ = CudnnSdpa::Build(shape, why, unsupported, op_.fp8_options_);
    if (!sdpa_) {
      if (unsupported)
        return Unsupported("CudnnSdpaUnsupported", op_.name_ + " (cuDNN " + CudnnVersionString() + "): " + why);
      return CaseResult::Failure(Disposition::kFailed, FailureClass::kFrameworkBug, "CudnnError",
                                 op_.name_ + " (cuDNN " + CudnnVersionString() + "): " + why);
    }
    o_fp8_ = sdpa_->output_fp8();
    if (o_fp8_) {
      static std::once_flag told;
      std::call_once(told, [&] {
        log::Info(op_.name_ + ": cuDNN " + CudnnVersionString() +
                  " builds the fp8 SDPA graph with an e4m3 O only (bf16 O refused: " + sdpa_->bf16_output_refusal() +
                  ")");
      });
    }
    source_ = sdpa_->kernel_source() + (s_.attn_fp8 ? "+servecast_quant_fp8_qkv" : "") + "+servecast_kv_append_" +
              (s_.kv_fp8 ? "fp8" : "bf16") + ":page=" + std::to_string(kPagedKvPageSize);
    workspace_ = DeviceBuffer(std::max<std::size_t>(sdpa_->workspace_bytes(), 16));

    // fp8 FMHA: the graph's scalars (shared by every set; amax_s / amax_o are written
    // by each call and not read).
    if (s_.attn_fp8) {
      scalars_ = DeviceBuffer(4 * sizeof(float) * kSlotCount);
      std::vector<float> host(4 * kSlotCount, 0.0f);
      host[4 * kSlotDescaleQ] = kFp8QScale;
      host[4 * kSlotDescaleK] = k_scale_;
      host[4 * kSlotDescaleV] = v_scale_;
      host[4 * kSlotDescaleS] = 1.0f / kFp8PScale;
      host[4 * kSlotScaleS] = kFp8PScale;
      host[4 * kSlotScaleO] = kFp8OScale;
      SC_CUDA_CHECK(
          cudaMemcpyAsync(scalars_.get(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice, stream_));
      SC_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `host` goes out of scope
    }
    sets_.push_back(MakeSet(SeedFor(base_seed_, 100)));
    Bind(sets_[0]);
    return std::nullopt;
  }

  // One call against the reference: the output, (fp8 FMHA) the e4m3 inputs it read,
  // and the KV cache it wrote.
  std::optional<CaseResult> Check() override {
    Launch(0, stream_);
    SC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    RefCheck check(op_.reference_scale_);
    std::string rule;
    if (!s_.attn_fp8) {
      check.AddNonFinite(CountNonFiniteBf16(sets_[0].o.get(), q_elems_, stream_), q_elems_);
      op_.CheckSampled(s_, sets_[0], SeedFor(base_seed_, 2), check, stream_);
      rule = "4 * 2^-8 * sum_j p_j*|v_jd| + 1e-5 (bf16 P and output)";
    } else {
      check.AddNonFinite(o_fp8_ ? CountNanE4m3Host(sets_[0].o.get(), q_elems_, stream_)
                                : CountNonFiniteBf16(sets_[0].o.get(), q_elems_, stream_),
                         q_elems_);
      RefCheck input_check(1.0);
      op_.CheckSampledFp8(s_, sets_[0], o_fp8_, SeedFor(base_seed_, 2), check, input_check, stream_);
      if (!input_check.ok())
        return op_.Incorrect(source_, input_check,
                             "e4m3 Q/K/V: x within half an e4m3 step of stored * scale (scales 0.25, 0.5, 1.5)");
      rule = std::string("2^-3 * sum_j p_j*|v_jd| + 2^-18 * sum_j |v_jd| / l + ") +
             (o_fp8_ ? "half an e4m3 step of O * 16, / 16" : "2^-8 * |O|") +
             " + 1e-5 (P in e4m3 x 256: 2^-4 relative, twice for a row sum of the rounded P; its "
             "subnormals 2^-18 absolute over the row sum l; O's rounding)";
    }
    if (!check.ok()) return op_.Incorrect(source_, check, rule);
    RefCheck cache_check(1.0);
    op_.CheckCache(s_, sets_[0], k_scale_, v_scale_, SeedFor(base_seed_, 6), cache_check, stream_);
    if (!cache_check.ok())
      return op_.Incorrect(source_, cache_check,
                           s_.kv_fp8 ? "KV cache: x within half an e4m3 step of stored * scale" : "KV cache: exact copy");
    return std::nullopt;
  }

  // Time, rotating through copies of Q, K, V, O.
  void Time() override {
    const double call_bytes = SetBytes(s_);
    const int copies = CopiesForColdL2(call_bytes);
    for (int k = 1; k < copies; ++k) {
      sets_.push_back(MakeSet(SeedFor(base_seed_, 100 + static_cast<std::uint64_t>(k))));
      Bind(sets_.back());
    }
    SC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    TimeOptions opt;
    opt.copies = copies;
    opt.rotated_bytes = call_bytes * copies;
    stats_ = TimeOnDevice(
        [&](cudaStream_t st, int iteration) { Launch(static_cast<std::size_t>(iteration % copies), st); },
        ctx_.timing, opt, ctx_.measure_power);
  }

  std::vector<Params> Emit() override { return op_.Row(c_, ctx_, source_, stats_); }

 private:
  Set MakeSet(std::uint64_t seed) {
    Set set{DeviceBuffer(q_elems_ * 2),
            DeviceBuffer(kv_elems_ * 2),
            DeviceBuffer(kv_elems_ * 2),
            DeviceBuffer(q_elems_ * 2),  // bf16 O, or e4m3 O in its first half
            DeviceBuffer(static_cast<std::size_t>(s_.batch * s_.num_heads * s_.isl) * 4),
            DeviceBuffer(pool_ * eb_),
            DeviceBuffer(pool_ * eb_),
            DeviceBuffer(table_n_ * 4),
            s_.attn_fp8 ? DeviceBuffer(q_elems_) : DeviceBuffer(),
            s_.attn_fp8 ? DeviceBuffer(kv_elems_) : DeviceBuffer(),
            s_.attn_fp8 ? DeviceBuffer(kv_elems_) : DeviceBuffer(),
            {}};
    // The pools poisoned (0xFF: bf16 NaN, e4m3 NaN), so a slot the write missed shows.
    FillPoison(set.k_pool.get(), set.k_pool.bytes(), stream_);
    FillPoison(set.v_pool.get(), set.v_pool.bytes(), stream_);
    set.host_table = UploadShuffledPageTable(table_n_, SeedFor(seed, 4), set.table, stream_);
    FillUniformBf16(set.q.get(), q_elems_, SeedFor(seed, 1), kQueryRange, stream_);
    FillUniformBf16(set.k.get(), kv_elems_, SeedFor(seed, 2), kKeyValueRange, stream_);
    FillUniformBf16(set.v.get(), kv_elems_, SeedFor(seed, 3), kKeyValueRange, stream_);
    FillPoison(set.o.get(), set.o.bytes(), stream_);
    FillPoison(set.stats.get(), set.stats.bytes(), stream_);
    for (const DeviceBuffer* b : {&set.q8, &set.k8, &set.v8})
      if (b->bytes()) FillPoison(b->get(), b->bytes(), stream_);
    return set;
  }

  int Bind(Set& set) {
    SdpaBuffers buffers{set.q.get(), set.k.get(), set.v.get(), set.o.get(), set.stats.as<float>(), {}};
    if (s_.attn_fp8) {
      buffers.q = set.q8.get();
      buffers.k = set.k8.get();
      buffers.v = set.v8.get();
      buffers.fp8 =
          SdpaFp8Scalars{Slot(scalars_, kSlotDescaleQ), Slot(scalars_, kSlotDescaleK), Slot(scalars_, kSlotDescaleV),
                         Slot(scalars_, kSlotDescaleS), Slot(scalars_, kSlotScaleS),   Slot(scalars_, kSlotScaleO),
                         Slot(scalars_, kSlotAmaxS),    Slot(scalars_, kSlotAmaxO)};
    }
    return sdpa_->Bind(buffers, workspace_.get());
  }

  // One call: [Q, K, V to e4m3,] the new tokens' K and V into the paged cache, the FMHA.
  void Launch(std::size_t i, cudaStream_t st) {
    Set& set = sets_[i];
    if (s_.attn_fp8) {
      QuantFp8TensorApply(set.q.get(), q_elems_, Slot(scalars_, kSlotDescaleQ), set.q8.get(), st);
      QuantFp8TensorApply(set.k.get(), kv_elems_, Slot(scalars_, kSlotDescaleK), set.k8.get(), st);
      QuantFp8TensorApply(set.v.get(), kv_elems_, Slot(scalars_, kSlotDescaleV), set.v8.get(), st);
    }
    LaunchKvCacheAppend(append_, kv_, set.k.get(), set.v.get(), set.table.as<std::int32_t>(), k_scale_, v_scale_,
                        set.k_pool.get(), set.v_pool.get(), st);
    sdpa_->Run(static_cast<int>(i), st);
  }

  const AttentionContextOp& op_;
  const collect::Case& c_;
  const collect::RunContext& ctx_;
  const AttnShape s_;
  cudaStream_t stream_;
  const std::uint64_t base_seed_;
  const std::size_t q_elems_, kv_elems_;
  const KvAppendShape append_;
  const KvDtype kv_;
  const float k_scale_, v_scale_;
  const std::size_t pool_, eb_, table_n_;
  std::unique_ptr<CudnnSdpa> sdpa_;
  bool o_fp8_ = false;
  std::string source_;
  DeviceBuffer workspace_, scalars_;
  std::vector<Set> sets_;
  collect::TimingStats stats_;
};

std::unique_ptr<collect::CasePhases> AttentionContextOp::MakePhases(const collect::Case& c,
                                                                    const collect::RunContext& ctx,
                                                                    const AttnShape& s) const {
  return std::make_unique<Phases>(*this, c, ctx, s);
}

// ---- attention_generation: servecast's paged split-KV decode ------------------------

class AttentionGenerationOp : public AttentionOpBase {
 public:
  AttentionGenerationOp(double reference_scale, const PagedDecodeTuning& tuning)
      : AttentionOpBase("attention_generation", "generation_attention_perf", Phase::kGeneration, reference_scale),
        tuning_(tuning) {}
  double default_timeout_s() const override { return 180; }

  double MemoryBytes(const Params& p) const override {
    AttnShape s;
    if (ParseAttention(p, Phase::kGeneration, s)) return 0;
    const PagedDecodeShape d = Decode(s);
    return CacheBytes(s) + 4.0 * s.batch * s.num_heads * s.head_dim +
           static_cast<double>(
               PlanPagedDecode(d, Multiprocessors(), s.kv_fp8 ? KvDtype::kFp8E4m3 : KvDtype::kBf16, tuning_)
                   .workspace_bytes);
  }

 protected:
  static PagedDecodeShape Decode(const AttnShape& s) {
    return PagedDecodeShape{s.batch, s.num_heads, s.num_kv_heads, s.head_dim, s.step + 1, s.window};
  }
  static std::size_t PoolElems(const AttnShape& s) {
    return static_cast<std::size_t>(s.batch * Decode(s).pages_per_seq() * s.num_kv_heads * kPagedKvPageSize *
                                    s.head_dim);
  }
  static double CacheBytes(const AttnShape& s) {
    return 2.0 * static_cast<double>(PoolElems(s)) * (s.kv_fp8 ? 1 : 2) +
           4.0 * static_cast<double>(s.batch * Decode(s).pages_per_seq());
  }
  struct Set {
    DeviceBuffer k, v, table, q, out;
    std::vector<std::int32_t> host_table;
  };

  class Phases;
  std::unique_ptr<collect::CasePhases> MakePhases(const collect::Case& c, const collect::RunContext& ctx,
                                                  const AttnShape& s) const override;
  const PagedDecodeTuning tuning_;  // PagedDecodeTuning{} for the registered op

  // Sampled sequences (first, last, one drawn) and heads (all, or up to 8 with the
  // first and the last): their visible pages are read back and the output
  // recomputed in double precision from the stored (dequantized) K and V.
  void CheckSampled(const AttnShape& s, const Set& set, float k_scale, float v_scale, std::uint64_t seed,
                    RefCheck& check, cudaStream_t stream) const {
    const std::int64_t N = s.num_heads, KV = s.num_kv_heads, D = s.head_dim, G = s.group();
    const std::int64_t tokens = s.step + 1;
    const std::int64_t first = s.window > 0 ? std::max<std::int64_t>(0, tokens - s.window) : 0;
    const std::int64_t pages_per_seq = Decode(s).pages_per_seq();
    const std::size_t page_elems = static_cast<std::size_t>(KV * kPagedKvPageSize * D);
    SplitMix64 rng(seed);
    std::set<std::int64_t> seqs = {0, s.batch - 1,
                                   static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(s.batch)))};
    const std::int64_t max_heads = tokens > 16384 ? 4 : 8;
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    auto value = [&](const std::vector<std::uint8_t>& raw, std::size_t i, float sc) {
      if (s.kv_fp8) return Fp8E4m3(raw[i]) * sc;
      std::uint16_t bits;
      std::memcpy(&bits, raw.data() + 2 * i, 2);
      return Bf16(bits);
    };
    for (std::int64_t b : seqs) {
      std::set<std::int64_t> heads = {0, N - 1};
      while (static_cast<std::int64_t>(heads.size()) < std::min(N, max_heads))
        heads.insert(static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(N))));
      // The visible pages of sequence b, in sequence order.
      const std::int64_t p0 = first / kPagedKvPageSize, p1 = (tokens - 1) / kPagedKvPageSize;
      const std::size_t eb = s.kv_fp8 ? 1 : 2;
      std::vector<std::uint8_t> k(static_cast<std::size_t>(p1 - p0 + 1) * page_elems * eb), v(k.size());
      for (std::int64_t p = p0; p <= p1; ++p) {
        const std::size_t pool_page =
            static_cast<std::size_t>(set.host_table[static_cast<std::size_t>(b * pages_per_seq + p)]);
        const std::size_t dst = static_cast<std::size_t>(p - p0) * page_elems * eb;
        SC_CUDA_CHECK(cudaMemcpyAsync(k.data() + dst, set.k.as<std::uint8_t>() + pool_page * page_elems * eb,
                                      page_elems * eb, cudaMemcpyDeviceToHost, stream));
        SC_CUDA_CHECK(cudaMemcpyAsync(v.data() + dst, set.v.as<std::uint8_t>() + pool_page * page_elems * eb,
                                      page_elems * eb, cudaMemcpyDeviceToHost, stream));
      }
      SC_CUDA_CHECK(cudaStreamSynchronize(stream));
      auto q = Download<std::uint16_t>(set.q.get(), static_cast<std::size_t>(N * D),
                                       static_cast<std::size_t>(b * N * D), stream);
      auto o = Download<std::uint16_t>(set.out.get(), static_cast<std::size_t>(N * D),
                                       static_cast<std::size_t>(b * N * D), stream);
      for (std::int64_t h : heads) {
        const std::int64_t g = h / G;
        auto row_of = [&](std::int64_t j) {
          return static_cast<std::size_t>(((j / kPagedKvPageSize - p0) * KV + g) * kPagedKvPageSize * D +
                                          (j % kPagedKvPageSize) * D);
        };
        std::vector<double> scores;
        for (std::int64_t j = first; j < tokens; ++j) {
          const std::size_t row = row_of(j);
          double dot = 0;
          for (std::int64_t d = 0; d < D; ++d)
            dot += Bf16(q[static_cast<std::size_t>(h * D + d)]) * value(k, row + static_cast<std::size_t>(d), k_scale);
          scores.push_back(dot * scale);
        }
        std::vector<double> ref, mag;
        ReferenceRow(
            scores,
            [&](std::size_t i, std::int64_t d) {
              return value(v, row_of(first + static_cast<std::int64_t>(i)) + static_cast<std::size_t>(d), v_scale);
            },
            D, ref, mag);
        for (std::int64_t d = 0; d < D; ++d) {
          const double tol = (kBf16Roundoff + 1e-4) * mag[static_cast<std::size_t>(d)] + 1e-6;
          check.Add("out[b=" + std::to_string(b) + ",head=" + std::to_string(h) + ",d=" + std::to_string(d) + "]",
                    Bf16(o[static_cast<std::size_t>(h * D + d)]), ref[static_cast<std::size_t>(d)], tol);
        }
      }
    }
  }
};

// One call: servecast's paged split-KV decode over a shuffled page table, checked on
// sampled sequences and heads, timed rotating copies of the cache.
class AttentionGenerationOp::Phases : public collect::CasePhases {
 public:
  Phases(const AttentionGenerationOp& op, const collect::Case& c, const collect::RunContext& ctx, const AttnShape& s)
      : op_(op),
        c_(c),
        ctx_(ctx),
        s_(s),
        stream_(Context().stream),
        base_seed_(Fnv1a64(c.id)),
        shape_(Decode(s)),
        kv_(s.kv_fp8 ? KvDtype::kFp8E4m3 : KvDtype::kBf16),
        k_scale_(s.kv_fp8 ? kFp8KScale : 1.0f),
        v_scale_(s.kv_fp8 ? kFp8VScale : 1.0f),
        pool_(PoolElems(s)),
        eb_(s.kv_fp8 ? 1 : 2),
        table_n_(static_cast<std::size_t>(s.batch * shape_.pages_per_seq())),
        q_elems_(static_cast<std::size_t>(s.batch * s.num_heads * s.head_dim)) {}

  // The launch plan, its workspace, and the first set of inputs.
  std::optional<CaseResult> Prepare() override {
    plan_ = PlanPagedDecode(shape_, Multiprocessors(), kv_, op_.tuning_);
    source_ = std::string("servecast_paged_decode_") + (s_.kv_fp8 ? "fp8kv" : "bf16kv") +
              ":page=" + std::to_string(kPagedKvPageSize) + "," + plan_.Describe();
    workspace_ = DeviceBuffer(std::max<std::size_t>(plan_.workspace_bytes, 16));
    sets_.push_back(MakeSet(SeedFor(base_seed_, 100)));
    return std::nullopt;
  }

  std::optional<CaseResult> Check() override {
    Launch(sets_[0], stream_);
    SC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    RefCheck check(op_.reference_scale_);
    check.AddNonFinite(CountNonFiniteBf16(sets_[0].out.get(), q_elems_, stream_), q_elems_);
    op_.CheckSampled(s_, sets_[0], k_scale_, v_scale_, SeedFor(base_seed_, 5), check, stream_);
    const std::string rule = "(2^-8 + 1e-4) * sum_j p_j*|v_jd| + 1e-6 (fp32 math, bf16 output)";
    if (!check.ok()) return op_.Incorrect(source_, check, rule);
    return std::nullopt;
  }

  void Time() override {
    const double call_bytes = CacheBytes(s_);
    const int copies = CopiesForColdL2(call_bytes);
    for (int k = 1; k < copies; ++k)
      sets_.push_back(MakeSet(SeedFor(base_seed_, 100 + static_cast<std::uint64_t>(k))));
    TimeOptions opt;
    opt.copies = copies;
    opt.rotated_bytes = call_bytes * copies;
    stats_ = TimeOnDevice(
        [&](cudaStream_t st, int iteration) { Launch(sets_[static_cast<std::size_t>(iteration % copies)], st); },
        ctx_.timing, opt, ctx_.measure_power);
  }

  std::vector<Params> Emit() override { return op_.Row(c_, ctx_, source_, stats_); }

 private:
  Set MakeSet(std::uint64_t seed) {
    Set set{DeviceBuffer(pool_ * eb_),     DeviceBuffer(pool_ * eb_),     DeviceBuffer(table_n_ * 4),
            DeviceBuffer(q_elems_ * 2), DeviceBuffer(q_elems_ * 2), {}};
    // Every slot, used or not: a kernel reading past a sequence's end reads noise.
    if (s_.kv_fp8) {
      FillUniformFp8E4m3(set.k.get(), pool_, SeedFor(seed, 1), kKeyValueRange, stream_);
      FillUniformFp8E4m3(set.v.get(), pool_, SeedFor(seed, 2), kKeyValueRange, stream_);
    } else {
      FillUniformBf16(set.k.get(), pool_, SeedFor(seed, 1), kKeyValueRange, stream_);
      FillUniformBf16(set.v.get(), pool_, SeedFor(seed, 2), kKeyValueRange, stream_);
    }
    FillUniformBf16(set.q.get(), q_elems_, SeedFor(seed, 3), kQueryRange, stream_);
    FillPoison(set.out.get(), set.out.bytes(), stream_);
    set.host_table = UploadShuffledPageTable(table_n_, SeedFor(seed, 4), set.table, stream_);
    SC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return set;
  }

  void Launch(Set& set, cudaStream_t st) {
    LaunchPagedDecode(shape_, plan_, kv_, set.q.get(), set.k.get(), set.v.get(), set.table.as<std::int32_t>(),
                      k_scale_, v_scale_, set.out.get(), workspace_.get(), st);
  }

  const AttentionGenerationOp& op_;
  const collect::Case& c_;
  const collect::RunContext& ctx_;
  const AttnShape s_;
  cudaStream_t stream_;
  const std::uint64_t base_seed_;
  const PagedDecodeShape shape_;
  const KvDtype kv_;
  const float k_scale_, v_scale_;
  const std::size_t pool_, eb_, table_n_, q_elems_;
  PagedDecodePlan plan_;
  std::string source_;
  DeviceBuffer workspace_;
  std::vector<Set> sets_;
  collect::TimingStats stats_;
};

std::unique_ptr<collect::CasePhases> AttentionGenerationOp::MakePhases(const collect::Case& c,
                                                                       const collect::RunContext& ctx,
                                                                       const AttnShape& s) const {
  return std::make_unique<Phases>(*this, c, ctx, s);
}

}  // namespace

std::unique_ptr<collect::Op> MakeAttentionContextOp(double reference_scale) {
  return std::make_unique<AttentionContextOp>(reference_scale, SdpaFp8Options{});
}

std::unique_ptr<collect::Op> MakeAttentionContextOp(double reference_scale, const SdpaFp8Options& fp8_options) {
  return std::make_unique<AttentionContextOp>(reference_scale, fp8_options);
}

std::unique_ptr<collect::Op> MakeAttentionGenerationOp(double reference_scale) {
  return std::make_unique<AttentionGenerationOp>(reference_scale, PagedDecodeTuning{});
}

std::unique_ptr<collect::Op> MakeAttentionGenerationOp(double reference_scale, const PagedDecodeTuning& tuning) {
  return std::make_unique<AttentionGenerationOp>(reference_scale, tuning);
}

void RegisterAttentionOps(collect::Registry& r) {
  r.AddOp("cuda", MakeAttentionContextOp());
  r.AddOp("cuda", MakeAttentionGenerationOp());
}

}  // namespace servecast::cuda
