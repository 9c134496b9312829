// The cuda `moe` op on a real GPU: small layers of every dtype, balanced and power-law
// routings, each expert-GEMM path (cuBLASLt per expert, the grouped kernel at several
// rows per tile, autotuned) against the stage-by-stage double-precision host
// reference; the check catches a wrong result; the registered op emits a moe_perf row.
#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/cuda/moe_grouped_gemm.h"
#include "backends/cuda/moe_ops.h"
#include "collect/case.h"
#include "collect/registry.h"
#include "gpu_test_util.h"

namespace servecast::cuda::moe {
namespace {

using collect::Disposition;
using testing::QuickContext;

struct Layer {
  std::int64_t tokens, hidden, inter, topk, experts, tp, ep;
};

collect::Case MoeCase(const std::string& dtype, const Layer& l, const std::string& distribution) {
  collect::Case c;
  c.op = "moe";
  c.params = collect::Params{{"moe_dtype", dtype},    {"num_tokens", l.tokens}, {"hidden_size", l.hidden},
                             {"inter_size", l.inter}, {"topk", l.topk},         {"num_experts", l.experts},
                             {"moe_tp_size", l.tp},   {"moe_ep_size", l.ep},    {"distribution", distribution}};
  c.id = collect::MakeCaseId(c.op, c.params);
  return c;
}

std::string Describe(const MoeRunReport& rep) {
  return std::string(collect::ToString(rep.result.disposition)) + " " + rep.result.error_type + ": " +
         rep.result.message + " | " + rep.kernel_source + " | samples " + std::to_string(rep.samples) + "\n" +
         rep.check_summary;
}

using Param = std::tuple<std::string, std::string, int>;  // dtype, distribution, layer index

const std::vector<Layer>& Layers() {
  static const std::vector<Layer> layers = {
      {1, 256, 256, 2, 8, 1, 1},     // one token
      {7, 256, 512, 2, 8, 2, 2},     // tp 2, ep 2: some tokens have no local expert
      {33, 384, 256, 4, 16, 1, 1},   // hidden 3 x 128
      {130, 256, 512, 8, 64, 2, 4},  // many experts, some empty
      {600, 384, 640, 2, 8, 1, 1},   // ~150 rows per expert: several 128-row tiles
      {40, 336, 368, 4, 16, 1, 2},   // column and k tails (336, 2 x 368 = 736 not multiples of 128)
  };
  return layers;
}

class MoeMatchesReference : public ::testing::TestWithParam<Param> {};


std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  std::string d = std::get<1>(info.param);
  for (char& ch : d)
    if (ch == '.') ch = '_';
  return std::get<0>(info.param) + "_" + d + "_layer" + std::to_string(std::get<2>(info.param));
}

TEST_P(MoeMatchesReference, OnSmallLayers) {
  SC_REQUIRE_GPU();
  const auto& [dtype, distribution, layer] = GetParam();
  const Layer& l = Layers()[static_cast<std::size_t>(layer)];
  const bool w4 = dtype == "w4a16_mxfp4" || dtype == "int4_wo", fp8 = dtype == "fp8" || dtype == "fp8_block";
  const std::int64_t inter = l.inter / l.tp, esz = fp8 ? 1 : 2;
  const bool block_ok = l.hidden % 128 == 0 && inter % 128 == 0;
  const bool grouped_ok = (l.hidden * esz) % 16 == 0 && (inter * esz) % 16 == 0 && l.hidden % 8 == 0 &&
                          (dtype != "fp8_block" || block_ok) && (!w4 || l.hidden % 16 == 0);
  // cuBLASLt per expert, the mma.sync grouped kernel at 8 .. 128 rows per tile, the
  // wgmma one (Hopper builds) at 8 / 64 / 128, and the autotuned choice.
  struct Path {
    int bt;
    bool wgmma;
  };
  const bool wgmma_runs = MoeGroupedWgmmaRuns();
  for (const Path& p : std::vector<Path>{{0, false}, {8, false}, {32, false}, {64, false}, {128, false},
                                         {8, true}, {64, true}, {128, true}, {-1, false}}) {
    MoeRunOptions opt;
    opt.time = false;
    opt.force_bt = p.bt;
    opt.force_wgmma = p.wgmma;
    const MoeRunReport rep = RunMoeCase(MoeCase(dtype, l, distribution), QuickContext(), opt);
    std::printf("[moe %s %s layer %d path %d%s] %s\n", dtype.c_str(), distribution.c_str(), layer, p.bt,
                p.wgmma ? " wgmma" : "", Describe(rep).c_str());
    if (dtype == "fp8_block" && !block_ok) {
      EXPECT_EQ(rep.result.disposition, Disposition::kNotSupported) << Describe(rep);
      continue;
    }
    // cuBLASLt has no weight-only 4-bit matmul: the grouped kernels run those types.
    if (w4 && p.bt == 0) {
      EXPECT_EQ(rep.result.disposition, Disposition::kNotSupported) << Describe(rep);
      continue;
    }
    if (p.bt > 0 && (!grouped_ok || (p.wgmma && !wgmma_runs) || (!p.wgmma && fp8 && p.bt > 64))) {
      EXPECT_EQ(rep.result.disposition, Disposition::kNotSupported) << Describe(rep);
      continue;
    }
    EXPECT_EQ(rep.result.disposition, Disposition::kPassed)
        << "path " << p.bt << (p.wgmma ? " wgmma" : "") << ": " << Describe(rep);
    if (p.bt == 0) {
      EXPECT_EQ(rep.kernel_source, kMoeCublasLtSource);
    }
    if (p.bt > 0) {
      EXPECT_EQ(rep.kernel_source, (p.wgmma ? kMoeWgmmaSourcePrefix : kMoeGroupedSourcePrefix) + std::to_string(p.bt));
    }
    EXPECT_EQ(rep.kernel_source.rfind("servecast_moe:", 0), 0u) << rep.kernel_source;
    EXPECT_EQ(rep.samples, distribution == "balanced" ? 1 : 5);
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, MoeMatchesReference,
                         ::testing::Combine(::testing::Values("bfloat16", "fp8", "fp8_block", "w4a16_mxfp4",
                                                              "int4_wo"),
                                            ::testing::Values("balanced", "power_law_1.2"),
                                            ::testing::Values(0, 1, 2, 3, 4, 5)),
                         ParamName);

class MoeCheckCatchesWrongResults : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeCheckCatchesWrongResults, WhenTheReferenceDiffers) {
  SC_REQUIRE_GPU();
  const collect::Case c = MoeCase(GetParam(), Layers()[2], "power_law_1.01");
  MoeRunOptions opt;
  opt.time = false;
  const bool w4 = GetParam() == "w4a16_mxfp4" || GetParam() == "int4_wo";
  for (int bt : {0, 16, 64}) {
    if (w4 && bt == 0) continue;  // no cuBLASLt path for the 4-bit types
    opt.force_bt = bt;
    opt.force_wgmma = bt == 64 && MoeGroupedWgmmaRuns();
    opt.perturb_reference = 0.1;  // the reference output 10% larger than the layer's
    const MoeRunReport bad = RunMoeCase(c, QuickContext(), opt);
    EXPECT_EQ(bad.result.disposition, Disposition::kIncorrect) << Describe(bad);
    EXPECT_EQ(bad.result.error_type, "IncorrectOutput");
    opt.perturb_reference = 0;
    const MoeRunReport ok = RunMoeCase(c, QuickContext(), opt);
    EXPECT_EQ(ok.result.disposition, Disposition::kPassed) << Describe(ok);
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, MoeCheckCatchesWrongResults,
                         ::testing::Values("bfloat16", "fp8", "fp8_block", "w4a16_mxfp4", "int4_wo"));

// gpt-oss's expert shape at moe_tp 4 (hidden 2880, inter 2880 / 4 = 720: the down GEMM's
// k is padded to 768 in the 4-bit layout, as engines pad it) and Kimi-K2.5's at moe_tp 8
// (hidden 7168, inter 256), each autotuned, and at 8 and 64 rows per tile on both
// grouped kernels.
TEST(MoeW4, ModelShapesMatchTheReference) {
  SC_REQUIRE_GPU();
  const std::vector<std::pair<std::string, Layer>> cases = {
      {"w4a16_mxfp4", {24, 2880, 2880, 4, 32, 4, 1}},
      {"w4a16_mxfp4", {3, 2880, 2880, 4, 128, 1, 8}},
      {"int4_wo", {20, 7168, 2048, 8, 64, 8, 1}},
  };
  struct Path {
    int bt;
    bool wgmma;
  };
  for (const auto& [dtype, l] : cases)
    for (const Path& p : std::vector<Path>{{-1, false}, {8, false}, {64, false}, {8, true}, {64, true}}) {
      if (p.wgmma && !MoeGroupedWgmmaRuns()) continue;
      MoeRunOptions opt;
      opt.time = false;
      opt.force_bt = p.bt;
      opt.force_wgmma = p.wgmma;
      const MoeRunReport rep = RunMoeCase(MoeCase(dtype, l, "power_law_1.2"), QuickContext(), opt);
      std::printf("[moe %s hidden %lld inter/tp %lld bt %d%s] %s\n", dtype.c_str(), static_cast<long long>(l.hidden),
                  static_cast<long long>(l.inter / l.tp), p.bt, p.wgmma ? " wgmma" : "", Describe(rep).c_str());
      EXPECT_EQ(rep.result.disposition, Disposition::kPassed) << Describe(rep);
      EXPECT_EQ(rep.kernel_source.rfind("servecast_moe:grouped_", 0), 0u) << rep.kernel_source;
    }
}

// relu2 (not gated) experts, Nemotron-H's: every expert-GEMM path on the small layers
// and Nemotron-3-Nano's shape at moe_tp 1 and 8 against the reference, a perturbed
// reference caught, ",nongated" in the kernel source, and only bfloat16 taken.
TEST(MoeRelu2, MatchesTheReferenceOnEveryPath) {
  SC_REQUIRE_GPU();
  auto relu2 = [](collect::Case c) {
    c.params.Set("expert_act", Value(std::string("relu2")));
    c.id = collect::MakeCaseId(c.op, c.params);
    return c;
  };
  std::vector<Layer> layers = Layers();
  layers.push_back({48, 2688, 1856, 6, 128, 1, 1});  // NVIDIA-Nemotron-3-Nano-30B-A3B
  layers.push_back({300, 2688, 1856, 6, 128, 8, 1});  // its moe_tp 8 slice (inter 232)
  for (const Layer& l : layers)
    for (int bt : {-1, 0, 16, 64}) {
      MoeRunOptions opt;
      opt.time = false;
      opt.force_bt = bt;
      opt.force_wgmma = bt == 64 && MoeGroupedWgmmaRuns();
      const MoeRunReport rep = RunMoeCase(relu2(MoeCase("bfloat16", l, "power_law_1.2")), QuickContext(), opt);
      EXPECT_EQ(rep.result.disposition, Disposition::kPassed) << Describe(rep);
      EXPECT_NE(rep.kernel_source.find(",nongated"), std::string::npos) << rep.kernel_source;
    }
  MoeRunOptions opt;
  opt.time = false;
  opt.perturb_reference = 0.1;
  const MoeRunReport bad = RunMoeCase(relu2(MoeCase("bfloat16", Layers()[2], "balanced")), QuickContext(), opt);
  EXPECT_EQ(bad.result.disposition, Disposition::kIncorrect) << Describe(bad);
  opt.perturb_reference = 0;
  const MoeRunReport fp8 = RunMoeCase(relu2(MoeCase("fp8", Layers()[0], "balanced")), QuickContext(), opt);
  EXPECT_EQ(fp8.result.disposition, Disposition::kNotSupported) << Describe(fp8);
  collect::Case act = MoeCase("bfloat16", Layers()[0], "balanced");
  act.params.Set("expert_act", Value(std::string("gelu")));
  const MoeRunReport wrong = RunMoeCase(act, QuickContext(), opt);
  EXPECT_EQ(wrong.result.disposition, Disposition::kFailed) << Describe(wrong);
  EXPECT_NE(wrong.result.message.find("expert_act 'gelu'"), std::string::npos) << wrong.result.message;
}

TEST(MoeOp, EmitsOneTimedRow) {
  SC_REQUIRE_GPU();
  collect::Registry registry;
  RegisterMoeOps(registry);
  collect::Op* op = registry.FindOp("cuda", "moe");
  ASSERT_NE(op, nullptr);
  EXPECT_FALSE(op->unverified());
  for (const char* dtype : {"bfloat16", "fp8", "fp8_block"})
    for (const char* distribution : {"balanced", "power_law_1.2"}) {
      const collect::Case c = MoeCase(dtype, Layer{64, 512, 768, 4, 32, 1, 2}, distribution);
      EXPECT_GT(op->MemoryBytes(c.params), 0);
      const collect::CaseResult r = op->Run(c, QuickContext());
      ASSERT_EQ(r.disposition, Disposition::kPassed) << dtype << " " << distribution << ": " << r.message;
      ASSERT_EQ(r.rows.size(), 1u);
      const collect::Params& row = r.rows[0];
      EXPECT_EQ(row.Str("op_name"), "moe");
      EXPECT_EQ(row.Str("moe_dtype"), dtype);
      EXPECT_EQ(row.Str("distribution"), distribution);
      EXPECT_EQ(row.Str("kernel_source").rfind("servecast_moe:", 0), 0u) << row.Str("kernel_source");
      EXPECT_GT(row.Num("latency"), 0);
      EXPECT_LE(row.Num("latency_p10"), row.Num("latency_p90"));
      std::printf("[moe row %s %s] latency %.4f ms timing %s l2 %s samples %lld\n", dtype, distribution,
                  row.Num("latency"), row.Str("timing").c_str(), row.Str("l2").c_str(),
                  static_cast<long long>(row.Int("samples")));
    }
}

TEST(MoeOp, RejectsBadShapesBeforeTouchingTheGpu) {
  SC_REQUIRE_GPU();
  MoeRunOptions opt;
  opt.time = false;
  // fp8_block needs hidden and inter / tp multiples of 128.
  const MoeRunReport block =
      RunMoeCase(MoeCase("fp8_block", Layer{4, 320, 256, 2, 8, 1, 1}, "balanced"), QuickContext(), opt);
  EXPECT_EQ(block.result.disposition, Disposition::kNotSupported) << Describe(block);
  const MoeRunReport nvfp4 =
      RunMoeCase(MoeCase("nvfp4", Layer{4, 256, 256, 2, 8, 1, 1}, "balanced"), QuickContext(), opt);
  EXPECT_EQ(nvfp4.result.disposition, Disposition::kNotSupported);
  const MoeRunReport ep =
      RunMoeCase(MoeCase("bfloat16", Layer{4, 256, 256, 2, 8, 1, 3}, "balanced"), QuickContext(), opt);
  EXPECT_EQ(ep.result.disposition, Disposition::kFailed);  // 8 experts over 3 EP ranks
}

}  // namespace
}  // namespace servecast::cuda::moe
