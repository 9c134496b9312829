// The CUDA backend's Gated DeltaNet op (gdn_ops.h). Each case: parse and validate the
// parameters -> deterministic inputs (poisoned outputs) -> one call of the
// convolution and the scan, each checked against a double-precision host reference
// on sampled sequences and heads (and a whole-output scan for unwritten NaN poison)
// -> each kernel timed with TimeOnDevice, rotating copies of the inputs so that
// repeated calls miss in L2 -> two rows (one per kernel).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/attention_check.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/elementwise_kernels.h"
#include "backends/cuda/fill.h"
#include "backends/cuda/gdn_kernels.h"
#include "backends/cuda/gdn_ops.h"
#include "backends/cuda/harness.h"
#include "backends/cuda/op_vocabulary.h"
#include "backends/cuda/recurrent_op.h"
#include "backends/cuda/short_conv_check.h"
#include "collect/case.h"
#include "collect/table_spec.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/value.h"

namespace servecast::cuda {
namespace {

// fp32 math in a different order than the reference (chunked, 64-step substitution):
// its error against |terms| is ~1e-5 at most on these inputs; 2^-12 leaves ~20x.
constexpr double kF32Order = 0x1p-12;
// Reference tokens per sampled (sequence, head) when the sequence is longer; the last
// sampled pair always runs its whole length (so its final state is checked).
constexpr std::int64_t kRefTokens = 4096;
// Decays exp(g) in [0.95, 1): a chunk keeps ~20% of its initial state, so the
// cross-chunk terms (exp(G) K S0, exp(G) Q S0) matter to the check.
constexpr float kDecayLo = -0.05f;
constexpr float kBetaLo = 0.1f, kBetaHi = 0.9f;
constexpr float kStateRange = 0.5f;  // the decode's initial state

CaseResult Invalid(const std::string& msg) {
  return CaseResult::Failure(Disposition::kFailed, FailureClass::kUnsupportedConfig, "InvalidParams", "gdn: " + msg);
}
CaseResult Unsupported(const std::string& type, const std::string& msg) {
  return CaseResult::Failure(Disposition::kNotSupported, FailureClass::kUnsupportedConfig, type, "gdn: " + msg);
}

struct Shape {
  bool context = true;
  GdnShape g;
};

std::optional<CaseResult> Parse(const Params& p, Shape& s) {
  std::string phase;
  std::int64_t tokens = 0, d_model = 0, dk = 0, dv = 0;
  try {
    phase = p.Str("phase");
    s.g.batch = p.Int("batch_size");
    s.g.seq = p.Int("seq_len");
    tokens = p.Int("num_tokens");
    d_model = p.Int("d_model");
    s.g.conv = p.Int("d_conv");
    s.g.hk = p.Int("num_k_heads");
    dk = p.Int("head_k_dim");
    s.g.hv = p.Int("num_v_heads");
    dv = p.Int("head_v_dim");
    (void)p.Str("model_name");
  } catch (const Error& e) {
    return Invalid(e.what());
  }
  if (phase != "context" && phase != "generation")
    return Invalid("phase '" + phase + "' (expected context or generation)");
  s.context = phase == "context";
  if (s.g.batch <= 0 || s.g.seq <= 0 || d_model <= 0 || s.g.conv <= 0 || s.g.hk <= 0 || s.g.hv <= 0 || dk <= 0 ||
      dv <= 0)
    return Invalid("batch_size, seq_len, d_model, d_conv, the head counts and dims must be positive (got " +
                   p.Canonical() + ")");
  if (tokens != s.g.batch * s.g.seq)
    return Invalid("num_tokens " + std::to_string(tokens) + " is not batch_size x seq_len (" +
                   std::to_string(s.g.batch * s.g.seq) + ")");
  if (s.g.hv % s.g.hk != 0)
    return Invalid("num_v_heads " + std::to_string(s.g.hv) + " is not a multiple of num_k_heads " +
                   std::to_string(s.g.hk));
  if (!s.context && s.g.seq != 1)
    return Invalid("generation runs one token per sequence (seq_len 1), got seq_len " + std::to_string(s.g.seq));
  if (dk != kGdnHeadDim || dv != kGdnHeadDim)
    return Unsupported("UnsupportedShape", "head_k_dim " + std::to_string(dk) + ", head_v_dim " + std::to_string(dv) +
                                               ": the cuda kernels take 128 and 128 (every Qwen3.5 / Qwen3-Next "
                                               "checkpoint)");
  if (s.g.conv > kGdnMaxConv)
    return Unsupported("UnsupportedShape",
                       "d_conv " + std::to_string(s.g.conv) + " above " + std::to_string(kGdnMaxConv));
  if (s.g.batch > 65535 || s.g.hv > 65535) return Unsupported("ShapeTooLarge", "batch_size or num_v_heads above 65535");
  return std::nullopt;
}

// Bytes of one input/output set: x and y (T x C bf16), g and beta (T x hv f32), o,
// the states and the convolution's window and weights.
double SetBytes(const GdnShape& g) {
  const double T = static_cast<double>(g.tokens()), C = static_cast<double>(g.channels());
  const double hv = static_cast<double>(g.hv), D = kGdnHeadDim;
  return T * C * 4 + T * hv * 8 + T * hv * D * 2 + static_cast<double>(g.batch) * hv * D * D * 4 +
         static_cast<double>(g.batch * (g.conv - 1)) * C * 2 + C * static_cast<double>(g.conv) * 2;
}

// The delta rule in double precision over one (sequence, value head), the state
// S[k][d] (dk x dv) updated in place token by token; q, k, v rows of 128 as bf16, as
// the convolution wrote them. Per token: the output row and, per column, sum_k
// |S_kd q_k| (the tolerance's scale).
struct RefStep {
  std::vector<double> o, mag;
};
class DeltaRule {
 public:
  explicit DeltaRule(std::vector<double> state) : S_(std::move(state)) {}
  RefStep Step(const std::uint16_t* q16, const std::uint16_t* k16, const std::uint16_t* v16, double g, double beta) {
    constexpr int D = kGdnHeadDim;
    double q[D], k[D], v[D];
    Normalized(q16, 1.0 / std::sqrt(static_cast<double>(D)), q);
    Normalized(k16, 1.0, k);
    for (int d = 0; d < D; ++d) v[d] = Bf16(v16[d]);
    const double a = std::exp(g);
    for (double& s : S_) s *= a;
    double u[D];
    for (int d = 0; d < D; ++d) {
      double kv = 0;
      for (int i = 0; i < D; ++i) kv += S_[static_cast<std::size_t>(i * D + d)] * k[i];
      u[d] = beta * (v[d] - kv);
    }
    RefStep r{std::vector<double>(D, 0.0), std::vector<double>(D, 0.0)};
    for (int i = 0; i < D; ++i)
      for (int d = 0; d < D; ++d) {
        double& s = S_[static_cast<std::size_t>(i * D + d)];
        s += k[i] * u[d];
        r.o[static_cast<std::size_t>(d)] += s * q[i];
        r.mag[static_cast<std::size_t>(d)] += std::fabs(s * q[i]);
      }
    return r;
  }
  const std::vector<double>& state() const { return S_; }

