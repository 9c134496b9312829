// The CUDA DSA module ops (backends/cuda/dsa_ops.h) against their double-precision
// stage references on small shapes: both architectures' geometries, bf16 and
// fp8_block GEMMs, bf16 and fp8 latent caches, prefill from an empty cache and over a
// cached prefix that crosses the 2,048-key top-k mid-sequence, decode below and above
// the top-k (the radix select on real scores), one and several sequences; a perturbed
// reference that must fail; the invalid and not_supported paths.

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "backends/cuda/dsa_ops.h"
#include "collect/case.h"
#include "collect/op.h"
#include "gpu_test_util.h"

namespace servecast::cuda {
namespace {

using collect::Disposition;

struct DsaCase {
  bool context;
  std::string arch;
  std::string gemm, kv;
  std::int64_t heads, batch, isl, step;
};

collect::Case MakeDsaCase(const DsaCase& d) {
  collect::Case c;
  c.op = d.context ? "dsa_context_module" : "dsa_generation_module";
  c.params = collect::Params{{"model", std::string("test/dsa")},
                             {"architecture", d.arch},
                             {"mla_dtype", std::string("bfloat16")},
                             {"kv_cache_dtype", d.kv},
                             {"gemm_type", d.gemm},
                             {"num_heads", d.heads},
                             {"batch_size", d.batch},
                             {"isl", d.isl},
                             {"tp_size", std::int64_t{1}},
                             {"step", d.step}};
  c.id = collect::MakeCaseId(c.op, c.params);
  return c;
}

std::string Describe(const collect::CaseResult& r) {
  return std::string(collect::ToString(r.disposition)) + ": " + r.error_type + " " + r.message;
}

const std::string kDs = "DeepseekV32ForCausalLM", kGlm = "GlmMoeDsaForCausalLM";

TEST(DsaModule, SmallShapesMatchTheReference) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  const std::vector<DsaCase> cases = {
      {true, kDs, "bfloat16", "bfloat16", 16, 1, 37, 0},      // prefill, empty cache, all keys kept
      {true, kDs, "fp8_block", "fp8", 8, 2, 64, 2010},      // over a prefix: the top-k starts selecting mid-way
      {true, kGlm, "bfloat16", "fp8", 4, 1, 100, 0},        // GLM-5: nope 192, v 256, 32 index heads
      {false, kDs, "fp8_block", "fp8", 128, 3, 1, 700},     // decode below the top-k, 128 heads
      {false, kDs, "bfloat16", "bfloat16", 32, 2, 1, 5000}, // decode above it
      {false, kGlm, "fp8_block", "bfloat16", 1, 5, 1, 2500},
  };
  for (const DsaCase& d : cases) {
    std::unique_ptr<collect::Op> op = MakeDsaOp(d.context);
    const collect::Case c = MakeDsaCase(d);
    const collect::CaseResult r = op->Run(c, ctx);
    ASSERT_EQ(r.disposition, Disposition::kPassed) << c.id << " -> " << Describe(r);
    ASSERT_EQ(r.rows.size(), 1u) << c.id;
    EXPECT_EQ(std::get<std::string>(r.rows[0].Get("op_name")), c.op);
    EXPECT_GT(std::get<double>(r.rows[0].Get("latency")), 0.0);
    EXPECT_EQ(std::get<std::string>(r.rows[0].Get("kernel_source")).rfind("servecast_dsa:", 0), 0u);
  }
}

TEST(DsaModule, PerturbedReferenceFails) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  for (const DsaCase& d : {DsaCase{true, kDs, "bfloat16", "bfloat16", 8, 1, 48, 0},
                           DsaCase{false, kGlm, "fp8_block", "fp8", 16, 2, 1, 3000}}) {
    std::unique_ptr<collect::Op> op = MakeDsaOp(d.context, 1.05);
    const collect::Case c = MakeDsaCase(d);
    const collect::CaseResult r = op->Run(c, ctx);
    EXPECT_EQ(r.disposition, Disposition::kIncorrect) << c.id << " -> " << Describe(r);
  }
}

TEST(DsaModule, RefusesWhatItCannotRun) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  std::unique_ptr<collect::Op> gen = MakeDsaOp(false);
  collect::CaseResult r = gen->Run(MakeDsaCase({false, kDs, "bfloat16", "bfloat16", 8, 1, 4, 100}), ctx);
  EXPECT_EQ(r.disposition, Disposition::kFailed) << Describe(r);  // generation has isl 1
  r = gen->Run(MakeDsaCase({false, "LlamaForCausalLM", "bfloat16", "bfloat16", 8, 1, 1, 100}), ctx);
  EXPECT_EQ(r.disposition, Disposition::kFailed) << Describe(r);  // no DSA geometry
  r = gen->Run(MakeDsaCase({false, kDs, "fp8", "bfloat16", 8, 1, 1, 100}), ctx);
  EXPECT_EQ(r.disposition, Disposition::kNotSupported) << Describe(r);
  r = gen->Run(MakeDsaCase({false, kDs, "bfloat16", "int8", 8, 1, 1, 100}), ctx);
  EXPECT_EQ(r.disposition, Disposition::kNotSupported) << Describe(r);
}

}  // namespace
}  // namespace servecast::cuda
