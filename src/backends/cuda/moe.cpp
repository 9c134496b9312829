// Op `moe` on the cuda backend (table moe_perf); moe_ops.h says what one call runs
// and why the expert GEMMs are one cuBLASLt matmul per local expert.
//
// Layouts (row-major, like the gemm op): the activations are [rows x hidden]; expert
// e's gate+up weight W13 is [2·inter x hidden] (rows [0, inter) gate, [inter, 2·inter)
// up, inter = inter_size / moe_tp_size; relu2 experts, expert_act relu2: [inter x
// hidden], up only), its down weight W2 is [hidden x inter]. Each
// matmul is the gemm op's TN form: yᵀ = op(Wᵀ) · xᵀ in cuBLASLt's column-major terms.
//
// Only the experts that some sample routes a token to get weights: the others are
// never read, so allocating them would change nothing but the footprint. The weights
// of those "touched" experts are rotated over CopiesForColdL2 copies; most cases touch
// far more than 2x L2 already (one copy, l2 = cold).

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/elementwise_kernels.h"
#include "backends/cuda/fill.h"
#include "backends/cuda/gemm_internal.h"
#include "backends/cuda/harness.h"
#include "backends/cuda/moe_grouped_gemm.h"
#include "backends/cuda/moe_kernels.h"
#include "backends/cuda/moe_ops.h"
#include "backends/cuda/op_vocabulary.h"
#include "backends/cuda/quantize.h"
#include "collect/case.h"
#include "collect/moe_routing.h"
#include "collect/registry.h"
#include "core/error.h"
#include "core/value.h"

namespace servecast::cuda {

void RegisterMoeOps(collect::Registry& r) {
  r.AddOp("cuda", moe::MakeMoeOp());
}

namespace moe {
namespace {

using gemm::Incorrect;
using gemm::InvalidParams;
using gemm::LtMatmul;
using gemm::NotSupported;
using gemm::RefCheck;
using gemm::SeedFor;
using gemm::SetDesc;

constexpr int kPowerLawSamples = 5;           // AIC times 5 routings per power-law case
constexpr std::int64_t kCheckTokensWith = 6;  // sampled tokens with a local expert, per sample
constexpr std::int64_t kCheckTokensWithout = 2;
constexpr std::int64_t kCheckCols = 32;           // sampled gate/up and output columns
constexpr double kL2Bound = 256.0 * 1024 * 1024;  // >= 2 x L2 of any current GPU (MemoryBytes bound)

enum class Dtype { kBf16, kFp8, kFp8Block, kW4Mxfp4, kW4Int4 };

bool IsFp8(Dtype d) {
  return d == Dtype::kFp8 || d == Dtype::kFp8Block;
}
bool IsW4(Dtype d) {
  return d == Dtype::kW4Mxfp4 || d == Dtype::kW4Int4;
}
MoeGemmType GemmTypeOf(Dtype d) {
  switch (d) {
    case Dtype::kBf16: return MoeGemmType::kBf16;
    case Dtype::kFp8: return MoeGemmType::kFp8;
    case Dtype::kFp8Block: return MoeGemmType::kFp8Block;
    case Dtype::kW4Mxfp4: return MoeGemmType::kW4Mxfp4;
    case Dtype::kW4Int4: return MoeGemmType::kW4Int4;
  }
  return MoeGemmType::kBf16;
}

std::int64_t RoundUp(std::int64_t v, std::int64_t to) {
  return (v + to - 1) / to * to;
}

struct Shape {
  Dtype dtype = Dtype::kBf16;
  std::string dtype_name;
  std::int64_t T = 0, H = 0, I = 0, K = 0, E = 0, L = 0;  // tokens, hidden, inter / tp, topk, experts, local
  // Gated experts (SiLU(gate) x up: W13 holds gate and up, U = 2 I rows) or relu2 ones
  // (expert_act relu2, Nemotron-H: max(up, 0)^2, one projection, U = I rows).
  bool gated = true;
  std::int64_t U = 0;
  std::int64_t tp = 1, ep = 1;
  std::string distribution;
  int samples = 1;
  int align = 1;         // segment padding (rows)
  std::int64_t esz = 2;  // bytes per GEMM input (activation) element
  // fp8_block: 128x128 weight blocks (rows) and K blocks padded to 4 (scale leading dimension).
  std::int64_t nb13 = 0, kbp13 = 0, nb2 = 0, kbp2 = 0;