 private:
  static void Normalized(const std::uint16_t* x16, double scale, double* out) {
    double ss = 0;
    for (int d = 0; d < kGdnHeadDim; ++d) {
      out[d] = Bf16(x16[d]);
      ss += out[d] * out[d];
    }
    const double inv = scale / std::sqrt(ss + static_cast<double>(kGdnNormEps));
    for (int d = 0; d < kGdnHeadDim; ++d) out[d] *= inv;
  }
  std::vector<double> S_;
};

std::string At(const char* what, std::int64_t b, std::int64_t t, std::int64_t h, std::int64_t d) {
  std::string s = std::string(what) + "[b=" + std::to_string(b);
  if (t >= 0) s += ",t=" + std::to_string(t);
  if (h >= 0) s += ",head=" + std::to_string(h);
  return s + ",d=" + std::to_string(d) + "]";
}

class GdnOp : public collect::Op {
 public:
  explicit GdnOp(double reference_scale)
      : table_(*collect::FindTableSpec("gdn_perf")), reference_scale_(reference_scale) {}
  std::string name() const override { return "gdn"; }
  const collect::TableSpec& table() const override { return table_; }
  std::vector<std::string> required_params() const override {
    return {"phase",       "batch_size", "seq_len",     "num_tokens", "d_model",   "d_conv",
            "num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim", "model_name"};
  }
  double default_timeout_s() const override { return 300; }
  double MemoryBytes(const Params& p) const override {
    Shape s;
    if (Parse(p, s)) return 0;
    return SetBytes(s.g) + (s.context ? static_cast<double>(GdnChunkWorkspaceBytes(s.g)) : 0.0) + 256.0 * 1024 * 1024;
  }
  CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override;

