// The CUDA backend's DSA module ops (dsa_ops.h): one layer's whole DeepSeek Sparse
// Attention module, as AIC's dsa_*_module_perf tables time it. Each case: parse ->
// weights, caches and inputs (deterministic; the cached prefix random) -> one call,
// every stage checked against a double-precision host reference on sampled tokens
// and heads -> the whole module timed as one CUDA graph with TimeOnDevice -> one row.
//
// The module, T = batch x isl new tokens after `step` cached ones per sequence:
//   q_a = RMSNorm(x W_qa)          kv = [RMSNorm(x W_kva[:512]) | rope(x W_kva[512:])]
//   index k = rope(LayerNorm(x W_k)),  index weights = x W_w (bf16 always)
//   q = q_a W_qb (n heads of nope + rope);  index q = rope(q_a W_iq) (index heads x 128)
//   the latent (kv) and the index key (e4m3, a scale per token) into their paged caches
//   indexer scores over every cached key (dsa_kernels.h), top-k (2048) per token
//   q_abs = [q_nope W_UK | rope(q_rope)] (576 per head), sparse MLA over the selected
//   latents (mla_kernels.h LaunchMlaSparse), o = out W_UV (v per head), y = o W_o.
// Prefill uses the absorbed sparse form too (every token a query over its own top-k,
// as FlashMLA's sparse prefill does); GEMMs at gemm_type (bfloat16 or fp8_block: the
// activations quantized per 128-group inside the call), the per-head W_UK / W_UV
// products in bfloat16.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/attention_check.h"
#include "backends/cuda/attention_kernels.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/dsa_kernels.h"
#include "backends/cuda/dsa_ops.h"
#include "backends/cuda/elementwise_kernels.h"
#include "backends/cuda/fill.h"
#include "backends/cuda/harness.h"
#include "backends/cuda/linear.h"
#include "backends/cuda/mla_kernels.h"
#include "backends/cuda/op_vocabulary.h"
#include "backends/cuda/quantize.h"
#include "collect/case.h"
#include "collect/table_spec.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/value.h"
#include "tables/cost_model.h"

