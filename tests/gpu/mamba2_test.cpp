// The CUDA Mamba2 op (backends/cuda/mamba2_ops.h) against its double-precision
// reference on small shapes: the prefill convolution (with bias) and chunked SSD scan
// (one token, sequences shorter than the convolution's window, exactly one chunk, a
// partial last chunk, chunks of 256, d_state 64 / 128 / 256, one and eight groups, a
// sequence past the reference's prefix, Nemotron-3-Nano's shape) and the decode
// convolution update and state update; two rows per case, one per kernel; perturbed
// references that must fail; the invalid and not_supported paths.

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "backends/cuda/mamba2_ops.h"
#include "collect/case.h"
#include "collect/op.h"
#include "gpu_test_util.h"

namespace servecast::cuda {
namespace {

using collect::Disposition;

struct Mamba2Case {
  std::string phase;
  std::int64_t batch, seq, nh, groups;
  std::int64_t state = 128, chunk = 128, head_dim = 64, conv = 4, tokens = -1;  // tokens -1: batch x seq
};

collect::Case MakeMamba2Case(const Mamba2Case& m) {
  collect::Case c;
  c.op = "mamba2";
  c.params = collect::Params{{"phase", m.phase},
                             {"batch_size", m.batch},
                             {"seq_len", m.seq},
                             {"num_tokens", m.tokens < 0 ? m.batch * m.seq : m.tokens},
                             {"d_model", std::int64_t{2688}},
                             {"d_state", m.state},
                             {"d_conv", m.conv},
                             {"nheads", m.nh},
                             {"head_dim", m.head_dim},
                             {"n_groups", m.groups},
                             {"chunk_size", m.chunk},
                             {"model_name", std::string("test/mamba2")}};
  c.id = collect::MakeCaseId("mamba2", c.params);
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
    EXPECT_EQ(std::get<std::string>(row.Get("op_name")), "mamba2");
    EXPECT_GT(std::get<double>(row.Get("latency")), 0.0);
    sources.insert(std::get<std::string>(row.Get("kernel_source")));
  }
  EXPECT_EQ(sources.size(), 2u);
  EXPECT_EQ(std::get<std::string>(r.rows[0].Get("kernel_source")).rfind(conv, 0), 0u);
  EXPECT_EQ(std::get<std::string>(r.rows[1].Get("kernel_source")).rfind(scan, 0), 0u);
}

TEST(Mamba2Context, SmallShapesMatchReference) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  std::unique_ptr<collect::Op> op = MakeMamba2Op();
  const std::vector<Mamba2Case> cases = {
      {"context", 1, 1, 2, 1},                 // one token: the window mostly zeros
      {"context", 2, 2, 4, 2},                 // shorter than the window (d_conv - 1 = 3)
      {"context", 2, 128, 4, 1},               // exactly one chunk, 4 heads per group
      {"context", 3, 300, 8, 2},               // a partial last chunk
      {"context", 2, 600, 4, 4, 128, 256},     // chunks of 256
      {"context", 2, 200, 4, 2, 64},           // d_state 64
      {"context", 1, 333, 2, 1, 256},          // d_state 256
      {"context", 1, 4500, 2, 1},              // past the reference's 4096-token prefix (the last pair in full)
      {"context", 1, 1000, 64, 8},             // NVIDIA-Nemotron-3-Nano-30B-A3B at tp 1
  };
  for (const Mamba2Case& m : cases) {
    const collect::Case c = MakeMamba2Case(m);
    ExpectPassedWithTwoRows(c, op->Run(c, ctx), "servecast_causal_conv1d:", "servecast_ssd_chunk");
  }
}

TEST(Mamba2Generation, SmallShapesMatchReference) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  std::unique_ptr<collect::Op> op = MakeMamba2Op();
  const std::vector<Mamba2Case> cases = {
      {"generation", 1, 1, 2, 1},
      {"generation", 7, 1, 4, 2},
      {"generation", 5, 1, 2, 1, 64},
      {"generation", 3, 1, 2, 2, 256},
      {"generation", 64, 1, 64, 8},  // NVIDIA-Nemotron-3-Nano-30B-A3B at tp 1
  };
  for (const Mamba2Case& m : cases) {
    const collect::Case c = MakeMamba2Case(m);
    ExpectPassedWithTwoRows(c, op->Run(c, ctx), "servecast_causal_conv1d_update:", "servecast_selective_state_update");
  }
}

TEST(Mamba2Context, PerturbedReferenceFails) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  std::unique_ptr<collect::Op> op = MakeMamba2Op(1.05);
  for (const Mamba2Case& m : {Mamba2Case{"context", 2, 300, 4, 2}, Mamba2Case{"generation", 4, 1, 4, 2}}) {
    const collect::Case c = MakeMamba2Case(m);
    const collect::CaseResult r = op->Run(c, ctx);
    EXPECT_EQ(r.disposition, Disposition::kIncorrect) << c.id << " -> " << Describe(r);
    EXPECT_TRUE(r.rows.empty());
  }
}

TEST(Mamba2Context, InvalidAndUnsupportedCasesSayWhy) {
  SC_REQUIRE_GPU();
  const collect::RunContext ctx = testing::QuickContext();
  std::unique_ptr<collect::Op> op = MakeMamba2Op();
  Mamba2Case dims{"context", 1, 16, 2, 1};
  dims.head_dim = 128;
  collect::CaseResult r = op->Run(MakeMamba2Case(dims), ctx);
  EXPECT_EQ(r.disposition, Disposition::kNotSupported) << Describe(r);
  EXPECT_NE(r.message.find("head_dim must be 64"), std::string::npos) << r.message;
  Mamba2Case chunk{"context", 1, 16, 2, 1};
  chunk.chunk = 100;
  r = op->Run(MakeMamba2Case(chunk), ctx);
  EXPECT_EQ(r.disposition, Disposition::kNotSupported) << Describe(r);
  EXPECT_NE(r.message.find("chunk_size must be"), std::string::npos) << r.message;
  Mamba2Case tokens{"context", 2, 16, 2, 1};
  tokens.tokens = 16;
  r = op->Run(MakeMamba2Case(tokens), ctx);
  EXPECT_EQ(r.disposition, Disposition::kFailed) << Describe(r);
  EXPECT_NE(r.message.find("num_tokens 16 is not batch_size x seq_len (32)"), std::string::npos) << r.message;
  r = op->Run(MakeMamba2Case({"generation", 2, 2, 2, 1}), ctx);
  EXPECT_EQ(r.disposition, Disposition::kFailed) << Describe(r);
  EXPECT_NE(r.message.find("seq_len 1"), std::string::npos) << r.message;
  r = op->Run(MakeMamba2Case({"context", 1, 16, 3, 2}), ctx);
  EXPECT_EQ(r.disposition, Disposition::kFailed) << Describe(r);
  EXPECT_NE(r.message.find("not a multiple of n_groups"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace servecast::cuda
