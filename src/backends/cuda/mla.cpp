// The CUDA backend's MLA ops (mla_ops.h). Each case: parse and validate the
// parameters -> deterministic inputs (poisoned outputs) -> one call checked against a
// double-precision host reference on sampled rows (and a whole-output scan for
// unwritten NaN poison) -> time with TimeOnDevice, rotating copies of the inputs so
// that repeated calls miss in L2 -> one row.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/attention_check.h"
#include "backends/cuda/attention_cudnn.h"
#include "backends/cuda/attention_kernels.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/elementwise_kernels.h"
#include "backends/cuda/fill.h"
#include "backends/cuda/gemm_internal.h"
#include "backends/cuda/harness.h"
#include "backends/cuda/mla_kernels.h"
#include "backends/cuda/mla_ops.h"
#include "backends/cuda/op_vocabulary.h"
#include "backends/cuda/quantize.h"
#include "collect/case.h"
#include "collect/table_spec.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/value.h"

namespace servecast::cuda {
namespace {

constexpr float kQueryRange = 3.0f;  // wider than the keys so the softmax is not flat
constexpr float kValueRange = 1.0f;
// The fp8 latent cache's scale: not 1, so a kernel that ignored it fails the check.
constexpr float kFp8LatentScale = 0.5f;

CaseResult Invalid(const std::string& op, const std::string& msg) {
  return CaseResult::Failure(Disposition::kFailed, FailureClass::kUnsupportedConfig, "InvalidParams", op + ": " + msg);
}
CaseResult Unsupported(const std::string& type, const std::string& msg) {
  return CaseResult::Failure(Disposition::kNotSupported, FailureClass::kUnsupportedConfig, type, msg);
}

// A reference check's outcome as an incorrect case.
CaseResult Incorrect(const std::string& op, const std::string& source, const RefCheck& check,
                     const std::string& rule) {
  return CaseResult::Failure(Disposition::kIncorrect, FailureClass::kCollectorBug, "IncorrectOutput",
                             op + " (" + source + "): " + check.Describe(rule));
}

// head h's rows of a [rows][heads][dim] bf16 tensor, rows [row0, row0 + n), to the host.
std::vector<std::uint16_t> HeadRows(const void* dev, std::int64_t row0, std::int64_t n, std::int64_t heads,
                                    std::int64_t h, std::int64_t dim, cudaStream_t st) {
  std::vector<std::uint16_t> out(static_cast<std::size_t>(n * dim));
  const auto* base = static_cast<const std::uint8_t*>(dev) + static_cast<std::size_t>((row0 * heads + h) * dim) * 2;
  SC_CUDA_CHECK(cudaMemcpy2DAsync(out.data(), static_cast<std::size_t>(dim) * 2, base,
                                  static_cast<std::size_t>(heads * dim) * 2, static_cast<std::size_t>(dim) * 2,
                                  static_cast<std::size_t>(n), cudaMemcpyDeviceToHost, st));
  SC_CUDA_CHECK(cudaStreamSynchronize(st));
  return out;
}

// ---- context_mla_perf / generation_mla_perf --------------------------------------

struct MlaShape {
  std::int64_t batch = 1, isl = 1, heads = 1, tp = 1, step = 0;
  bool kv_fp8 = false;
};

std::optional<CaseResult> ParseMla(const Params& p, bool context, MlaShape& s) {
  const std::string op = context ? "mla_context" : "mla_generation";
  std::string mla_dtype, kv_dtype;
  try {
    mla_dtype = p.Str("mla_dtype");
    kv_dtype = p.Str("kv_cache_dtype");
    s.heads = p.Int("num_heads");
    s.batch = p.Int("batch_size");
    s.isl = p.Int("isl");
    s.tp = p.Int("tp_size");
    s.step = p.Int("step");
  } catch (const Error& e) {
    return Invalid(op, e.what());
  }
  if (s.batch <= 0 || s.isl <= 0 || s.heads <= 0 || s.tp <= 0 || s.step < 0)
    return Invalid(op, "batch_size, isl, num_heads and tp_size must be positive, step non-negative (got " +
                           p.Canonical() + ")");
  if (mla_dtype != "bfloat16")
    return Unsupported("UnsupportedDtype", op + " on cuda computes in bfloat16 (mla_dtype bfloat16); the case asks for " +
                                               mla_dtype);
  if (kv_dtype != "bfloat16" && kv_dtype != "fp8")
    return Unsupported("UnsupportedDtype", op + " on cuda: kv_cache_dtype '" + kv_dtype + "' (have bfloat16, fp8)");
  s.kv_fp8 = kv_dtype == "fp8";
  if (context) {
    if (s.step != 0)
      return Unsupported("UnsupportedConfig", op + ": step " + std::to_string(s.step) +
                                                  " (prefill over a cached prefix) is not supported; step 0 only");
    if (static_cast<double>(s.batch) * s.isl * s.heads * kMlaQkDim >= 2147483647.0)
      return Unsupported("ShapeTooLarge", op + ": a tensor of more than 2^31 elements");
  } else {
    if (s.isl != 1)
      return Unsupported("UnsupportedConfig", op + ": isl " + std::to_string(s.isl) +
                                                  " is not supported; one query token per sequence (isl 1)");
    if (s.step + 1 > (std::int64_t{1} << 30))
      return Unsupported("ShapeTooLarge", op + ": step " + std::to_string(s.step) + " beyond 2^30 cached tokens");
    if (s.batch > 65535) return Unsupported("ShapeTooLarge", op + ": batch_size above 65535");
  }
  return std::nullopt;
}

class MlaOpBase : public collect::Op {
 public:
  MlaOpBase(std::string name, const char* table, bool context, double reference_scale)
      : name_(std::move(name)),
        table_(*collect::FindTableSpec(table)),
        context_(context),
        reference_scale_(reference_scale) {}
  std::string name() const override { return name_; }
  const collect::TableSpec& table() const override { return table_; }
  std::vector<std::string> required_params() const override {
    return {"mla_dtype", "kv_cache_dtype", "num_heads", "batch_size", "isl", "tp_size", "step"};
  }
  CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override {
    MlaShape s;
    if (std::optional<CaseResult> bad = ParseMla(c.params, context_, s)) return *bad;
    if (!ctx.runtime)
      return CaseResult::Failure(Disposition::kFailed, FailureClass::kCollectorBug, "MissingRuntime",
                                 name_ + ": the run context carries no runtime");
    std::unique_ptr<collect::CasePhases> phases = MakePhases(c, ctx, s);
    return RunCudaPhases(*phases, FailureClass::kCollectorBug);
  }

