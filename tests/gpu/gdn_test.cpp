// The CUDA Gated DeltaNet op (backends/cuda/gdn_ops.h) against its double-precision
// reference on small shapes: the prefill convolution and chunked scan (one token,
// sequences shorter than the convolution's window, exactly one chunk, a partial last
// chunk, a sequence past the reference's prefix, GQA ratios 2, 3 and 4, d_conv 2 and
// 4) and the decode convolution update and recurrent step; two rows per case, one per
// kernel; perturbed references that must fail; the invalid and not_supported paths.

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "backends/cuda/gdn_ops.h"
#include "collect/case.h"
#include "collect/op.h"
#include "gpu_test_util.h"

namespace servecast::cuda {
namespace {

using collect::Disposition;

struct GdnCase {
  std::string phase;
  std::int64_t batch, seq, hk, hv;
  std::int64_t conv = 4, dk = 128, tokens = -1;  // tokens -1: batch x seq
};

collect::Case MakeGdnCase(const GdnCase& g) {
  collect::Case c;
  c.op = "gdn";
  c.params = collect::Params{{"phase", g.phase},
                             {"batch_size", g.batch},
                             {"seq_len", g.seq},
                             {"num_tokens", g.tokens < 0 ? g.batch * g.seq : g.tokens},
                             {"d_model", std::int64_t{2048}},
                             {"d_conv", g.conv},
                             {"num_k_heads", g.hk},
                             {"head_k_dim", g.dk},
                             {"num_v_heads", g.hv},
                             {"head_v_dim", std::int64_t{128}},
                             {"model_name", std::string("test/gdn")}};
  c.id = collect::MakeCaseId("gdn", c.params);
  return c;
}

std::string Describe(const collect::CaseResult& r) {
  return std::string(collect::ToString(r.disposition)) + ": " + r.error_type + " " + r.message;
}

void ExpectPassedWithTwoRows(const collect::Case& c, const collect::CaseResult& r, const std::string& conv,
                             const std::string& scan) {
  ASSERT_EQ(r.disposition, Disposition::kPassed) << c.id << " -> " << Describe(r);
  ASSERT_EQ(r.rows.size(), 2u) << c.id;
  std::set<std::string> sources;
  for (const auto& row : r.rows) {
    EXPECT_EQ(std::get<std::string>(row.Get("op_name")), "gdn");
    EXPECT_GT(std::get<double>(row.Get("latency")), 0.0);
    sources.insert(std::get<std::string>(row.Get("kernel_source")));
  }
  EXPECT_EQ(sources.size(), 2u);
  EXPECT_EQ(std::get<std::string>(r.rows[0].Get("kernel_source")).rfind(conv, 0), 0u);
  EXPECT_EQ(std::get<std::string>(r.rows[1].Get("kernel_source")).rfind(scan, 0), 0u);
}

TEST(GdnContext, SmallShapesMatchReference) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  std::unique_ptr<collect::Op> op = MakeGdnOp();
  const std::vector<GdnCase> cases = {
      {"context", 1, 1, 2, 4},        // one token: the window mostly zeros
      {"context", 2, 2, 2, 4},        // shorter than the window (d_conv - 1 = 3)
      {"context", 2, 64, 2, 6},       // exactly one chunk, 3 value heads per key head
      {"context", 3, 200, 4, 8},      // a partial last chunk
      {"context", 2, 100, 1, 2, 2},   // d_conv 2
      {"context", 1, 4500, 2, 4},     // past the reference's 4096-token prefix (the last pair in full)
      {"context", 1, 300, 16, 48},    // Qwen3.5-27B at tp 1
  };
  for (const GdnCase& g : cases) {
    const collect::Case c = MakeGdnCase(g);
    ExpectPassedWithTwoRows(c, op->Run(c, ctx), "servecast_causal_conv1d:", "servecast_gdn_chunk64");
  }
}

TEST(GdnGeneration, SmallShapesMatchReference) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  std::unique_ptr<collect::Op> op = MakeGdnOp();
  const std::vector<GdnCase> cases = {
      {"generation", 1, 1, 2, 4},
      {"generation", 7, 1, 2, 6},
      {"generation", 5, 1, 1, 2, 3},  // d_conv 3
      {"generation", 64, 1, 16, 64},  // Qwen3.5-397B-A17B at tp 1
  };
  for (const GdnCase& g : cases) {
    const collect::Case c = MakeGdnCase(g);
    ExpectPassedWithTwoRows(c, op->Run(c, ctx), "servecast_causal_conv1d_update:", "servecast_gdn_recurrent");
  }
}

TEST(GdnContext, PerturbedReferenceFails) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  std::unique_ptr<collect::Op> op = MakeGdnOp(1.05);
  for (const GdnCase& g : {GdnCase{"context", 2, 150, 2, 4}, GdnCase{"generation", 4, 1, 2, 4}}) {
    const collect::Case c = MakeGdnCase(g);
    const collect::CaseResult r = op->Run(c, ctx);
    EXPECT_EQ(r.disposition, Disposition::kIncorrect) << c.id << " -> " << Describe(r);
    EXPECT_TRUE(r.rows.empty());
  }
}

TEST(GdnContext, InvalidAndUnsupportedCasesSayWhy) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  std::unique_ptr<collect::Op> op = MakeGdnOp();
  GdnCase dims{"context", 1, 16, 2, 4};
  dims.dk = 64;
  collect::CaseResult r = op->Run(MakeGdnCase(dims), ctx);
  EXPECT_EQ(r.disposition, Disposition::kNotSupported) << Describe(r);
  EXPECT_NE(r.message.find("head_k_dim 64"), std::string::npos) << r.message;
  GdnCase tokens{"context", 2, 16, 2, 4};
  tokens.tokens = 16;
  r = op->Run(MakeGdnCase(tokens), ctx);
  EXPECT_EQ(r.disposition, Disposition::kFailed) << Describe(r);
  EXPECT_NE(r.message.find("num_tokens 16 is not batch_size x seq_len (32)"), std::string::npos) << r.message;
  r = op->Run(MakeGdnCase({"generation", 2, 2, 2, 4}), ctx);
  EXPECT_EQ(r.disposition, Disposition::kFailed) << Describe(r);
  EXPECT_NE(r.message.find("seq_len 1"), std::string::npos) << r.message;
  r = op->Run(MakeGdnCase({"context", 1, 16, 3, 4}), ctx);
  EXPECT_EQ(r.disposition, Disposition::kFailed) << Describe(r);
  EXPECT_NE(r.message.find("not a multiple"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace servecast::cuda