namespace servecast::cuda {
namespace {

constexpr float kNormEps = 1e-6f;
constexpr float kRopeTheta = 10000.0f;
constexpr float kLatentFp8Scale = 0.5f;  // the fp8 latent cache's per-tensor scale (not 1: a kernel ignoring it fails)
constexpr float kPrefixIndexScale = 0x1.787878p-7f;  // 0x3C3C3C3C: the cached prefix's index-key scales (memset)
// A stage whose output is a bf16 GEMM result, normalized or rotated: rounding of
// the GEMM output and of the stage's own output (2^-8 each), float math.
constexpr double kStageRel = 0x1p-6;
constexpr double kGemmRel = 0x1p-7;
constexpr double kAccum = 0x1p-12;
// A norm/rope stage may miss by this many times the error its input carries into it
// (mag: the GEMM output's rounding and accumulation, through the norm's scale).
constexpr double kStageMargin = 2.0;

struct Shape {
  bool context = true;
  tables::DsaGeometry g;
  std::int64_t n = 1, batch = 1, isl = 1, step = 0, tp = 1;
  bool kv_fp8 = false, fp8_block = false;
  std::int64_t H = 0, ql = 0, nope = 0, rope = 0, v = 0, ih = 0, topk = 0;
  std::int64_t T() const { return batch * isl; }
  std::int64_t Tp() const { return (T() + 3) / 4 * 4; }
  std::int64_t keys() const { return step + isl; }  // of the longest query
  std::int64_t pages_per_seq() const { return (keys() + kPagedKvPageSize - 1) / kPagedKvPageSize; }
  std::int64_t slots() const { return batch * pages_per_seq() * kPagedKvPageSize; }
  std::int64_t qk() const { return nope + rope; }
};

CaseResult Invalid(const std::string& op, const std::string& msg) {
  return CaseResult::Failure(Disposition::kFailed, FailureClass::kUnsupportedConfig, "InvalidParams", op + ": " + msg);
}
CaseResult Unsupported(const std::string& op, const std::string& type, const std::string& msg) {
  return CaseResult::Failure(Disposition::kNotSupported, FailureClass::kUnsupportedConfig, type, op + ": " + msg);
}

std::optional<CaseResult> Parse(const std::string& op, const Params& p, bool context, Shape& s) {
  std::string arch, mla, kv, gemm;
  try {
    (void)p.Str("model");
    arch = p.Str("architecture");
    mla = p.Str("mla_dtype");
    kv = p.Str("kv_cache_dtype");
    gemm = p.Str("gemm_type");
    s.n = p.Int("num_heads");
    s.batch = p.Int("batch_size");
    s.isl = p.Int("isl");
    s.tp = p.Int("tp_size");
    s.step = p.Int("step");
    s.g = tables::DsaGeometryOf(arch);
  } catch (const Error& e) {
    return Invalid(op, e.what());
  }
  s.context = context;
  if (s.n <= 0 || s.batch <= 0 || s.isl <= 0 || s.tp <= 0 || s.step < 0)
    return Invalid(op, "num_heads, batch_size, isl and tp_size must be positive, step non-negative (got " +
                           p.Canonical() + ")");
  if (!context && (s.isl != 1 || s.step < 1))
    return Invalid(op, "generation decodes one token per sequence over its cached ones (isl 1, step >= 1), got " +
                           p.Canonical());
  if (mla != "bfloat16") return Unsupported(op, "UnsupportedDtype", "mla_dtype '" + mla + "' (have bfloat16)");
  if (kv != "bfloat16" && kv != "fp8")
    return Unsupported(op, "UnsupportedDtype", "kv_cache_dtype '" + kv + "' (have bfloat16, fp8)");
  if (gemm != "bfloat16" && gemm != "fp8_block")
    return Unsupported(op, "UnsupportedDtype", "gemm_type '" + gemm + "' (have bfloat16, fp8_block)");
  s.kv_fp8 = kv == "fp8";
  s.fp8_block = gemm == "fp8_block";
  const auto I = [](double d) { return static_cast<std::int64_t>(d); };
  s.H = I(s.g.hidden), s.ql = I(s.g.q_lora), s.nope = I(s.g.nope), s.rope = I(s.g.rope), s.v = I(s.g.v);
  s.ih = I(s.g.index_heads), s.topk = I(s.g.topk);
  if (I(s.g.kv_lora) != kMlaLatent || s.rope != kMlaRope || I(s.g.index_dim) != kDsaIndexDim)
    return Unsupported(op, "UnsupportedShape", "the geometry of " + arch + " (latent 512, rope 64, index dim 128 only)");
  if (s.n * s.v % 128 != 0 && s.fp8_block)
    return Unsupported(op, "UnsupportedShape", "fp8_block o_proj needs num_heads x v_head_dim a multiple of 128");
  if (s.T() > 65535) return Unsupported(op, "ShapeTooLarge", "more than 65,535 new tokens in one call");
  if (s.keys() > (std::int64_t{1} << 30)) return Unsupported(op, "ShapeTooLarge", "more than 2^30 keys per sequence");
  return std::nullopt;
}

// Device bytes of one case (buffers, caches, weights), for the memory guard.
double CaseBytes(const Shape& s) {
  const double T = static_cast<double>(s.Tp()), n = static_cast<double>(s.n);
  const double acts = T * (s.H * 2.0 + s.ql + 576 + 3 * 128 + s.ih + n * s.qk() + 2.0 * s.ih * 128 + n * 576 +
                           n * 512 + n * s.v) * 2;
  const double logits = static_cast<double>(s.T()) * static_cast<double>(s.keys()) * 4;
  const double caches = static_cast<double>(s.slots()) * ((s.kv_fp8 ? 1 : 2) * 576.0 + 128 + 4);
  const double wb = s.fp8_block ? 1 : 2;
  const double weights = (s.H * (s.ql + 576.0 + 128) + s.ql * (n * s.qk() + s.ih * 128.0) + n * s.v * s.H) * wb +
                         s.H * static_cast<double>(s.ih) * 2 + n * (512.0 * s.nope + 512.0 * s.v) * 2;
  return acts + logits + caches + weights + static_cast<double>(s.T()) * (s.topk + 1) * 4;
}

// Host double helpers.
std::vector<double> Bf16Row(const void* dev, std::size_t count, std::size_t offset, cudaStream_t st) {
  const auto raw = Download<std::uint16_t>(dev, count, offset, st);
  std::vector<double> out(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) out[i] = Bf16(raw[i]);
  return out;
}
double Dot(const std::vector<double>& a, const std::vector<double>& b, double* abs_sum) {
  double s = 0, m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    s += a[i] * b[i];
    m += std::fabs(a[i] * b[i]);
  }
  if (abs_sum) *abs_sum = m;
  return s;
}
// In place on x[begin, begin + width): the norm. mag (same indexing) holds each
// input element's error bound on entry and the output's on return: the input's own
// error and the mean's (LayerNorm) scaled by |w| / std, large where x is close to the
// mean; the error of the variance is relative and left to the stage's kStageRel.
void NormRef(std::vector<double>& x, std::vector<double>& mag, std::size_t begin, std::size_t width,
             const std::vector<double>& w, const std::vector<double>* bias) {
  double mean = 0, sq = 0;
  for (std::size_t i = 0; i < width; ++i) mean += x[begin + i], sq += x[begin + i] * x[begin + i];
  mean /= static_cast<double>(width);
  sq /= static_cast<double>(width);
  const double m = bias ? mean : 0.0;
  const double var = bias ? sq - mean * mean : sq;
  const double inv = 1.0 / std::sqrt(var + kNormEps);
  mag.resize(x.size(), 0.0);
  double mean_err = 0;
  if (bias) {
    for (std::size_t i = 0; i < width; ++i) mean_err += mag[begin + i];
    mean_err /= static_cast<double>(width);
  }
  for (std::size_t i = 0; i < width; ++i) {
    mag[begin + i] = std::fabs(w[i]) * (mag[begin + i] + mean_err) * inv;
    x[begin + i] = (x[begin + i] - m) * inv * w[i] + (bias ? (*bias)[i] : 0.0);
  }
}
// In place: the 64 columns from begin rotated (interleaved pairs) at position pos;
// mag's pair entries become their sum (the rotation mixes them); a pair without an
// error bound gets its bf16 rounding, 2^-8 (|a| + |b|).
void RopeRef(std::vector<double>& x, std::vector<double>& mag, std::size_t begin, std::int64_t pos) {
  mag.resize(x.size(), 0.0);
  for (int i = 0; i < kDsaRopeDim / 2; ++i) {
    const double angle =
        static_cast<double>(pos) * std::exp2(-(2.0 * i / kDsaRopeDim) * std::log2(static_cast<double>(kRopeTheta)));
    const double c = std::cos(angle), s = std::sin(angle);
    const std::size_t ia = begin + 2 * static_cast<std::size_t>(i), ib = ia + 1;
    const double a = x[ia], b = x[ib];
    x[ia] = a * c - b * s;
    x[ib] = b * c + a * s;
    const double m = mag[ia] + mag[ib] > 0 ? mag[ia] + mag[ib] : 0x1p-8 * (std::fabs(a) + std::fabs(b));
    mag[ia] = mag[ib] = m;
  }
}
double Rms(const std::vector<double>& x, std::size_t begin, std::size_t width) {
  double sq = 0;
  for (std::size_t i = 0; i < width; ++i) sq += x[begin + i] * x[begin + i];
  return std::sqrt(sq / static_cast<double>(std::max<std::size_t>(width, 1)));
}

class DsaOp : public collect::Op {
 public:
  DsaOp(bool context, double reference_scale)
      : context_(context),
        table_(*collect::FindTableSpec(context ? "dsa_context_module_perf" : "dsa_generation_module_perf")),
        reference_scale_(reference_scale) {}
  std::string name() const override { return context_ ? "dsa_context_module" : "dsa_generation_module"; }
  const collect::TableSpec& table() const override { return table_; }
  std::vector<std::string> required_params() const override {
    return {"model", "architecture", "mla_dtype", "kv_cache_dtype", "gemm_type", "num_heads",
            "batch_size", "isl", "tp_size", "step"};
  }
  std::vector<collect::Requirement> requirements() const override { return gemm::Fp8Requirements("gemm_type"); }
  double default_timeout_s() const override { return 300; }
  double MemoryBytes(const Params& p) const override {
    Shape s;
    if (Parse(name(), p, context_, s)) return 0;
    return CaseBytes(s) + 512.0 * 1024 * 1024;
  }
  CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override;