  const collect::TableSpec& table_;
  const double reference_scale_;
};

class GdnPhases : public collect::CasePhases {
 public:
  GdnPhases(const GdnOp& op, const collect::Case& c, const collect::RunContext& ctx, const Shape& s)
      : op_(op), c_(c), ctx_(ctx), s_(s), g_(s.g), stream_(Context().stream), base_seed_(Fnv1a64(c.id)) {}

  std::optional<CaseResult> Prepare() override {
    if (s_.context && GdnChunkSmemBytes() > Context().prop.sharedMemPerBlockOptin)
      return Unsupported("SharedMemory", "the prefill scan needs " + std::to_string(GdnChunkSmemBytes()) +
                                             " B of shared memory per block; the device allows " +
                                             std::to_string(Context().prop.sharedMemPerBlockOptin));
    conv_source_ = std::string(s_.context ? "servecast_causal_conv1d" : "servecast_causal_conv1d_update") +
                   ":silu,k=" + std::to_string(g_.conv);
    scan_source_ = s_.context ? "servecast_gdn_chunk64:fp32" : "servecast_gdn_recurrent:fp32";
    if (s_.context) workspace_ = DeviceBuffer(GdnChunkWorkspaceBytes(g_));
    sets_.push_back(MakeSet(SeedFor(base_seed_, 100)));
    return std::nullopt;
  }

  std::optional<CaseResult> Check() override {
    // The decode's state and window are updated in place: keep the sampled inputs first.
    const RecurrentSamples smp = SampleRecurrent(g_.batch, g_.hv, SeedFor(base_seed_, 7));
    std::vector<std::vector<float>> state0;
    std::vector<std::vector<std::uint16_t>> window0;
    const Set& set = sets_[0];
    const std::int64_t C = g_.channels(), D = kGdnHeadDim;
    if (!s_.context) {
      for (const auto& [b, h] : smp.pairs)
        state0.push_back(Download<float>(set.state.get(), static_cast<std::size_t>(D * D),
                                         static_cast<std::size_t>((b * g_.hv + h) * D * D), stream_));
      window0 = DownloadWindows(g_.conv_shape(), set.window.get(), smp.seqs, stream_);
    }
    LaunchConv(0, stream_);
    LaunchScan(0, stream_);
    SC_CUDA_CHECK(cudaStreamSynchronize(stream_));

    RefCheck conv(op_.reference_scale_), window(op_.reference_scale_), out(op_.reference_scale_),
        state(op_.reference_scale_);
    const std::size_t y_elems = static_cast<std::size_t>(g_.tokens() * C);
    const std::size_t o_elems = static_cast<std::size_t>(g_.tokens() * g_.hv * D);
    conv.AddNonFinite(CountNonFiniteBf16(set.y.get(), y_elems, stream_), y_elems);
    out.AddNonFinite(CountNonFiniteBf16(set.o.get(), o_elems, stream_), o_elems);
    CheckShortConv(g_.conv_shape(), s_.context, set.x.get(), set.w.get(), nullptr, set.y.get(), set.window.get(),
                   smp.seqs, window0, SeedFor(base_seed_, 8), conv, window, stream_);
    CheckScan(set, smp, state0, out, state);
    if (!conv.ok()) return Incorrect(conv_source_, conv, kShortConvRule);
    if (!window.ok()) return Incorrect(conv_source_, window, kShortConvWindowRule);
    if (!out.ok()) return Incorrect(scan_source_, out, "2^-8 |ref| + 2^-12 sum_k |S_kd q_k| + 1e-6 (bf16 output)");
    if (!state.ok()) return Incorrect(scan_source_, state, "2^-12 max |S_ref| of the head (fp32 state)");
    return std::nullopt;
  }

  void Time() override {
    const double set_bytes = SetBytes(g_);
    const int copies = CopiesForColdL2(set_bytes);
    for (int k = 1; k < copies; ++k) sets_.push_back(MakeSet(SeedFor(base_seed_, 100 + static_cast<std::uint64_t>(k))));
    SC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const double T = static_cast<double>(g_.tokens()), C = static_cast<double>(g_.channels());
    const double hv = static_cast<double>(g_.hv), D = kGdnHeadDim;
    const double conv_bytes = 2 * T * C * 2 + static_cast<double>(g_.batch * (g_.conv - 1)) * C * 2;
    const double scan_bytes = T * C * 2 + T * hv * 8 + T * hv * D * 2 + static_cast<double>(g_.batch) * hv * D * D * 4;
    timing_.Time([&](std::size_t i, cudaStream_t st) { LaunchConv(i, st); },
                 [&](std::size_t i, cudaStream_t st) { LaunchScan(i, st); }, copies, conv_bytes, scan_bytes, ctx_);
  }