  std::int64_t W13Elems() const { return U * H; }
  std::int64_t W2Elems() const { return H * I; }
  // Bytes of one expert matrix [rows x cols]: its elements at the weight dtype's width,
  // for the 4-bit types codes and group scales (moe_grouped_gemm.h, MoeW4Layout).
  std::int64_t MatrixBytes(std::int64_t rows, std::int64_t cols) const {
    if (IsW4(dtype)) return MoeW4LayoutOf(GemmTypeOf(dtype), rows, cols).Bytes();
    return rows * cols * esz;
  }
  std::int64_t W13Stride() const { return RoundUp(MatrixBytes(U, H), 256); }  // bytes per expert
  std::int64_t W2Stride() const { return RoundUp(MatrixBytes(H, I), 256); }
  // Bytes of one weight row in the checkpoint layout the check reads (4-bit: codes and scales).
  std::int64_t RowBytes(bool up) const {
    const std::int64_t cols = up ? H : I;
    if (IsW4(dtype)) return MoeW4LayoutOf(GemmTypeOf(dtype), up ? U : H, cols).RowBytes();
    return cols * esz;
  }
  // Scale floats per expert. A per-tensor fp8 scale takes 4 floats: cuBLASLt rejects
  // (CUBLAS_STATUS_NOT_SUPPORTED) scale pointers that are not 16-byte aligned.
  std::int64_t S13() const { return dtype == Dtype::kFp8Block ? nb13 * kbp13 : 4; }
  std::int64_t S2() const { return dtype == Dtype::kFp8Block ? nb2 * kbp2 : 4; }
  double ExpertBytes() const {
    return static_cast<double>(W13Stride() + W2Stride()) +
           (IsFp8(dtype) ? 4.0 * static_cast<double>(S13() + S2()) : 0.0);
  }
};

std::optional<CaseResult> ParseShape(const collect::Params& p, Shape& s) {
  std::int64_t inter_size = 0;
  try {
    s.dtype_name = p.Str("moe_dtype");
    s.T = p.Int("num_tokens");
    s.H = p.Int("hidden_size");
    inter_size = p.Int("inter_size");
    s.K = p.Int("topk");
    s.E = p.Int("num_experts");
    s.tp = p.Int("moe_tp_size");
    s.ep = p.Int("moe_ep_size");
    s.distribution = p.Str("distribution");
    if (p.Has("expert_act")) {
      const std::string act = p.Str("expert_act");
      if (act != "silu" && act != "relu2")
        return InvalidParams("moe", "expert_act '" + act + "'; expected silu (gated, the default) or relu2 (not gated)");
      s.gated = act == "silu";
    }
  } catch (const Error& e) {
    return InvalidParams("moe", e.what());
  }
  if (s.T <= 0 || s.H <= 0 || inter_size <= 0 || s.K <= 0 || s.E <= 0 || s.tp <= 0 || s.ep <= 0)
    return InvalidParams("moe",
                         "num_tokens, hidden_size, inter_size, topk, num_experts, moe_tp_size and moe_ep_size "
                         "must be positive; got " +
                             p.Canonical());
  if (inter_size % s.tp != 0)
    return InvalidParams("moe", "inter_size " + std::to_string(inter_size) + " is not a multiple of moe_tp_size " +
                                    std::to_string(s.tp));
  if (s.E % s.ep != 0 || s.K > s.E)
    return InvalidParams("moe", "num_experts " + std::to_string(s.E) + " must be a multiple of moe_ep_size " +
                                    std::to_string(s.ep) + " and >= topk " + std::to_string(s.K));
  s.I = inter_size / s.tp;
  s.U = s.gated ? 2 * s.I : s.I;
  s.L = s.E / s.ep;
  if (s.distribution == "balanced")
    s.samples = 1;
  else if (s.distribution.rfind("power_law_", 0) == 0)
    s.samples = kPowerLawSamples;
  else
    return InvalidParams("moe", "distribution '" + s.distribution + "'; expected balanced or power_law_<alpha>");
  if (s.dtype_name == "bfloat16") {
    s.dtype = Dtype::kBf16;
  } else if (s.dtype_name == "fp8") {
    s.dtype = Dtype::kFp8;
    s.esz = 1;
  } else if (s.dtype_name == "fp8_block") {
    s.dtype = Dtype::kFp8Block;
    s.esz = 1;
    s.align = 4;
  } else if (s.dtype_name == "w4a16_mxfp4") {
    s.dtype = Dtype::kW4Mxfp4;
  } else if (s.dtype_name == "int4_wo") {
    s.dtype = Dtype::kW4Int4;
  } else {
    return NotSupported("UnsupportedDtype", "moe on cuda runs moe_dtype bfloat16, fp8, fp8_block, w4a16_mxfp4 and "
                                            "int4_wo; got '" + s.dtype_name + "'");
  }
  if (!s.gated && s.dtype != Dtype::kBf16)
    return NotSupported("UnsupportedDtype", "moe on cuda runs relu2 (not gated) experts in bfloat16 only; got '" +
                                                s.dtype_name + "'");
  if (s.K > kMoeMaxTopk || s.E > kMoeMaxExperts)
    return NotSupported("ShapeTooLarge", "moe on cuda: topk <= " + std::to_string(kMoeMaxTopk) +
                                             " and num_experts <= " + std::to_string(kMoeMaxExperts) + "; got topk " +
                                             std::to_string(s.K) + ", num_experts " + std::to_string(s.E));
  if (s.T * s.K > INT32_MAX || s.U > INT32_MAX || s.H > INT32_MAX)
    return NotSupported("ShapeTooLarge",
                        "moe on cuda: num_tokens x topk, hidden_size and 2 x inter_size / "
                        "moe_tp_size must fit 32 bits");
  if (IsW4(s.dtype) && (s.H % 16 != 0 || s.I % 8 != 0))
    return NotSupported("W4Shape", "moe " + s.dtype_name +
                                       " needs hidden_size a multiple of 16 and inter_size / moe_tp_size of 8 (the "
                                       "4-bit kernel's 16-row weight blocks); got hidden " +
                                       std::to_string(s.H) + ", inter " + std::to_string(s.I));
  if (s.dtype == Dtype::kFp8Block) {
    if (s.H % 128 != 0 || s.I % 128 != 0)
      return NotSupported("BlockShape",
                          "moe fp8_block needs hidden_size and inter_size / moe_tp_size multiples of "
                          "128 (128x128 weight blocks, 1x128 activation groups); got hidden " +
                              std::to_string(s.H) + ", inter " + std::to_string(s.I));
    s.nb13 = s.U / 128;
    s.kbp13 = RoundUp(s.H / 128, 4);
    s.nb2 = s.H / 128;
    s.kbp2 = RoundUp(s.I / 128, 4);
  }
  return std::nullopt;
}

// Upper bound on the rows of a sample's permuted buffers.
std::int64_t MaxRowsBound(const Shape& s) {
  return s.T * std::min(s.K, s.L) + (s.align - 1) * s.L;
}

std::uint32_t AlignOf(std::int64_t byte_offset) {
  if (byte_offset == 0) return 256;
  const std::int64_t low = byte_offset & -byte_offset;
  return static_cast<std::uint32_t>(std::min<std::int64_t>(256, low));
}

// How a case runs its expert GEMMs: bt = 0 cuBLASLt per expert; bt > 0 a grouped
// kernel with bt rows per tile, mma.sync or (wgmma) Hopper's warpgroup MMA.
struct GemmPath {
  int bt = 0;
  bool wgmma = false;
};

// The algorithm each expert matmul shape got from cuBLASLt's heuristic and ran with,
// kept for the worker's life: later cases of the same shape (the 81 of a slice share
// n, k and many row counts) skip the heuristic query and the trial run. The key holds
// everything the choice depends on: dtype, n, k, rows and the alignments of B, D and
// the two scale pointers.
using AlgoKey = std::tuple<int, std::int64_t, std::int64_t, std::int64_t, std::uint32_t, std::uint32_t, std::uint32_t,
                           std::uint32_t>;
std::map<AlgoKey, cublasLtMatmulAlgo_t>& AlgoCache() {
  static std::map<AlgoKey, cublasLtMatmulAlgo_t> cache;
  return cache;
}

// One local expert's two matmuls in one sample.
struct ExpertGemm {
  std::int64_t e = 0;     // local expert id
  std::int64_t w = 0;     // weight slot (index among the touched experts)
  std::int64_t off = 0;   // first row of its segment
  std::int64_t rows = 0;  // segment rows (count padded to align)
  LtMatmul gu, down;
  cublasLtMatmulAlgo_t gu_algo{}, down_algo{};
};

struct Sample {
  collect::MoeRouting routing;
  std::vector<std::int64_t> counts;   // [L]
  std::vector<std::int64_t> offsets;  // [L + 1], padded
  std::int64_t rows = 0;              // offsets[L]
  DeviceBuffer logits;                // bf16 [T x E]
  std::vector<std::unique_ptr<ExpertGemm>> gemms;
};

struct Buffers {
  DeviceBuffer x;                     // bf16 [T x H]
  DeviceBuffer xq, x_scale, x_state;  // fp8: e4m3 [T x H], 1 float, 2 words
  DeviceBuffer ids, topw, slot_of;    // [T x K]
  DeviceBuffer counts, offsets, cursor;
  DeviceBuffer row_token;             // [max_rows]
  DeviceBuffer perm;                  // [max_rows x H]: bf16 (bf16, fp8_block) or e4m3 (fp8)
  DeviceBuffer permq, perm_scale;     // fp8_block: e4m3 [max_rows x H], [H/128 x max_rows] floats
  DeviceBuffer gu;                    // bf16 [max_rows x 2I]
  DeviceBuffer h;                     // bf16 [max_rows x I] (bf16, fp8)
  DeviceBuffer hq, h_scale, h_state;  // fp8: e4m3, 1 float, 2 words; fp8_block: e4m3, [I/128 x max_rows]
  DeviceBuffer down;                  // bf16 [max_rows x H]
  DeviceBuffer out;                   // bf16 [T x H]
  DeviceBuffer scratch;               // reference amax, counters
  std::vector<DeviceBuffer> w13, w2;  // per copy: touched experts' weights (4-bit types: tiled layout)
  DeviceBuffer w13_plain, w2_plain;   // 4-bit types: the checkpoint layout the check reads
  DeviceBuffer w13_scale, w2_scale;   // per touched expert
  std::int64_t max_rows = 0;
};

DeviceBuffer Alloc(std::int64_t bytes) {
  return DeviceBuffer(static_cast<std::size_t>(std::max<std::int64_t>(bytes, 256)));
}

template <class T>
std::vector<T> Read(const void* base, std::int64_t elem_offset, std::int64_t count, cudaStream_t st) {
  std::vector<T> out(static_cast<std::size_t>(count));
  if (count > 0)
    SC_CUDA_CHECK(cudaMemcpyAsync(out.data(), static_cast<const T*>(base) + elem_offset,
                                  static_cast<std::size_t>(count) * sizeof(T), cudaMemcpyDeviceToHost, st));
  SC_CUDA_CHECK(cudaStreamSynchronize(st));
  return out;
}

void BuildMatmul(const Shape& s, LtMatmul& mm, std::int64_t n, std::int64_t k, std::int64_t rows, const void* a_scale,
                 const void* b_scale, std::uint32_t align_b, std::uint32_t align_d) {
  const DeviceContext& dc = Context();
  const cudaDataType_t ab = s.dtype == Dtype::kBf16 ? CUDA_R_16BF : CUDA_R_8F_E4M3;
  SC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&mm.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  SetDesc(mm.desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  SetDesc(mm.desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  if (s.dtype == Dtype::kFp8) {
    SetDesc(mm.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, a_scale);
    SetDesc(mm.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b_scale);
    SetDesc(mm.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, static_cast<std::int8_t>(1));
  } else if (s.dtype == Dtype::kFp8Block) {
    SetDesc(mm.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
            static_cast<std::int32_t>(CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F));
    SetDesc(mm.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
            static_cast<std::int32_t>(CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F));
    SetDesc(mm.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, a_scale);
    SetDesc(mm.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b_scale);
  }
  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  SC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&mm.a, ab, u(k), u(n), k));
  SC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&mm.b, ab, u(k), u(rows), k));
  SC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&mm.d, CUDA_R_16BF, u(n), u(rows), n));
  SC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&mm.pref));
  const std::uint64_t ws = dc.workspace_bytes;
  SC_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(mm.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  const std::uint32_t align_a = 256;
  SC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(mm.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                                       sizeof(align_a)));
  SC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(mm.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                                       sizeof(align_b)));
  SC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(mm.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d,
                                                       sizeof(align_d)));
  SC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(mm.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d,
                                                       sizeof(align_d)));
}

cublasStatus_t Matmul(const LtMatmul& mm, const cublasLtMatmulAlgo_t& algo, const void* a, const void* b, void* d,
                      cudaStream_t st) {
  const DeviceContext& dc = Context();
  const float alpha = 1.0f, beta = 0.0f;
  return cublasLtMatmul(dc.lt, mm.desc, &alpha, a, mm.a, b, mm.b, &beta, d, mm.d, d, mm.d, &algo, dc.workspace,
                        dc.workspace_bytes, st);
}

// The op's state for one case: shape, samples, buffers, and the launch.
class MoeCase {
 public:
  MoeCase(const Shape& s, const std::string& case_id) : s_(s), id_(case_id) {}

  // Synthesizes the routings; an invalid shape is reported by the caller.
  void Route() {
    collect::MoeRoutingShape rs;
    rs.num_tokens = s_.T;
    rs.num_experts = s_.E;
    rs.topk = s_.K;
    rs.moe_ep_size = s_.ep;
    rs.distribution = s_.distribution;
    for (int i = 0; i < s_.samples; ++i) {
      auto smp = std::make_unique<Sample>();
      smp->routing = collect::SynthesizeMoeRouting(rs, SeedFor(id_, 4), i);
      const auto& r = smp->routing;
      if (static_cast<std::int64_t>(r.tokens_per_expert.size()) != s_.E ||
          static_cast<std::int64_t>(r.logits.size()) != s_.T * s_.E ||
          static_cast<std::int64_t>(r.expert_ids.size()) != s_.T * s_.K || r.local_experts != s_.L)
        throw Error("moe: SynthesizeMoeRouting returned a routing of the wrong size for " + id_);
      smp->counts.assign(r.tokens_per_expert.begin(), r.tokens_per_expert.begin() + s_.L);
      smp->offsets.assign(static_cast<std::size_t>(s_.L + 1), 0);
      for (std::int64_t e = 0; e < s_.L; ++e)
        smp->offsets[static_cast<std::size_t>(e + 1)] =
            smp->offsets[static_cast<std::size_t>(e)] + RoundUp(smp->counts[static_cast<std::size_t>(e)], s_.align);
      smp->rows = smp->offsets[static_cast<std::size_t>(s_.L)];
      samples_.push_back(std::move(smp));
    }
    slot_of_expert_.assign(static_cast<std::size_t>(s_.L), -1);
    for (const auto& smp : samples_)
      for (std::int64_t e = 0; e < s_.L; ++e)
        if (smp->counts[static_cast<std::size_t>(e)] > 0 && slot_of_expert_[static_cast<std::size_t>(e)] < 0)
          slot_of_expert_[static_cast<std::size_t>(e)] = touched_++;
  }

  std::int64_t touched() const { return touched_; }
  int samples() const { return s_.samples; }
  int copies() const { return copies_; }
  double TouchedBytes() const { return static_cast<double>(touched_) * s_.ExpertBytes(); }