  const bool context_;
  const collect::TableSpec& table_;
  const double reference_scale_;
};

class DsaPhases : public collect::CasePhases {
 public:
  DsaPhases(const DsaOp& op, const collect::Case& c, const collect::RunContext& ctx, const Shape& s)
      : op_(op), c_(c), ctx_(ctx), s_(s), st_(Context().stream), seed_(Fnv1a64(c.id)),
        tok_{s.batch, s.isl, s.step, s.pages_per_seq()} {}

  std::optional<CaseResult> Prepare() override {
    const std::int64_t Tp = s_.Tp(), T = s_.T(), n = s_.n;
    auto alloc = [&](std::int64_t bytes) {
      DeviceBuffer b(static_cast<std::size_t>(std::max<std::int64_t>(bytes, 256)));
      SC_CUDA_CHECK(cudaMemsetAsync(b.get(), 0, b.bytes(), st_));
      return b;
    };
    x_ = alloc(Tp * s_.H * 2);
    FillUniformBf16(x_.get(), static_cast<std::size_t>(T * s_.H), SeedFor(seed_, 1), 1.0f, st_);
    qa_ = alloc(Tp * s_.ql * 2);
    kva_ = alloc(Tp * 576 * 2);
    ik_ = alloc(Tp * 128 * 2);
    iw_ = alloc(Tp * s_.ih * 2);
    qb_ = alloc(Tp * n * s_.qk() * 2);
    iq_ = alloc(Tp * s_.ih * 128 * 2);
    qabs_ = alloc(Tp * n * 576 * 2);
    logits_ = alloc(T * s_.keys() * 4);
    slots_ = alloc(T * s_.topk * 4);
    lens_ = alloc(T * 4);
    olat_ = alloc(Tp * n * 512 * 2);
    ov_ = alloc(Tp * n * s_.v * 2);
    out_ = alloc(Tp * s_.H * 2);
    FillPoison(out_.get(), static_cast<std::size_t>(T * s_.H * 2), st_);
    // Norm weights (non-zero, both signs) and the LayerNorm bias.
    for (auto [buf, width, stream] : {std::tuple{&wq_norm_, s_.ql, 11}, std::tuple{&wkv_norm_, std::int64_t{512}, 12},
                                      std::tuple{&wk_norm_, std::int64_t{128}, 13}, std::tuple{&bk_norm_, std::int64_t{128}, 14}}) {
      *buf = alloc(width * 2);
      FillUniformBf16(buf->get(), static_cast<std::size_t>(width), SeedFor(seed_, static_cast<std::uint64_t>(stream)),
                      1.0f, st_);
    }
    // Caches: the cached prefix random, the index scales positive (a byte pattern).
    const std::int64_t slots = s_.slots();
    pool_ = alloc(slots * 576 * (s_.kv_fp8 ? 1 : 2));
    if (s_.kv_fp8)
      FillUniformFp8E4m3(pool_.get(), static_cast<std::size_t>(slots * 576), SeedFor(seed_, 2), 2.0f, st_);
    else
      FillUniformBf16(pool_.get(), static_cast<std::size_t>(slots * 576), SeedFor(seed_, 2), 1.0f, st_);
    index_pool_ = alloc(slots * 128);
    FillUniformFp8E4m3(index_pool_.get(), static_cast<std::size_t>(slots * 128), SeedFor(seed_, 3), 64.0f, st_);
    index_scale_ = alloc(slots * 4);
    SC_CUDA_CHECK(cudaMemsetAsync(index_scale_.get(), 0x3C, index_scale_.bytes(), st_));
    table_dev_ = alloc(s_.batch * s_.pages_per_seq() * 4);
    table_ = UploadShuffledPageTable(static_cast<std::size_t>(s_.batch * s_.pages_per_seq()), SeedFor(seed_, 4),
                                     table_dev_, st_);

    // Projections.
    const bool fb = s_.fp8_block;
    auto lin = [&](std::unique_ptr<Linear>& l, LinearSpec spec, std::uint64_t stream) {
      l = std::make_unique<Linear>(spec, SeedFor(seed_, stream), st_);
    };
    lin(qa_l_, {fb, Tp, s_.ql, s_.H}, 20);
    lin(kva_l_, {fb, Tp, 576, s_.H}, 21);
    lin(wk_l_, {fb, Tp, 128, s_.H}, 22);
    lin(wp_l_, {false, Tp, s_.ih, s_.H}, 23);
    lin(qb_l_, {fb, Tp, n * s_.qk(), s_.ql}, 24);
    lin(iq_l_, {fb, Tp, s_.ih * 128, s_.ql}, 25);
    lin(uk_l_, {false, Tp, 512, s_.nope, n, n * s_.qk(), s_.qk(), n * 576, 576}, 26);
    lin(uv_l_, {false, Tp, s_.v, 512, n, n * 512, 512, n * s_.v, s_.v}, 27);
    lin(o_l_, {fb, Tp, s_.H, n * s_.v}, 28);
    struct Step {
      Linear* l;
      const void* x;
      void* y;
    };
    for (const Step& st : {Step{qa_l_.get(), x_.get(), qa_.get()}, Step{kva_l_.get(), x_.get(), kva_.get()},
                           Step{wk_l_.get(), x_.get(), ik_.get()}, Step{wp_l_.get(), x_.get(), iw_.get()},
                           Step{qb_l_.get(), qa_.get(), qb_.get()}, Step{iq_l_.get(), qa_.get(), iq_.get()},
                           Step{uk_l_.get(), qb_.get(), qabs_.get()}, Step{uv_l_.get(), olat_.get(), ov_.get()},
                           Step{o_l_.get(), ov_.get(), out_.get()}}) {
      if (std::optional<std::string> why = st.l->Choose(st.x, st.y, st_))
        return Unsupported(op_.name(), "NoCublasLtAlgorithm", *why);
    }
    FillPoison(out_.get(), static_cast<std::size_t>(T * s_.H * 2), st_);  // Choose wrote it
    plan_ = PlanMlaDecode(MlaDecodeShape{T, n, s_.topk}, Multiprocessors(),
                          s_.kv_fp8 ? KvDtype::kFp8E4m3 : KvDtype::kBf16, /*gathered=*/true);
    workspace_ = alloc(static_cast<std::int64_t>(std::max<std::size_t>(plan_.workspace_bytes, 16)));
    index_chunk_ = DsaIndexerChunkTiles(tok_, Multiprocessors());
    source_ = std::string("servecast_dsa:") + (fb ? "fp8_block" : "bf16") + "-gemm,indexer=bf16-mma-fp8keys,chunk=" +
              std::to_string(index_chunk_ * kPagedKvPageSize) + ",topk=radix," +
              "sparse_mla=" + plan_.Describe() + (s_.kv_fp8 ? ",fp8kv" : ",bf16kv");
    SC_CUDA_CHECK(cudaStreamSynchronize(st_));
    return std::nullopt;
  }