  std::vector<Params> Emit() override { return timing_.Rows(op_, ctx_, c_.params, conv_source_, scan_source_); }

 private:
  struct Set {
    DeviceBuffer x, w, y, window, g, beta, o, state;
  };

  Set MakeSet(std::uint64_t seed) {
    const std::size_t T = static_cast<std::size_t>(g_.tokens()), C = static_cast<std::size_t>(g_.channels());
    const std::size_t hv = static_cast<std::size_t>(g_.hv), D = kGdnHeadDim, B = static_cast<std::size_t>(g_.batch);
    const std::size_t W = static_cast<std::size_t>(g_.conv - 1), K = static_cast<std::size_t>(g_.conv);
    Set set{DeviceBuffer(T * C * 2),      DeviceBuffer(C * K * 2),
            DeviceBuffer(T * C * 2),      DeviceBuffer(std::max<std::size_t>(B * W * C * 2, 16)),
            DeviceBuffer(T * hv * 4),     DeviceBuffer(T * hv * 4),
            DeviceBuffer(T * hv * D * 2), DeviceBuffer(B * hv * D * D * 4)};
    FillUniformBf16(set.x.get(), T * C, SeedFor(seed, 1), 1.0f, stream_);
    FillUniformBf16(set.w.get(), C * K, SeedFor(seed, 2), 0.5f, stream_);
    // g in [kDecayLo, 0), beta in [kBetaLo, kBetaHi): affine maps of uniform [-1, 1).
    FillUniformF32(set.g.as<float>(), T * hv, SeedFor(seed, 3), 1.0f, stream_);
    LaunchGdnAffineF32(set.g.as<float>(), static_cast<std::int64_t>(T * hv), -kDecayLo / 2, kDecayLo / 2, stream_);
    FillUniformF32(set.beta.as<float>(), T * hv, SeedFor(seed, 4), 1.0f, stream_);
    LaunchGdnAffineF32(set.beta.as<float>(), static_cast<std::int64_t>(T * hv), (kBetaHi - kBetaLo) / 2,
                       (kBetaHi + kBetaLo) / 2, stream_);
    FillPoison(set.y.get(), set.y.bytes(), stream_);
    FillPoison(set.o.get(), set.o.bytes(), stream_);
    if (s_.context) {
      FillPoison(set.window.get(), set.window.bytes(), stream_);
      FillPoison(set.state.get(), set.state.bytes(), stream_);
    } else {
      FillUniformBf16(set.window.get(), B * W * C, SeedFor(seed, 5), 1.0f, stream_);
      FillUniformF32(set.state.as<float>(), B * hv * D * D, SeedFor(seed, 6), kStateRange, stream_);
    }
    return set;
  }

  void LaunchConv(std::size_t i, cudaStream_t st) {
    Set& set = sets_[i];
    if (s_.context)
      LaunchShortConvPrefill(g_.conv_shape(), set.x.get(), set.w.get(), nullptr, set.y.get(), set.window.get(), st);
    else
      LaunchShortConvDecode(g_.conv_shape(), set.x.get(), set.w.get(), nullptr, set.y.get(), set.window.get(), st);
  }
  void LaunchScan(std::size_t i, cudaStream_t st) {
    Set& set = sets_[i];
    if (s_.context)
      LaunchGdnChunkPrefill(g_, set.y.get(), set.g.as<float>(), set.beta.as<float>(), set.o.get(),
                            set.state.as<float>(), workspace_.as<float>(), st);
    else
      LaunchGdnRecurrentDecode(g_, set.y.get(), set.g.as<float>(), set.beta.as<float>(), set.o.get(),
                               set.state.as<float>(), st);
  }