 protected:
  virtual std::unique_ptr<collect::CasePhases> MakePhases(const collect::Case& c, const collect::RunContext& ctx,
                                                          const MlaShape& s) const = 0;
  std::vector<Params> Row(const collect::Case& c, const collect::RunContext& ctx, const std::string& source,
                          const collect::TimingStats& stats) const {
    return {collect::MakeRow(table_, *ctx.runtime, name_, source, c.params, stats, ctx.measure_power)};
  }

  std::string name_;
  const collect::TableSpec& table_;
  bool context_;
  double reference_scale_;
};

// A latent cache value as stored: bf16, or e4m3 × scale.
double CachedValue(const std::vector<std::uint8_t>& raw, std::size_t i, bool fp8, double scale) {
  if (fp8) return Fp8E4m3(raw[i]) * scale;
  std::uint16_t bits;
  std::memcpy(&bits, raw.data() + 2 * i, 2);
  return Bf16(bits);
}

// ---- mla_context: the latent cache write, then cuDNN's fused SDPA (q/k 192, v 128) ----

class MlaContextOp : public MlaOpBase {
 public:
  explicit MlaContextOp(double reference_scale)
      : MlaOpBase("mla_context", "context_mla_perf", true, reference_scale) {}
  double default_timeout_s() const override { return 300; }
  double MemoryBytes(const Params& p) const override {
    MlaShape s;
    if (ParseMla(p, true, s)) return 0;
    return SetBytes(s) + 256.0 * 1024 * 1024;
  }

  static MlaPrefillShape Prefill(const MlaShape& s) { return MlaPrefillShape{s.batch, s.isl, s.heads}; }
  static std::size_t PoolElems(const MlaShape& s) {
    return static_cast<std::size_t>(s.batch * Prefill(s).pages_per_seq() * kPagedKvPageSize) * kMlaCacheDim;
  }
  // q, k (192), v, o (128) in bf16, the softmax stats, the latent input, the pool and its table.
  static double SetBytes(const MlaShape& s) {
    const double tokens = static_cast<double>(s.batch * s.isl);
    return tokens * s.heads * 2.0 * (2 * kMlaQkDim + 2 * kMlaVDim) + tokens * s.heads * 4.0 +
           tokens * kMlaCacheDim * 2.0 + static_cast<double>(PoolElems(s)) * (s.kv_fp8 ? 1 : 2) +
           4.0 * static_cast<double>(s.batch * Prefill(s).pages_per_seq());
  }

 protected:
  class Phases;
  std::unique_ptr<collect::CasePhases> MakePhases(const collect::Case& c, const collect::RunContext& ctx,
                                                  const MlaShape& s) const override;
};

class MlaContextOp::Phases : public collect::CasePhases {
 public:
  Phases(const MlaContextOp& op, const collect::Case& c, const collect::RunContext& ctx, const MlaShape& s)
      : op_(op),
        c_(c),
        ctx_(ctx),
        s_(s),
        stream_(Context().stream),
        base_seed_(Fnv1a64(c.id)),
        prefill_(Prefill(s)),
        kv_(s.kv_fp8 ? KvDtype::kFp8E4m3 : KvDtype::kBf16),
        scale_(s.kv_fp8 ? kFp8LatentScale : 1.0f),
        tokens_(static_cast<std::size_t>(s.batch * s.isl)),
        table_n_(static_cast<std::size_t>(s.batch * prefill_.pages_per_seq())) {}

  std::optional<CaseResult> Prepare() override {
    SdpaShape shape{s_.batch, s_.isl, s_.heads, s_.heads, kMlaQkDim, 0, SdpaDtype::kBf16, kMlaVDim};
    std::string why;
    bool unsupported = false;
    sdpa_ = CudnnSdpa::Build(shape, why, unsupported);
    if (!sdpa_) {
      if (unsupported)
        return Unsupported("CudnnSdpaUnsupported", op_.name() + " (cuDNN " + CudnnVersionString() + "): " + why);
      return CaseResult::Failure(Disposition::kFailed, FailureClass::kFrameworkBug, "CudnnError",
                                 op_.name() + " (cuDNN " + CudnnVersionString() + "): " + why);
    }
    source_ = sdpa_->kernel_source() + ",d_qk=192,d_v=128+servecast_mla_cache_write_" +
              (s_.kv_fp8 ? "fp8" : "bf16") + ":page=" + std::to_string(kPagedKvPageSize);
    workspace_ = DeviceBuffer(std::max<std::size_t>(sdpa_->workspace_bytes(), 16));
    sets_.push_back(MakeSet(SeedFor(base_seed_, 100)));
    Bind(sets_[0]);
    return std::nullopt;
  }

