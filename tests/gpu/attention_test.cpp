// The CUDA attention ops (backends/cuda/attention_ops.h) against their
// double-precision references on small shapes: MHA / GQA / MQA, sliding window,
// head dims 64 / 128 / 256, bf16 and fp8 KV, split and unsplit decode, every A/B
// variant of the tensor-core decode kernel, fp8 KV on the tensor-core kernel and
// forced onto the CUDA-core one; fp8 context FMHA (cuDNN's fp8 SDPA); the
// not_supported paths; perturbed references that must fail. The achieved rates at
// large shapes are benchmarks/bench_op_rates.cpp's.

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "backends/cuda/attention_cudnn.h"
#include "backends/cuda/attention_kernels.h"
#include "backends/cuda/attention_ops.h"
#include "backends/cuda/device.h"
#include "backends/cuda/fill.h"
#include "collect/case.h"
#include "collect/op.h"
#include "gpu_test_util.h"

namespace servecast::cuda {
namespace {

using collect::Disposition;

struct AttnCase {
  std::int64_t batch, isl, heads, kv_heads, head_dim, window, step;
  std::string attn_dtype = "bfloat16", kv_dtype = "bfloat16";
};

collect::Case MakeCase(const std::string& op, const AttnCase& a) {
  collect::Case c;
  c.op = op;
  c.params = collect::Params{{"batch_size", a.batch},         {"isl", a.isl},
                             {"num_heads", a.heads},          {"num_key_value_heads", a.kv_heads},
                             {"head_dim", a.head_dim},        {"window_size", a.window},
                             {"beam_width", std::int64_t{1}}, {"attn_dtype", a.attn_dtype},
                             {"kv_cache_dtype", a.kv_dtype},  {"step", a.step}};
  c.id = collect::MakeCaseId(op, c.params);
  return c;
}

std::string Describe(const collect::CaseResult& r) {
  return std::string(collect::ToString(r.disposition)) + ": " + r.error_type + " " + r.message;
}

double Latency(const collect::CaseResult& r) {
  return AsDouble(r.rows.at(0).Get("latency"));
}

class AttentionGenerationKernels : public ::testing::TestWithParam<bool> {};

// Every shape with the tensor-core variant allowed (it takes head dim 64/128 with
// bf16 KV and groups of 3+, or fp8 KV and groups of 2+) and with the CUDA-core
// kernel only.
TEST_P(AttentionGenerationKernels, SmallShapesMatchReference) {
  SC_REQUIRE_GPU();
  PagedDecodeTuning tuning;
  tuning.tensor_cores = GetParam();
  const collect::RunContext ctx = testing::QuickContext();
  std::unique_ptr<collect::Op> op = MakeAttentionGenerationOp(1.0, tuning);
  const std::vector<AttnCase> cases = {
      {1, 1, 8, 8, 128, 0, 0},                         // one token, MHA
      {3, 1, 32, 8, 128, 0, 1000},                     // GQA 4, split KV, a partial last page
      {2, 1, 24, 8, 128, 0, 300},                      // group 3 (heads per CTA 4, one masked)
      {4, 1, 64, 4, 64, 0, 4095},                      // group 16: two head chunks, head dim 64
      {2, 1, 16, 2, 256, 0, 777},                      // head dim 256
      {2, 1, 8, 1, 128, 0, 2047},                      // MQA
      {2, 1, 32, 8, 64, 128, 1000},                    // sliding window, first page partly hidden
      {1, 1, 32, 8, 128, 0, 20000},                    // many splits
      {64, 1, 32, 8, 128, 0, 100},                     // large batch: one split
      {2, 1, 32, 1, 128, 0, 500},                      // group 32: two chunks of 16 (tensor cores)
      {2, 1, 16, 8, 128, 0, 700},                      // group 2 (CUDA cores)
      {3, 1, 32, 8, 128, 0, 1000, "bfloat16", "fp8"},  // fp8 KV
      {2, 1, 16, 2, 256, 64, 500, "bfloat16", "fp8"},  // fp8 KV, head dim 256, window
      {2, 1, 8, 8, 64, 0, 63, "bfloat16", "fp8"},      // fp8 KV, head dim 64, exactly one page
  };
  for (const AttnCase& a : cases) {
    collect::Case c = MakeCase("attention_generation", a);
    collect::CaseResult r = op->Run(c, ctx);
    EXPECT_EQ(r.disposition, Disposition::kPassed) << c.id << " -> " << Describe(r);
    if (r.disposition == Disposition::kPassed) {
      ASSERT_EQ(r.rows.size(), 1u);
      EXPECT_GT(Latency(r), 0.0) << c.id;
      EXPECT_NE(std::get<std::string>(r.rows[0].Get("kernel_source")).find("servecast_paged_decode"),
                std::string::npos);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AttentionDecode, AttentionGenerationKernels, ::testing::Bool());

// fp8 e4m3 KV (the op's scales 0.5 for K and 1.5 for V) through the op's
// double-precision reference check, on the tensor-core kernel (true: the default
// plan; fp16 MMAs on K/V converted from fp8 in the fragment loads) and forced onto
// the CUDA-core kernel (false: PagedDecodeTuning::tensor_cores_fp8 false): groups of 2, 3,
// 4, 8 and 32 (two head chunks), head dims 64 and 128, one split and several,
// partial last pages, exactly one page, sliding windows, and long splits. The
// kernel_source must name the path ("mma," or not), so a case cannot pass on the
// other kernel.
class AttentionGenerationFp8 : public ::testing::TestWithParam<bool> {};

TEST_P(AttentionGenerationFp8, SmallShapesMatchReference) {
  SC_REQUIRE_GPU();
  const bool tensor_cores = GetParam();
  if (tensor_cores)
    std::printf("[fp8 mma] CTAs/SM on this device: %d at head dim 64, %d at 128 (the split rule assumes 5 and 3)\n",
                PagedDecodeFp8CtasPerSm(64), PagedDecodeFp8CtasPerSm(128));
  EXPECT_GE(PagedDecodeFp8CtasPerSm(128), 1);
  PagedDecodeTuning tuning;
  tuning.tensor_cores_fp8 = tensor_cores;
  const collect::RunContext ctx = testing::QuickContext();
  std::unique_ptr<collect::Op> op = MakeAttentionGenerationOp(1.0, tuning);
  const std::string f = "fp8", b = "bfloat16";
  const std::vector<AttnCase> cases = {
      {3, 1, 32, 8, 128, 0, 1000, b, f},    // group 4, split KV, a partial last page
      {2, 1, 64, 8, 128, 0, 5000, b, f},    // group 8, split KV, a partial last page
      {4, 1, 32, 8, 64, 0, 2100, b, f},     // group 4, head dim 64
      {2, 1, 64, 8, 64, 0, 777, b, f},      // group 8, head dim 64
      {2, 1, 16, 8, 128, 0, 700, b, f},     // group 2
      {3, 1, 16, 8, 64, 0, 1500, b, f},     // group 2, head dim 64
      {1, 1, 8, 4, 128, 0, 20000, b, f},    // group 2, many splits
      {2, 1, 24, 8, 128, 0, 300, b, f},     // group 3 (rows past the group are zero)
      {64, 1, 32, 8, 128, 0, 100, b, f},    // one split, a partial page
      {2, 1, 64, 8, 128, 0, 63, b, f},      // group 8, exactly one page
      {2, 1, 32, 8, 64, 128, 1000, b, f},   // sliding window, first page partly hidden
      {2, 1, 64, 8, 128, 200, 3000, b, f},  // sliding window, group 8
      {2, 1, 32, 1, 128, 0, 500, b, f},     // group 32: two head chunks of 16
      {16, 1, 32, 8, 128, 0, 40000, b, f},  // long splits (37-209 pages)
      {300, 1, 64, 8, 64, 0, 4094, b, f},   // 64-page splits, partial last page
  };
  for (const AttnCase& a : cases) {
    collect::Case c = MakeCase("attention_generation", a);
    collect::CaseResult r = op->Run(c, ctx);
    EXPECT_EQ(r.disposition, Disposition::kPassed) << c.id << " -> " << Describe(r);
    if (r.disposition == Disposition::kPassed) {
      ASSERT_EQ(r.rows.size(), 1u);
      const std::string source = std::get<std::string>(r.rows[0].Get("kernel_source"));
      EXPECT_NE(source.find("servecast_paged_decode_fp8kv:"), std::string::npos) << source;
      EXPECT_EQ(source.find("mma,") != std::string::npos, tensor_cores) << c.id << ": " << source;
      EXPECT_EQ(source.find("tma,"), std::string::npos) << source;  // the fp8 kernel's ring is cp.async
      EXPECT_EQ(source.find("variant="), std::string::npos) << source;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AttentionDecode, AttentionGenerationFp8, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return std::string(p.param ? "TensorCores" : "CudaCores");
                         });

// The fp8 kernel's lean loop (independent warps, each with its own running maxima,
// combined at the end; interior tiles unmasked; rescales skipped when no maximum moved)
// against the loop the bf16 kernel keeps, on the same inputs: every output within 1% of
// the largest |output| (the two differ only in where fp16 P and the fp32 sums round),
// on shapes with one split and several, partial first (window) and last pages, groups
// of 2, 4, 8 and 32, head dims 64 and 128. Both outputs must be finite (so two
// unwritten, poisoned outputs cannot agree). The op's reference checks (above) run the
// lean loop, the default, against double precision. The full loop is the plan of
// PagedDecodeTuning::fp8_lean false (the same split, heads per CTA and workspace).
TEST(AttentionGenerationFp8Lean, AgreesWithTheFullLoop) {
  SC_REQUIRE_GPU();
  struct S {
    std::int64_t batch, heads, kv_heads, head_dim, tokens, window;
  };
  const S shapes[] = {{3, 32, 8, 128, 1000, 0},  {2, 64, 8, 128, 5000, 0}, {4, 32, 8, 64, 2100, 0},
                      {2, 32, 8, 64, 1000, 128}, {1, 32, 8, 128, 20000, 0}, {2, 16, 8, 128, 700, 0},
                      {2, 32, 1, 128, 500, 0},   {16, 32, 8, 128, 40000, 0}};
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreate(&st), cudaSuccess);
  for (const S& x : shapes) {
    const PagedDecodeShape s{x.batch, x.heads, x.kv_heads, x.head_dim, x.tokens, x.window};
    const PagedDecodePlan plan = PlanPagedDecode(s, Context().prop.multiProcessorCount, KvDtype::kFp8E4m3);
    ASSERT_TRUE(plan.tensor_cores) << plan.Describe();
    ASSERT_TRUE(plan.fp8_lean);
    PagedDecodeTuning full_loop;
    full_loop.fp8_lean = false;
    const PagedDecodePlan plan_full =
        PlanPagedDecode(s, Context().prop.multiProcessorCount, KvDtype::kFp8E4m3, full_loop);
    ASSERT_FALSE(plan_full.fp8_lean);
    ASSERT_EQ(plan_full.Describe(), plan.Describe());
    ASSERT_EQ(plan_full.workspace_bytes, plan.workspace_bytes);
    const std::int64_t pages = s.batch * s.pages_per_seq();
    const std::size_t q_elems = static_cast<std::size_t>(s.batch * s.num_heads * s.head_dim);
    const std::size_t pool = static_cast<std::size_t>(pages * s.num_kv_heads * kPagedKvPageSize * s.head_dim);
    DeviceBuffer q(q_elems * 2), k(pool), v(pool), table(static_cast<std::size_t>(pages) * 4),
        workspace(std::max<std::size_t>(plan.workspace_bytes, 16)), out_lean(q_elems * 2), out_full(q_elems * 2);
    FillUniformBf16(q.get(), q_elems, 11, 3.0f, st);
    FillUniformFp8E4m3(k.get(), pool, 12, 2.0f, st);
    FillUniformFp8E4m3(v.get(), pool, 13, 2.0f, st);
    std::vector<std::int32_t> host_table(static_cast<std::size_t>(pages));
    for (std::int64_t i = 0; i < pages; ++i) host_table[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7 + 3) % pages);
    if (pages % 7 == 0)  // keep it a permutation
      for (std::int64_t i = 0; i < pages; ++i) host_table[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(pages - 1 - i);
    ASSERT_EQ(cudaMemcpyAsync(table.get(), host_table.data(), host_table.size() * 4, cudaMemcpyHostToDevice, st),
              cudaSuccess);
    FillPoison(out_lean.get(), out_lean.bytes(), st);
    FillPoison(out_full.get(), out_full.bytes(), st);
    for (bool lean : {true, false}) {
      LaunchPagedDecode(s, lean ? plan : plan_full, KvDtype::kFp8E4m3, q.get(), k.get(), v.get(), table.as<std::int32_t>(), 0.5f, 1.5f,
                        lean ? out_lean.get() : out_full.get(), workspace.get(), st);
    }
    std::vector<std::uint16_t> a(q_elems), b(q_elems);
    ASSERT_EQ(cudaMemcpyAsync(a.data(), out_lean.get(), q_elems * 2, cudaMemcpyDeviceToHost, st), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(b.data(), out_full.get(), q_elems * 2, cudaMemcpyDeviceToHost, st), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    std::size_t non_finite = 0, equal = 0;
    float max_abs = 0.f, max_diff = 0.f;
    for (std::size_t i = 0; i < q_elems; ++i) {
      const float x = Bf16ToF32(a[i]), y = Bf16ToF32(b[i]);
      if (!std::isfinite(x) || !std::isfinite(y)) {
        ++non_finite;
        continue;
      }
      equal += a[i] == b[i];
      max_abs = std::max(max_abs, std::fabs(y));
      max_diff = std::max(max_diff, std::fabs(x - y));
    }
    std::printf("[fp8 lean] %s tokens %lld: max |diff| %.3g of max |out| %.3g, %zu of %zu bit-equal\n",
                plan.Describe().c_str(), static_cast<long long>(s.tokens), max_diff, max_abs, equal, q_elems);
    EXPECT_EQ(non_finite, 0u) << plan.Describe();
    EXPECT_GT(max_abs, 0.f) << plan.Describe();
    EXPECT_LE(max_diff, 1e-2f * max_abs) << plan.Describe() << ", tokens " << s.tokens;
  }
  cudaStreamDestroy(st);
}

// Every A/B variant of the tensor-core kernel (PagedDecodeVariants: tile size,
// ring depth, page-table prefetch, split target) through the op's double-precision
// reference check: groups of 4, 8 and 32 (two head chunks), head dims 64 and 128,
// one split and several, partial last pages, a window, and splits longer than the
// page-table prefetch's 32-page chunks. The plan must name the variant, so a case
// cannot pass on the default kernel instead.
class AttentionGenerationVariants : public ::testing::TestWithParam<int> {};

TEST_P(AttentionGenerationVariants, SmallShapesMatchReference) {
  SC_REQUIRE_GPU();
  const int variant = GetParam();
  const PagedDecodeVariant info = PagedDecodeVariants().at(static_cast<std::size_t>(variant));
  std::printf("[variant %d] %s: %s; CTAs/SM on this device: %d at head dim 64, %d at 128\n", variant, info.name.c_str(),
              info.description.c_str(), PagedDecodeVariantCtasPerSm(variant, 64),
              PagedDecodeVariantCtasPerSm(variant, 128));
  EXPECT_GE(PagedDecodeVariantCtasPerSm(variant, 128), 1);
  PagedDecodeTuning tuning;
  tuning.variant = variant;
  const collect::RunContext ctx = testing::QuickContext();
  std::unique_ptr<collect::Op> op = MakeAttentionGenerationOp(1.0, tuning);
  const std::vector<AttnCase> cases = {
      {3, 1, 32, 8, 128, 0, 1000},    // group 4, split KV, a partial last page
      {2, 1, 64, 8, 128, 0, 5000},    // group 8, split KV, a partial last page
      {4, 1, 32, 8, 64, 0, 2100},     // group 4, head dim 64
      {2, 1, 64, 8, 64, 0, 777},      // group 8, head dim 64
      {64, 1, 32, 8, 128, 0, 100},    // one split
      {2, 1, 32, 8, 64, 128, 1000},   // sliding window, first page partly hidden
      {2, 1, 32, 1, 128, 0, 500},     // group 32: two head chunks
      {16, 1, 32, 8, 128, 0, 40000},  // splits of 37-209 pages (several prefetch chunks)
      {300, 1, 64, 8, 64, 0, 4094},   // 64-page splits (one or two per sequence), partial last page
  };
  for (const AttnCase& a : cases) {
    collect::Case c = MakeCase("attention_generation", a);
    collect::CaseResult r = op->Run(c, ctx);
    EXPECT_EQ(r.disposition, Disposition::kPassed) << info.name << " " << c.id << " -> " << Describe(r);
    if (r.disposition == Disposition::kPassed) {
      ASSERT_EQ(r.rows.size(), 1u);
      const std::string source = std::get<std::string>(r.rows[0].Get("kernel_source"));
      EXPECT_NE(source.find("mma,"), std::string::npos) << source;
      // The tma* variants fill the ring by TMA ("mma,tma,"), the default too for splits of
      // kPagedDecodeTmaMinPages pages or more (this suite runs on sm_90+), the others by cp.async.
      const std::size_t pps = source.find("pages_per_split=");
      ASSERT_NE(pps, std::string::npos) << source;
      const bool tma = info.name.rfind("tma", 0) == 0 ||
                       (variant == 0 && std::stoi(source.substr(pps + 16)) >= kPagedDecodeTmaMinPages);
      EXPECT_EQ(source.find("mma,tma,") != std::string::npos, tma) << source;
      if (variant == 0)
        EXPECT_EQ(source.find("variant="), std::string::npos) << source;
      else
        EXPECT_NE(source.find(",variant=" + info.name), std::string::npos) << source;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AttentionDecode, AttentionGenerationVariants,
                         ::testing::Range(0, static_cast<int>(PagedDecodeVariants().size())),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return PagedDecodeVariants().at(static_cast<std::size_t>(p.param)).name;
                         });

TEST(AttentionGeneration, PerturbedReferenceIsIncorrect) {
  SC_REQUIRE_GPU();
  std::unique_ptr<collect::Op> op = MakeAttentionGenerationOp(1.05);
  collect::CaseResult r =
      op->Run(MakeCase("attention_generation", {2, 1, 32, 8, 128, 0, 1000}), testing::QuickContext());
  EXPECT_EQ(r.disposition, Disposition::kIncorrect) << Describe(r);
  // fp8 KV on the tensor-core kernel (group 4 and group 2) and on the CUDA-core one.
  for (bool tensor_cores : {true, false}) {
    PagedDecodeTuning tuning;
    tuning.tensor_cores_fp8 = tensor_cores;
    std::unique_ptr<collect::Op> op_fp8 = MakeAttentionGenerationOp(1.05, tuning);
    for (const AttnCase& a : {AttnCase{2, 1, 32, 8, 128, 0, 1000, "bfloat16", "fp8"},
                              AttnCase{2, 1, 16, 8, 64, 0, 1000, "bfloat16", "fp8"}}) {
      collect::CaseResult rf = op_fp8->Run(MakeCase("attention_generation", a), testing::QuickContext());
      EXPECT_EQ(rf.disposition, Disposition::kIncorrect) << (tensor_cores ? "mma " : "cuda cores ") << Describe(rf);
    }
  }
}

TEST(AttentionGeneration, UnsupportedCasesSaySo) {
  SC_REQUIRE_GPU();
  std::unique_ptr<collect::Op> op = MakeAttentionGenerationOp();
  const collect::RunContext ctx = testing::QuickContext();
  EXPECT_EQ(op->Run(MakeCase("attention_generation", {1, 1, 8, 8, 96, 0, 10}), ctx).disposition,
            Disposition::kNotSupported);
  EXPECT_EQ(op->Run(MakeCase("attention_generation", {1, 2, 8, 8, 128, 0, 10}), ctx).disposition,
            Disposition::kNotSupported);
  EXPECT_EQ(op->Run(MakeCase("attention_generation", {1, 1, 12, 8, 128, 0, 10}), ctx).disposition,
            Disposition::kFailed);  // 12 heads over 8 KV heads: invalid
}

TEST(AttentionContext, SmallShapesMatchReference) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  std::unique_ptr<collect::Op> op = MakeAttentionContextOp();
  const std::vector<AttnCase> cases = {
      {1, 128, 8, 8, 128, 0, 0},   // MHA
      {2, 300, 32, 8, 128, 0, 0},  // GQA 4, length not a multiple of the tiles
      {2, 256, 16, 1, 128, 0, 0},  // MQA
      {1, 512, 8, 2, 64, 0, 0},    // head dim 64
      {2, 200, 8, 4, 64, 64, 0},   // sliding window
      {2, 300, 32, 8, 128, 0, 0, "bfloat16", "fp8"},  // fp8 KV cache: the write quantizes, partial last page
      {3, 64, 8, 8, 64, 0, 0, "bfloat16", "fp8"},     // fp8 KV cache, exactly one page per sequence
  };
  for (const AttnCase& a : cases) {
    collect::Case c = MakeCase("attention_context", a);
    collect::CaseResult r = op->Run(c, ctx);
    EXPECT_EQ(r.disposition, Disposition::kPassed) << c.id << " -> " << Describe(r);
    if (r.disposition == Disposition::kPassed) {
      ASSERT_EQ(r.rows.size(), 1u);
      EXPECT_GT(Latency(r), 0.0) << c.id;
      const std::string source = std::get<std::string>(r.rows[0].Get("kernel_source"));
      EXPECT_NE(source.find(std::string("+servecast_kv_append_") + (a.kv_dtype == "fp8" ? "fp8" : "bf16")),
                std::string::npos)
          << source;
      std::printf("[attention_context] %s: %s\n", c.id.c_str(), source.c_str());
    }
  }
  // Head dim 256: cuDNN's SDPA runs it on Hopper from 9.x on, or says not supported.
  collect::Case c256 = MakeCase("attention_context", {1, 256, 8, 2, 256, 0, 0});
  collect::CaseResult r256 = op->Run(c256, ctx);
  EXPECT_TRUE(r256.disposition == Disposition::kPassed || r256.disposition == Disposition::kNotSupported)
      << Describe(r256);
  std::printf("[attention_context] %s -> %s\n", c256.id.c_str(), Describe(r256).c_str());
}

TEST(AttentionContext, PerturbedReferenceIsIncorrect) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  collect::CaseResult r =
      MakeAttentionContextOp(1.05)->Run(MakeCase("attention_context", {1, 256, 8, 2, 128, 0, 0}), ctx);
  EXPECT_EQ(r.disposition, Disposition::kIncorrect) << Describe(r);
}

// fp8 context FMHA (attn_dtype fp8 with an fp8 KV cache: e4m3 Q/K/V with per-tensor
// scales 0.25 / 0.5 / 1.5, cuDNN's fp8 SDPA graph) through the op's double-precision
// reference from the dequantized e4m3 inputs: MHA, GQA 4 and 8, MQA, head dims 64
// and 128, lengths that are and are not multiples of 64, one and several sequences.
// kernel_source must name the fp8 graph and its O dtype. Where cuDNN has no engine
// for the graph on this GPU the op says not_supported with cuDNN's message; on
// Hopper (sm_90) and newer that is a failure.
TEST(AttentionContext, Fp8FmhaSmallShapesMatchReference) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  std::unique_ptr<collect::Op> op = MakeAttentionContextOp();
  int device = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  const std::string f = "fp8";
  const std::vector<AttnCase> cases = {
      {1, 128, 8, 8, 128, 0, 0, f, f},    // MHA, two 64-row tiles
      {2, 300, 32, 8, 128, 0, 0, f, f},   // GQA 4, length not a multiple of 64, partial last page
      {2, 256, 16, 1, 128, 0, 0, f, f},   // MQA
      {1, 512, 8, 2, 64, 0, 0, f, f},     // head dim 64, GQA 4
      {3, 100, 16, 2, 64, 0, 0, f, f},    // head dim 64, GQA 8, length not a multiple of 64
      {2, 64, 8, 8, 64, 0, 0, f, f},      // exactly one page per sequence
      {1, 1000, 32, 8, 128, 0, 0, f, f},  // a longer row (sum of many rounded P)
  };
  for (const AttnCase& a : cases) {
    collect::Case c = MakeCase("attention_context", a);
    collect::CaseResult r = op->Run(c, ctx);
    std::printf("[attention_context fp8] %s -> %s\n", c.id.c_str(),
                r.disposition == Disposition::kPassed ? std::get<std::string>(r.rows.at(0).Get("kernel_source")).c_str()
                                                      : Describe(r).c_str());
    if (major < 9 && r.disposition == Disposition::kNotSupported) continue;
    EXPECT_EQ(r.disposition, Disposition::kPassed) << c.id << " -> " << Describe(r);
    if (r.disposition == Disposition::kPassed) {
      ASSERT_EQ(r.rows.size(), 1u);
      EXPECT_GT(Latency(r), 0.0) << c.id;
      const std::string source = std::get<std::string>(r.rows[0].Get("kernel_source"));
      EXPECT_EQ(source.rfind("cudnn_sdpa_fp8:engine=", 0), 0u) << source;
      EXPECT_TRUE(source.find(",o=bf16+") != std::string::npos || source.find(",o=fp8+") != std::string::npos)
          << source;
      EXPECT_NE(source.find("+servecast_quant_fp8_qkv+servecast_kv_append_fp8:page="), std::string::npos) << source;
    }
  }
}

// The fp8 check can fail: a reference off by 25% (what a kernel that ignored a
// descale of 0.8 or 1.25 would produce) must be incorrect, on a short and a longer
// row; and fp8 FMHA over a bf16 KV cache is not a case the op runs (not_supported).
TEST(AttentionContext, Fp8FmhaPerturbedReferenceIsIncorrect) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  for (const AttnCase& a :
       {AttnCase{1, 256, 8, 2, 128, 0, 0, "fp8", "fp8"}, AttnCase{2, 300, 16, 2, 64, 0, 0, "fp8", "fp8"}}) {
    collect::CaseResult r = MakeAttentionContextOp(1.25)->Run(MakeCase("attention_context", a), ctx);
    if (r.disposition == Disposition::kNotSupported) {  // no fp8 SDPA engine here (Fp8FmhaSmallShapes says if wrong)
      std::printf("[attention_context fp8] %s\n", Describe(r).c_str());
      continue;
    }
    EXPECT_EQ(r.disposition, Disposition::kIncorrect) << Describe(r);
    std::printf("[attention_context fp8, reference x 1.25] %s\n", Describe(r).c_str());
  }
  AttnCase fp8_fmha_bf16_kv{1, 128, 8, 8, 128, 0, 0, "fp8", "bfloat16"};
  EXPECT_EQ(MakeAttentionContextOp()->Run(MakeCase("attention_context", fp8_fmha_bf16_kv), ctx).disposition,
            Disposition::kNotSupported);
}

// Shapes of the h200-attn3 sweep whose fp8 FMHA output failed the reference check
// (deterministically: garbage such as 20 where 0.026 was expected), run with the
// default graph and with the SdpaFp8Options variants (the softmax stats virtual, as
// an inference graph has them; the first one or two engine configurations skipped;
// O's scale listed before its amax, as cudnn-frontend orders them); each outcome is
// printed. On the H200 with cuDNN 9.14 (2026-12-01) the default passed 1 of these 8,
// the first four variants 1, 1, 0 and 0 (both engine configurations cuDNN offers are
// engine 2; skipping both leaves none: not_supported); the scale_o_first variants
// were added after that run. Asserted: whatever cuDNN
// returns, the op's check decides — a case ends passed with one row, incorrect
// (IncorrectOutput, no row), or, only when every configuration was skipped,
// not_supported; never failed, never a row from a wrong output. fp8 FMHA stays out
// of the plan while the default does not pass them all (docs/kernels.md).
TEST(AttentionContext, Fp8FmhaWrongOutputsOnAttn3ShapesAreCaught) {
  SC_REQUIRE_GPU();
  int device = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  if (major < 9) GTEST_SKIP() << "cuDNN's fp8 SDPA needs sm_90 or newer";
  collect::RunContext ctx = testing::QuickContext();
  ctx.timing.min_samples = 3;
  ctx.timing.budget_s = 0.05;
  const std::string f = "fp8";
  const std::vector<AttnCase> cases = {
      {8, 16, 32, 8, 128, 0, 0, f, f},    {4, 16, 64, 8, 128, 0, 0, f, f},    {8, 256, 16, 8, 128, 0, 0, f, f},
      {16, 256, 16, 8, 128, 0, 0, f, f},  {128, 256, 16, 8, 128, 0, 0, f, f}, {256, 256, 8, 1, 128, 0, 0, f, f},
      {64, 1024, 16, 8, 128, 0, 0, f, f}, {8, 1024, 32, 8, 128, 0, 0, f, f},
  };
  struct Variant {
    const char* name;
    SdpaFp8Options options;
  };
  const std::vector<Variant> variants = {{"default", {}},
                                         {"virtual_stats", {true, 0}},
                                         {"skip_configs=1", {false, 1}},
                                         {"skip_configs=2", {false, 2}},
                                         {"virtual_stats,skip_configs=1", {true, 1}},
                                         {"scale_o_first", {false, 0, true}},
                                         {"scale_o_first,virtual_stats", {true, 0, true}}};
  // For a run under compute-sanitizer: SERVECAST_FP8FMHA_ONLY=NAME runs that variant on
  // the two smallest shapes only.
  const char* only = std::getenv("SERVECAST_FP8FMHA_ONLY");
  int variants_run = 0;
  for (const Variant& v : variants) {
    if (only && std::string(only) != v.name) continue;
    ++variants_run;
    std::unique_ptr<collect::Op> op = MakeAttentionContextOp(1.0, v.options);
    int passed = 0, incorrect = 0;
    for (const AttnCase& a : cases) {
      if (only && &a - cases.data() >= 2) break;
      const collect::Case c = MakeCase("attention_context", a);
      const collect::CaseResult r = op->Run(c, ctx);
      std::printf("[fp8 fmha %s] b=%lld s=%lld h=%lld/%lld -> %s\n", v.name, static_cast<long long>(a.batch),
                  static_cast<long long>(a.isl), static_cast<long long>(a.heads), static_cast<long long>(a.kv_heads),
                  r.disposition == Disposition::kPassed
                      ? std::get<std::string>(r.rows.at(0).Get("kernel_source")).c_str()
                      : Describe(r).substr(0, 400).c_str());
      if (r.disposition == Disposition::kPassed) {
        ++passed;
        EXPECT_EQ(r.rows.size(), 1u) << c.id;
      } else if (r.disposition == Disposition::kIncorrect) {
        ++incorrect;
        EXPECT_TRUE(r.rows.empty()) << c.id;
        EXPECT_NE(Describe(r).find("IncorrectOutput"), std::string::npos) << c.id << " -> " << Describe(r);
      } else {
        EXPECT_EQ(r.disposition, Disposition::kNotSupported) << v.name << " " << c.id << " -> " << Describe(r);
        EXPECT_GE(v.options.skip_configs, 2) << "only skipping every engine configuration leaves none: " << c.id;
      }
    }
    std::printf("[fp8 fmha %s] %d passed, %d incorrect, %zu cases\n", v.name, passed, incorrect,
                only ? std::min<std::size_t>(2, cases.size()) : cases.size());
  }
  if (variants_run == 0) ADD_FAILURE() << "SERVECAST_FP8FMHA_ONLY='" << only << "' names no variant";
}

}  // namespace
}  // namespace servecast::cuda