  // The scan over sampled (sequence, head) pairs from the convolution's output as the
  // device wrote it: every output row of the reference's tokens, and the final state
  // where the reference covered the whole sequence.
  void CheckScan(const Set& set, const RecurrentSamples& smp, const std::vector<std::vector<float>>& state0,
                 RefCheck& out, RefCheck& state) {
    const std::int64_t C = g_.channels(), D = kGdnHeadDim, S = g_.seq, hv = g_.hv;
    const std::int64_t ratio = hv / g_.hk;
    for (std::size_t pi = 0; pi < smp.pairs.size(); ++pi) {
      const auto [b, h] = smp.pairs[pi];
      const bool last = pi + 1 == smp.pairs.size();
      const std::int64_t n = s_.context && !last ? std::min(S, kRefTokens) : S;
      const std::int64_t kh = h / ratio, row0 = b * S;
      const auto q = DownloadBlock<std::uint16_t>(set.y.get(), row0, n, C, kh * D, D, stream_);
      const auto k = DownloadBlock<std::uint16_t>(set.y.get(), row0, n, C, (g_.hk + kh) * D, D, stream_);
      const auto v = DownloadBlock<std::uint16_t>(set.y.get(), row0, n, C, (2 * g_.hk + h) * D, D, stream_);
      const auto gg = DownloadBlock<float>(set.g.get(), row0, n, hv, h, 1, stream_);
      const auto bt = DownloadBlock<float>(set.beta.get(), row0, n, hv, h, 1, stream_);
      const auto o = DownloadBlock<std::uint16_t>(set.o.get(), row0, n, hv * D, h * D, D, stream_);
      std::vector<double> init(static_cast<std::size_t>(D * D), 0.0);
      if (!s_.context) std::copy(state0[pi].begin(), state0[pi].end(), init.begin());
      DeltaRule rule(std::move(init));
      for (std::int64_t t = 0; t < n; ++t) {
        const std::size_t at = static_cast<std::size_t>(t * D);
        const RefStep r =
            rule.Step(&q[at], &k[at], &v[at], gg[static_cast<std::size_t>(t)], bt[static_cast<std::size_t>(t)]);
        for (std::int64_t d = 0; d < D; ++d) {
          const double ref = r.o[static_cast<std::size_t>(d)];
          out.AddLazy([&] { return At("o", b, t, h, d); }, Bf16(o[at + static_cast<std::size_t>(d)]), ref,
                      kBf16Roundoff * std::fabs(ref) + kF32Order * r.mag[static_cast<std::size_t>(d)] + 1e-6);
        }
      }
      if (n != S) continue;
      const auto got = Download<float>(set.state.get(), static_cast<std::size_t>(D * D),
                                       static_cast<std::size_t>((b * hv + h) * D * D), stream_);
      double peak = 0;
      for (double s : rule.state()) peak = std::max(peak, std::fabs(s));
      for (std::int64_t i = 0; i < D * D; ++i)
        state.AddLazy([&] { return At("state", b, i / D, h, i % D); }, got[static_cast<std::size_t>(i)],
                      rule.state()[static_cast<std::size_t>(i)], kF32Order * peak + 1e-12);
    }
  }

  CaseResult Incorrect(const std::string& source, const RefCheck& check, const std::string& rule) const {
    return CaseResult::Failure(Disposition::kIncorrect, FailureClass::kCollectorBug, "IncorrectOutput",
                               "gdn (" + source + "): " + check.Describe(rule));
  }

  const GdnOp& op_;
  const collect::Case& c_;
  const collect::RunContext& ctx_;
  const Shape s_;
  const GdnShape g_;
  cudaStream_t stream_;
  const std::uint64_t base_seed_;
  std::string conv_source_, scan_source_;
  std::vector<Set> sets_;
  DeviceBuffer workspace_;  // the prefill scan's per-chunk float32 workspace (shared by the sets)
  TwoKernelTiming timing_;
};

CaseResult GdnOp::Run(const collect::Case& c, const collect::RunContext& ctx) {
  Shape s;
  if (std::optional<CaseResult> bad = Parse(c.params, s)) return *bad;
  if (!ctx.runtime)
    return CaseResult::Failure(Disposition::kFailed, FailureClass::kCollectorBug, "MissingRuntime",
                               "gdn: the run context carries no runtime");
  GdnPhases phases(*this, c, ctx, s);
  return RunCudaPhases(phases, FailureClass::kCollectorBug);
}

}  // namespace

std::unique_ptr<collect::Op> MakeGdnOp(double reference_scale) {
  return std::make_unique<GdnOp>(reference_scale);
}

void RegisterGdnOps(collect::Registry& r) {
  r.AddOp("cuda", MakeGdnOp());
}

}  // namespace servecast::cuda