  std::optional<CaseResult> Check() override {
    Launch(0, stream_);
    SC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const Set& set = sets_[0];
    const std::size_t o_elems = tokens_ * static_cast<std::size_t>(s_.heads) * kMlaVDim;
    RefCheck check(op_.reference_scale_);
    check.AddNonFinite(CountNonFiniteBf16(set.o.get(), o_elems, stream_), o_elems);
    RefCheck k_check(1.0), cache_check(1.0);
    CheckSampled(set, check, k_check, cache_check);
    if (!check.ok())
      return Incorrect(op_.name(), source_, check, "4 * 2^-8 * sum_j p_j*|v_jd| + 1e-5 (bf16 P and output)");
    if (!k_check.ok())
      return Incorrect(op_.name(), source_, k_check, "k[.., 128:192] of every head: an exact copy of k_rope");
    if (!cache_check.ok())
      return Incorrect(op_.name(), source_, cache_check,
                       s_.kv_fp8 ? "latent cache: x within half an e4m3 step of stored * 0.5"
                                 : "latent cache: an exact copy");
    return std::nullopt;
  }

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
  struct Set {
    DeviceBuffer q, k, v, o, stats, latent, pool, table;
    std::vector<std::int32_t> host_table;
  };

  Set MakeSet(std::uint64_t seed) {
    const std::size_t n = static_cast<std::size_t>(s_.heads);
    Set set{DeviceBuffer(tokens_ * n * kMlaQkDim * 2),
            DeviceBuffer(tokens_ * n * kMlaQkDim * 2),
            DeviceBuffer(tokens_ * n * kMlaVDim * 2),
            DeviceBuffer(tokens_ * n * kMlaVDim * 2),
            DeviceBuffer(tokens_ * n * 4),
            DeviceBuffer(tokens_ * kMlaCacheDim * 2),
            DeviceBuffer(PoolElems(s_) * (s_.kv_fp8 ? 1 : 2)),
            DeviceBuffer(table_n_ * 4),
            {}};
    FillUniformBf16(set.q.get(), tokens_ * n * kMlaQkDim, SeedFor(seed, 1), kQueryRange, stream_);
    // k's rope columns hold noise until the call copies k_rope over them.
    FillUniformBf16(set.k.get(), tokens_ * n * kMlaQkDim, SeedFor(seed, 2), kValueRange, stream_);
    FillUniformBf16(set.v.get(), tokens_ * n * kMlaVDim, SeedFor(seed, 3), kValueRange, stream_);
    FillUniformBf16(set.latent.get(), tokens_ * kMlaCacheDim, SeedFor(seed, 5), kValueRange, stream_);
    FillPoison(set.o.get(), set.o.bytes(), stream_);
    FillPoison(set.stats.get(), set.stats.bytes(), stream_);
    FillPoison(set.pool.get(), set.pool.bytes(), stream_);
    set.host_table = UploadShuffledPageTable(table_n_, SeedFor(seed, 4), set.table, stream_);
    return set;
  }

  int Bind(Set& set) {
    SdpaBuffers buffers{set.q.get(), set.k.get(), set.v.get(), set.o.get(), set.stats.as<float>(), {}};
    return sdpa_->Bind(buffers, workspace_.get());
  }

  void Launch(std::size_t i, cudaStream_t st) {
    Set& set = sets_[i];
    LaunchMlaPrefillCacheWrite(prefill_, kv_, set.latent.get(), set.table.as<std::int32_t>(), scale_, set.pool.get(),
                               set.k.get(), st);
    sdpa_->Run(static_cast<int>(i), st);
  }

  // Sampled (sequence, head) pairs, five positions each (0, the last, three drawn):
  // the output recomputed in double precision from the q, k, v the FMHA read; k's
  // rope columns against the latent's k_rope at those positions; and the cache slots
  // of the first and the last page's tokens and 32 drawn ones against the latent.
  void CheckSampled(const Set& set, RefCheck& check, RefCheck& k_check, RefCheck& cache_check) {
    const std::int64_t S = s_.isl, N = s_.heads;
    SplitMix64 rng(SeedFor(base_seed_, 2));
    auto any = [&](std::int64_t n) { return static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(n))); };
    std::set<std::pair<std::int64_t, std::int64_t>> pairs = {{0, 0}, {s_.batch - 1, N - 1}};
    while (static_cast<std::int64_t>(pairs.size()) < std::min<std::int64_t>(4, s_.batch * N))
      pairs.insert({any(2) ? 0 : s_.batch - 1, any(N)});
    const double scale = 1.0 / std::sqrt(static_cast<double>(kMlaQkDim));
    for (const auto& [b, h] : pairs) {
      const auto q = HeadRows(set.q.get(), b * S, S, N, h, kMlaQkDim, stream_);
      const auto k = HeadRows(set.k.get(), b * S, S, N, h, kMlaQkDim, stream_);
      const auto v = HeadRows(set.v.get(), b * S, S, N, h, kMlaVDim, stream_);
      const auto o = HeadRows(set.o.get(), b * S, S, N, h, kMlaVDim, stream_);
      const auto lat = Download<std::uint16_t>(set.latent.get(), static_cast<std::size_t>(S) * kMlaCacheDim,
                                               static_cast<std::size_t>(b * S) * kMlaCacheDim, stream_);
      std::set<std::int64_t> positions = {0, S - 1};
      while (static_cast<std::int64_t>(positions.size()) < std::min<std::int64_t>(5, S)) positions.insert(any(S));
      for (std::int64_t pos : positions) {
        for (int d = 0; d < kMlaRope; ++d) {
          const std::size_t at = static_cast<std::size_t>(pos * kMlaQkDim + kMlaNope + d);
          k_check.Add("k[b=" + std::to_string(b) + ",s=" + std::to_string(pos) + ",head=" + std::to_string(h) +
                          ",d=" + std::to_string(kMlaNope + d) + "]",
                      Bf16(k[at]), Bf16(lat[static_cast<std::size_t>(pos * kMlaCacheDim + kMlaLatent + d)]),
                      1e-30);
        }
        std::vector<double> scores;
        for (std::int64_t j = 0; j <= pos; ++j) {
          double dot = 0;
          for (int d = 0; d < kMlaQkDim; ++d)
            dot += Bf16(q[static_cast<std::size_t>(pos * kMlaQkDim + d)]) *
                   Bf16(k[static_cast<std::size_t>(j * kMlaQkDim + d)]);
          scores.push_back(dot * scale);
        }
        std::vector<double> ref, mag;
        ReferenceRow(
            scores, [&](std::size_t j, std::int64_t d) { return Bf16(v[j * kMlaVDim + static_cast<std::size_t>(d)]); },
            kMlaVDim, ref, mag);
        for (int d = 0; d < kMlaVDim; ++d) {
          const double tol = 4 * kBf16Roundoff * mag[static_cast<std::size_t>(d)] + 1e-5;
          check.AddLazy(
              [&] {
                return "out[b=" + std::to_string(b) + ",s=" + std::to_string(pos) + ",head=" + std::to_string(h) +
                       ",d=" + std::to_string(d) + "]";
              },
              Bf16(o[static_cast<std::size_t>(pos * kMlaVDim + d)]), ref[static_cast<std::size_t>(d)], tol);
        }
      }
      // The cache of sequence b.
      std::set<std::int64_t> tokens;
      for (std::int64_t t = 0; t < std::min<std::int64_t>(S, kPagedKvPageSize); ++t) tokens.insert(t);
      for (std::int64_t t = std::max<std::int64_t>(0, S - kPagedKvPageSize); t < S; ++t) tokens.insert(t);
      for (int i = 0; i < 32; ++i) tokens.insert(any(S));
      const std::size_t eb = s_.kv_fp8 ? 1 : 2, row_bytes = kMlaCacheDim * eb;
      for (std::int64_t t : tokens) {
        const std::size_t page = static_cast<std::size_t>(
            set.host_table[static_cast<std::size_t>(b * prefill_.pages_per_seq() + t / kPagedKvPageSize)]);
        const auto raw = Download<std::uint8_t>(set.pool.get(), row_bytes,
                                                (page * kPagedKvPageSize + static_cast<std::size_t>(t % kPagedKvPageSize)) *
                                                    row_bytes,
                                                stream_);
        for (int d = 0; d < kMlaCacheDim; ++d) {
          const double want = Bf16(lat[static_cast<std::size_t>(t * kMlaCacheDim + d)]);
          const double got = CachedValue(raw, static_cast<std::size_t>(d), s_.kv_fp8, scale_);
          const double tol =
              s_.kv_fp8 ? 0.5 * E4m3Ulp(want / scale_) * scale_ * (1 + 1e-6) : std::fabs(want) * 1e-12 + 1e-30;
          cache_check.AddLazy(
              [&] {
                return "latent_cache[b=" + std::to_string(b) + ",t=" + std::to_string(t) + ",d=" + std::to_string(d) +
                       "]";
              },
              got, want, tol);
        }
      }
    }
  }

