// The CUDA elementwise ops (backends/cuda/elementwise_ops.h) against their
// double-precision references on small odd shapes, the not_supported paths, a
// perturbed reference that must fail, and the two rmsnorm kernels agreeing. (The
// achieved bandwidth at the largest planned shapes, printed and never asserted, is
// benchmarks/bench_op_rates.cpp's BM_Elementwise since issue 28.)

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/device.h"
#include "backends/cuda/elementwise_kernels.h"
#include "backends/cuda/elementwise_ops.h"
#include "backends/cuda/fill.h"
#include "backends/cuda/harness.h"
#include "collect/case.h"
#include "collect/op.h"
#include "collect/table_spec.h"
#include "gpu_test_util.h"

namespace servecast::cuda {
namespace {

using collect::Disposition;
using collect::FailureClass;

collect::RuntimeInfo TestRuntime() {
  collect::RuntimeInfo rt;
  rt.backend = "cuda";
  rt.version = "gpu-test";
  rt.device_name = Context().prop.name;
  rt.sm = Context().prop.major * 10 + Context().prop.minor;
  return rt;
}

collect::Case MakeCase(const std::string& op, std::int64_t tokens, std::int64_t hidden,
                       const std::string& dtype = "bfloat16") {
  collect::Case c;
  c.op = op;
  c.params = collect::Params{{"dtype", dtype}, {"num_tokens", tokens}, {"hidden_size", hidden}};
  c.id = collect::MakeCaseId(op, c.params);
  return c;
}

// Short timing: the tests check that timing runs and yields a row, not its precision.
collect::RunContext QuickContext(const collect::RuntimeInfo& rt) {
  collect::RunContext ctx;
  ctx.runtime = &rt;
  ctx.timing.warmup_runs = 1;
  ctx.timing.min_samples = 3;
  ctx.timing.max_samples = 20;
  ctx.timing.budget_s = 0.02;
  return ctx;
}

double Cell(const collect::Params& row, const char* name) {
  return AsDouble(row.Get(name));
}

// Widths that exercise every access width (8, 4, 2, 1).
std::vector<std::int64_t> HiddenSizes(const std::string& op) {
  if (op == "rotary_embedding") return {128, 384, 1152};
  // rmsnorm (plain / fused): kRegisters with 1 and 2 accesses per thread (1, 7,
  // 130, 1000), 4 (plain 4100, 5120) and 8 beyond the shared-memory stage (30000);
  // kShared for 4098, 9999 (and fused 4100, 5120).
  if (op == "rmsnorm" || op == "rmsnorm_residual") return {1, 7, 130, 1000, 4098, 4100, 5120, 9999, 30000};
  return {1, 7, 130, 1000, 4100};
}

TEST(ElementwiseOps, SmallOddShapesMatchReference) {
  SC_REQUIRE_GPU();
  const collect::RuntimeInfo rt = TestRuntime();
  const collect::RunContext ctx = QuickContext(rt);
  for (const std::string& name : ElementwiseOpNames()) {
    std::unique_ptr<collect::Op> op = MakeElementwiseOp(name);
    EXPECT_EQ(op->name(), name);
    for (std::int64_t tokens : {1, 3, 17}) {
      for (std::int64_t hidden : HiddenSizes(name)) {
        SCOPED_TRACE(name + " tokens=" + std::to_string(tokens) + " hidden=" + std::to_string(hidden));
        collect::CaseResult r = op->Run(MakeCase(name, tokens, hidden), ctx);
        ASSERT_EQ(r.disposition, Disposition::kPassed) << r.error_type << ": " << r.message;
        ASSERT_EQ(r.rows.size(), 1u);
        const collect::Params& row = r.rows[0];
        EXPECT_EQ(row.Str("op_name"), name);
        EXPECT_EQ(row.Str("framework"), "cuda");
        EXPECT_EQ(row.Int("num_tokens"), tokens);
        EXPECT_EQ(row.Int("hidden_size"), hidden);
        EXPECT_GT(Cell(row, "latency"), 0.0);
        EXPECT_TRUE(std::isfinite(Cell(row, "latency")));
        EXPECT_GE(row.Int("samples"), 3);
        EXPECT_TRUE(row.Str("l2") == "warm" || row.Str("l2") == "cold");
        EXPECT_EQ(row.Str("kernel_source").rfind("servecast_", 0), 0u);
      }
    }
  }
}

// Sampled-row checks (shapes over 2^18 elements): first and last rows included.
TEST(ElementwiseOps, SampledRowsOnLargerShapes) {
  SC_REQUIRE_GPU();
  const collect::RuntimeInfo rt = TestRuntime();
  const collect::RunContext ctx = QuickContext(rt);
  for (const std::string& name : ElementwiseOpNames()) {
    SCOPED_TRACE(name);
    collect::CaseResult r = MakeElementwiseOp(name)->Run(MakeCase(name, 1031, 2944), ctx);
    EXPECT_EQ(r.disposition, Disposition::kPassed) << r.error_type << ": " << r.message;
  }
}

// A reference off by 5% must be caught: proves each op's check can fail.
TEST(ElementwiseOps, PerturbedReferenceIsIncorrect) {
  SC_REQUIRE_GPU();
  const collect::RuntimeInfo rt = TestRuntime();
  const collect::RunContext ctx = QuickContext(rt);
  for (const std::string& name : ElementwiseOpNames()) {
    for (std::int64_t tokens : {3, 1031}) {
      SCOPED_TRACE(name + " tokens=" + std::to_string(tokens));
      collect::CaseResult r = MakeElementwiseOp(name, 1.05)->Run(MakeCase(name, tokens, 384), ctx);
      EXPECT_EQ(r.disposition, Disposition::kIncorrect) << r.message;
      EXPECT_EQ(r.failure_class, FailureClass::kCollectorBug);
      EXPECT_EQ(r.error_type, "IncorrectOutput");
      EXPECT_TRUE(r.rows.empty());
      EXPECT_NE(r.message.find("out of tolerance"), std::string::npos) << r.message;
    }
  }
}

TEST(ElementwiseOps, UnsupportedShapesAndDtypes) {
  SC_REQUIRE_GPU();
  const collect::RuntimeInfo rt = TestRuntime();
  const collect::RunContext ctx = QuickContext(rt);
  struct Expect {
    std::string op;
    std::int64_t tokens, hidden;
    std::string dtype;
    std::string error_type;
  };
  const std::vector<Expect> cases = {
      {"rotary_embedding", 3, 100, "bfloat16", "UnsupportedShape"},  // not whole heads of 128
      {"rotary_embedding", 3, 200, "bfloat16", "UnsupportedShape"},
      // odd: 30001 scalar accesses > 16384, and 60002 bytes > the 48 KiB stage
      {"rmsnorm", 3, 30001, "bfloat16", "UnsupportedShape"},
      {"rmsnorm_residual", 3, 30001, "bfloat16", "UnsupportedShape"},
      {"silu_and_mul", 3, 1024, "float32", "UnsupportedDtype"},
      {"embedding", 3, 1024, "float16", "UnsupportedDtype"},
  };
  for (const Expect& e : cases) {
    SCOPED_TRACE(e.op + " hidden=" + std::to_string(e.hidden) + " " + e.dtype);
    collect::CaseResult r = MakeElementwiseOp(e.op)->Run(MakeCase(e.op, e.tokens, e.hidden, e.dtype), ctx);
    EXPECT_EQ(r.disposition, Disposition::kNotSupported) << r.message;
    EXPECT_EQ(r.failure_class, FailureClass::kUnsupportedConfig);
    EXPECT_EQ(r.error_type, e.error_type);
    EXPECT_FALSE(r.message.empty());
  }
  collect::CaseResult bad = MakeElementwiseOp("rmsnorm")->Run(MakeCase("rmsnorm", 0, 1024), ctx);
  EXPECT_EQ(bad.disposition, Disposition::kFailed);
  EXPECT_EQ(bad.error_type, "InvalidParams");
}

// The two rmsnorm kernels side by side where both fit (what kAuto's threshold is
// based on): both must agree within a bf16 ulp; their times are printed only.
TEST(ElementwiseOps, RmsNormKernelsCompared) {
  SC_REQUIRE_GPU();
  cudaStream_t st = Context().stream;
  std::printf("%-9s %-9s %7s %7s %11s %9s\n", "op", "kernel", "tokens", "hidden", "latency_ms", "TB/s");
  for (const auto& [tokens, hidden] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {32768, 2048}, {32768, 4096}, {32768, 5120}, {32768, 8192}, {32768, 16384}, {4096, 8192}}) {
    const std::size_t n = static_cast<std::size_t>(tokens * hidden);
    DeviceBuffer x(2 * n), res(2 * n), res0(2 * n), y_reg(2 * n), y_sh(2 * n), w(2 * static_cast<std::size_t>(hidden));
    FillUniformBf16(x.get(), n, 11, 1.0f, st);
    FillUniformBf16(res0.get(), n, 12, 1.0f, st);
    FillUniformBf16(w.get(), static_cast<std::size_t>(hidden), 13, 1.0f, st);
    for (bool fused : {false, true}) {
      for (RmsNormKernel kernel : {RmsNormKernel::kRegisters, RmsNormKernel::kShared}) {
        DeviceBuffer& y = kernel == RmsNormKernel::kRegisters ? y_reg : y_sh;
        if (fused) {
          ASSERT_EQ(cudaMemcpyAsync(res.get(), res0.get(), 2 * n, cudaMemcpyDeviceToDevice, st), cudaSuccess);
        }
        LaunchRmsNormBf16(x.get(), fused ? res.get() : nullptr, w.get(), y.get(), tokens, hidden, 1e-6f, st, kernel);
        collect::TimingConfig cfg;
        TimeOptions opt;
        opt.rotated_bytes = 2.0 * n * (fused ? 4 : 2);
        collect::TimingStats stats = TimeOnDevice(
            [&](cudaStream_t s, int) {
              LaunchRmsNormBf16(x.get(), fused ? res.get() : nullptr, w.get(), y.get(), tokens, hidden, 1e-6f, s,
                                kernel);
            },
            cfg, opt, false);
        const double bytes = 2.0 * (static_cast<double>(n) * (fused ? 4 : 2) + hidden);
        std::printf("%-9s %-9s %7lld %7lld %11.5f %9.3f\n", fused ? "fused" : "rmsnorm",
                    kernel == RmsNormKernel::kRegisters ? "registers" : "shared", static_cast<long long>(tokens),
                    static_cast<long long>(hidden), stats.median_ms, bytes / (stats.median_ms * 1e-3) / 1e12);
      }
      if (fused) continue;  // the fused timing loop keeps adding into res: compare the plain form only
      std::vector<std::uint16_t> a(n), b(n);
      ASSERT_EQ(cudaMemcpyAsync(a.data(), y_reg.get(), 2 * n, cudaMemcpyDeviceToHost, st), cudaSuccess);
      ASSERT_EQ(cudaMemcpyAsync(b.data(), y_sh.get(), 2 * n, cudaMemcpyDeviceToHost, st), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const double va = Bf16ToF32(a[i]), vb = Bf16ToF32(b[i]);
        if (!(std::fabs(va - vb) <= 0x1p-7 * std::fabs(va))) ++differ;
      }
      EXPECT_EQ(differ, 0u) << "hidden " << hidden;
    }
  }
}

}  // namespace
}  // namespace servecast::cuda
