// The CUDA backend's core on a real GPU: runtime detection, the timing harness,
// random fills, NVML readings, CUDA error mapping.
#include <cuda_runtime.h>

#include <optional>
#include <regex>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/fill.h"
#include "backends/cuda/harness.h"
#include "backends/cuda/nvml.h"
#include "gpu_test_util.h"

namespace servecast::cuda {
namespace {

TEST(CudaRuntime, DetectsTheLibraryStack) {
  SC_REQUIRE_GPU();
  CudaBackend backend;
  auto rt = backend.DetectRuntime();
  EXPECT_EQ(rt.backend, "cuda");
  EXPECT_TRUE(std::regex_match(rt.version, std::regex(R"(\d+\.\d+-cublaslt\d+\.\d+-cudnn\d+\.\d+-nccl\d+\.\d+)")))
      << rt.version;
  EXPECT_GE(rt.sm, 70);
  EXPECT_EQ(rt.arch, "sm" + std::to_string(rt.sm));
  EXPECT_FALSE(rt.device_name.empty());
  EXPECT_TRUE(rt.libraries.count("cublaslt"));
  EXPECT_FALSE(backend.DefaultDevices().empty());
}

TEST(CudaFill, UniformValuesAreInRangeNonZeroAndDeterministic) {
  SC_REQUIRE_GPU();
  auto& ctx = Context();
  const std::size_t n = 1 << 20;
  DeviceBuffer a(n * sizeof(float)), b(n * sizeof(float)), c(n * 2);
  FillUniformF32(a.as<float>(), n, 7, 2.0f, ctx.stream);
  FillUniformF32(b.as<float>(), n, 7, 2.0f, ctx.stream);
  FillUniformBf16(c.get(), n, 8, 1.0f, ctx.stream);
  std::vector<float> ha(n), hb(n);
  std::vector<std::uint16_t> hc(n);
  SC_CUDA_CHECK(cudaMemcpyAsync(ha.data(), a.get(), n * 4, cudaMemcpyDeviceToHost, ctx.stream));
  SC_CUDA_CHECK(cudaMemcpyAsync(hb.data(), b.get(), n * 4, cudaMemcpyDeviceToHost, ctx.stream));
  SC_CUDA_CHECK(cudaMemcpyAsync(hc.data(), c.get(), n * 2, cudaMemcpyDeviceToHost, ctx.stream));
  SC_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(ha[i], hb[i]);
    ASSERT_NE(ha[i], 0.0f);
    ASSERT_GE(ha[i], -2.0f);
    ASSERT_LT(ha[i], 2.0f);
    float bf = Bf16ToF32(hc[i]);
    ASSERT_LE(std::abs(bf), 1.0f);
    sum += ha[i];
  }
  EXPECT_LT(std::abs(sum / n), 0.01);  // centred
}

TEST(CudaHarness, TimesACopyNearMemoryBandwidth) {
  SC_REQUIRE_GPU();
  auto& ctx = Context();
  const std::size_t bytes = 1ull << 30;  // 1 GiB each way: far beyond L2
  DeviceBuffer src(bytes), dst(bytes);
  FillUniformF32(src.as<float>(), bytes / 4, 1, 1.0f, ctx.stream);
  collect::TimingConfig cfg;
  cfg.budget_s = 0.3;
  TimeOptions opt;
  opt.rotated_bytes = 2.0 * bytes;
  auto stats = TimeOnDevice(
      [&](cudaStream_t s, int) { SC_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, s)); },
      cfg, opt, false);
  EXPECT_EQ(stats.method, "graph");
  EXPECT_EQ(stats.l2, "cold");
  EXPECT_GE(stats.samples, cfg.min_samples);
  EXPECT_LE(stats.p10_ms, stats.median_ms);
  EXPECT_LE(stats.median_ms, stats.p90_ms);
  double tb_per_s = 2.0 * bytes / (stats.median_ms * 1e-3) / 1e12;
  // H200: ~4.3 TB/s read+write measured; any healthy GPU of the last generations is within these bounds.
  EXPECT_GT(tb_per_s, 0.3) << tb_per_s;
  EXPECT_LT(tb_per_s, 10.0) << tb_per_s;
  std::printf("device copy: %.2f TB/s (read+write), median %.4f ms, rsd %.4f, %d samples, clock %.0f -> %.0f MHz\n",
              tb_per_s, stats.median_ms, stats.rsd, stats.samples, stats.clock_mhz_before, stats.clock_mhz_after);
}

TEST(CudaHarness, ShortOpsAreRepeatedInsideOneReplay) {
  SC_REQUIRE_GPU();
  DeviceBuffer buf(4096);
  collect::TimingConfig cfg;
  cfg.budget_s = 0.1;
  int calls_seen = 0;
  auto stats = TimeOnDevice(
      [&](cudaStream_t s, int) {
        ++calls_seen;
        FillUniformF32(buf.as<float>(), 1024, 3, 1.0f, s);
      },
      cfg, TimeOptions{}, false);
  EXPECT_GT(stats.calls_per_sample, 1);  // a few-microsecond kernel needs many calls per 50 us sample
  EXPECT_GT(stats.median_ms, 0.0);
  EXPECT_LT(stats.median_ms, 0.05);
  EXPECT_EQ(stats.l2, "warm");
}

TEST(CudaHarness, CopiesForColdL2CoverTwiceTheCache) {
  SC_REQUIRE_GPU();
  auto& ctx = Context();
  double l2 = static_cast<double>(ctx.l2_bytes);
  EXPECT_EQ(CopiesForColdL2(4 * l2), 1);
  EXPECT_EQ(CopiesForColdL2(l2 / 2, 8), 4);
  EXPECT_EQ(CopiesForColdL2(l2 / 100, 8), 8);  // capped
}

// A real out-of-memory error in a phase, through the phase driver's CUDA mapping.
TEST(CudaErrors, OutOfMemoryIsAResourceFailure) {
  SC_REQUIRE_GPU();
  struct HugePrepare : collect::CasePhases {
    bool checked = false;
    std::optional<collect::CaseResult> Prepare() override {
      DeviceBuffer huge(std::size_t{1} << 50);  // 1 PiB
      ADD_FAILURE() << "allocation of 1 PiB succeeded";
      return std::nullopt;
    }
    std::optional<collect::CaseResult> Check() override {
      checked = true;
      return std::nullopt;
    }
    void Time() override {}
    std::vector<collect::Params> Emit() override { return {}; }
  } phases;
  const collect::CaseResult r = RunCudaPhases(phases, collect::FailureClass::kFrameworkBug);
  EXPECT_FALSE(phases.checked);
  EXPECT_EQ(r.disposition, collect::Disposition::kFailed);
  EXPECT_EQ(r.failure_class, collect::FailureClass::kResource);
  EXPECT_EQ(r.error_type, "CudaOutOfMemory");
  EXPECT_FALSE(r.poisoned);
  cudaGetLastError();
}

TEST(CudaNvml, ReadsClocks) {
  SC_REQUIRE_GPU();
  char bus[32] = {0};
  SC_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof(bus), 0));
  const Nvml& nvml = Nvml::ForPciBusId(bus);
  if (!nvml.available()) GTEST_SKIP() << "NVML unavailable: " << nvml.why_unavailable();
  EXPECT_GT(nvml.SmClockMhz(), 100);
  EXPECT_FALSE(nvml.DriverVersion().empty());
}

}  // namespace
}  // namespace servecast::cuda