  const MlaContextOp& op_;
  const collect::Case& c_;
  const collect::RunContext& ctx_;
  const MlaShape s_;
  cudaStream_t stream_;
  const std::uint64_t base_seed_;
  const MlaPrefillShape prefill_;
  const KvDtype kv_;
  const float scale_;
  const std::size_t tokens_, table_n_;
  std::unique_ptr<CudnnSdpa> sdpa_;
  std::string source_;
  DeviceBuffer workspace_;
  std::vector<Set> sets_;
  collect::TimingStats stats_;
};

std::unique_ptr<collect::CasePhases> MlaContextOp::MakePhases(const collect::Case& c, const collect::RunContext& ctx,
                                                              const MlaShape& s) const {
  return std::make_unique<Phases>(*this, c, ctx, s);
}

// ---- mla_generation: servecast's absorbed MLA decode over the paged latent cache ----

class MlaGenerationOp : public MlaOpBase {
 public:
  explicit MlaGenerationOp(double reference_scale)
      : MlaOpBase("mla_generation", "generation_mla_perf", false, reference_scale) {}
  double default_timeout_s() const override { return 180; }
  double MemoryBytes(const Params& p) const override {
    MlaShape s;
    if (ParseMla(p, false, s)) return 0;
    // The split workspace is at most 64 splits of fp32 rows.
    return CacheBytes(s) + 2.0 * s.batch * s.heads * (kMlaCacheDim + kMlaLatent) +
           64.0 * s.batch * s.heads * (kMlaLatent + 1) * 4;
  }

  static MlaDecodeShape Decode(const MlaShape& s) { return MlaDecodeShape{s.batch, s.heads, s.step + 1}; }
  static std::size_t PoolElems(const MlaShape& s) {
    return static_cast<std::size_t>(s.batch * Decode(s).pages_per_seq() * kPagedKvPageSize) * kMlaCacheDim;
  }
  static double CacheBytes(const MlaShape& s) {
    return static_cast<double>(PoolElems(s)) * (s.kv_fp8 ? 1 : 2) +
           4.0 * static_cast<double>(s.batch * Decode(s).pages_per_seq());
  }

 protected:
  class Phases;
  std::unique_ptr<collect::CasePhases> MakePhases(const collect::Case& c, const collect::RunContext& ctx,
                                                  const MlaShape& s) const override;
};

class MlaGenerationOp::Phases : public collect::CasePhases {
 public:
  Phases(const MlaGenerationOp& op, const collect::Case& c, const collect::RunContext& ctx, const MlaShape& s)
      : op_(op),
        c_(c),
        ctx_(ctx),
        s_(s),
        stream_(Context().stream),
        base_seed_(Fnv1a64(c.id)),
        shape_(Decode(s)),
        kv_(s.kv_fp8 ? KvDtype::kFp8E4m3 : KvDtype::kBf16),
        scale_(s.kv_fp8 ? kFp8LatentScale : 1.0f),
        softmax_scale_(static_cast<float>(1.0 / std::sqrt(static_cast<double>(kMlaQkDim)))),
        eb_(s.kv_fp8 ? 1 : 2),
        table_n_(static_cast<std::size_t>(s.batch * shape_.pages_per_seq())),
        q_elems_(static_cast<std::size_t>(s.batch * s.heads) * kMlaCacheDim),
        o_elems_(static_cast<std::size_t>(s.batch * s.heads) * kMlaLatent) {}