  void Launch(cudaStream_t st) {
    const std::int64_t n = s_.n;
    qa_l_->Run(x_.get(), qa_.get(), st);
    kva_l_->Run(x_.get(), kva_.get(), st);
    wk_l_->Run(x_.get(), ik_.get(), st);
    wp_l_->Run(x_.get(), iw_.get(), st);
    const std::int64_t T = s_.T();
    LaunchDsaNorm(qa_.get(), s_.ql, qa_.get(), s_.ql, T, static_cast<int>(s_.ql), wq_norm_.get(), nullptr, false,
                  kNormEps, st);
    LaunchDsaNorm(kva_.get(), 576, kva_.get(), 576, T, 512, wkv_norm_.get(), nullptr, false, kNormEps, st);
    LaunchDsaRope(kva_.get(), {576, 0, 512}, kva_.get(), {576, 0, 512}, tok_, 1, kRopeTheta, st);
    LaunchDsaNorm(ik_.get(), 128, ik_.get(), 128, T, 128, wk_norm_.get(), bk_norm_.get(), true, kNormEps, st);
    LaunchDsaRope(ik_.get(), {128, 0, 0}, ik_.get(), {128, 0, 0}, tok_, 1, kRopeTheta, st);
    qb_l_->Run(qa_.get(), qb_.get(), st);
    iq_l_->Run(qa_.get(), iq_.get(), st);
    LaunchDsaRope(iq_.get(), {s_.ih * 128, 128, 0}, iq_.get(), {s_.ih * 128, 128, 0}, tok_, static_cast<int>(s_.ih),
                  kRopeTheta, st);
    LaunchDsaCacheWrite(tok_, kva_.get(), 576, ik_.get(), table_dev_.as<std::int32_t>(), s_.kv_fp8, kLatentFp8Scale,
                        pool_.get(), index_pool_.get(), index_scale_.as<float>(), st);
    LaunchDsaIndexerLogits(tok_, static_cast<int>(s_.ih), iq_.get(), iw_.get(), IndexWeightScale(), index_pool_.get(),
                           index_scale_.as<float>(), table_dev_.as<std::int32_t>(), logits_.as<float>(), s_.keys(),
                           index_chunk_, st);
    LaunchDsaTopk(tok_, logits_.as<float>(), s_.keys(), static_cast<int>(s_.topk), table_dev_.as<std::int32_t>(),
                  slots_.as<std::int32_t>(), lens_.as<std::int32_t>(), st);
    uk_l_->Run(qb_.get(), qabs_.get(), st);
    LaunchDsaRope(qb_.get(), {n * s_.qk(), s_.qk(), s_.nope}, qabs_.get(), {n * 576, 576, 512}, tok_,
                  static_cast<int>(n), kRopeTheta, st);
    LaunchMlaSparse(MlaDecodeShape{T, n, s_.topk}, plan_, s_.kv_fp8 ? KvDtype::kFp8E4m3 : KvDtype::kBf16, qabs_.get(),
                    pool_.get(), slots_.as<std::int32_t>(), lens_.as<std::int32_t>(),
                    s_.kv_fp8 ? kLatentFp8Scale : 1.0f, SoftmaxScale(), olat_.get(), workspace_.get(), st);
    uv_l_->Run(olat_.get(), ov_.get(), st);
    o_l_->Run(ov_.get(), out_.get(), st);
  }

