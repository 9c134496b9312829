// The cuda `gemm` op on a real GPU: every dtype against its double-precision host
// reference on small, odd and one large shape; the check catches a wrong result; a
// registered op emits a gemm_perf row.
#include <cublasLt.h>

#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/gemm_internal.h"
#include "backends/cuda/gemm_ops.h"
#include "collect/case.h"
#include "collect/registry.h"
#include "gpu_test_util.h"

namespace servecast::cuda::gemm {
namespace {

using collect::Disposition;

collect::Case GemmCase(const std::string& dtype, std::int64_t m, std::int64_t n, std::int64_t k) {
  collect::Case c;
  c.op = "gemm";
  c.params = collect::Params{{"gemm_dtype", dtype}, {"m", m}, {"n", n}, {"k", k}};
  c.id = collect::MakeCaseId(c.op, c.params);
  return c;
}

using testing::QuickContext;
using testing::Runtime;

std::string Describe(const GemmRunReport& rep) {
  return std::string(collect::ToString(rep.result.disposition)) + " " + rep.result.error_type + ": " +
         rep.result.message + " | " + rep.kernel_source + " | " + rep.check_summary;
}

struct Shape {
  std::int64_t m, n, k;
};

class GemmMatchesReference : public ::testing::TestWithParam<std::tuple<std::string, Shape>> {};

std::string ShapeName(const ::testing::TestParamInfo<std::tuple<std::string, Shape>>& info) {
  const std::string& dtype = std::get<0>(info.param);
  const Shape& s = std::get<1>(info.param);
  return dtype + "_m" + std::to_string(s.m) + "_n" + std::to_string(s.n) + "_k" + std::to_string(s.k);
}

TEST_P(GemmMatchesReference, OnSmallOddAndLargeShapes) {
  SC_REQUIRE_GPU();
  const auto& [dtype, s] = GetParam();
  GemmRunOptions opt;
  opt.time = false;
  const GemmRunReport rep = RunGemmCase(GemmCase(dtype, s.m, s.n, s.k), QuickContext(), opt);
  std::printf("[gemm %s m=%lld n=%lld k=%lld] %s\n", dtype.c_str(), static_cast<long long>(s.m),
              static_cast<long long>(s.n), static_cast<long long>(s.k), Describe(rep).c_str());
  EXPECT_EQ(rep.result.disposition, Disposition::kPassed) << Describe(rep);
  EXPECT_EQ(rep.kernel_source.rfind("cublaslt:algo=", 0), 0u) << rep.kernel_source;
  if (dtype == "fp8") {
    EXPECT_NE(rep.kernel_source.find("+servecast_quant_fp8_tensor"), std::string::npos);
  }
  if (dtype == "fp8_block") {
    EXPECT_NE(rep.kernel_source.find("+servecast_quant_fp8_group128"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, GemmMatchesReference,
                         ::testing::Combine(::testing::Values("bfloat16", "fp8", "fp8_block"),
                                            ::testing::Values(Shape{1, 256, 256}, Shape{17, 256, 256},
                                                              Shape{3, 128, 128}, Shape{33, 768, 1536},
                                                              Shape{129, 384, 640}, Shape{4096, 4096, 4096})),
                         ShapeName);

// Feature sizes below 128 (bf16 and per-tensor fp8 only; fp8_block drops them).
INSTANTIATE_TEST_SUITE_P(NarrowFeatures, GemmMatchesReference,
                         ::testing::Combine(::testing::Values("bfloat16", "fp8"),
                                            ::testing::Values(Shape{1, 32, 32}, Shape{17, 32, 64}, Shape{65, 64, 32})),
                         ShapeName);

// The deepest reduction of the grid: the accumulation error bound must hold there too.
INSTANTIATE_TEST_SUITE_P(DeepK, GemmMatchesReference,
                         ::testing::Combine(::testing::Values("bfloat16", "fp8", "fp8_block"),
                                            ::testing::Values(Shape{16, 256, 65536})),
                         ShapeName);

class GemmCheckCatchesWrongResults : public ::testing::TestWithParam<std::string> {};

TEST_P(GemmCheckCatchesWrongResults, WhenTheReferenceInputsDiffer) {
  SC_REQUIRE_GPU();
  GemmRunOptions opt;
  opt.time = false;
  opt.perturb_reference = 0.1;  // the reference sees activations 10% larger than the GEMM did
  const GemmRunReport rep = RunGemmCase(GemmCase(GetParam(), 17, 256, 1024), QuickContext(), opt);
  EXPECT_EQ(rep.result.disposition, Disposition::kIncorrect) << Describe(rep);
  EXPECT_EQ(rep.result.error_type, "IncorrectOutput");
  opt.perturb_reference = 0;
  const GemmRunReport ok = RunGemmCase(GemmCase(GetParam(), 17, 256, 1024), QuickContext(), opt);
  EXPECT_EQ(ok.result.disposition, Disposition::kPassed) << Describe(ok);
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, GemmCheckCatchesWrongResults, ::testing::Values("bfloat16", "fp8", "fp8_block"));

TEST(GemmOp, EmitsOneTimedRowPerDtype) {
  SC_REQUIRE_GPU();
  collect::Registry registry;
  RegisterGemmOps(registry);
  collect::Op* op = registry.FindOp("cuda", "gemm");
  ASSERT_NE(op, nullptr);
  ASSERT_NE(registry.FindOp("cuda", "compute_scale"), nullptr);
  for (const char* dtype : {"bfloat16", "fp8", "fp8_block"}) {
    const collect::Case c = GemmCase(dtype, 64, 1024, 2048);
    EXPECT_GT(op->MemoryBytes(c.params), 0);
    const collect::CaseResult r = op->Run(c, QuickContext());
    ASSERT_EQ(r.disposition, Disposition::kPassed) << dtype << ": " << r.message;
    ASSERT_EQ(r.rows.size(), 1u);
    const collect::Params& row = r.rows[0];
    EXPECT_EQ(row.Str("op_name"), "gemm");
    EXPECT_EQ(row.Str("gemm_dtype"), dtype);
    EXPECT_EQ(row.Int("m"), 64);
    EXPECT_GT(row.Num("latency"), 0);
    EXPECT_LE(row.Num("latency_p10"), row.Num("latency_p90"));
    EXPECT_EQ(row.Str("timing"), "graph");
    std::printf("[gemm row %s] %s latency %.4f ms l2 %s samples %lld\n", dtype, row.Str("kernel_source").c_str(),
                row.Num("latency"), row.Str("l2").c_str(), static_cast<long long>(row.Int("samples")));
  }
}

TEST(GemmOp, RejectsUnknownDtypeWithoutTouchingTheGpu) {
  SC_REQUIRE_GPU();
  const GemmRunReport rep = RunGemmCase(GemmCase("fp7", 1, 32, 32), QuickContext(), GemmRunOptions{});
  EXPECT_EQ(rep.result.disposition, Disposition::kFailed);
  const GemmRunReport nvfp4 = RunGemmCase(GemmCase("nvfp4", 1, 32, 32), QuickContext(), GemmRunOptions{});
  EXPECT_EQ(nvfp4.result.disposition, Disposition::kNotSupported);
}

}  // namespace
}  // namespace servecast::cuda::gemm