  std::optional<CaseResult> Prepare() override {
    plan_ = PlanMlaDecode(shape_, Multiprocessors(), kv_);
    source_ = std::string("servecast_mla_decode_") + (s_.kv_fp8 ? "fp8kv" : "bf16kv") +
              ":page=" + std::to_string(kPagedKvPageSize) + "," + plan_.Describe();
    workspace_ = DeviceBuffer(std::max<std::size_t>(plan_.workspace_bytes, 16));
    sets_.push_back(MakeSet(SeedFor(base_seed_, 100)));
    return std::nullopt;
  }

  std::optional<CaseResult> Check() override {
    Launch(sets_[0], stream_);
    SC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    RefCheck check(op_.reference_scale_);
    check.AddNonFinite(CountNonFiniteBf16(sets_[0].out.get(), o_elems_, stream_), o_elems_);
    CheckSampled(sets_[0], check);
    if (!check.ok())
      return Incorrect(op_.name(), source_, check,
                       "(2^-7 + 1e-4) * sum_j p_j*|v_jd| + 1e-6 (fp32 scores, bf16 P, bf16 output)");
    return std::nullopt;
  }

  void Time() override {
    const double call_bytes = CacheBytes(s_) + 2.0 * static_cast<double>(q_elems_ + o_elems_);
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
  struct Set {
    DeviceBuffer pool, table, q, out;
    std::vector<std::int32_t> host_table;
  };

  Set MakeSet(std::uint64_t seed) {
    const std::size_t pool_elems = PoolElems(s_);
    Set set{DeviceBuffer(pool_elems * eb_), DeviceBuffer(table_n_ * 4), DeviceBuffer(q_elems_ * 2),
            DeviceBuffer(o_elems_ * 2), {}};
    if (s_.kv_fp8)
      FillUniformFp8E4m3(set.pool.get(), pool_elems, SeedFor(seed, 1), kValueRange, stream_);
    else
      FillUniformBf16(set.pool.get(), pool_elems, SeedFor(seed, 1), kValueRange, stream_);
    FillUniformBf16(set.q.get(), q_elems_, SeedFor(seed, 3), kQueryRange, stream_);
    FillPoison(set.out.get(), set.out.bytes(), stream_);
    set.host_table = UploadShuffledPageTable(table_n_, SeedFor(seed, 4), set.table, stream_);
    // The slots past each sequence's end poisoned (NaN): a kernel that read them fails.
    const std::int64_t used = shape_.tokens % kPagedKvPageSize;
    if (used != 0) {
      const std::size_t row = kMlaCacheDim * eb_;
      for (std::int64_t b = 0; b < s_.batch; ++b) {
        const std::size_t page = static_cast<std::size_t>(
            set.host_table[static_cast<std::size_t>((b + 1) * shape_.pages_per_seq() - 1)]);
        FillPoison(set.pool.as<std::uint8_t>() + (page * kPagedKvPageSize + static_cast<std::size_t>(used)) * row,
                   static_cast<std::size_t>(kPagedKvPageSize - used) * row, stream_);
      }
    }
    SC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return set;
  }

  void Launch(Set& set, cudaStream_t st) {
    LaunchMlaDecode(shape_, plan_, kv_, set.q.get(), set.pool.get(), set.table.as<std::int32_t>(), scale_,
                    softmax_scale_, set.out.get(), workspace_.get(), st);
  }

  // Sampled sequences (the first, the last, one drawn; two for long caches) and heads
  // (up to 8 with the first and the last; 2 beyond 32k tokens): the sequence's pages
  // read back and the output recomputed in double precision from the stored latents.
  void CheckSampled(const Set& set, RefCheck& check) {
    const std::int64_t N = s_.heads, T = shape_.tokens, pages = shape_.pages_per_seq();
    SplitMix64 rng(SeedFor(base_seed_, 5));
    std::set<std::int64_t> seqs = {0, s_.batch - 1};
    if (T <= 32768) seqs.insert(static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(s_.batch))));
    const std::int64_t max_heads = T > 32768 ? 2 : T > 4096 ? 4 : 8;
    const std::size_t row = kMlaCacheDim * eb_, page_bytes = kPagedKvPageSize * row;
    for (std::int64_t b : seqs) {
      std::set<std::int64_t> heads = {0, N - 1};
      while (static_cast<std::int64_t>(heads.size()) < std::min(N, max_heads))
        heads.insert(static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(N))));
      std::vector<std::uint8_t> cache(static_cast<std::size_t>(pages) * page_bytes);
      for (std::int64_t p = 0; p < pages; ++p) {
        const std::size_t pool_page =
            static_cast<std::size_t>(set.host_table[static_cast<std::size_t>(b * pages + p)]);
        SC_CUDA_CHECK(cudaMemcpyAsync(cache.data() + static_cast<std::size_t>(p) * page_bytes,
                                      set.pool.as<std::uint8_t>() + pool_page * page_bytes, page_bytes,
                                      cudaMemcpyDeviceToHost, stream_));
      }
      SC_CUDA_CHECK(cudaStreamSynchronize(stream_));
      const auto q = Download<std::uint16_t>(set.q.get(), static_cast<std::size_t>(N) * kMlaCacheDim,
                                             static_cast<std::size_t>(b * N) * kMlaCacheDim, stream_);
      const auto o = Download<std::uint16_t>(set.out.get(), static_cast<std::size_t>(N) * kMlaLatent,
                                             static_cast<std::size_t>(b * N) * kMlaLatent, stream_);
      // The cache dequantized once per sequence.
      std::vector<double> c(static_cast<std::size_t>(T) * kMlaCacheDim);
      for (std::size_t i = 0; i < c.size(); ++i) c[i] = CachedValue(cache, i, s_.kv_fp8, scale_);
      for (std::int64_t h : heads) {
        std::vector<double> scores(static_cast<std::size_t>(T));
        for (std::int64_t j = 0; j < T; ++j) {
          double dot = 0;
          const double* cj = c.data() + static_cast<std::size_t>(j) * kMlaCacheDim;
          for (int d = 0; d < kMlaCacheDim; ++d) dot += Bf16(q[static_cast<std::size_t>(h * kMlaCacheDim + d)]) * cj[d];
          scores[static_cast<std::size_t>(j)] = dot * softmax_scale_;
        }
        std::vector<double> ref, mag;
        ReferenceRow(
            scores, [&](std::size_t j, std::int64_t d) { return c[j * kMlaCacheDim + static_cast<std::size_t>(d)]; },
            kMlaLatent, ref, mag);
        for (int d = 0; d < kMlaLatent; ++d) {
          const double tol = (2 * kBf16Roundoff + 1e-4) * mag[static_cast<std::size_t>(d)] + 1e-6;
          check.AddLazy(
              [&] { return "out[b=" + std::to_string(b) + ",head=" + std::to_string(h) + ",d=" + std::to_string(d) + "]"; },
              Bf16(o[static_cast<std::size_t>(h * kMlaLatent + d)]), ref[static_cast<std::size_t>(d)], tol);
        }
      }
    }
  }

  const MlaGenerationOp& op_;
  const collect::Case& c_;
  const collect::RunContext& ctx_;
  const MlaShape s_;
  cudaStream_t stream_;
  const std::uint64_t base_seed_;
  const MlaDecodeShape shape_;
  const KvDtype kv_;
  const float scale_, softmax_scale_;
  const std::size_t eb_, table_n_, q_elems_, o_elems_;
  MlaDecodePlan plan_;
  std::string source_;
  DeviceBuffer workspace_;
  std::vector<Set> sets_;
  collect::TimingStats stats_;
};