  std::optional<CaseResult> Check() override {
    Launch(st_);
    SC_CUDA_CHECK(cudaStreamSynchronize(st_));
    RefCheck check(op_.reference_scale_);
    const std::size_t out_n = static_cast<std::size_t>(s_.T() * s_.H);
    check.AddNonFinite(CountNonFiniteBf16(out_.get(), out_n, st_), out_n);
    std::string topk_error;
    CheckSampled(check, topk_error);
    if (!topk_error.empty())
      return CaseResult::Failure(Disposition::kIncorrect, FailureClass::kCollectorBug, "IncorrectOutput",
                                 op_.name() + " (" + source_ + "): top-k: " + topk_error);
    if (!check.ok())
      return CaseResult::Failure(
          Disposition::kIncorrect, FailureClass::kCollectorBug, "IncorrectOutput",
          op_.name() + " (" + source_ + "): " +
              check.Describe("stages from their device inputs: GEMM 2^-7|ref| + 2^-12 sum|x w|, norm/rope stages "
                             "2^-6|ref| + 2^-10 rms + twice their input's error through the norm, caches half an e4m3 step, indexer 2^-12 sum|terms|, attention "
                             "(2^-7 + 1e-4) sum p|v| + 1e-6"));
    return std::nullopt;
  }

  void Time() override {
    double bytes = 0;
    for (const Linear* l : {qa_l_.get(), kva_l_.get(), wk_l_.get(), wp_l_.get(), qb_l_.get(), iq_l_.get(),
                            uk_l_.get(), uv_l_.get(), o_l_.get()})
      bytes += l->weight_bytes();
    TimeOptions opt;
    opt.copies = 1;
    opt.rotated_bytes = bytes + static_cast<double>(pool_.bytes() + index_pool_.bytes());
    stats_ = TimeOnDevice([&](cudaStream_t st, int) { Launch(st); }, ctx_.timing, opt, ctx_.measure_power);
  }

  std::vector<Params> Emit() override {
    return {collect::MakeRow(op_.table(), *ctx_.runtime, op_.name(), source_, c_.params, stats_, ctx_.measure_power)};
  }

