#include "backends/cuda/attention_cudnn.h"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_check.h"

namespace servecast::cuda {
namespace {

// A failed cuDNN call: the status name, cuDNN's own last message, the statement
// and where. Thrown as CudaError (execution failures poison the context).
[[noreturn]] void ThrowCudnn(cudnnStatus_t st, const char* stmt, const char* file, int line) {
  char last[1024] = {0};
  cudnnGetLastErrorString(last, sizeof last);
  std::string msg = std::string(cudnnGetErrorString(st)) + " (" + std::to_string(static_cast<int>(st)) + ") from `" +
                    stmt + "` at " + file + ":" + std::to_string(line) + (last[0] ? std::string(": ") + last : "");
  const bool sticky = st >= CUDNN_STATUS_EXECUTION_FAILED && st < 6000;
  throw CudaError(msg, sticky, st == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED);
}

}  // namespace
}  // namespace servecast::cuda

// Every cuDNN call of this file goes through this check.
#define SC_CUDNN_CHECK(stmt)                                                                              \
  do {                                                                                                    \
    cudnnStatus_t sc_st_ = (stmt);                                                                        \
    if (sc_st_ != CUDNN_STATUS_SUCCESS) ::servecast::cuda::ThrowCudnn(sc_st_, #stmt, __FILE__, __LINE__); \
  } while (0)

namespace servecast::cuda {
namespace {

cudnnHandle_t Handle() {
  static std::once_flag once;
  static cudnnHandle_t handle = nullptr;
  std::call_once(once, [] { SC_CUDNN_CHECK(cudnnCreate(&handle)); });
  return handle;
}

// One backend descriptor, destroyed with its owner.
struct Desc {
  cudnnBackendDescriptor_t d = nullptr;
  explicit Desc(cudnnBackendDescriptorType_t type) { SC_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d)); }
  ~Desc() {
    if (d) cudnnBackendDestroyDescriptor(d);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
};

enum Uid : std::int64_t {
  kUidQ = 1,
  kUidK = 2,
  kUidV = 3,
  kUidO = 4,
  kUidStats = 5,
  kUidScale = 6,
  kUidNegInf = 7,
  kUidWindow = 8,
  kUidDescaleQ = 9,  // the fp8 graph's scalars
  kUidDescaleK = 10,
  kUidDescaleV = 11,
  kUidDescaleS = 12,
  kUidScaleS = 13,
  kUidScaleO = 14,
  kUidAmaxS = 15,
  kUidAmaxO = 16,
  kUidVirtual = 100,
};

}  // namespace

struct CudnnSdpa::Impl {
  std::vector<std::unique_ptr<Desc>> keep;  // every descriptor the plan refers to
  cudnnBackendDescriptor_t plan = nullptr;
  std::vector<std::unique_ptr<Desc>> packs;
  float scale = 1.0f;
  float neg_inf = -FLT_MAX;
  float unit_scale_o = 1.0f;  // fp8 with a bf16 O: scale_o by value
  float window = 0.0f;         // the band chain's by-value FLOAT scalar (as cudnn-frontend passes it)
  std::int32_t window_i = 0;   // the shared-index chain's INT32 scalar
  bool window_chain = true;    // which of the two window graphs (BuildOne)
  bool has_window = false;
  bool fp8 = false;
  bool out_fp8 = false;
  bool virtual_stats = false;  // the softmax stats not written (SdpaFp8Options)
  std::int64_t next_uid = kUidVirtual;

  cudnnBackendDescriptor_t Make(cudnnBackendDescriptorType_t type) {
    keep.push_back(std::make_unique<Desc>(type));
    return keep.back()->d;
  }

  cudnnBackendDescriptor_t Tensor(std::int64_t uid, cudnnDataType_t type, std::vector<std::int64_t> dims,
                                  std::vector<std::int64_t> strides, bool is_virtual, bool by_value = false) {
    cudnnBackendDescriptor_t t = Make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const std::int64_t alignment = 16;
    SC_CUDNN_CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
    SC_CUDNN_CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64,
                                            static_cast<std::int64_t>(dims.size()), dims.data()));
    SC_CUDNN_CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64,
                                            static_cast<std::int64_t>(strides.size()), strides.data()));
    SC_CUDNN_CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    SC_CUDNN_CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment));
    if (is_virtual) {
      bool v = true;
      SC_CUDNN_CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v));
    }
    if (by_value) {
      bool v = true;
      SC_CUDNN_CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &v));
    }
    SC_CUDNN_CHECK(cudnnBackendFinalize(t));
    return t;
  }
  cudnnBackendDescriptor_t Virtual(cudnnDataType_t type, std::vector<std::int64_t> dims,
                                   std::vector<std::int64_t> strides) {
    return Tensor(next_uid++, type, std::move(dims), std::move(strides), true);
  }
  cudnnBackendDescriptor_t Scalar(std::int64_t uid, cudnnDataType_t type) {
    return Tensor(uid, type, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
  }
  // A one-element fp32 tensor in device memory (the fp8 graph's scales and amaxes).
  cudnnBackendDescriptor_t DeviceScalar(std::int64_t uid) {
    return Tensor(uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, false);
  }

  cudnnBackendDescriptor_t Matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    cudnnBackendDescriptor_t mm = Make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    SC_CUDNN_CHECK(cudnnBackendSetAttribute(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
    SC_CUDNN_CHECK(cudnnBackendFinalize(mm));
    cudnnBackendDescriptor_t op = Make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    SC_CUDNN_CHECK(
        cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a));
    SC_CUDNN_CHECK(
        cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b));
    SC_CUDNN_CHECK(
        cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c));
    SC_CUDNN_CHECK(
        cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm));
    SC_CUDNN_CHECK(cudnnBackendFinalize(op));
    return op;
  }

  // y = mode(x[, b][, t]); math in `prec`; GEN_INDEX takes `axis`.
  cudnnBackendDescriptor_t Pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t prec, cudnnBackendDescriptor_t x,
                                     cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y,
                                     std::int64_t axis = -1) {
    cudnnBackendDescriptor_t pw = Make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    SC_CUDNN_CHECK(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
    SC_CUDNN_CHECK(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec));
    if (axis >= 0) SC_CUDNN_CHECK(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis));
    SC_CUDNN_CHECK(cudnnBackendFinalize(pw));
    cudnnBackendDescriptor_t op = Make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    SC_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw));
    SC_CUDNN_CHECK(
        cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    if (b)
      SC_CUDNN_CHECK(
          cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b));
    if (t)
      SC_CUDNN_CHECK(
          cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t));
    SC_CUDNN_CHECK(
        cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    SC_CUDNN_CHECK(cudnnBackendFinalize(op));
    return op;
  }

  cudnnBackendDescriptor_t Reduction(cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
                                     cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t r = Make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    SC_CUDNN_CHECK(
        cudnnBackendSetAttribute(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode));
    SC_CUDNN_CHECK(cudnnBackendSetAttribute(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
    SC_CUDNN_CHECK(cudnnBackendFinalize(r));
    cudnnBackendDescriptor_t op = Make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    SC_CUDNN_CHECK(
        cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    SC_CUDNN_CHECK(
        cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    SC_CUDNN_CHECK(
        cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &r));
    SC_CUDNN_CHECK(cudnnBackendFinalize(op));
    return op;
  }
};

CudnnSdpa::~CudnnSdpa() = default;

std::unique_ptr<CudnnSdpa> CudnnSdpa::Build(const SdpaShape& s, std::string& why, bool& unsupported,
                                            const SdpaFp8Options& fp8_options) {
  if (s.dtype == SdpaDtype::kBf16) return BuildOne(s, false, why, unsupported, fp8_options);
  // fp8: a bf16 O first; the e4m3 O where cuDNN does not build that (whatever its
  // status: an unsupported output type may also come back as a bad parameter).
  std::unique_ptr<CudnnSdpa> out = BuildOne(s, false, why, unsupported, fp8_options);
  if (out) return out;
  const std::string bf16_refusal = why;
  std::string why_fp8;
  out = BuildOne(s, true, why_fp8, unsupported, fp8_options);
  if (out) {
    out->bf16_output_refusal_ = bf16_refusal;
    why.clear();
    return out;
  }
  why = "with a bf16 O: " + bf16_refusal + "; with an e4m3 O: " + why_fp8;
  return nullptr;
}

std::unique_ptr<CudnnSdpa> CudnnSdpa::BuildOne(const SdpaShape& s, bool output_fp8, std::string& why,
                                               bool& unsupported, const SdpaFp8Options& fp8_options) {
  const bool has_window = s.window > 0 && s.window < s.seq;
  std::unique_ptr<CudnnSdpa> out = BuildGraph(s, output_fp8, true, why, unsupported, fp8_options);
  if (out || !has_window) return out;
  // The band chain did not build: the window as a second select on the causal indices.
  const std::string chain_refusal = why;
  out = BuildGraph(s, output_fp8, false, why, unsupported, fp8_options);
  if (out)
    why.clear();
  else
    why = "with the window as its own index chain: " + chain_refusal + "; on the causal indices: " + why;
  return out;
}

std::unique_ptr<CudnnSdpa> CudnnSdpa::BuildGraph(const SdpaShape& s, bool output_fp8, bool window_chain,
                                                 std::string& why, bool& unsupported,
                                                 const SdpaFp8Options& fp8_options) {
  unsupported = false;
  std::unique_ptr<CudnnSdpa> out(new CudnnSdpa());
  out->impl_ = std::make_unique<Impl>();
  Impl& g = *out->impl_;
  g.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  g.window = static_cast<float>(s.window);
  g.window_i = static_cast<std::int32_t>(s.window);
  g.window_chain = window_chain;
  g.has_window = s.window > 0 && s.window < s.seq;
  g.fp8 = s.dtype == SdpaDtype::kFp8;
  g.out_fp8 = g.fp8 && output_fp8;
  out->output_fp8_ = g.out_fp8;
  const char* what = g.fp8 ? (g.out_fp8 ? "fp8 SDPA (e4m3 O)" : "fp8 SDPA (bf16 O)") : "SDPA";

  const std::int64_t B = s.batch, S = s.seq, H = s.num_heads, HK = s.num_kv_heads, D = s.head_dim;
  const std::int64_t DV = s.head_dim_v > 0 ? s.head_dim_v : D;  // V and O (MLA prefill: 128 against 192)
  try {
    const cudnnDataType_t io = g.fp8 ? CUDNN_DATA_FP8_E4M3 : CUDNN_DATA_BFLOAT16;
    const cudnnDataType_t o_type = g.out_fp8 ? CUDNN_DATA_FP8_E4M3 : CUDNN_DATA_BFLOAT16;
    // Caller tensors, logical [b, h, s, d] over "bshd" memory; Kᵀ as [b, hk, d, s].
    auto q = g.Tensor(kUidQ, io, {B, H, S, D}, {S * H * D, D, H * D, 1}, false);
    auto kt = g.Tensor(kUidK, io, {B, HK, D, S}, {S * HK * D, D, 1, HK * D}, false);
    auto v = g.Tensor(kUidV, io, {B, HK, S, DV}, {S * HK * DV, DV, HK * DV, 1}, false);
    auto o = g.Tensor(kUidO, o_type, {B, H, S, DV}, {S * H * DV, DV, H * DV, 1}, false);
    g.virtual_stats = g.fp8 && fp8_options.virtual_stats;
    auto stats = g.virtual_stats ? g.Virtual(CUDNN_DATA_FLOAT, {B, H, S, 1}, {H * S, S, 1, 1})
                                 : g.Tensor(kUidStats, CUDNN_DATA_FLOAT, {B, H, S, 1}, {H * S, S, 1, 1}, false);
    auto scale = g.Scalar(kUidScale, CUDNN_DATA_FLOAT);
    auto neg_inf = g.Scalar(kUidNegInf, CUDNN_DATA_FLOAT);

    const std::vector<std::int64_t> sd = {B, H, S, S}, ss = {H * S * S, S * S, S, 1};
    const std::vector<std::int64_t> rd = {B, H, S, 1}, rs = {H * S, S, 1, 1};
    std::vector<cudnnBackendDescriptor_t> ops;
    // y = x × the fp8 graph's device scalar `uid`, a new fp32 virtual tensor of x's shape.
    auto times = [&](cudnnBackendDescriptor_t x, std::int64_t uid, const std::vector<std::int64_t>& dims,
                     const std::vector<std::int64_t>& strides) {
      auto y = g.Virtual(CUDNN_DATA_FLOAT, dims, strides);
      ops.push_back(g.Pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, x, g.DeviceScalar(uid), nullptr, y));
      return y;
    };

    auto scores = g.Virtual(CUDNN_DATA_FLOAT, sd, ss);
    ops.push_back(g.Matmul(q, kt, scores));
    auto scaled = g.Virtual(CUDNN_DATA_FLOAT, sd, ss);
    ops.push_back(g.Pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, scores, scale, nullptr, scaled));
    if (g.fp8)  // the scores of the fp8 values, dequantized: × descale_q × descale_k
      scaled = times(times(scaled, kUidDescaleQ, sd, ss), kUidDescaleK, sd, ss);

    // Causal: keep row >= col.
    auto row = g.Virtual(CUDNN_DATA_INT32, sd, ss);
    ops.push_back(g.Pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, scaled, nullptr, nullptr, row, 2));
    auto col = g.Virtual(CUDNN_DATA_INT32, sd, ss);
    ops.push_back(g.Pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, scaled, nullptr, nullptr, col, 3));
    auto causal = g.Virtual(CUDNN_DATA_BOOLEAN, sd, ss);
    ops.push_back(g.Pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, nullptr, causal));
    auto masked = g.Virtual(CUDNN_DATA_FLOAT, sd, ss);
    ops.push_back(g.Pointwise(CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, scaled, neg_inf, causal, masked));

    // Sliding window: keep col + window > row, as a second chain on the causal
    // select's output with its own indices (FLOAT, as cudnn-frontend's pre-9.21
    // diagonal-band fallback builds it: GEN_INDEX rows and columns of the masked
    // scores, ADD the by-value FLOAT window along axis 3, CMP_GT, BINARY_SELECT). The
    // earlier graph reused the causal INT32 indices with an INT32 window and ran
    // slower than full causal attention (docs/kernels.md).
    if (g.has_window) {
      // The two forms differ in the indices compared: reach = col + window, then
      // keep reach > row_cmp with a select.
      cudnnBackendDescriptor_t reach = nullptr, row_cmp = nullptr;
      if (!g.window_chain) {  // the graph before 2026-12-01, kept as the fallback
        auto window = g.Scalar(kUidWindow, CUDNN_DATA_INT32);
        reach = g.Virtual(CUDNN_DATA_INT32, sd, ss);
        ops.push_back(g.Pointwise(CUDNN_POINTWISE_ADD, CUDNN_DATA_INT32, col, window, nullptr, reach));
        row_cmp = row;
      } else {
        auto window = g.Scalar(kUidWindow, CUDNN_DATA_FLOAT);
        row_cmp = g.Virtual(CUDNN_DATA_FLOAT, sd, ss);
        ops.push_back(g.Pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, masked, nullptr, nullptr, row_cmp, 2));
        auto col_i = g.Virtual(CUDNN_DATA_FLOAT, sd, ss);
        ops.push_back(g.Pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, masked, nullptr, nullptr, col_i, 3));
        reach = g.Virtual(CUDNN_DATA_FLOAT, sd, ss);
        ops.push_back(g.Pointwise(CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, col_i, window, nullptr, reach, 3));
      }
      auto in_window = g.Virtual(CUDNN_DATA_BOOLEAN, sd, ss);
      ops.push_back(g.Pointwise(CUDNN_POINTWISE_CMP_GT, CUDNN_DATA_BOOLEAN, reach, row_cmp, nullptr, in_window));
      auto masked_w = g.Virtual(CUDNN_DATA_FLOAT, sd, ss);
      ops.push_back(g.Pointwise(CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, masked, neg_inf, in_window, masked_w));
      masked = masked_w;
    }

    // Softmax with its statistics (max + log sum exp).
    auto row_max = g.Virtual(CUDNN_DATA_FLOAT, rd, rs);
    ops.push_back(g.Reduction(CUDNN_REDUCE_TENSOR_MAX, masked, row_max));
    auto shifted = g.Virtual(CUDNN_DATA_FLOAT, sd, ss);
    ops.push_back(g.Pointwise(CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, masked, row_max, nullptr, shifted));
    auto expd = g.Virtual(CUDNN_DATA_FLOAT, sd, ss);
    ops.push_back(g.Pointwise(CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, shifted, nullptr, nullptr, expd));
    auto row_sum = g.Virtual(CUDNN_DATA_FLOAT, rd, rs);
    ops.push_back(g.Reduction(CUDNN_REDUCE_TENSOR_ADD, expd, row_sum));
    auto log_sum = g.Virtual(CUDNN_DATA_FLOAT, rd, rs);
    ops.push_back(g.Pointwise(CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, row_sum, nullptr, nullptr, log_sum));
    ops.push_back(g.Pointwise(CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, row_max, log_sum, nullptr, stats));
    if (!g.fp8) {
      auto probs = g.Virtual(CUDNN_DATA_BFLOAT16, sd, ss);  // the second matmul takes the i/o type
      ops.push_back(g.Pointwise(CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, expd, row_sum, nullptr, probs));
      ops.push_back(g.Matmul(probs, v, o));
    } else {
      // P in fp32, its amax, then P × scale_s cast to e4m3 for the second matmul.
      auto probs = g.Virtual(CUDNN_DATA_FLOAT, sd, ss);
      ops.push_back(g.Pointwise(CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, expd, row_sum, nullptr, probs));
      ops.push_back(g.Reduction(CUDNN_REDUCE_TENSOR_AMAX, probs, g.DeviceScalar(kUidAmaxS)));
      auto probs8 = g.Virtual(CUDNN_DATA_FP8_E4M3, sd, ss);
      ops.push_back(
          g.Pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, probs, g.DeviceScalar(kUidScaleS), nullptr, probs8));
      // O' = P8·V in fp32, × descale_s × descale_v, its amax, × scale_o into O.
      const std::vector<std::int64_t> od = {B, H, S, DV}, os = {H * S * DV, S * DV, DV, 1};
      auto pv = g.Virtual(CUDNN_DATA_FLOAT, od, os);
      ops.push_back(g.Matmul(probs8, v, pv));
      auto by_v = times(times(pv, kUidDescaleS, od, os), kUidDescaleV, od, os);
      auto scale_o = g.out_fp8 ? g.DeviceScalar(kUidScaleO) : g.Scalar(kUidScaleO, CUDNN_DATA_FLOAT);
      auto amax_o = g.Reduction(CUDNN_REDUCE_TENSOR_AMAX, by_v, g.DeviceScalar(kUidAmaxO));
      auto to_o = g.Pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, by_v, scale_o, nullptr, o);
      if (fp8_options.scale_o_first) {  // SdpaFp8Options: cudnn-frontend's matmul_fp8 order
        ops.push_back(to_o);
        ops.push_back(amax_o);
      } else {
        ops.push_back(amax_o);
        ops.push_back(to_o);
      }
    }

    cudnnHandle_t handle = Handle();
    cudnnBackendDescriptor_t graph = g.Make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    SC_CUDNN_CHECK(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                            static_cast<std::int64_t>(ops.size()), ops.data()));
    SC_CUDNN_CHECK(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
    cudnnStatus_t st = cudnnBackendFinalize(graph);
    if (st != CUDNN_STATUS_SUCCESS) {
      char last[1024] = {0};
      cudnnGetLastErrorString(last, sizeof last);
      why = std::string("cuDNN rejected the ") + what + " operation graph: " + cudnnGetErrorString(st) + " " + last;
      unsupported = st >= CUDNN_STATUS_NOT_SUPPORTED && st < CUDNN_STATUS_INTERNAL_ERROR;
      return nullptr;
    }

    // Engine configurations in heuristics order; the first that finalizes wins.
    std::string tried;
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      cudnnBackendDescriptor_t heur = g.Make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
      SC_CUDNN_CHECK(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
      SC_CUDNN_CHECK(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
      st = cudnnBackendFinalize(heur);
      if (st != CUDNN_STATUS_SUCCESS) {
        tried += std::string(" heuristics mode ") + std::to_string(static_cast<int>(mode)) + ": " +
                 cudnnGetErrorString(st) + ";";
        continue;
      }
      std::int64_t count = 0;
      SC_CUDNN_CHECK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                              &count, nullptr));
      std::vector<cudnnBackendDescriptor_t> cfgs;
      for (std::int64_t i = 0; i < count; ++i) cfgs.push_back(g.Make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
      std::int64_t got = 0;
      if (count > 0)
        SC_CUDNN_CHECK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                                count, &got, cfgs.data()));
      if (got == 0) tried += std::string(" heuristics mode ") + std::to_string(static_cast<int>(mode)) + ": no engine;";
      int skip = g.fp8 ? fp8_options.skip_configs : 0;
      for (std::int64_t i = 0; i < got; ++i) {
        cudnnBackendDescriptor_t plan = g.Make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        SC_CUDNN_CHECK(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
        SC_CUDNN_CHECK(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[static_cast<std::size_t>(i)]));
        st = cudnnBackendFinalize(plan);
        if (st != CUDNN_STATUS_SUCCESS) {
          tried += std::string(" config ") + std::to_string(i) + ": " + cudnnGetErrorString(st) + ";";
          continue;
        }
        if (skip > 0) {  // SdpaFp8Options::skip_configs
          --skip;
          tried += std::string(" config ") + std::to_string(i) + ": skipped;";
          continue;
        }
        std::int64_t ws = 0, n = 0;
        SC_CUDNN_CHECK(
            cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws));
        // The engine's global index names what runs.
        std::int64_t engine_index = -1;
        cudnnBackendDescriptor_t engine = g.Make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
        if (cudnnBackendGetAttribute(cfgs[static_cast<std::size_t>(i)], CUDNN_ATTR_ENGINECFG_ENGINE,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine) == CUDNN_STATUS_SUCCESS)
          cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &engine_index);
        g.plan = plan;
        out->workspace_bytes_ = static_cast<std::size_t>(ws);
        out->kernel_source_ = std::string(g.fp8 ? "cudnn_sdpa_fp8" : "cudnn_sdpa") +
                              ":engine=" + std::to_string(engine_index) +
                              (g.fp8 ? (g.out_fp8 ? ",o=fp8" : ",o=bf16") : "") +
                              (g.has_window ? (g.window_chain ? ",window=band_chain" : ",window=causal_index") : "");
        return out;
      }
    }
    char last[1024] = {0};
    cudnnGetLastErrorString(last, sizeof last);
    why = std::string("no cuDNN engine configuration finalizes for this ") + what + " graph:" + tried +
          (last[0] ? std::string(" ") + last : "");
    unsupported = true;
    return nullptr;
  } catch (const CudaError& e) {
    why = std::string("building the cuDNN ") + what + " graph failed: " + e.what();
    return nullptr;
  }
}