std::unique_ptr<collect::CasePhases> MlaGenerationOp::MakePhases(const collect::Case& c,
                                                                 const collect::RunContext& ctx,
                                                                 const MlaShape& s) const {
  return std::make_unique<Phases>(*this, c, ctx, s);
}

// ---- mla_gen_pre / mla_gen_post -> mla_bmm_perf: per-head batched GEMMs (cuBLASLt) ----
//
// pre:  y[t][h][0:512] = x[t][h][0:128] · W_UK[h]   (q_nope into the latent space)
// post: y[t][h][0:128] = x[t][h][0:512] · W_UV[h]   (the latent output into v space)
// Weights are stored [h][out][in] (K-major, the layout cuBLASLt's fp8 kernels need);
// bfloat16, or fp8 e4m3 with a per-tensor scale, the activations then quantized per
// tensor (dynamic: amax, then apply) inside the timed call.

struct BmmShape {
  bool pre = true;
  bool fp8 = false;
  std::int64_t tokens = 1, heads = 1;
  std::int64_t in() const { return pre ? kMlaNope : kMlaLatent; }
  std::int64_t out() const { return pre ? kMlaLatent : kMlaVDim; }
};

class MlaBmmOp : public collect::Op {
 public:
  MlaBmmOp(bool pre, double reference_scale)
      : pre_(pre), table_(*collect::FindTableSpec("mla_bmm_perf")), reference_scale_(reference_scale) {}
  std::string name() const override { return pre_ ? "mla_gen_pre" : "mla_gen_post"; }
  const collect::TableSpec& table() const override { return table_; }
  std::vector<std::string> required_params() const override { return {"bmm_dtype", "num_tokens", "num_heads"}; }
  std::vector<collect::Requirement> requirements() const override {
    collect::Requirement fp8;
    fp8.applies_when = "bmm_dtype == \"fp8\"";
    fp8.min_sm = 89;  // e4m3 tensor cores
    return {fp8};
  }
  double MemoryBytes(const Params& p) const override {
    BmmShape s;
    if (Parse(p, s)) return 0;
    const double io = static_cast<double>(s.tokens * s.heads) * static_cast<double>(s.in() * 3 + s.out() * 2);
    return io + 8.0 * static_cast<double>(s.heads * s.in() * s.out()) * 2 + 64;
  }
  CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override;

  std::optional<CaseResult> Parse(const Params& p, BmmShape& s) const {
    std::string dtype;
    try {
      dtype = p.Str("bmm_dtype");
      s.tokens = p.Int("num_tokens");
      s.heads = p.Int("num_heads");
    } catch (const Error& e) {
      return Invalid(name(), e.what());
    }
    s.pre = pre_;
    if (s.tokens <= 0 || s.heads <= 0)
      return Invalid(name(), "num_tokens and num_heads must be positive (got " + p.Canonical() + ")");
    if (dtype != "bfloat16" && dtype != "fp8")
      return Unsupported("UnsupportedDtype", name() + " on cuda: bmm_dtype '" + dtype + "' (have bfloat16, fp8)");
    s.fp8 = dtype == "fp8";
    if (static_cast<double>(s.tokens) * s.heads * kMlaLatent >= 2147483647.0)
      return Unsupported("ShapeTooLarge", name() + ": a tensor of more than 2^31 elements");
    return std::nullopt;
  }

  const bool pre_;
  const collect::TableSpec& table_;
  const double reference_scale_;
};

class BmmPhases : public collect::CasePhases {
 public:
  BmmPhases(const MlaBmmOp& op, const collect::Case& c, const collect::RunContext& ctx, const BmmShape& s)
      : op_(op), c_(c), ctx_(ctx), s_(s), stream_(Context().stream), base_seed_(Fnv1a64(c.id)) {}