 private:
  float IndexWeightScale() const {
    return static_cast<float>(1.0 / std::sqrt(static_cast<double>(s_.ih) * kDsaIndexDim));
  }
  float SoftmaxScale() const { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(s_.qk()))); }
  std::int64_t Pos(std::int64_t r) const { return s_.step + r % s_.isl; }

  // y = x W^T for output columns `cols` of row r, against the device's y (bf16).
  void CheckGemm(RefCheck& check, const char* what, const Linear& l, const void* x, const void* y, std::int64_t head,
                 std::int64_t r, const std::vector<std::int64_t>& cols) {
    const LinearSpec& sp = l.spec();
    const std::vector<double> xr = l.InputRow(x, head, r, st_);
    const auto got = Bf16Row(y, static_cast<std::size_t>(sp.n), static_cast<std::size_t>(head * sp.stride_y + r * sp.ldy), st_);
    for (std::int64_t j : cols) {
      double mag = 0;
      const double ref = Dot(xr, l.WeightRow(head, j, st_), &mag);
      check.AddLazy([&] { return std::string(what) + "[t=" + std::to_string(r) + ",head=" + std::to_string(head) +
                                 ",col=" + std::to_string(j) + "]"; },
                    got[static_cast<std::size_t>(j)], ref, kGemmRel * std::fabs(ref) + kAccum * mag + 1e-12);
    }
  }
  // The full projection of row r (all n columns), as the reference of a norm/rope
  // stage; err gets each column's error bound: bf16 output rounding and float
  // accumulation (the GEMM check's allowance, without its margin).
  std::vector<double> FullGemm(const Linear& l, const void* x, std::int64_t r, std::vector<double>& err) {
    const std::vector<double> xr = l.InputRow(x, 0, r, st_);
    const auto n = static_cast<std::size_t>(l.spec().n);
    std::vector<double> y(n);
    err.assign(n, 0.0);
    for (std::size_t j = 0; j < n; ++j) {
      double abs_sum = 0;
      y[j] = Dot(xr, l.WeightRow(0, static_cast<std::int64_t>(j), st_), &abs_sum);
      err[j] = 0x1p-8 * std::fabs(y[j]) + kAccum * abs_sum;
    }
    return y;
  }
  void CheckStage(RefCheck& check, const char* what, std::int64_t r, const std::vector<double>& ref,
                  const std::vector<double>& mag, const std::vector<double>& got, std::size_t begin,
                  std::size_t width) {
    const double rms = Rms(ref, begin, width);
    for (std::size_t i = begin; i < begin + width; ++i)
      check.AddLazy([&] { return std::string(what) + "[t=" + std::to_string(r) + ",col=" + std::to_string(i) + "]"; },
                    got[i], ref[i], kStageRel * std::fabs(ref[i]) + kStageMargin * mag[i] + 0x1p-10 * rms + 1e-12);
  }

  std::int64_t SlotPos(std::int64_t b, std::int32_t slot) const {
    const auto it = page_pos_.find(slot / kPagedKvPageSize);
    if (it == page_pos_.end() || it->second.first != b) return -1;
    return it->second.second * kPagedKvPageSize + slot % kPagedKvPageSize;
  }

  void CheckSampled(RefCheck& check, std::string& topk_error) {
    const std::int64_t T = s_.T(), n = s_.n;
    const std::int64_t pps = s_.pages_per_seq();
    for (std::int64_t b = 0; b < s_.batch; ++b)
      for (std::int64_t p = 0; p < pps; ++p)
        page_pos_[table_[static_cast<std::size_t>(b * pps + p)]] = {b, p};
    SplitMix64 rng(SeedFor(seed_, 5));
    std::set<std::int64_t> rows = {0, T - 1, static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(T)))};
    std::set<std::int64_t> heads = {0, n - 1, static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(n)))};
    auto sample_cols = [&](std::int64_t width, int count) {
      std::set<std::int64_t> c = {0, width - 1};
      while (static_cast<int>(c.size()) < std::min<std::int64_t>(count, width))
        c.insert(static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(width))));
      return std::vector<std::int64_t>(c.begin(), c.end());
    };
    const auto dl = [&](const DeviceBuffer& b, std::int64_t count, std::int64_t off) {
      return Bf16Row(b.get(), static_cast<std::size_t>(count), static_cast<std::size_t>(off), st_);
    };
    const std::vector<double> wq = dl(wq_norm_, s_.ql, 0), wkv = dl(wkv_norm_, 512, 0), wk = dl(wk_norm_, 128, 0),
                              bk = dl(bk_norm_, 128, 0);
    for (std::int64_t r : rows) {
      const std::int64_t pos = Pos(r), b = r / s_.isl, keys = pos + 1;
      // q_a, kv (norm + rope), index key (LayerNorm + rope), index weights.
      {
        std::vector<double> mag, ref = FullGemm(*qa_l_, x_.get(), r, mag);
        NormRef(ref, mag, 0, static_cast<std::size_t>(s_.ql), wq, nullptr);
        CheckStage(check, "q_a", r, ref, mag, dl(qa_, s_.ql, r * s_.ql), 0, static_cast<std::size_t>(s_.ql));
      }
      const std::vector<double> kv_dev = dl(kva_, 576, r * 576);
      {
        std::vector<double> mag, ref = FullGemm(*kva_l_, x_.get(), r, mag);
        NormRef(ref, mag, 0, 512, wkv, nullptr);
        RopeRef(ref, mag, 512, pos);
        CheckStage(check, "kv_latent", r, ref, mag, kv_dev, 0, 512);
        CheckStage(check, "k_rope", r, ref, mag, kv_dev, 512, 64);
      }
      const std::vector<double> ik_dev = dl(ik_, 128, r * 128);
      {
        std::vector<double> mag, ref = FullGemm(*wk_l_, x_.get(), r, mag);
        NormRef(ref, mag, 0, 128, wk, &bk);
        RopeRef(ref, mag, 0, pos);
        CheckStage(check, "index_k", r, ref, mag, ik_dev, 0, 128);
      }
      CheckGemm(check, "index_weights", *wp_l_, x_.get(), iw_.get(), 0, r, sample_cols(s_.ih, 8));
      CheckGemm(check, "q_b", *qb_l_, qa_.get(), qb_.get(), 0, r, sample_cols(n * s_.qk(), 48));
      // Index q: the projection then rope on each head's first 64 columns.
      {
        const std::vector<double> xr = iq_l_->InputRow(qa_.get(), 0, r, st_);
        const std::vector<double> got = dl(iq_, s_.ih * 128, r * s_.ih * 128);
        for (std::int64_t h : {std::int64_t{0}, s_.ih - 1}) {
          std::vector<double> ref(128), mag(128);
          for (std::size_t j = 0; j < 128; ++j) {
            double abs_sum = 0;
            ref[j] = Dot(xr, iq_l_->WeightRow(0, h * 128 + static_cast<std::int64_t>(j), st_), &abs_sum);
            mag[j] = 0x1p-8 * std::fabs(ref[j]) + kAccum * abs_sum;
          }
          RopeRef(ref, mag, 0, pos);
          std::vector<double> g(got.begin() + h * 128, got.begin() + (h + 1) * 128);
          CheckStage(check, "index_q", r, ref, mag, g, 0, 128);
        }
      }
      // The caches: this token's slot holds its latent and index key.
      {
        const std::int64_t slot = static_cast<std::int64_t>(table_[static_cast<std::size_t>(b * s_.pages_per_seq() + pos / kPagedKvPageSize)]) *
                                      kPagedKvPageSize + pos % kPagedKvPageSize;
        // A cache row stored as e4m3 codes x scale: each within half an e4m3 step of want.
        const auto check_e4m3 = [&](const char* what, const std::vector<std::uint8_t>& raw,
                                    const std::vector<double>& want, double scale, double slack) {
          for (std::size_t i = 0; i < want.size(); ++i)
            check.AddLazy([&] { return std::string(what) + "[t=" + std::to_string(r) + ",col=" + std::to_string(i) + "]"; },
                          Fp8E4m3(raw[i]) * scale, want[i],
                          0.5 * E4m3Ulp(want[i] / scale) * scale * (1 + slack) + 1e-12);
        };
        if (s_.kv_fp8) {
          check_e4m3("latent_cache", Download<std::uint8_t>(pool_.get(), 576, static_cast<std::size_t>(slot * 576), st_),
                     kv_dev, kLatentFp8Scale, 1e-6);
        } else {
          const std::vector<double> got = dl(pool_, 576, slot * 576);
          for (int i = 0; i < 576; ++i)
            check.AddLazy([&] { return "latent_cache[t=" + std::to_string(r) + ",col=" + std::to_string(i) + "]"; },
                          got[static_cast<std::size_t>(i)], kv_dev[static_cast<std::size_t>(i)], 1e-30);
        }
        double amax = 0;
        for (double v : ik_dev) amax = std::max(amax, std::fabs(v));
        const double scale = std::max(amax / kFp8E4m3Max, static_cast<double>(kFp8MinScale));
        const float got_scale = Download<float>(index_scale_.get(), 1, static_cast<std::size_t>(slot), st_)[0];
        check.AddLazy([&] { return "index_scale[t=" + std::to_string(r) + "]"; }, got_scale, scale, 1e-6 * scale);
        check_e4m3("index_cache", Download<std::uint8_t>(index_pool_.get(), 128, static_cast<std::size_t>(slot * 128), st_),
                   ik_dev, got_scale, 1e-5);
      }
      // Indexer scores over sampled keys, from the device's index q, weights and cache.
      const std::vector<double> iq = dl(iq_, s_.ih * 128, r * s_.ih * 128);
      const std::vector<double> iw = dl(iw_, s_.ih, r * s_.ih);
      const auto logits = Download<float>(logits_.get(), static_cast<std::size_t>(keys),
                                          static_cast<std::size_t>(r * s_.keys()), st_);
      for (std::int64_t key : sample_cols(keys, 24)) {
        const std::int64_t slot =
            static_cast<std::int64_t>(table_[static_cast<std::size_t>(b * s_.pages_per_seq() + key / kPagedKvPageSize)]) *
                kPagedKvPageSize + key % kPagedKvPageSize;
        const auto raw = Download<std::uint8_t>(index_pool_.get(), 128, static_cast<std::size_t>(slot * 128), st_);
        const double ks = Download<float>(index_scale_.get(), 1, static_cast<std::size_t>(slot), st_)[0];
        double sum = 0, mag = 0;
        for (std::int64_t h = 0; h < s_.ih; ++h) {
          double d = 0, dm = 0;
          for (int i = 0; i < 128; ++i) {
            const double t = iq[static_cast<std::size_t>(h * 128 + i)] * Fp8E4m3(raw[static_cast<std::size_t>(i)]);
            d += t;
            dm += std::fabs(t);
          }
          const double w = iw[static_cast<std::size_t>(h)] * IndexWeightScale();
          sum += w * std::max(d, 0.0);
          mag += std::fabs(w) * dm;
        }
        check.AddLazy([&] { return "index_score[t=" + std::to_string(r) + ",key=" + std::to_string(key) + "]"; },
                      logits[static_cast<std::size_t>(key)], sum * ks, kAccum * mag * ks + 1e-30);
      }
      // Top-k: min(keys, k) distinct keys of this sequence, none below an unselected one.
      const std::int32_t len = Download<std::int32_t>(lens_.get(), 1, static_cast<std::size_t>(r), st_)[0];
      const std::int64_t want_len = std::min(keys, s_.topk);
      if (len != want_len) {
        topk_error = "token " + std::to_string(r) + " kept " + std::to_string(len) + " keys, expected " +
                     std::to_string(want_len);
        return;
      }
      const auto sel = Download<std::int32_t>(slots_.get(), static_cast<std::size_t>(len),
                                              static_cast<std::size_t>(r * s_.topk), st_);
      std::vector<char> taken(static_cast<std::size_t>(keys), 0);
      for (std::int32_t slot : sel) {
        const std::int64_t p = SlotPos(b, slot);
        if (p < 0 || p >= keys || taken[static_cast<std::size_t>(p)]) {
          topk_error = "token " + std::to_string(r) + " selected slot " + std::to_string(slot) +
                       (p < 0 || p >= keys ? " outside its sequence's keys" : " twice");
          return;
        }
        taken[static_cast<std::size_t>(p)] = 1;
      }
      if (keys > s_.topk) {
        float min_taken = INFINITY, max_left = -INFINITY;
        for (std::int64_t p = 0; p < keys; ++p) {
          const float l = logits[static_cast<std::size_t>(p)];
          if (taken[static_cast<std::size_t>(p)]) min_taken = std::min(min_taken, l);
          else max_left = std::max(max_left, l);
        }
        if (min_taken < max_left) {
          topk_error = "token " + std::to_string(r) + ": a selected score " + FormatG6(min_taken) +
                       " is below an unselected one " + FormatG6(max_left);
          return;
        }
      }
      // q_abs: q_nope W_UK per head and the rotated q_rope; then sparse attention over
      // the selected latents; then W_UV; then the output projection.
      const std::vector<double> qb = dl(qb_, n * s_.qk(), r * n * s_.qk());
      const std::vector<double> qabs = dl(qabs_, n * 576, r * n * 576);
      const std::vector<double> olat = dl(olat_, n * 512, r * n * 512);
      std::vector<std::vector<double>> latents;
      for (std::int32_t slot : sel) {
        std::vector<double> c(576);
        if (s_.kv_fp8) {
          const auto raw = Download<std::uint8_t>(pool_.get(), 576, static_cast<std::size_t>(slot) * 576, st_);
          for (int i = 0; i < 576; ++i) c[static_cast<std::size_t>(i)] = Fp8E4m3(raw[static_cast<std::size_t>(i)]) * kLatentFp8Scale;
        } else {
          c = dl(pool_, 576, static_cast<std::int64_t>(slot) * 576);
        }
        latents.push_back(std::move(c));
      }
      for (std::int64_t h : heads) {
        CheckGemm(check, "q_absorbed", *uk_l_, qb_.get(), qabs_.get(), h, r, sample_cols(512, 24));
        std::vector<double> rope_ref(qb.begin() + h * s_.qk() + s_.nope, qb.begin() + (h + 1) * s_.qk());
        std::vector<double> rope_mag;
        RopeRef(rope_ref, rope_mag, 0, pos);
        std::vector<double> rope_got(qabs.begin() + h * 576 + 512, qabs.begin() + (h + 1) * 576);
        CheckStage(check, "q_rope", r, rope_ref, rope_mag, rope_got, 0, 64);
        std::vector<double> scores(latents.size());
        for (std::size_t j = 0; j < latents.size(); ++j) {
          double d = 0;
          for (int i = 0; i < 576; ++i) d += qabs[static_cast<std::size_t>(h * 576 + i)] * latents[j][static_cast<std::size_t>(i)];
          scores[j] = d * SoftmaxScale();
        }
        std::vector<double> ref, mag;
        ReferenceRow(scores, [&](std::size_t j, std::int64_t d) { return latents[j][static_cast<std::size_t>(d)]; }, 512,
                     ref, mag);
        for (int d = 0; d < 512; ++d)
          check.AddLazy([&] { return "attention[t=" + std::to_string(r) + ",head=" + std::to_string(h) + ",d=" +
                                     std::to_string(d) + "]"; },
                        olat[static_cast<std::size_t>(h * 512 + d)], ref[static_cast<std::size_t>(d)],
                        (2 * 0x1p-8 + 1e-4) * mag[static_cast<std::size_t>(d)] + 1e-6);
        CheckGemm(check, "o_v", *uv_l_, olat_.get(), ov_.get(), h, r, sample_cols(s_.v, 16));
      }
      CheckGemm(check, "out", *o_l_, ov_.get(), out_.get(), 0, r, sample_cols(s_.H, 32));
    }
  }

  const DsaOp& op_;
  const collect::Case& c_;
  const collect::RunContext& ctx_;
  const Shape s_;
  cudaStream_t st_;
  const std::uint64_t seed_;
  const DsaTokens tok_;
  DeviceBuffer x_, qa_, kva_, ik_, iw_, qb_, iq_, qabs_, logits_, slots_, lens_, olat_, ov_, out_;
  DeviceBuffer wq_norm_, wkv_norm_, wk_norm_, bk_norm_;
  DeviceBuffer pool_, index_pool_, index_scale_, table_dev_, workspace_;
  std::vector<std::int32_t> table_;
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> page_pos_;  // pool page -> (sequence, its page)
  std::unique_ptr<Linear> qa_l_, kva_l_, wk_l_, wp_l_, qb_l_, iq_l_, uk_l_, uv_l_, o_l_;
  MlaDecodePlan plan_;
  int index_chunk_ = 16;  // indexer pages per CTA (DsaIndexerChunkTiles)
  std::string source_;
  collect::TimingStats stats_;
};

CaseResult DsaOp::Run(const collect::Case& c, const collect::RunContext& ctx) {
  Shape s;
  if (std::optional<CaseResult> bad = Parse(name(), c.params, context_, s)) return *bad;
  if (!ctx.runtime)
    return CaseResult::Failure(Disposition::kFailed, FailureClass::kCollectorBug, "MissingRuntime",
                               name() + ": the run context carries no runtime");
  DsaPhases phases(*this, c, ctx, s);
  return RunCudaPhases(phases, FailureClass::kCollectorBug);
}

}  // namespace

std::unique_ptr<collect::Op> MakeDsaOp(bool context, double reference_scale) {
  return std::make_unique<DsaOp>(context, reference_scale);
}

void RegisterDsaOps(collect::Registry& r) {
  r.AddOp("cuda", MakeDsaOp(true));
  r.AddOp("cuda", MakeDsaOp(false));
}

}  // namespace servecast::cuda
