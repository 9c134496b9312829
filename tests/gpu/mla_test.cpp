// The CUDA MLA ops (backends/cuda/mla_ops.h) against their double-precision
// references on small shapes: the decode kernel's three head tiles (16, 32, 64
// local heads, and head counts that leave rows of a tile empty), split and unsplit
// KV, partial last pages (their tail poisoned), bf16 and fp8 latent caches; the
// prefill's cache write and cuDNN SDPA at q/k 192, v 128; the per-head BMMs in bf16
// and fp8; the not_supported paths; perturbed references that must fail. The
// decode kernel's rates at large shapes are benchmarks/bench_op_rates.cpp's.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "backends/cuda/mla_kernels.h"
#include "backends/cuda/mla_ops.h"
#include "collect/case.h"
#include "collect/op.h"
#include "gpu_test_util.h"

namespace servecast::cuda {
namespace {

using collect::Disposition;

struct MlaCase {
  std::int64_t batch, isl, heads, step;
  std::string kv_dtype = "bfloat16", mla_dtype = "bfloat16";
};

collect::Case MakeMlaCase(const std::string& op, const MlaCase& m) {
  collect::Case c;
  c.op = op;
  c.params = collect::Params{{"mla_dtype", m.mla_dtype},
                             {"kv_cache_dtype", m.kv_dtype},
                             {"num_heads", m.heads},
                             {"batch_size", m.batch},
                             {"isl", m.isl},
                             {"tp_size", std::int64_t{128} / std::max<std::int64_t>(1, m.heads)},
                             {"step", m.step}};
  c.id = collect::MakeCaseId(op, c.params);
  return c;
}

collect::Case MakeBmmCase(const std::string& op, const std::string& dtype, std::int64_t tokens, std::int64_t heads) {
  collect::Case c;
  c.op = op;
  c.params = collect::Params{{"bmm_dtype", dtype}, {"num_tokens", tokens}, {"num_heads", heads}};
  c.id = collect::MakeCaseId(op, c.params);
  return c;
}

std::string Describe(const collect::CaseResult& r) {
  return std::string(collect::ToString(r.disposition)) + ": " + r.error_type + " " + r.message;
}

std::string Source(const collect::CaseResult& r) {
  return std::get<std::string>(r.rows.at(0).Get("kernel_source"));
}

TEST(MlaGeneration, SmallShapesMatchReference) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  std::unique_ptr<collect::Op> op = MakeMlaGenerationOp();
  const std::string f = "fp8";
  const std::vector<MlaCase> cases = {
      {1, 1, 16, 0},           // one cached token
      {2, 1, 16, 100},         // 16 heads, a partial last page (its tail poisoned)
      {3, 1, 8, 1000},         // 8 heads: half the row tile empty; split KV
      {2, 1, 32, 777},         // 32-head tile
      {2, 1, 64, 4095},        // 64-head tile, exactly 64 pages
      {1, 1, 128, 20000},      // two head blocks of 64, many splits
      {64, 1, 128, 63},        // large batch, one page: no split
      {4, 1, 1, 300},          // one head
      {2, 1, 24, 500},         // 24 heads: a 32-row tile with 8 empty rows
      {1, 1, 16, 65535},       // 16 heads, 1,024 pages over many splits
      {2, 1, 64, 20000},       // 64 heads, split, a partial last page
      {3, 1, 16, 1000, f},     // fp8 latent cache
      {2, 1, 64, 2047, f},     // fp8, 64-head tile
      {1, 1, 128, 31, f},      // fp8, half a page
  };
  for (const MlaCase& m : cases) {
    collect::Case c = MakeMlaCase("mla_generation", m);
    collect::CaseResult r = op->Run(c, ctx);
    EXPECT_EQ(r.disposition, Disposition::kPassed) << c.id << " -> " << Describe(r);
    if (r.disposition == Disposition::kPassed) {
      ASSERT_EQ(r.rows.size(), 1u);
      EXPECT_NE(Source(r).find("servecast_mla_decode_"), std::string::npos) << Source(r);
      // A bf16 cache runs the wgmma kernel where it can (an sm_90a build on Hopper).
      EXPECT_EQ(Source(r).find(",wgmma,") != std::string::npos, m.kv_dtype == "bfloat16" && MlaDecodeWgmmaRuns())
          << Source(r);
    }
  }
}

TEST(MlaGeneration, PerturbedReferenceFails) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  std::unique_ptr<collect::Op> op = MakeMlaGenerationOp(1.05);
  for (const MlaCase& m : {MlaCase{2, 1, 16, 300}, MlaCase{2, 1, 64, 1000, "fp8"}}) {
    collect::Case c = MakeMlaCase("mla_generation", m);
    collect::CaseResult r = op->Run(c, ctx);
    EXPECT_EQ(r.disposition, Disposition::kIncorrect) << c.id << " -> " << Describe(r);
  }
}