  std::optional<CaseResult> Prepare() override {
    const std::size_t x_elems = static_cast<std::size_t>(s_.tokens * s_.heads * s_.in());
    const std::size_t w_elems = static_cast<std::size_t>(s_.heads * s_.in() * s_.out());
    x_ = DeviceBuffer(x_elems * 2);
    y_ = DeviceBuffer(static_cast<std::size_t>(s_.tokens * s_.heads * s_.out()) * 2);
    FillUniformBf16(x_.get(), x_elems, SeedFor(base_seed_, 1), 1.0f, stream_);
    FillPoison(y_.get(), y_.bytes(), stream_);
    DeviceBuffer staging(w_elems * 2);
    FillUniformBf16(staging.get(), w_elems, SeedFor(base_seed_, 2), 1.0f, stream_);
    if (!s_.fp8) {
      w_.push_back(std::move(staging));
    } else {
      xq_ = DeviceBuffer(x_elems);
      x_scale_ = DeviceBuffer(sizeof(float));
      x_state_ = DeviceBuffer(2 * sizeof(unsigned));
      w_scale_ = DeviceBuffer(sizeof(float));
      DeviceBuffer w_state(2 * sizeof(unsigned));
      SC_CUDA_CHECK(cudaMemsetAsync(x_state_.get(), 0, x_state_.bytes(), stream_));
      SC_CUDA_CHECK(cudaMemsetAsync(w_state.get(), 0, w_state.bytes(), stream_));
      w_.emplace_back(w_elems);
      QuantFp8TensorAmax(staging.get(), w_elems, w_state.as<unsigned>(), w_scale_.as<float>(), stream_);
      QuantFp8TensorApply(staging.get(), w_elems, w_scale_.as<float>(), w_[0].get(), stream_);
      SC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
    SC_CUDA_CHECK(cudaStreamSynchronize(stream_));

    const cudaDataType_t ab = s_.fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
    SC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&mm_.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    gemm::SetDesc(mm_.desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    gemm::SetDesc(mm_.desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
    if (s_.fp8) {
      gemm::SetDesc(mm_.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, w_scale_.get());
      gemm::SetDesc(mm_.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, x_scale_.get());
      gemm::SetDesc(mm_.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, static_cast<std::int8_t>(1));
    }
    const std::int32_t batch = static_cast<std::int32_t>(s_.heads);
    auto batched = [&](cublasLtMatrixLayout_t& l, cudaDataType_t t, std::int64_t rows, std::int64_t cols,
                       std::int64_t ld, std::int64_t stride) {
      SC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, t, u(rows), u(cols), ld));
      SC_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)));
      SC_CUBLAS_CHECK(
          cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    };
    // A = W[h] as [in x out] column-major (transposed by the op), B = x[:, h, :] as
    // [in x tokens] with ld heads·in, D = y[:, h, :] as [out x tokens] with ld heads·out.
    batched(mm_.a, ab, s_.in(), s_.out(), s_.in(), s_.in() * s_.out());
    batched(mm_.b, ab, s_.in(), s_.tokens, s_.heads * s_.in(), s_.in());
    batched(mm_.d, CUDA_R_16BF, s_.out(), s_.tokens, s_.heads * s_.out(), s_.out());
    SC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&mm_.pref));
    const std::uint64_t ws = Context().workspace_bytes;
    SC_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(mm_.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasLtMatmulHeuristicResult_t heur{};
    int returned = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(Context().lt, mm_.desc, mm_.a, mm_.b, mm_.d, mm_.d,
                                                             mm_.pref, 1, &heur, &returned);
    if (st != CUBLAS_STATUS_SUCCESS || returned == 0)
      return Unsupported("CublasLtNoAlgo", op_.name() + ": cuBLASLt " + gemm::CublasLtVersion() +
                                               " has no batched algorithm for this shape (" + gemm::StatusName(st) +
                                               ")");
    algo_ = heur.algo;
    source_ = gemm::AlgoString(algo_) + ",batched" + (s_.fp8 ? "+servecast_quant_fp8_tensor" : "");
    return std::nullopt;
  }

  std::optional<CaseResult> Check() override {
    Launch(0, stream_);
    SC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const std::int64_t IN = s_.in(), OUT = s_.out(), N = s_.heads;
    const std::size_t y_elems = static_cast<std::size_t>(s_.tokens * N * OUT);
    RefCheck check(op_.reference_scale_);
    check.AddNonFinite(CountNonFiniteBf16(y_.get(), y_elems, stream_), y_elems);
    RefCheck quant(1.0);
    SplitMix64 rng(SeedFor(base_seed_, 3));
    std::set<std::int64_t> tokens = {0, s_.tokens - 1}, heads = {0, N - 1};
    while (static_cast<std::int64_t>(tokens.size()) < std::min<std::int64_t>(4, s_.tokens))
      tokens.insert(static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(s_.tokens))));
    while (static_cast<std::int64_t>(heads.size()) < std::min<std::int64_t>(4, N))
      heads.insert(static_cast<std::int64_t>(rng.Below(static_cast<std::uint64_t>(N))));
    float w_scale = 1, x_scale = 1;
    if (s_.fp8) {
      w_scale = Download<float>(w_scale_.get(), 1, 0, stream_)[0];
      x_scale = Download<float>(x_scale_.get(), 1, 0, stream_)[0];
    }
    for (std::int64_t h : heads) {
      const std::size_t w_off = static_cast<std::size_t>(h * OUT * IN), w_n = static_cast<std::size_t>(OUT * IN);
      std::vector<double> w(w_n);
      if (s_.fp8) {
        const auto raw = Download<std::uint8_t>(w_[0].get(), w_n, w_off, stream_);
        for (std::size_t i = 0; i < w_n; ++i) w[i] = Fp8E4m3(raw[i]) * w_scale;
      } else {
        const auto raw = Download<std::uint16_t>(w_[0].get(), w_n, w_off, stream_);
        for (std::size_t i = 0; i < w_n; ++i) w[i] = Bf16(raw[i]);
      }
      for (std::int64_t t : tokens) {
        const std::size_t x_off = static_cast<std::size_t>((t * N + h) * IN);
        const auto x16 = Download<std::uint16_t>(x_.get(), static_cast<std::size_t>(IN), x_off, stream_);
        std::vector<double> x(static_cast<std::size_t>(IN));
        if (s_.fp8) {
          const auto x8 = Download<std::uint8_t>(xq_.get(), static_cast<std::size_t>(IN), x_off, stream_);
          for (std::int64_t i = 0; i < IN; ++i) {
            const std::size_t k = static_cast<std::size_t>(i);
            x[k] = Fp8E4m3(x8[k]) * x_scale;
            const double want = Bf16(x16[k]);
            quant.Add("xq[t=" + std::to_string(t) + ",head=" + std::to_string(h) + ",i=" + std::to_string(i) + "]",
                      x[k], want, 0.5 * E4m3Ulp(want / x_scale) * x_scale * (1 + 1e-6));
          }
        } else {
          for (std::int64_t i = 0; i < IN; ++i) x[static_cast<std::size_t>(i)] = Bf16(x16[static_cast<std::size_t>(i)]);
        }
        const auto y = Download<std::uint16_t>(y_.get(), static_cast<std::size_t>(OUT),
                                               static_cast<std::size_t>((t * N + h) * OUT), stream_);
        const double eps = s_.fp8 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -14);
        for (std::int64_t o = 0; o < OUT; ++o) {
          double ref = 0, mag = 0;
          for (std::int64_t i = 0; i < IN; ++i) {
            const double p = x[static_cast<std::size_t>(i)] * w[static_cast<std::size_t>(o * IN + i)];
            ref += p;
            mag += std::fabs(p);
          }
          check.AddLazy(
              [&] { return "y[t=" + std::to_string(t) + ",head=" + std::to_string(h) + ",o=" + std::to_string(o) + "]"; },
              Bf16(y[static_cast<std::size_t>(o)]), ref, kBf16Roundoff * std::fabs(ref) + eps * mag + 1e-6);
        }
      }
    }
    if (s_.fp8 && !quant.ok())
      return Incorrect(op_.name(), source_, quant, "x within half an e4m3 step of stored * scale");
    if (!check.ok())
      return Incorrect(op_.name(), source_, check,
                       std::string("2^-8·|ref| + ") + (s_.fp8 ? "2^-10" : "2^-14") + "·Σ|x·w| + 1e-6");
    return std::nullopt;
  }

  void Time() override {
    const double w_bytes = static_cast<double>(w_[0].bytes());
    const int copies = CopiesForColdL2(w_bytes);
    for (int k = 1; k < copies; ++k) {
      w_.emplace_back(w_[0].bytes());
      SC_CUDA_CHECK(cudaMemcpyAsync(w_.back().get(), w_[0].get(), w_[0].bytes(), cudaMemcpyDeviceToDevice, stream_));
    }
    SC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    TimeOptions opt;
    opt.copies = copies;
    opt.rotated_bytes = w_bytes * copies;
    stats_ = TimeOnDevice(
        [&](cudaStream_t st, int iteration) { Launch(static_cast<std::size_t>(iteration % copies), st); }, ctx_.timing,
        opt, ctx_.measure_power);
  }

  std::vector<Params> Emit() override {
    return {collect::MakeRow(op_.table(), *ctx_.runtime, op_.name(), source_, c_.params, stats_, ctx_.measure_power)};
  }

 private:
  void Launch(std::size_t copy, cudaStream_t st) {
    const std::size_t x_elems = static_cast<std::size_t>(s_.tokens * s_.heads * s_.in());
    if (s_.fp8) {
      QuantFp8TensorAmax(x_.get(), x_elems, x_state_.as<unsigned>(), x_scale_.as<float>(), st);
      QuantFp8TensorApply(x_.get(), x_elems, x_scale_.as<float>(), xq_.get(), st);
    }
    const float alpha = 1.0f, beta = 0.0f;
    const DeviceContext& dc = Context();
    const void* x = s_.fp8 ? xq_.get() : x_.get();
    SC_CUBLAS_CHECK(cublasLtMatmul(dc.lt, mm_.desc, &alpha, w_[copy].get(), mm_.a, x, mm_.b, &beta, y_.get(), mm_.d,
                                   y_.get(), mm_.d, &algo_, dc.workspace, dc.workspace_bytes, st));
  }

  const MlaBmmOp& op_;
  const collect::Case& c_;
  const collect::RunContext& ctx_;
  const BmmShape s_;
  cudaStream_t stream_;
  const std::uint64_t base_seed_;
  DeviceBuffer x_, xq_, x_scale_, x_state_, w_scale_, y_;
  std::vector<DeviceBuffer> w_;
  gemm::LtMatmul mm_;
  cublasLtMatmulAlgo_t algo_{};
  std::string source_;
  collect::TimingStats stats_;
};