int CudnnSdpa::Bind(const SdpaBuffers& b, void* workspace) {
  Impl& g = *impl_;
  std::vector<std::int64_t> uids = {kUidQ, kUidK, kUidV, kUidO, kUidScale, kUidNegInf};
  std::vector<void*> ptrs = {b.q, b.k, b.v, b.o, &g.scale, &g.neg_inf};
  if (!g.virtual_stats) {
    uids.push_back(kUidStats);
    ptrs.push_back(b.stats);
  }
  if (g.has_window) {
    uids.push_back(kUidWindow);
    ptrs.push_back(g.window_chain ? static_cast<void*>(&g.window) : static_cast<void*>(&g.window_i));
  }
  if (g.fp8) {
    const SdpaFp8Scalars& f = b.fp8;
    for (const void* p :
         {static_cast<const void*>(f.descale_q), static_cast<const void*>(f.descale_k),
          static_cast<const void*>(f.descale_v), static_cast<const void*>(f.descale_s),
          static_cast<const void*>(f.scale_s), static_cast<const void*>(f.amax_s), static_cast<const void*>(f.amax_o)})
      if (!p || reinterpret_cast<std::uintptr_t>(p) % 16 != 0)
        throw CudaError("CudnnSdpa::Bind: an fp8 scalar pointer is null or not 16-byte aligned", false, false);
    if (g.out_fp8 && (!f.scale_o || reinterpret_cast<std::uintptr_t>(f.scale_o) % 16 != 0))
      throw CudaError("CudnnSdpa::Bind: scale_o (e4m3 O) is null or not 16-byte aligned", false, false);
    const std::vector<std::pair<std::int64_t, const void*>> more = {
        {kUidDescaleQ, f.descale_q}, {kUidDescaleK, f.descale_k},
        {kUidDescaleV, f.descale_v}, {kUidDescaleS, f.descale_s},
        {kUidScaleS, f.scale_s},     {kUidAmaxS, f.amax_s},
        {kUidAmaxO, f.amax_o},       {kUidScaleO, g.out_fp8 ? static_cast<const void*>(f.scale_o) : &g.unit_scale_o}};
    for (const auto& [uid, ptr] : more) {
      uids.push_back(uid);
      ptrs.push_back(const_cast<void*>(ptr));  // cuDNN's variant pack takes void*; it only reads inputs
    }
  }
  auto pack = std::make_unique<Desc>(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  SC_CUDNN_CHECK(cudnnBackendSetAttribute(pack->d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                                          static_cast<std::int64_t>(uids.size()), uids.data()));
  SC_CUDNN_CHECK(cudnnBackendSetAttribute(pack->d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                          static_cast<std::int64_t>(ptrs.size()), ptrs.data()));
  SC_CUDNN_CHECK(
      cudnnBackendSetAttribute(pack->d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
  SC_CUDNN_CHECK(cudnnBackendFinalize(pack->d));
  g.packs.push_back(std::move(pack));
  return static_cast<int>(g.packs.size()) - 1;
}

void CudnnSdpa::Run(int index, cudaStream_t stream) const {
  cudnnHandle_t handle = Handle();
  SC_CUDNN_CHECK(cudnnSetStream(handle, stream));
  SC_CUDNN_CHECK(cudnnBackendExecute(handle, impl_->plan, impl_->packs.at(static_cast<std::size_t>(index))->d));
}

std::string CudnnVersionString() {
  const std::size_t v = cudnnGetVersion();
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." + std::to_string(v % 100);
}

}  // namespace servecast::cuda