TEST(MlaGeneration, UnsupportedCasesSayWhy) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  std::unique_ptr<collect::Op> op = MakeMlaGenerationOp();
  collect::CaseResult r = op->Run(MakeMlaCase("mla_generation", {2, 4, 16, 100}), ctx);
  EXPECT_EQ(r.disposition, Disposition::kNotSupported) << Describe(r);
  r = op->Run(MakeMlaCase("mla_generation", {2, 1, 16, 100, "bfloat16", "fp8"}), ctx);
  EXPECT_EQ(r.disposition, Disposition::kNotSupported) << Describe(r);
  EXPECT_NE(r.message.find("mla_dtype"), std::string::npos) << r.message;
}

TEST(MlaGeneration, PlanCoversTheHeadsAndTheCache) {
  SC_REQUIRE_GPU();
  for (std::int64_t heads : {1, 8, 16, 24, 32, 64, 128})
    for (std::int64_t tokens : {1, 33, 4096, 131072})
      for (KvDtype kv : {KvDtype::kBf16, KvDtype::kFp8E4m3}) {
        const MlaDecodeShape s{4, heads, tokens};
        const MlaDecodePlan p = PlanMlaDecode(s, 132, kv);
        EXPECT_GE(p.head_tile * p.head_blocks, heads);
        EXPECT_LT(p.head_tile * (p.head_blocks - 1), heads);
        EXPECT_EQ(p.wgmma, kv == KvDtype::kBf16 && MlaDecodeWgmmaRuns()) << p.Describe();
        EXPECT_EQ(p.tile_tokens, p.wgmma ? 64 : 32);
        EXPECT_FALSE(PlanMlaDecode(s, 132, kv, /*gathered=*/true).wgmma);
        const std::int64_t tiles = (tokens + p.tile_tokens - 1) / p.tile_tokens;
        EXPECT_GE(p.tiles_per_split * p.splits, tiles) << p.Describe();
        EXPECT_LT(p.tiles_per_split * (p.splits - 1), tiles) << p.Describe();  // no empty split
        EXPECT_LE(p.splits, 64);
        EXPECT_EQ(p.workspace_bytes > 0, p.splits > 1);
      }
}

TEST(MlaContext, SmallShapesMatchReference) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  std::unique_ptr<collect::Op> op = MakeMlaContextOp();
  const std::vector<MlaCase> cases = {
      {1, 1, 16, 0},             // one token
      {2, 100, 16, 0},           // a partial page
      {1, 300, 128, 0},          // 128 heads
      {3, 64, 8, 0, "fp8"},      // fp8 latent cache, one page each
      {2, 257, 32, 0, "fp8"},    // fp8, a partial last page
  };
  for (const MlaCase& m : cases) {
    collect::Case c = MakeMlaCase("mla_context", m);
    collect::CaseResult r = op->Run(c, ctx);
    EXPECT_EQ(r.disposition, Disposition::kPassed) << c.id << " -> " << Describe(r);
    if (r.disposition == Disposition::kPassed) {
      EXPECT_NE(Source(r).find("d_qk=192,d_v=128+servecast_mla_cache_write_"), std::string::npos) << Source(r);
    }
  }
  std::unique_ptr<collect::Op> wrong = MakeMlaContextOp(1.05);
  collect::CaseResult r = wrong->Run(MakeMlaCase("mla_context", {2, 100, 16, 0}), ctx);
  EXPECT_EQ(r.disposition, Disposition::kIncorrect) << Describe(r);
  r = op->Run(MakeMlaCase("mla_context", {2, 100, 16, 5}), ctx);
  EXPECT_EQ(r.disposition, Disposition::kNotSupported) << Describe(r);
}

TEST(MlaBmm, SmallShapesMatchReference) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  for (bool pre : {true, false}) {
    std::unique_ptr<collect::Op> op = MakeMlaBmmOp(pre);
    const std::string name = pre ? "mla_gen_pre" : "mla_gen_post";
    for (const std::string dtype : {"bfloat16", "fp8"})
      for (auto [tokens, heads] : std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 128}, {37, 16}, {512, 1}}) {
        collect::Case c = MakeBmmCase(name, dtype, tokens, heads);
        collect::CaseResult r = op->Run(c, ctx);
        EXPECT_EQ(r.disposition, Disposition::kPassed) << c.id << " -> " << Describe(r);
        if (r.disposition == Disposition::kPassed) {
          EXPECT_EQ(std::get<std::string>(r.rows[0].Get("op_name")), name);
          EXPECT_NE(Source(r).find("batched"), std::string::npos) << Source(r);
        }
      }
    std::unique_ptr<collect::Op> wrong = MakeMlaBmmOp(pre, 1.05);
    collect::CaseResult r = wrong->Run(MakeBmmCase(name, "bfloat16", 64, 8), ctx);
    EXPECT_EQ(r.disposition, Disposition::kIncorrect) << Describe(r);
  }
}

}  // namespace
}  // namespace servecast::cuda
