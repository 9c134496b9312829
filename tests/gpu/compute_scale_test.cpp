// The cuda `compute_scale` op and the fp8 quantization kernels behind it, on a real GPU.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/fill.h"
#include "backends/cuda/gemm_internal.h"
#include "backends/cuda/gemm_ops.h"
#include "backends/cuda/quantize.h"
#include "collect/case.h"
#include "collect/registry.h"
#include "gpu_test_util.h"

namespace servecast::cuda::gemm {
namespace {

using collect::Disposition;

collect::Case ScaleCase(std::int64_t m, std::int64_t k) {
  collect::Case c;
  c.op = "compute_scale";
  c.params = collect::Params{{"quant_dtype", std::string("fp8")}, {"m", m}, {"k", k}};
  c.id = collect::MakeCaseId(c.op, c.params);
  return c;
}

using testing::QuickContext;
using testing::Runtime;

class ComputeScaleMatchesReference : public ::testing::TestWithParam<std::pair<std::int64_t, std::int64_t>> {};

TEST_P(ComputeScaleMatchesReference, DynamicAndStatic) {
  SC_REQUIRE_GPU();
  const auto [m, k] = GetParam();
  const ComputeScaleReport rep = RunComputeScaleCase(ScaleCase(m, k), QuickContext(), false);
  EXPECT_EQ(rep.result.disposition, Disposition::kPassed) << rep.result.message;
}

INSTANTIATE_TEST_SUITE_P(Shapes, ComputeScaleMatchesReference,
                         ::testing::Values(std::pair<std::int64_t, std::int64_t>{1, 32}, std::pair{17, 4096},
                                           std::pair{4096, 7168}, std::pair{33, 65536}, std::pair{3, 100}),
                         [](const auto& info) {
                           return "m" + std::to_string(info.param.first) + "_k" + std::to_string(info.param.second);
                         });

TEST(ComputeScaleOp, EmitsARowWithNonNegativeLatency) {
  SC_REQUIRE_GPU();
  collect::Registry registry;
  RegisterGemmOps(registry);
  collect::Op* op = registry.FindOp("cuda", "compute_scale");
  ASSERT_NE(op, nullptr);
  for (auto [m, k] : {std::pair<std::int64_t, std::int64_t>{1, 4096}, std::pair<std::int64_t, std::int64_t>{4096, 8192},
                      std::pair<std::int64_t, std::int64_t>{8192, 8192}}) {
    const collect::CaseResult r = op->Run(ScaleCase(m, k), QuickContext());
    ASSERT_EQ(r.disposition, Disposition::kPassed) << r.message;
    ASSERT_EQ(r.rows.size(), 1u);
    const collect::Params& row = r.rows[0];
    EXPECT_EQ(row.Str("op_name"), "compute_scale");
    EXPECT_EQ(row.Str("quant_dtype"), "fp8");
    EXPECT_GE(row.Num("latency"), 0.0);
    EXPECT_GE(row.Num("latency_p10"), 0.0);
    EXPECT_GE(row.Num("latency_p90"), 0.0);
    EXPECT_GT(row.Int("samples"), 0);
    const ComputeScaleReport rep = RunComputeScaleCase(ScaleCase(m, k), QuickContext(), true);
    std::printf("[compute_scale m=%lld k=%lld] latency %.5f ms (dynamic %.5f, static %.5f)\n",
                static_cast<long long>(m), static_cast<long long>(k), row.Num("latency"), rep.dynamic_ms,
                rep.static_ms);
    EXPECT_GT(rep.dynamic_ms, 0);
    EXPECT_GT(rep.static_ms, 0);
  }
}

// The quantization check fails on a wrong scale, a flipped byte and a wrong group scale.
TEST(Fp8QuantCheck, CatchesWrongScalesAndValues) {
  SC_REQUIRE_GPU();
  auto& dc = Context();
  const std::int64_t rows = 8, k = 512;
  const std::size_t n = static_cast<std::size_t>(rows * k);
  DeviceBuffer x(n * 2), q(n), state(8), scale(4), gq(n), gscales(static_cast<std::size_t>(rows * (k / 128)) * 4);
  SC_CUDA_CHECK(cudaMemsetAsync(state.get(), 0, 8, dc.stream));
  FillUniformBf16(x.get(), n, 99, 1.0f, dc.stream);
  ScaleBf16ByBlockPattern(x.get(), rows, k, 1, 0, dc.stream);
  QuantFp8TensorAmax(x.get(), n, state.as<unsigned>(), scale.as<float>(), dc.stream);
  QuantFp8TensorApply(x.get(), n, scale.as<float>(), q.get(), dc.stream);
  QuantFp8Group128(x.get(), rows, k, gq.get(), gscales.as<float>(), dc.stream);
  std::vector<std::uint16_t> hx(n);
  std::vector<std::uint8_t> hq(n), hgq(n);
  std::vector<float> hgs(static_cast<std::size_t>(rows * (k / 128)));
  float hs = 0;
  SC_CUDA_CHECK(cudaMemcpyAsync(hx.data(), x.get(), n * 2, cudaMemcpyDeviceToHost, dc.stream));
  SC_CUDA_CHECK(cudaMemcpyAsync(hq.data(), q.get(), n, cudaMemcpyDeviceToHost, dc.stream));
  SC_CUDA_CHECK(cudaMemcpyAsync(hgq.data(), gq.get(), n, cudaMemcpyDeviceToHost, dc.stream));
  SC_CUDA_CHECK(cudaMemcpyAsync(hgs.data(), gscales.get(), hgs.size() * 4, cudaMemcpyDeviceToHost, dc.stream));
  SC_CUDA_CHECK(cudaMemcpyAsync(&hs, scale.get(), 4, cudaMemcpyDeviceToHost, dc.stream));
  SC_CUDA_CHECK(cudaStreamSynchronize(dc.stream));
  std::vector<std::int64_t> all;
  for (std::int64_t i = 0; i < rows; ++i) all.push_back(i);

  EXPECT_TRUE(CheckTensorQuant(hx, hq, k, hs, all).ok());
  EXPECT_FALSE(CheckTensorQuant(hx, hq, k, hs * 1.02f, all).ok());
  auto flipped = hq;
  flipped[77] ^= 0x08;  // one exponent bit
  EXPECT_FALSE(CheckTensorQuant(hx, flipped, k, hs, all).ok());

  EXPECT_TRUE(CheckGroupQuant(hx, hgq, k, hgs, rows, all).ok())
      << CheckGroupQuant(hx, hgq, k, hgs, rows, all).Describe("q", "");
  auto swapped = hgs;  // row-major instead of token-contiguous scales
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t g = 0; g < k / 128; ++g)
      swapped[static_cast<std::size_t>(i * (k / 128) + g)] = hgs[static_cast<std::size_t>(g * rows + i)];
  EXPECT_FALSE(CheckGroupQuant(hx, hgq, k, swapped, rows, all).ok());
}

}  // namespace
}  // namespace servecast::cuda::gemm