  void Prepare(cudaStream_t st) {
    const Shape& s = s_;
    b_.max_rows = 0;
    for (const auto& smp : samples_) b_.max_rows = std::max(b_.max_rows, smp->rows);
    const std::int64_t R = b_.max_rows, TH = s.T * s.H;
    b_.x = Alloc(TH * 2);
    FillUniformBf16(b_.x.get(), static_cast<std::size_t>(TH), SeedFor(id_, 1), 1.0f, st);
    ScaleBf16ByBlockPattern(b_.x.get(), s.T, s.H, 1, 0, st);
    if (s.dtype == Dtype::kFp8) {
      b_.xq = Alloc(TH);
      b_.x_scale = Alloc(4);
      b_.x_state = Alloc(8);
      b_.h_scale = Alloc(4);
      b_.h_state = Alloc(8);
      SC_CUDA_CHECK(cudaMemsetAsync(b_.x_state.get(), 0, b_.x_state.bytes(), st));
      SC_CUDA_CHECK(cudaMemsetAsync(b_.h_state.get(), 0, b_.h_state.bytes(), st));
    }
    b_.ids = Alloc(s.T * s.K * 4);
    b_.topw = Alloc(s.T * s.K * 4);
    b_.slot_of = Alloc(s.T * s.K * 4);
    b_.counts = Alloc(s.L * 4);
    b_.offsets = Alloc((s.L + 1) * 4);
    b_.cursor = Alloc(s.L * 4);
    b_.row_token = Alloc(R * 4);
    b_.perm = Alloc(R * s.H * (s.dtype == Dtype::kFp8 ? 1 : 2));
    if (s.dtype == Dtype::kFp8Block) {
      b_.permq = Alloc(R * s.H);
      b_.perm_scale = Alloc(s.H / 128 * R * 4);
      b_.h_scale = Alloc(s.I / 128 * R * 4);
    }
    b_.gu = Alloc(R * s.U * 2);
    if (s.dtype != Dtype::kFp8Block) b_.h = Alloc(R * s.I * 2);
    if (IsFp8(s.dtype)) b_.hq = Alloc(R * s.I);
    b_.down = Alloc(R * s.H * 2);
    b_.out = Alloc(TH * 2);
    b_.scratch = Alloc(256);
    // The scales too: BuildGemms' trial matmuls run before any call has written them.
    for (DeviceBuffer* buf :
         {&b_.perm, &b_.permq, &b_.perm_scale, &b_.gu, &b_.h, &b_.hq, &b_.down, &b_.x_scale, &b_.h_scale})
      if (buf->get()) SC_CUDA_CHECK(cudaMemsetAsync(buf->get(), 0, buf->bytes(), st));

    for (auto& smp : samples_) {
      std::vector<std::uint16_t> bits(smp->routing.logits.size());
      for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = F32ToBf16(smp->routing.logits[i]);
      smp->logits = Alloc(static_cast<std::int64_t>(bits.size() * 2));
      SC_CUDA_CHECK(cudaMemcpyAsync(smp->logits.get(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice, st));
      SC_CUDA_CHECK(cudaStreamSynchronize(st));
    }
    PrepareWeights(st);
  }

  // Builds every expert matmul and picks its algorithm; an outcome when cuBLASLt has none.
  std::optional<CaseResult> BuildGemms(cudaStream_t st) {
    const Shape& s = s_;
    if (IsW4(s.dtype))
      return NotSupported("NoCublasLtW4", "cuBLASLt has no weight-only 4-bit matmul (" + s.dtype_name +
                                              "); the grouped kernel runs these experts");
    const DeviceContext& dc = Context();
    const std::string where_base = "moe_dtype=" + s.dtype_name + " hidden=" + std::to_string(s.H) +
                                   " inter/tp=" + std::to_string(s.I) + " (cuBLASLt " + gemm::CublasLtVersion() +
                                   ", sm_" + std::to_string(dc.prop.major) + std::to_string(dc.prop.minor) + ")";
    std::map<AlgoKey, cublasLtMatmulAlgo_t>& chosen = AlgoCache();
    for (auto& smp : samples_)
      for (std::int64_t e = 0; e < s.L; ++e) {
        if (smp->counts[static_cast<std::size_t>(e)] == 0) continue;
        auto g = std::make_unique<ExpertGemm>();
        g->e = e;
        g->w = slot_of_expert_[static_cast<std::size_t>(e)];
        g->off = smp->offsets[static_cast<std::size_t>(e)];
        g->rows = smp->offsets[static_cast<std::size_t>(e + 1)] - g->off;
        for (int kind = 0; kind < 2; ++kind) {
          const bool up = kind == 0;
          const std::int64_t n = up ? s.U : s.H, k = up ? s.H : s.I;
          const std::uint32_t align_b = AlignOf(g->off * k * s.esz), align_d = AlignOf(g->off * n * 2);
          const void* a_scale = nullptr;
          const void* b_scale = nullptr;
          std::int64_t a_scale_off = 0, b_scale_off = 0;  // floats from the scale buffers' starts
          if (s.dtype == Dtype::kFp8) {
            a_scale_off = g->w * 4;
            a_scale = (up ? b_.w13_scale.as<float>() : b_.w2_scale.as<float>()) + a_scale_off;
            b_scale = up ? b_.x_scale.get() : b_.h_scale.get();
          } else if (s.dtype == Dtype::kFp8Block) {
            a_scale_off = g->w * (up ? s.S13() : s.S2());
            b_scale_off = (up ? s.H : s.I) / 128 * g->off;
            a_scale = (up ? b_.w13_scale.as<float>() : b_.w2_scale.as<float>()) + a_scale_off;
            b_scale = (up ? b_.perm_scale.as<float>() : b_.h_scale.as<float>()) + b_scale_off;
          }
          LtMatmul& mm = up ? g->gu : g->down;
          BuildMatmul(s, mm, n, k, g->rows, a_scale, b_scale, align_b, align_d);
          cublasLtMatmulAlgo_t& algo = up ? g->gu_algo : g->down_algo;
          const AlgoKey key{static_cast<int>(s.dtype), n, k, g->rows, align_b, align_d, AlignOf(a_scale_off * 4),
                            AlignOf(b_scale_off * 4)};
          if (auto it = chosen.find(key); it != chosen.end()) {
            algo = it->second;
            continue;
          }
          const void* a = up ? W13(0, g->w) : W2(0, g->w);
          const void* bp = up ? GemmInUp(g->off) : GemmInDown(g->off);
          void* d = up ? static_cast<void*>(b_.gu.as<char>() + g->off * s.U * 2)
                       : static_cast<void*>(b_.down.as<char>() + g->off * s.H * 2);
          const std::string where = where_base + (up ? " gate_up" : " down") + " n=" + std::to_string(n) +
                                    " k=" + std::to_string(k) + " rows=" + std::to_string(g->rows);
          if (auto bad = PickAlgo(mm, a, bp, d, algo, where, st)) return bad;
          chosen.emplace(key, algo);
        }
        smp->gemms.push_back(std::move(g));
      }
    return std::nullopt;
  }

  // Enqueues sample `sample` on weight copy `copy` (no host synchronization).
  void Launch(int sample, int copy, cudaStream_t st) {
    const Shape& s = s_;
    Sample& smp = *samples_[static_cast<std::size_t>(sample)];
    auto* ids = b_.ids.as<std::int32_t>();
    LaunchMoeRouterTopk(smp.logits.get(), s.T, s.E, static_cast<int>(s.K), ids, b_.topw.as<float>(), st);
    LaunchMoeCountLocal(ids, s.T * s.K, s.L, b_.counts.as<int>(), st);
    LaunchMoeOffsets(b_.counts.as<int>(), s.L, s.align, b_.offsets.as<int>(), b_.cursor.as<int>(), st);
    const void* src = b_.x.get();
    std::int64_t row_bytes = s.H * 2;
    if (s.dtype == Dtype::kFp8) {
      const auto n = static_cast<std::size_t>(s.T * s.H);
      QuantFp8TensorAmax(b_.x.get(), n, b_.x_state.as<unsigned>(), b_.x_scale.as<float>(), st);
      QuantFp8TensorApply(b_.x.get(), n, b_.x_scale.as<float>(), b_.xq.get(), st);
      src = b_.xq.get();
      row_bytes = s.H;
    }
    LaunchMoeScatterRows(ids, s.T, static_cast<int>(s.K), s.L, b_.cursor.as<int>(), b_.slot_of.as<int>(),
                         b_.row_token.as<int>(), b_.max_rows, src, b_.perm.get(), row_bytes, st);
    if (smp.rows > 0) {
      if (s.dtype == Dtype::kFp8Block)
        LaunchMoeQuantGroup128(b_.perm.get(), false, smp.rows, s.H, b_.offsets.as<int>(), b_.counts.as<int>(), s.L,
                               b_.permq.get(), b_.perm_scale.as<float>(), st);
      if (path_.bt > 0)
        LaunchGrouped(GroupedArgs(true, copy, Tiles()[static_cast<std::size_t>(sample)]), st);
      else
        for (const auto& g : smp.gemms)
          SC_CUBLAS_CHECK(Matmul(g->gu, g->gu_algo, W13(copy, g->w), GemmInUp(g->off),
                                 b_.gu.as<char>() + g->off * s.U * 2, st));
      if (s.dtype == Dtype::kFp8Block) {
        LaunchMoeQuantGroup128(b_.gu.get(), true, smp.rows, s.I, b_.offsets.as<int>(), b_.counts.as<int>(), s.L,
                               b_.hq.get(), b_.h_scale.as<float>(), st);
      } else {
        if (s.gated)
          LaunchSiluAndMulBf16(b_.gu.get(), b_.h.get(), smp.rows, s.I, st);
        else
          LaunchRelu2Bf16(b_.gu.get(), b_.h.get(), smp.rows, s.I, st);
        if (s.dtype == Dtype::kFp8) {
          const auto n = static_cast<std::size_t>(smp.rows * s.I);
          QuantFp8TensorAmax(b_.h.get(), n, b_.h_state.as<unsigned>(), b_.h_scale.as<float>(), st);
          QuantFp8TensorApply(b_.h.get(), n, b_.h_scale.as<float>(), b_.hq.get(), st);
        }
      }
      if (path_.bt > 0)
        LaunchGrouped(GroupedArgs(false, copy, Tiles()[static_cast<std::size_t>(sample)]), st);
      else
        for (const auto& g : smp.gemms)
          SC_CUBLAS_CHECK(Matmul(g->down, g->down_algo, W2(copy, g->w), GemmInDown(g->off),
                                 b_.down.as<char>() + g->off * s.H * 2, st));
    }
    LaunchMoeCombine(b_.down.get(), b_.slot_of.as<int>(), b_.topw.as<float>(), s.T, static_cast<int>(s.K), s.H,
                     b_.out.get(), st);
  }

  // Runs each sample once on poisoned outputs and checks it; an incorrect outcome or nothing.
  std::optional<CaseResult> Check(const MoeRunOptions& opt, MoeRunReport& rep, cudaStream_t st);

  MoeGemmType GemmType() const { return GemmTypeOf(s_.dtype); }

  // The grouped kernel takes both expert GEMMs of this shape.
  bool GroupedSupported() const {
    return MoeGroupedGemmSupported(GemmType(), s_.U, s_.H) && MoeGroupedGemmSupported(GemmType(), s_.H, s_.I);
  }

  // The expert GEMMs run as one grouped launch each with `bt` rows per tile (bt > 0,
  // mma.sync or wgmma kernel), or as one cuBLASLt matmul per expert (bt = 0;
  // BuildGemms must have succeeded).
  // Each bt's tile lists are built and copied to the device once per case (the mma.sync
  // and wgmma kernels share them).
  void UsePath(const GemmPath& path, cudaStream_t st) {
    path_ = path;
    const int bt = path.bt;
    if (bt == 0 || tiles_.count(bt)) return;
    std::vector<TileSet>& sets = tiles_[bt];
    const Shape& s = s_;
    for (const auto& smp : samples_) {
      TileSet ts;
      for (int up = 1; up >= 0; --up) {
        std::vector<MoeGemmSegment> segs;
        for (std::int64_t e = 0; e < s.L; ++e) {
          if (smp->counts[static_cast<std::size_t>(e)] == 0) continue;
          const std::int64_t w = slot_of_expert_[static_cast<std::size_t>(e)];
          MoeGemmSegment sg;
          sg.row0 = smp->offsets[static_cast<std::size_t>(e)];
          sg.rows = smp->offsets[static_cast<std::size_t>(e + 1)] - sg.row0;
          sg.w_offset = w * (up ? s.W13Stride() : s.W2Stride());
          sg.w_scale = w * (up ? s.S13() : s.S2());
          segs.push_back(sg);
        }
        const std::vector<MoeGemmTile> tiles = MoeGemmTiles(segs, up ? s.U : s.H, bt);
        DeviceBuffer buf = Alloc(static_cast<std::int64_t>(std::max<std::size_t>(tiles.size(), 1) * sizeof(MoeGemmTile)));
        if (!tiles.empty())
          SC_CUDA_CHECK(cudaMemcpyAsync(buf.get(), tiles.data(), tiles.size() * sizeof(MoeGemmTile),
                                        cudaMemcpyHostToDevice, st));
        (up ? ts.up : ts.down) = std::move(buf);
        (up ? ts.n_up : ts.n_down) = static_cast<int>(tiles.size());
      }
      sets.push_back(std::move(ts));
    }
    SC_CUDA_CHECK(cudaStreamSynchronize(st));
  }

  // The candidate implementations of the expert GEMMs: cuBLASLt per expert (when it
  // took every matmul) and the grouped kernel with rows per tile from the first size
  // (of 8, 16, 32, 64, 128) that holds the largest expert segment in one tile down to
  // 8. The grouped kernel is the wgmma one where it runs (sm_90a builds on Hopper) and
  // mma.sync elsewhere: on the H200, wgmma matched mma.sync at 8 rows per tile and beat
  // it at every larger size, by up to 2.8x for fp8 (bench_moe_grouped,
  // benchmarks/RESULTS.md), so timing both only doubled the autotune.
  std::vector<GemmPath> Candidates(bool cublas_ok) const {
    std::vector<GemmPath> c;
    if (cublas_ok) c.push_back(GemmPath{});
    if (!GroupedSupported()) return c;
    std::int64_t max_seg = 0;
    for (const auto& smp : samples_)
      for (std::int64_t e = 0; e < s_.L; ++e)
        max_seg = std::max(max_seg, smp->offsets[static_cast<std::size_t>(e + 1)] - smp->offsets[static_cast<std::size_t>(e)]);
    const bool wgmma = MoeGroupedWgmmaRuns();
    std::vector<int> bts;
    for (int bt : {8, 16, 32, 64, 128}) {
      if (!(wgmma ? MoeGroupedWgmmaValidBt(bt) : MoeGroupedGemmValidBt(GemmType(), bt))) break;
      bts.push_back(bt);
      if (bt >= max_seg) break;
    }
    for (auto it = bts.rbegin(); it != bts.rend(); ++it) c.push_back(GemmPath{*it, wgmma});
    // The 4-bit types at 8 and 16 rows per tile (decode-sized experts) also time the
    // mma.sync kernel: on the H200 it streamed gpt-oss's 4-bit experts at 2.2 TB/s where
    // wgmma reached 1.7 at 8 rows per tile, and wgmma won from 32 rows up
    // (bench_moe_grouped, docs/kernels.md).
    if (wgmma && IsW4(s_.dtype))
      for (auto it = bts.rbegin(); it != bts.rend(); ++it)
        if (*it <= 16) c.push_back(GemmPath{*it, false});
    return c;
  }

  // Autotune, the way engines pick a MoE tactic: time each candidate on this case
  // (every sample, weights rotated over the copies as when timed), keep the fastest.
  // Each grouped kernel's tile sizes are timed from the largest down and its sweep stops
  // at the first one more than 3% slower than its best tile size before it: a smaller tile only
  // re-reads each expert's weights more often, so past the turn it only gets slower,
  // and the small tiles of a large case were the autotune's most expensive timings.
  void Autotune(const std::vector<GemmPath>& candidates, cudaStream_t st) {
    if (candidates.size() == 1) {
      UsePath(candidates[0], st);
      return;
    }
    const auto call = [this](cudaStream_t stream, int it) {
      Launch(it % samples(), (it / samples()) % copies(), stream);
    };
    GemmPath best = candidates[0];
    double best_ms = 0;
    double best_grouped_ms[2] = {0, 0};  // per grouped kernel (mma.sync, wgmma)
    bool past_turn[2] = {false, false};
    int calls = 0;
    for (const GemmPath& path : candidates) {
      if (path.bt > 0 && past_turn[path.wgmma]) continue;
      UsePath(path, st);
      if (calls == 0) {  // every sample, then more weight copies up to >= 0.5 ms, at most one rotation
        const double probe = gemm::TimeCallsMs(call, samples(), st) * samples();  // ms for all samples
        calls = samples() * std::clamp(static_cast<int>(std::ceil(0.5 / std::max(probe, 1e-4))), 1, copies());
      }
      const double ms = gemm::TimeCallsMs(call, calls, st);
      if (&path == &candidates[0] || ms < best_ms) {
        best_ms = ms;
        best = path;
      }
      if (path.bt > 0) {
        double& kernel_best = best_grouped_ms[path.wgmma];
        if (kernel_best > 0 && ms > 1.03 * kernel_best) past_turn[path.wgmma] = true;  // 3%: past the turn
        if (kernel_best == 0 || ms < kernel_best) kernel_best = ms;
      }
    }
    UsePath(best, st);
  }

  // The expert GEMMs' path; relu2 experts add ",nongated" (the marker the estimator's
  // moe reader, as AIC's tables, reads for a slice of non-gated experts).
  std::string KernelSource() const {
    const std::string act = s_.gated ? "" : ",nongated";
    if (path_.bt == 0) return kMoeCublasLtSource + act;
    return std::string(path_.wgmma ? kMoeWgmmaSourcePrefix : kMoeGroupedSourcePrefix) + std::to_string(path_.bt) +
           act;
  }

  void AllocateCopies(cudaStream_t st) {
    copies_ = touched_ > 0 ? CopiesForColdL2(TouchedBytes()) : 1;
    for (int c = 1; c < copies_; ++c) {
      b_.w13.push_back(Alloc(static_cast<std::int64_t>(b_.w13[0].bytes())));
      b_.w2.push_back(Alloc(static_cast<std::int64_t>(b_.w2[0].bytes())));
      SC_CUDA_CHECK(
          cudaMemcpyAsync(b_.w13.back().get(), b_.w13[0].get(), b_.w13[0].bytes(), cudaMemcpyDeviceToDevice, st));
      SC_CUDA_CHECK(
          cudaMemcpyAsync(b_.w2.back().get(), b_.w2[0].get(), b_.w2[0].bytes(), cudaMemcpyDeviceToDevice, st));
    }
    SC_CUDA_CHECK(cudaStreamSynchronize(st));
  }

 private:
  struct TileSet {
    DeviceBuffer up, down;
    int n_up = 0, n_down = 0;
  };

  void LaunchGrouped(const MoeGroupedGemmArgs& g, cudaStream_t st) const {
    if (path_.wgmma)
      LaunchMoeGroupedGemmWgmma(g, path_.bt, st);
    else
      LaunchMoeGroupedGemm(g, path_.bt, st);
  }

  MoeGroupedGemmArgs GroupedArgs(bool up, int copy, const TileSet& ts) const {
    const Shape& s = s_;
    MoeGroupedGemmArgs g;
    g.type = GemmType();
    g.a = up ? GemmInUp(0) : GemmInDown(0);
    g.w = up ? W13(copy, 0) : W2(copy, 0);
    g.d = up ? b_.gu.get() : b_.down.get();
    g.n = up ? s.U : s.H;
    g.k = up ? s.H : s.I;
    g.tiles = (up ? ts.up : ts.down).as<MoeGemmTile>();
    g.num_tiles = up ? ts.n_up : ts.n_down;
    if (s.dtype == Dtype::kFp8) {
      g.a_scale = (up ? b_.x_scale : b_.h_scale).as<float>();
      g.w_scale = (up ? b_.w13_scale : b_.w2_scale).as<float>();
    } else if (s.dtype == Dtype::kFp8Block) {
      g.a_scale = (up ? b_.perm_scale : b_.h_scale).as<float>();
      g.w_scale = (up ? b_.w13_scale : b_.w2_scale).as<float>();
      g.w_scale_ld = up ? s.kbp13 : s.kbp2;
    }
    return g;
  }

  const void* W13(int copy, std::int64_t w) const {
    return b_.w13[static_cast<std::size_t>(copy)].as<char>() + w * s_.W13Stride();
  }
  const void* W2(int copy, std::int64_t w) const {
    return b_.w2[static_cast<std::size_t>(copy)].as<char>() + w * s_.W2Stride();
  }
  const void* GemmInUp(std::int64_t off) const {
    const DeviceBuffer& in = s_.dtype == Dtype::kFp8Block ? b_.permq : b_.perm;
    return in.as<char>() + off * s_.H * s_.esz;
  }
  const void* GemmInDown(std::int64_t off) const {
    const DeviceBuffer& in = IsFp8(s_.dtype) ? b_.hq : b_.h;
    return in.as<char>() + off * s_.I * s_.esz;
  }

  void PrepareWeights(cudaStream_t st) {
    const Shape& s = s_;
    const std::int64_t n = std::max<std::int64_t>(touched_, 1);
    b_.w13.push_back(Alloc(n * s.W13Stride()));
    b_.w2.push_back(Alloc(n * s.W2Stride()));
    if (IsW4(s.dtype)) {
      b_.w13_plain = Alloc(n * s.W13Stride());
      b_.w2_plain = Alloc(n * s.W2Stride());
    }
    if (IsFp8(s.dtype)) {
      b_.w13_scale = Alloc(n * s.S13() * 4);
      b_.w2_scale = Alloc(n * s.S2() * 4);
      SC_CUDA_CHECK(cudaMemsetAsync(b_.w13_scale.get(), 0, b_.w13_scale.bytes(), st));
      SC_CUDA_CHECK(cudaMemsetAsync(b_.w2_scale.get(), 0, b_.w2_scale.bytes(), st));
    }
    DeviceBuffer staging = s.dtype == Dtype::kBf16 ? DeviceBuffer() : Alloc(std::max(s.W13Elems(), s.W2Elems()) * 2);
    DeviceBuffer state = Alloc(8);
    SC_CUDA_CHECK(cudaMemsetAsync(state.get(), 0, state.bytes(), st));
    const float s13 = 1.0f / std::sqrt(static_cast<float>(s.H)), s2 = 1.0f / std::sqrt(static_cast<float>(s.I));
    for (std::int64_t e = 0; e < s.L; ++e) {
      const std::int64_t w = slot_of_expert_[static_cast<std::size_t>(e)];
      if (w < 0) continue;
      for (int which = 0; which < 2; ++which) {
        const bool up = which == 0;
        const std::int64_t rows = up ? s.U : s.H, cols = up ? s.H : s.I;
        const auto elems = static_cast<std::size_t>(rows * cols);
        void* dst = (up ? b_.w13[0].as<char>() + w * s.W13Stride() : b_.w2[0].as<char>() + w * s.W2Stride());
        void* bf = s.dtype == Dtype::kBf16 ? dst : staging.get();
        FillUniformBf16(bf, elems, SeedFor(id_, 100 + 2 * static_cast<std::uint64_t>(e) + which), up ? s13 : s2, st);
        ScaleBf16ByBlockPattern(bf, rows, cols, 128, 1 + which, st);
        if (s.dtype == Dtype::kFp8) {
          float* scale = (up ? b_.w13_scale.as<float>() : b_.w2_scale.as<float>()) + w * 4;
          QuantFp8TensorAmax(bf, elems, state.as<unsigned>(), scale, st);
          QuantFp8TensorApply(bf, elems, scale, dst, st);
        } else if (s.dtype == Dtype::kFp8Block) {
          float* scale = up ? b_.w13_scale.as<float>() + w * s.S13() : b_.w2_scale.as<float>() + w * s.S2();
          QuantFp8Block128x128(bf, rows, cols, up ? s.kbp13 : s.kbp2, dst, scale, st);
        } else if (IsW4(s.dtype)) {
          // The checkpoint's layout first, then the load-time repack into the kernel's.
          const MoeW4Layout layout = MoeW4LayoutOf(GemmType(), rows, cols);
          char* plain = (up ? b_.w13_plain.as<char>() + w * s.W13Stride() : b_.w2_plain.as<char>() + w * s.W2Stride());
          LaunchMoeW4Quantize(GemmType(), bf, layout, plain, st);
          LaunchMoeW4Tile(plain, layout, dst, st);
        }
        if (s.dtype != Dtype::kBf16) SC_CUDA_CHECK(cudaStreamSynchronize(st));  // staging is reused
      }
    }
    SC_CUDA_CHECK(cudaStreamSynchronize(st));
    if (IsFp8(s.dtype)) {
      w13_scale_host_ = Read<float>(b_.w13_scale.get(), 0, n * s.S13(), st);
      w2_scale_host_ = Read<float>(b_.w2_scale.get(), 0, n * s.S2(), st);
    }
  }

  std::optional<CaseResult> PickAlgo(const LtMatmul& mm, const void* a, const void* b, void* d,
                                     cublasLtMatmulAlgo_t& out, const std::string& where, cudaStream_t st) {
    const DeviceContext& dc = Context();
    constexpr int kWant = 4;
    cublasLtMatmulHeuristicResult_t heur[kWant] = {};
    int returned = 0;
    const cublasStatus_t hs =
        cublasLtMatmulAlgoGetHeuristic(dc.lt, mm.desc, mm.a, mm.b, mm.d, mm.d, mm.pref, kWant, heur, &returned);
    if (hs != CUBLAS_STATUS_SUCCESS || returned == 0)
      return NotSupported("NoCublasLtAlgorithm", "cublasLtMatmulAlgoGetHeuristic returned " + gemm::StatusName(hs) +
                                                     " with " + std::to_string(returned) + " algorithms for " + where);
    std::string rejected;
    bool all_not_supported = true;
    for (int i = 0; i < returned; ++i) {
      if (heur[i].state != CUBLAS_STATUS_SUCCESS) continue;
      const cublasStatus_t ms = Matmul(mm, heur[i].algo, a, b, d, st);
      SC_CUDA_CHECK(cudaStreamSynchronize(st));
      SC_CUDA_CHECK(cudaGetLastError());
      if (ms == CUBLAS_STATUS_SUCCESS) {
        out = heur[i].algo;
        return std::nullopt;
      }
      rejected += (rejected.empty() ? "" : ", ") + gemm::AlgoString(heur[i].algo) + ": " + gemm::StatusName(ms);
      all_not_supported = all_not_supported && ms == CUBLAS_STATUS_NOT_SUPPORTED;
    }
    const std::string msg = "every heuristic algorithm failed in cublasLtMatmul for " + where + ": " + rejected;
    if (all_not_supported) return NotSupported("CublasLtRejected", msg);
    return CaseResult::Failure(collect::Disposition::kFailed, collect::FailureClass::kFrameworkBug, "CublasLtFailed",
                               msg);
  }

  // Row `row` of touched expert `w`'s W13 (up) or W2, dequantized from its bytes into `out`.
  void DequantWeightRow(bool up, std::int64_t w, std::int64_t row, const std::uint8_t* bytes,
                        std::vector<double>& out) const {
    const Shape& s = s_;
    const std::int64_t cols = up ? s.H : s.I;
    out.resize(static_cast<std::size_t>(cols));
    if (s.dtype == Dtype::kBf16) {
      for (std::int64_t l = 0; l < cols; ++l) {
        std::uint16_t v = 0;
        std::memcpy(&v, bytes + 2 * l, 2);
        out[static_cast<std::size_t>(l)] = Bf16ToF32(v);
      }
      return;
    }
    if (IsW4(s.dtype)) {
      // Checkpoint layout: kp / 2 code bytes (even k in the low nibble), then the scales.
      const MoeW4Layout layout = MoeW4LayoutOf(GemmType(), up ? s.U : s.H, cols);
      const std::uint8_t* scales = bytes + layout.kp / 2;
      for (std::int64_t l = 0; l < cols; ++l) {
        const unsigned code = (bytes[l / 2] >> (4 * (l & 1))) & 15u;
        double v, scale;
        if (s.dtype == Dtype::kW4Mxfp4) {
          static constexpr double kE2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
          v = (code & 8u ? -1.0 : 1.0) * kE2m1[code & 7u];
          scale = std::ldexp(1.0, static_cast<int>(scales[l / 32]) - 127);
        } else {
          v = static_cast<double>(static_cast<int>(code) - 8);
          std::uint16_t b = 0;
          std::memcpy(&b, scales + 2 * (l / 32), 2);
          scale = Bf16ToF32(b);
        }
        out[static_cast<std::size_t>(l)] = v * scale;
      }
      return;
    }
    const std::vector<float>& sc = up ? w13_scale_host_ : w2_scale_host_;
    for (std::int64_t l = 0; l < cols; ++l) {
      double scale;
      if (s.dtype == Dtype::kFp8)
        scale = sc[static_cast<std::size_t>(w * 4)];
      else
        scale =
            sc[static_cast<std::size_t>(w * (up ? s.S13() : s.S2()) + (row / 128) * (up ? s.kbp13 : s.kbp2) + l / 128)];
      out[static_cast<std::size_t>(l)] = static_cast<double>(E4m3ToFloat(bytes[l])) * scale;
    }
  }

  std::int64_t WeightRowOffset(bool up, std::int64_t w, std::int64_t row) const {
    return w * (up ? s_.W13Stride() : s_.W2Stride()) + row * s_.RowBytes(up);
  }

  using RowKey = std::tuple<bool, std::int64_t, std::int64_t>;  // (up, touched expert, row)
  // Weight rows as the device holds them (bf16 or e4m3 bytes); the check dequantizes a
  // row when it uses it. Thousands of rows kept as doubles (about 200 MB for a
  // DeepSeek-V3 sample) cost more than the sums over them.
  struct WeightRowBytes {
    std::vector<std::uint8_t> bytes;
    std::map<RowKey, std::size_t> offset;  // key -> first byte of the row in `bytes`
  };

  // Adds the rows `keys` (those not held yet) to `out` in one gather and one copy to the
  // host per matrix (one copy per row made this the slowest part of a case).
  void FetchWeightRows(const std::set<RowKey>& keys, WeightRowBytes& out, cudaStream_t st) const {
    for (int up = 0; up < 2; ++up) {
      std::vector<RowKey> part;
      std::vector<std::int64_t> offs;
      for (const auto& key : keys)
        if (std::get<0>(key) == (up == 1) && !out.offset.count(key)) {
          part.push_back(key);
          offs.push_back(WeightRowOffset(up == 1, std::get<1>(key), std::get<2>(key)));
        }
      if (part.empty()) continue;
      const std::int64_t row_bytes = s_.RowBytes(up == 1), n = static_cast<std::int64_t>(part.size());
      DeviceBuffer offs_dev = Alloc(n * 8), rows_dev = Alloc(n * row_bytes);
      SC_CUDA_CHECK(cudaMemcpyAsync(offs_dev.get(), offs.data(), offs.size() * 8, cudaMemcpyHostToDevice, st));
      // The 4-bit types read the checkpoint layout: the kernel's tiled copy is what the
      // GEMM reads, so a wrong repack shows as a wrong GEMM output.
      const DeviceBuffer& src = IsW4(s_.dtype) ? (up ? b_.w13_plain : b_.w2_plain) : (up ? b_.w13[0] : b_.w2[0]);
      LaunchGatherRows(src.get(), offs_dev.as<std::int64_t>(), n, row_bytes, rows_dev.get(), st);
      const auto bytes = Read<std::uint8_t>(rows_dev.get(), 0, n * row_bytes, st);
      const std::size_t base = out.bytes.size();
      out.bytes.insert(out.bytes.end(), bytes.begin(), bytes.end());
      for (std::size_t i = 0; i < part.size(); ++i)
        out.offset.emplace(part[i], base + i * static_cast<std::size_t>(row_bytes));
    }
  }

  std::optional<CaseResult> CheckSample(int sample, const MoeRunOptions& opt, MoeRunReport& rep, cudaStream_t st);

  Shape s_;
  std::string id_;
  std::vector<std::unique_ptr<Sample>> samples_;
  std::vector<std::int64_t> slot_of_expert_;  // local expert -> weight slot, -1 when untouched
  std::int64_t touched_ = 0;
  int copies_ = 1;
  GemmPath path_;               // the expert GEMMs' implementation
  std::map<int, std::vector<TileSet>> tiles_;  // rows per tile -> per sample

  const std::vector<TileSet>& Tiles() const { return tiles_.at(path_.bt); }
  Buffers b_;
  std::vector<float> w13_scale_host_, w2_scale_host_;
};

double Silu(double g) {
  return g / (1.0 + std::exp(-g));
}

std::optional<CaseResult> MoeCase::Check(const MoeRunOptions& opt, MoeRunReport& rep, cudaStream_t st) {
  for (int i = 0; i < s_.samples; ++i)
    if (auto bad = CheckSample(i, opt, rep, st)) return bad;
  return std::nullopt;
}

std::optional<CaseResult> MoeCase::CheckSample(int sample, const MoeRunOptions& opt, MoeRunReport& rep,
                                               cudaStream_t st) {
  const Shape& s = s_;
  const Sample& smp = *samples_[static_cast<std::size_t>(sample)];
  const auto& r = smp.routing;
  const std::string tag = "sample " + std::to_string(sample) + ": ";
  const std::int64_t kg_h = s.H / 128, kg_i = s.I / 128;

  // Poison everything the call writes, run it once.
  // h_scale and x_scale included: the down GEMM reads fp8_block's SiLU·up scales of rows
  // the check does not sample, so one the quantizer failed to write must show as NaN.
  for (DeviceBuffer* buf :
       {&b_.out, &b_.perm, &b_.permq, &b_.perm_scale, &b_.gu, &b_.h, &b_.hq, &b_.down, &b_.x_scale, &b_.h_scale})
    if (buf->get()) FillPoison(buf->get(), buf->bytes(), st);
  Launch(sample, 0, st);
  SC_CUDA_CHECK(cudaStreamSynchronize(st));

  // 1. The permutation reproduces the routing's counts.
  const auto counts = Read<int>(b_.counts.get(), 0, s.L, st);
  const auto offsets = Read<int>(b_.offsets.get(), 0, s.L + 1, st);
  for (std::int64_t e = 0; e <= s.L; ++e) {
    const auto ue = static_cast<std::size_t>(e);
    if (e < s.L && counts[ue] != smp.counts[ue])
      return Incorrect("moe", tag + "the device permutation counted " + std::to_string(counts[ue]) +
                                  " tokens for local expert " + std::to_string(e) +
                                  ", the routing's tokens_per_expert " + std::to_string(smp.counts[ue]));
    if (offsets[ue] != smp.offsets[ue])
      return Incorrect("moe", tag + "device segment offset " + std::to_string(offsets[ue]) + " of local expert " +
                                  std::to_string(e) + ", expected " + std::to_string(smp.offsets[ue]));
  }

  // 2. Whole output written and finite (it was poisoned with NaN).
  auto* count = reinterpret_cast<unsigned long long*>(b_.scratch.as<char>() + 64);
  CountNonFiniteBf16(b_.out.get(), static_cast<std::size_t>(s.T * s.H), count, st);
  const auto bad_out = Read<unsigned long long>(count, 0, 1, st)[0];
  if (bad_out)
    return Incorrect("moe", tag + std::to_string(bad_out) + " of " + std::to_string(s.T * s.H) +
                                " outputs are NaN/inf (poisoned first: unwritten or non-finite)");

  // Scales of the per-tensor fp8 dtype: exactly max(amax / 448, min) of what was quantized.
  float x_scale = 0, h_scale = 0;
  if (s.dtype == Dtype::kFp8) {
    x_scale = Read<float>(b_.x_scale.get(), 0, 1, st)[0];
    AmaxBf16Reference(b_.x.get(), static_cast<std::size_t>(s.T * s.H), b_.scratch.as<float>(), st);
    const float want_x = std::max(Read<float>(b_.scratch.get(), 0, 1, st)[0] / kFp8E4m3Max, kFp8MinScale);
    if (!(x_scale == want_x))
      return Incorrect("moe",
                       tag + "dynamic activation scale " + FormatG6(x_scale) + " != max(amax/448, min) = " + FormatG6(want_x));
    if (smp.rows > 0) {
      h_scale = Read<float>(b_.h_scale.get(), 0, 1, st)[0];
      AmaxBf16Reference(b_.h.get(), static_cast<std::size_t>(smp.rows * s.I), b_.scratch.as<float>(), st);
      const float want_h = std::max(Read<float>(b_.scratch.get(), 0, 1, st)[0] / kFp8E4m3Max, kFp8MinScale);
      if (!(h_scale == want_h))
        return Incorrect(
            "moe", tag + "dynamic scale of SiLU(gate)·up " + FormatG6(h_scale) + " != max(amax/448, min) = " + FormatG6(want_h));
    }
  }

  // Sampled tokens: some with a local expert, some without.
  std::vector<std::int64_t> with, without;
  for (std::int64_t t = 0; t < s.T; ++t) {
    bool local = false;
    for (std::int64_t j = 0; j < s.K; ++j) local = local || r.expert_ids[static_cast<std::size_t>(t * s.K + j)] < s.L;
    (local ? with : without).push_back(t);
  }
  std::vector<std::int64_t> tokens;
  for (auto idx :
       gemm::SampleIndices(static_cast<std::int64_t>(with.size()), kCheckTokensWith, SeedFor(id_, 5 + sample)))
    tokens.push_back(with[static_cast<std::size_t>(idx)]);
  for (auto idx :
       gemm::SampleIndices(static_cast<std::int64_t>(without.size()), kCheckTokensWithout, SeedFor(id_, 15 + sample)))
    tokens.push_back(without[static_cast<std::size_t>(idx)]);
  const auto cols_i = gemm::SampleIndices(s.I, kCheckCols, SeedFor(id_, 25 + sample));
  const auto cols_h = gemm::SampleIndices(s.H, kCheckCols, SeedFor(id_, 35 + sample));

  // Accumulation error allowed per unit of Σ|a·b|: 2^-14 for bf16 (as the gemm op).
  // fp8 types: 2^-9. The gemm op's 2^-10 held for all its 101,556 cases, but the
  // per-expert GEMMs here (small row counts, fast accumulation as engines run per-tensor
  // fp8) twice exceeded it on the H200 by 2-3% in about 9,400 cases (a down GEMM at
  // k = 14,336 on mma.sync before its per-128-k promotion, and one at k = 1,440 on
  // cuBLASLt: 1.1e-3·Σ|a·b| after the bf16 output rounding). The GPU tests prove the
  // check still catches a 10% wrong output.
  // The 4-bit types: mxfp4 weights (2 significant bits times a power of 2) are exact in
  // bf16, so bf16's bound holds; int4's code · scale is rounded to bf16 in the kernel
  // (as engines dequantize), half a bf16 step, 2^-9 relative per product.
  const double eps =
      s.dtype == Dtype::kBf16 || s.dtype == Dtype::kW4Mxfp4 ? std::ldexp(1.0, -14) : std::ldexp(1.0, -9);
  RefCheck routing_check, gather_check, quant_check, gu_check, h_check, down_check, combine_check, out_check;
  // Every weight row the sampled tokens' local picks need, read at once; a pick the
  // device routed elsewhere (caught by the routing check) reads its rows one by one.
  std::set<RowKey> wanted;
  for (std::int64_t t : tokens)
    for (std::int64_t j = 0; j < s.K; ++j) {
      const std::int64_t e = r.expert_ids[static_cast<std::size_t>(t * s.K + j)];
      if (e < 0 || e >= s.L) continue;
      const std::int64_t w = slot_of_expert_[static_cast<std::size_t>(e)];
      for (std::int64_t c : cols_i) {
        wanted.emplace(true, w, c);
        if (s.gated) wanted.emplace(true, w, c + s.I);  // its up row (relu2 experts have no gate rows)
      }
      for (std::int64_t c : cols_h) wanted.emplace(false, w, c);
    }
  WeightRowBytes w_rows;
  FetchWeightRows(wanted, w_rows, st);
  std::vector<double> w_row;  // the weight row in use, dequantized; valid until the next weight_row call
  auto weight_row = [&](bool up, std::int64_t w, std::int64_t row) -> const std::vector<double>& {
    const RowKey key{up, w, row};
    auto it = w_rows.offset.find(key);
    if (it == w_rows.offset.end()) {
      FetchWeightRows({key}, w_rows, st);
      it = w_rows.offset.find(key);
    }
    DequantWeightRow(up, w, row, w_rows.bytes.data() + it->second, w_row);
    return w_row;
  };

  for (std::int64_t t : tokens) {
    const auto ids = Read<std::int32_t>(b_.ids.get(), t * s.K, s.K, st);
    const auto topw = Read<float>(b_.topw.get(), t * s.K, s.K, st);
    const auto slots = Read<int>(b_.slot_of.get(), t * s.K, s.K, st);
    // 3. Router: the top-k of the bf16 logits in double (descending, lower id first),
    // softmax over them; the routing's expert_ids must be the same set.
    std::vector<std::pair<double, std::int64_t>> lg;
    for (std::int64_t e = 0; e < s.E; ++e)
      lg.emplace_back(Bf16ToF32(F32ToBf16(r.logits[static_cast<std::size_t>(t * s.E + e)])), e);
    std::partial_sort(lg.begin(), lg.begin() + s.K, lg.end(), [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    std::set<std::int64_t> ref_set, routing_set;
    double z = 0;
    for (std::int64_t j = 0; j < s.K; ++j) {
      z += std::exp(lg[static_cast<std::size_t>(j)].first - lg[0].first);
      ref_set.insert(lg[static_cast<std::size_t>(j)].second);
      routing_set.insert(r.expert_ids[static_cast<std::size_t>(t * s.K + j)]);
    }
    if (ref_set != routing_set)
      return Incorrect("moe", tag + "token " + std::to_string(t) +
                                  ": the top-k of the routing's logits differs from its expert_ids (routing contract)");
    std::vector<double> w_ref(static_cast<std::size_t>(s.K));
    for (std::int64_t j = 0; j < s.K; ++j) {
      const auto uj = static_cast<std::size_t>(j);
      w_ref[uj] = std::exp(lg[uj].first - lg[0].first) / z;
      const auto where = [&] { return "token " + std::to_string(t) + " pick " + std::to_string(j); };
      routing_check.Add(ids[uj], static_cast<double>(lg[uj].second), 0.5, where);
      routing_check.Add(topw[uj], w_ref[uj], 1e-5, where);
    }

    // 4. Per local pick: gather, quantization, gate/up, SiLU·up, down.
    std::vector<double> out_ref(cols_h.size(), 0.0);
    std::vector<double> out_tol(cols_h.size(), 1e-30);
    std::vector<double> comb_ref(static_cast<std::size_t>(s.H), 0.0), comb_abs(static_cast<std::size_t>(s.H), 0.0);
    const auto x_row = Read<std::uint16_t>(b_.x.get(), t * s.H, s.H, st);
    for (std::int64_t j = 0; j < s.K; ++j) {
      const auto uj = static_cast<std::size_t>(j);
      const std::int64_t e = ids[uj];
      if (e < 0 || e >= s.L) continue;
      const std::int64_t slot = slots[uj];
      const std::int64_t off = smp.offsets[static_cast<std::size_t>(e)];
      const std::int64_t seg = smp.offsets[static_cast<std::size_t>(e + 1)] - off;
      const std::string at =
          "token " + std::to_string(t) + " expert " + std::to_string(e) + " slot " + std::to_string(slot);
      if (slot < off || slot >= off + smp.counts[static_cast<std::size_t>(e)] ||
          Read<int>(b_.row_token.get(), slot, 1, st)[0] != t)
        return Incorrect("moe", tag + at + ": the slot is outside the expert's segment [" + std::to_string(off) + ", " +
                                    std::to_string(off + smp.counts[static_cast<std::size_t>(e)]) +
                                    ") or its row_token is not the token");
      const std::int64_t w = slot_of_expert_[static_cast<std::size_t>(e)];
      const std::int64_t i = slot - off;
      // a: the gate/up GEMM's input row as it saw it, dequantized.
      std::vector<double> a(static_cast<std::size_t>(s.H));
      if (s.dtype == Dtype::kFp8) {
        const auto pr = Read<std::uint8_t>(b_.perm.get(), slot * s.H, s.H, st);
        const auto xq = Read<std::uint8_t>(b_.xq.get(), t * s.H, s.H, st);
        for (std::int64_t l = 0; l < s.H; ++l)
          gather_check.Add(pr[static_cast<std::size_t>(l)], xq[static_cast<std::size_t>(l)], 0.5,
                           [&] { return at + " col " + std::to_string(l); });
        RefCheck q = gemm::CheckTensorQuant(x_row, pr, s.H, x_scale, {t});
        if (!q.ok()) return Incorrect("moe", tag + q.Describe("quantized activations", "half an e4m3 step"));
        for (std::int64_t l = 0; l < s.H; ++l)
          a[static_cast<std::size_t>(l)] = static_cast<double>(E4m3ToFloat(pr[static_cast<std::size_t>(l)])) * x_scale;
      } else {
        const auto pr = Read<std::uint16_t>(b_.perm.get(), slot * s.H, s.H, st);
        // Compared as bit patterns with tolerance 0.5 (an exact copy), like the fp8 bytes
        // above: RefCheck::Add takes error / tolerance, so a tolerance of 0 turns an exact
        // match into 0/0 = NaN, which counts as bad and failed every correct case.
        for (std::int64_t l = 0; l < s.H; ++l)
          gather_check.Add(pr[static_cast<std::size_t>(l)], x_row[static_cast<std::size_t>(l)], 0.5,
                           [&] { return at + " col " + std::to_string(l) + " (bf16 bits)"; });
        if (!IsFp8(s.dtype)) {
          for (std::int64_t l = 0; l < s.H; ++l)
            a[static_cast<std::size_t>(l)] = Bf16ToF32(pr[static_cast<std::size_t>(l)]);
        } else {
          const auto q = Read<std::uint8_t>(b_.permq.get(), slot * s.H, s.H, st);
          const auto sc = Read<float>(b_.perm_scale.get(), kg_h * off, kg_h * seg, st);  // expert's [kg x seg] block
          RefCheck qc = gemm::CheckGroupQuant(x_row, q, s.H, sc, seg, {i});
          if (!qc.ok())
            return Incorrect("moe", tag + qc.Describe("1x128-quantized activations", "exact scale; half an e4m3 step"));
          for (std::int64_t l = 0; l < s.H; ++l)
            a[static_cast<std::size_t>(l)] = static_cast<double>(E4m3ToFloat(q[static_cast<std::size_t>(l)])) *
                                             sc[static_cast<std::size_t>((l / 128) * seg + i)];
        }
      }
      // gate/up on sampled columns.
      const auto gu_row = Read<std::uint16_t>(b_.gu.get(), slot * s.U, s.U, st);
      for (std::int64_t c : cols_i)
        for (int half = 0; half < (s.gated ? 2 : 1); ++half) {
          const std::int64_t n = c + half * s.I;
          const auto& wr = weight_row(true, w, n);
          double sum = 0, abs_sum = 0;
          for (std::int64_t l = 0; l < s.H; ++l) {
            const double p = a[static_cast<std::size_t>(l)] * wr[static_cast<std::size_t>(l)];
            sum += p;
            abs_sum += std::fabs(p);
          }
          gu_check.Add(Bf16ToF32(gu_row[static_cast<std::size_t>(n)]), sum,
                       std::ldexp(std::fabs(sum), -8) + eps * abs_sum + 1e-30,
                       [&] { return at + (half || !s.gated ? " up col " : " gate col ") + std::to_string(c); });
        }
      // SiLU(gate)·up from the device's gate/up values; b: the down GEMM's input as it saw it.
      std::vector<double> hv(static_cast<std::size_t>(s.I)), gu_mag(static_cast<std::size_t>(s.I));
      for (std::int64_t l = 0; l < s.I; ++l) {
        if (s.gated) {
          const double g = Bf16ToF32(gu_row[static_cast<std::size_t>(l)]);
          const double u = Bf16ToF32(gu_row[static_cast<std::size_t>(s.I + l)]);
          hv[static_cast<std::size_t>(l)] = Silu(g) * u;
          gu_mag[static_cast<std::size_t>(l)] = std::fabs(g * u);
        } else {  // relu2
          const double u = std::max(0.0, static_cast<double>(Bf16ToF32(gu_row[static_cast<std::size_t>(l)])));
          hv[static_cast<std::size_t>(l)] = u * u;
          gu_mag[static_cast<std::size_t>(l)] = u * u;
        }
      }
      std::vector<double> bvec(static_cast<std::size_t>(s.I));
      if (s.dtype == Dtype::kFp8Block) {
        const auto q = Read<std::uint8_t>(b_.hq.get(), slot * s.I, s.I, st);
        const auto sc = Read<float>(b_.h_scale.get(), kg_i * off, kg_i * seg, st);
        for (std::int64_t g = 0; g < kg_i; ++g) {
          double amax = 0;
          for (std::int64_t l = g * 128; l < g * 128 + 128; ++l)
            amax = std::max(amax, std::fabs(hv[static_cast<std::size_t>(l)]));
          const double want = std::max(amax / kFp8E4m3Max, static_cast<double>(kFp8MinScale));
          const double sg = sc[static_cast<std::size_t>(g * seg + i)];
          quant_check.Add(sg, want, std::ldexp(want, -16),
                          [&] { return at + " SiLU·up scale group " + std::to_string(g); });
          for (std::int64_t l = g * 128; l < g * 128 + 128; ++l) {
            const double v = std::clamp(hv[static_cast<std::size_t>(l)] / sg, -static_cast<double>(kFp8E4m3Max),
                                        static_cast<double>(kFp8E4m3Max));
            const double got = E4m3ToFloat(q[static_cast<std::size_t>(l)]);
            quant_check.Add(got, v, 0.5 * E4m3Ulp(v) * (1 + 1e-5) + std::ldexp(std::fabs(v), -16) + 1e-30,
                            [&] { return at + " SiLU·up q col " + std::to_string(l); });
            bvec[static_cast<std::size_t>(l)] = got * sg;
          }
        }
      } else {
        const auto hr = Read<std::uint16_t>(b_.h.get(), slot * s.I, s.I, st);
        for (std::int64_t l = 0; l < s.I; ++l) {
          const auto ul = static_cast<std::size_t>(l);
          h_check.Add(Bf16ToF32(hr[ul]), hv[ul],
                      std::ldexp(std::fabs(hv[ul]), -8) + std::ldexp(gu_mag[ul], -16) + 1e-30,
                      [&] { return at + " SiLU·up col " + std::to_string(l); });
          bvec[ul] = Bf16ToF32(hr[ul]);
        }
        if (s.dtype == Dtype::kFp8) {
          const auto q = Read<std::uint8_t>(b_.hq.get(), slot * s.I, s.I, st);
          RefCheck qc = gemm::CheckTensorQuant(hr, q, s.I, h_scale, {slot});
          if (!qc.ok()) return Incorrect("moe", tag + qc.Describe("quantized SiLU(gate)·up", "half an e4m3 step"));
          for (std::int64_t l = 0; l < s.I; ++l)
            bvec[static_cast<std::size_t>(l)] =
                static_cast<double>(E4m3ToFloat(q[static_cast<std::size_t>(l)])) * h_scale;
        }
      }
      // down on sampled columns, and the layer's output reference on them.
      const auto down_row = Read<std::uint16_t>(b_.down.get(), slot * s.H, s.H, st);
      for (std::size_t ci = 0; ci < cols_h.size(); ++ci) {
        const std::int64_t c = cols_h[ci];
        const auto& wr = weight_row(false, w, c);
        double sum = 0, abs_sum = 0;
        for (std::int64_t l = 0; l < s.I; ++l) {
          const double p = bvec[static_cast<std::size_t>(l)] * wr[static_cast<std::size_t>(l)];
          sum += p;
          abs_sum += std::fabs(p);
        }
        const double tol = std::ldexp(std::fabs(sum), -8) + eps * abs_sum + 1e-30;
        down_check.Add(Bf16ToF32(down_row[static_cast<std::size_t>(c)]), sum, tol,
                       [&] { return at + " down col " + std::to_string(c); });
        out_ref[ci] += w_ref[uj] * sum;
        out_tol[ci] += w_ref[uj] * tol + std::ldexp(w_ref[uj] * std::fabs(sum), -16);
      }
      for (std::int64_t c = 0; c < s.H; ++c) {
        const double d = Bf16ToF32(down_row[static_cast<std::size_t>(c)]);
        comb_ref[static_cast<std::size_t>(c)] += w_ref[uj] * d;
        comb_abs[static_cast<std::size_t>(c)] += std::fabs(w_ref[uj] * d);
      }
    }
    // 5. The output row: the weighted combine of the device's expert rows (all columns),
    // and the full layer's reference (sampled columns). Remote-only tokens: exact zeros.
    const double scale = 1 + opt.perturb_reference;
    const auto out_row = Read<std::uint16_t>(b_.out.get(), t * s.H, s.H, st);
    for (std::int64_t c = 0; c < s.H; ++c) {
      const auto uc = static_cast<std::size_t>(c);
      const double ref = comb_ref[uc] * scale;
      combine_check.Add(Bf16ToF32(out_row[uc]), ref,
                        std::ldexp(std::fabs(ref), -8) + std::ldexp(comb_abs[uc], -16) + 1e-30,
                        [&] { return "out[" + std::to_string(t) + "," + std::to_string(c) + "]"; });
    }
    for (std::size_t ci = 0; ci < cols_h.size(); ++ci) {
      const double ref = out_ref[ci] * scale;
      out_check.Add(Bf16ToF32(out_row[static_cast<std::size_t>(cols_h[ci])]), ref,
                    std::ldexp(std::fabs(ref), -8) + out_tol[ci],
                    [&] { return "out[" + std::to_string(t) + "," + std::to_string(cols_h[ci]) + "]"; });
    }
  }

  const std::string gemm_rule = "2^-8·|ref| + " + FormatG6(eps) + "·Σ|a·b|";
  const std::string out_rule = "2^-8·|ref| + Σ_j w_j·(down tolerance_j) + 2^-16·Σ_j |w_j·down_j|";
  struct Stage {
    const char* name;
    const RefCheck* check;
    std::string rule;
  };
  const std::vector<Stage> stages = {
      {"router top-k ids and weights", &routing_check, "ids exact; weights 1e-5"},
      {"gathered activations", &gather_check, "exact copy"},
      {"quantized SiLU(gate)·up (fp8_block)", &quant_check, "scale 2^-16 relative; half an e4m3 step"},
      {"gate/up GEMM outputs", &gu_check, gemm_rule},
      {"SiLU(gate)·up", &h_check, "2^-8·|ref| + 2^-16·|gate·up|"},
      {"down GEMM outputs", &down_check, gemm_rule},
      {"combine of the device's expert rows", &combine_check, "2^-8·|ref| + 2^-16·Σ|w·down|"},
      {"layer output against the reference", &out_check, out_rule}};
  std::string summary;
  for (const Stage& st_ : stages) {
    if (st_.check->checked() == 0) continue;
    const std::string line = st_.check->Describe(st_.name, st_.rule);
    summary += (summary.empty() ? "" : "\n") + line;
    if (st_.check->bad() > 0) {
      rep.check_summary = tag + summary;
      return Incorrect("moe", tag + line);
    }
  }
  if (out_check.checked() == 0 || combine_check.checked() == 0)
    return Incorrect("moe", tag + "no output element was checked");
  rep.check_summary = tag + summary;
  rep.worst_ratio = std::max(rep.worst_ratio, out_check.worst_ratio());
  return std::nullopt;
}

// Wall time of a case's phases; a case slower than kSlowCaseMs says where its time
// went on the worker's stderr (the run's collector.log), so the collection's cost
// can be attributed without a profiler.
constexpr double kSlowCaseMs = 300;
class PhaseClock {
 public:
  void Mark(const char* name) {
    const auto now = std::chrono::steady_clock::now();
    marks_.emplace_back(name, std::chrono::duration<double, std::milli>(now - last_).count());
    last_ = now;
  }
  void LogIfSlow(const std::string& id, const std::string& source) const {
    double total = 0;
    for (const auto& m : marks_) total += m.second;
    if (total < kSlowCaseMs) return;
    std::string line = "moe phases (ms, " + source + "):";
    for (const auto& m : marks_) line += " " + m.first + " " + std::to_string(static_cast<long long>(m.second));
    std::fprintf(stderr, "%s | %s\n", line.c_str(), id.c_str());
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, double>> marks_;
};

// One moe case through the phase driver; `rep` (the caller's) gets the choices and
// the check's summary as the phases make them.
class MoePhases : public collect::CasePhases {
 public:
  MoePhases(const Shape& s, const collect::Case& c, const collect::RunContext& ctx, const MoeRunOptions& opt,
            MoeRunReport& rep)
      : c_(c), ctx_(ctx), opt_(opt), rep_(rep), st_(Context().stream), mc_(s, c.id) {}

  // Routings, buffers and weights, the expert GEMMs' candidates (cuBLASLt per expert,
  // the grouped kernel's tiles) and the autotuned one.
  std::optional<CaseResult> Prepare() override {
    try {
      mc_.Route();  // host only: the routings are synthesized, no CUDA call
    } catch (const Error& e) {
      return InvalidParams("moe", std::string("routing: ") + e.what());
    }
    phases_.Mark("route");
    mc_.Prepare(st_);
    phases_.Mark("prepare");
    // cuBLASLt per expert is one candidate; a shape it rejects can still run grouped.
    const std::optional<CaseResult> cublas_bad = mc_.BuildGemms(st_);
    phases_.Mark("cublaslt");
    std::vector<GemmPath> candidates = mc_.Candidates(!cublas_bad);
    if (opt_.force_bt == 0) {
      if (cublas_bad) return *cublas_bad;
      candidates = {GemmPath{}};
    } else if (opt_.force_bt > 0) {
      const bool ok = mc_.GroupedSupported() &&
                      (opt_.force_wgmma ? MoeGroupedWgmmaRuns() && MoeGroupedWgmmaValidBt(opt_.force_bt)
                                        : MoeGroupedGemmValidBt(mc_.GemmType(), opt_.force_bt));
      if (!ok)
        return NotSupported("GroupedShape", std::string("the grouped expert GEMM (") +
                                                (opt_.force_wgmma ? "wgmma" : "mma.sync") +
                                                ") does not take this shape or device with " +
                                                std::to_string(opt_.force_bt) + " rows per tile");
      candidates = {GemmPath{opt_.force_bt, opt_.force_wgmma}};
    }
    if (candidates.empty()) return *cublas_bad;
    if (opt_.time) {
      if (!ctx_.runtime) throw Error("moe: RunContext without runtime info");
      mc_.AllocateCopies(st_);
      phases_.Mark("copies");
    }
    mc_.Autotune(candidates, st_);
    phases_.Mark("autotune");
    rep_.kernel_source = mc_.KernelSource();
    return std::nullopt;
  }

  std::optional<CaseResult> Check() override {
    if (std::optional<CaseResult> bad = mc_.Check(opt_, rep_, st_)) {
      bad->message += " (expert GEMMs: " + rep_.kernel_source + ")";
      return bad;
    }
    phases_.Mark("check");
    return std::nullopt;
  }

  void Time() override {
    table_ = collect::FindTableSpec("moe_perf");
    if (!table_) throw Error("moe: table moe_perf is not defined");
    rep_.weight_copies = mc_.copies();
    const int samples = mc_.samples(), copies = mc_.copies();
    TimeOptions topt;
    topt.copies = samples * copies;  // call i: sample i % samples on weight copy (i / samples) % copies
    topt.rotated_bytes = static_cast<double>(copies) * mc_.TouchedBytes();
    MoeCase& mc = mc_;
    const LaunchFn launch = [&mc, samples, copies](cudaStream_t stream, int it) {
      mc.Launch(it % samples, (it / samples) % copies, stream);
    };
    stats_ = TimeOnDevice(launch, ctx_.timing, topt, ctx_.measure_power);
    phases_.Mark("time");
    phases_.LogIfSlow(c_.id, rep_.kernel_source);
  }

  std::vector<collect::Params> Emit() override {
    return {collect::MakeRow(*table_, *ctx_.runtime, "moe", rep_.kernel_source, c_.params, stats_,
                             ctx_.measure_power)};
  }

 private:
  const collect::Case& c_;
  const collect::RunContext& ctx_;
  const MoeRunOptions& opt_;
  MoeRunReport& rep_;
  cudaStream_t st_;
  MoeCase mc_;
  PhaseClock phases_;
  const collect::TableSpec* table_ = nullptr;
  collect::TimingStats stats_;
};

class MoeOp : public collect::Op {
 public:
  MoeOp() {
    table_ = collect::FindTableSpec("moe_perf");
    if (!table_) throw Error("moe: table moe_perf is not defined");
  }
  std::string name() const override { return "moe"; }
  const collect::TableSpec& table() const override { return *table_; }
  std::vector<std::string> required_params() const override { return table_->KeyColumnNames(); }
  // expert_act: silu (gated, the default) or relu2 (Nemotron-H's non-gated experts);
  // not a key column: the rows say it in kernel_source (",nongated").
  std::vector<std::string> optional_params() const override { return {"expert_act"}; }
  double default_timeout_s() const override { return 300; }
  std::vector<collect::Requirement> requirements() const override { return gemm::Fp8Requirements("moe_dtype"); }
  // An upper bound: the experts a case can touch (all local ones, or fewer when the
  // tokens cannot reach them), their weight copies (at most 8, and at most 2 x L2
  // beyond one set), the fp8 staging weight, the activations and the routings.
  double MemoryBytes(const collect::Params& p) const override {
    Shape s;
    if (ParseShape(p, s)) return 0;  // Run reports the problem
    const double touched = static_cast<double>(std::min(s.L, s.T * s.K * s.samples));
    const double one = touched * s.ExpertBytes();
    double bytes = std::min(8 * one, one + kL2Bound);
    if (s.dtype != Dtype::kBf16) bytes += 2.0 * static_cast<double>(std::max(s.W13Elems(), s.W2Elems()));
    if (IsW4(s.dtype)) bytes += one;  // the checkpoint-layout copy the check reads
    const double R = static_cast<double>(MaxRowsBound(s)), T = static_cast<double>(s.T);
    const double H = static_cast<double>(s.H), I = static_cast<double>(s.I);
    bytes += T * H * (2 + 1 + 2);                        // x, xq, out
    bytes += R * (H * (2 + 1 + 2) + 2 * static_cast<double>(s.U) + 3 * I + 4);  // perm, permq, down; gu; h, hq; row_token
    bytes += R * (H + I) / 128 * 4;                      // 1x128 scales
    bytes += s.samples * T * static_cast<double>(s.E) * 2 + 12 * T * static_cast<double>(s.K);
    return bytes + 1e6;
  }
  CaseResult Run(const collect::Case& c, const collect::RunContext& ctx) override {
    return RunMoeCase(c, ctx, MoeRunOptions{}).result;
  }

 private:
  const collect::TableSpec* table_ = nullptr;
};

}  // namespace

MoeRunReport RunMoeCase(const collect::Case& c, const collect::RunContext& ctx, const MoeRunOptions& opt) {
  MoeRunReport rep;
  Shape s;
  if (auto bad = ParseShape(c.params, s)) {
    rep.result = *bad;
    return rep;
  }
  rep.kernel_source = std::string(kMoeCublasLtSource) + (s.gated ? "" : ",nongated");
  rep.samples = s.samples;
  MoePhases phases(s, c, ctx, opt, rep);
  rep.result = RunCudaPhases(phases, collect::FailureClass::kFrameworkBug, {opt.time});
  return rep;
}

std::unique_ptr<collect::Op> MakeMoeOp() {
  return std::make_unique<MoeOp>();
}

}  // namespace moe
}  // namespace servecast::cuda