CaseResult MlaBmmOp::Run(const collect::Case& c, const collect::RunContext& ctx) {
  BmmShape s;
  if (std::optional<CaseResult> bad = Parse(c.params, s)) return *bad;
  if (!ctx.runtime)
    return CaseResult::Failure(Disposition::kFailed, FailureClass::kCollectorBug, "MissingRuntime",
                               name() + ": the run context carries no runtime");
  BmmPhases phases(*this, c, ctx, s);
  return RunCudaPhases(phases, FailureClass::kCollectorBug);
}

}  // namespace

std::unique_ptr<collect::Op> MakeMlaContextOp(double reference_scale) {
  return std::make_unique<MlaContextOp>(reference_scale);
}
std::unique_ptr<collect::Op> MakeMlaGenerationOp(double reference_scale) {
  return std::make_unique<MlaGenerationOp>(reference_scale);
}
std::unique_ptr<collect::Op> MakeMlaBmmOp(bool pre, double reference_scale) {
  return std::make_unique<MlaBmmOp>(pre, reference_scale);
}

void RegisterMlaOps(collect::Registry& r) {
  r.AddOp("cuda", MakeMlaContextOp());
  r.AddOp("cuda", MakeMlaGenerationOp());
  r.AddOp("cuda", MakeMlaBmmOp(true));
  r.AddOp("cuda", MakeMlaBmmOp(false));
}

}  // namespace servecast::cuda
