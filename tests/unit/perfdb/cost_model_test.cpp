// The cost model (tables/cost_model.h) and the table declarations as perfdb reads
// them: SOL is the roofline at the system's rates, the gate's floors sit beside
// it, and the loaders take their key columns from the declarations.
#include "tables/cost_model.h"

#include <gtest/gtest.h>

#include "../core/core_test_util.h"
#include "core/error.h"
#include "perfdb/elementwise.h"
#include "perfdb/perf_database.h"
#include "perfdb/sol.h"
#include "system/system_spec.h"
#include "tables/table_spec.h"

namespace servecast::perfdb {
namespace {

using servecast::testing::HasText;
using servecast::testing::ThrownMessage;

Sol H200() {
  return Sol(systems::LoadSystemByName(SERVECAST_SOURCE_DIR "/systems", "h200_sxm"));
}

TEST(CostModelTest, SolIsTheRooflineAtTheSystemsRates) {
  const Sol sol = H200();
  const tables::OpCost g = tables::GemmRoofline("fp8_block", 64, 4096, 8192);
  EXPECT_EQ(g.compute_dtype, "fp8");
  EXPECT_EQ(g.flops, tables::GemmFlops(64, 4096, 8192));
  EXPECT_EQ(sol.GemmMs("fp8_block", 64, 4096, 8192), sol.Ms(g));
  const tables::OpCost c = tables::ContextAttentionRoofline(2, 1000, 24, 32, 8, 128, 0, "bfloat16", "fp8");
  EXPECT_EQ(sol.ContextAttentionMs(2, 1000, 24, 32, 8, 128, 0, "bfloat16", "fp8"), sol.Ms(c));
  const tables::OpCost d = tables::GenerationAttentionRoofline(8, 4097, 32, 8, 128, 0, "fp8", 90);
  EXPECT_EQ(d.compute_dtype, "fp8");
  EXPECT_EQ(tables::GenerationAttentionRoofline(8, 4097, 32, 8, 128, 0, "fp8", 80).compute_dtype, "bfloat16");
  EXPECT_EQ(sol.GenerationAttentionMs(8, 4097, 32, 8, 128, 0, "fp8"), sol.Ms(d));
  const tables::OpCost m = tables::MoeRoofline("fp8", 512, 4096, 1536, 8, 128, 1, 4, true);
  EXPECT_EQ(sol.MoeMs("fp8", 512, 4096, 1536, 8, 128, 1, 4), sol.Ms(m));
  // No peak rate is asked for a cost without FLOPs.
  EXPECT_EQ(sol.Ms(tables::OpCost{0, 1e9, "no-such-rate"}), sol.MemMs(1e9));
}

TEST(CostModelTest, RooflineAndFloorDifferWhereNamed) {
  // GEMM fp8: the roofline counts the output at 1 B (AIC), the floor at 2 B (bf16 out).
  const tables::OpCost r = tables::GemmRoofline("fp8", 16, 32, 64);
  const tables::OpCost f = tables::GemmFloor("fp8", 16, 32, 64);
  EXPECT_EQ(r.flops, f.flops);
  EXPECT_EQ(r.bytes, 16.0 * 32 + 16 * 64 + 32 * 64);
  EXPECT_EQ(f.bytes, (16.0 * 64 + 64 * 32) + 16 * 32 * 2);
  // Decode: the roofline attends to s - 1 keys, the floor to isl + step.
  EXPECT_EQ(tables::GenerationAttentionRoofline(1, 101, 1, 1, 1, 0, "bfloat16", 90).flops, 4.0 * 100);
  EXPECT_EQ(tables::GenerationAttentionFloor(1, 100, 1, 1, 1, 1, 0, "bfloat16", "bfloat16").flops, 4.0 * 101);
}

TEST(CostModelTest, ElementwiseSolCountsTheSlicesDtype) {
  EXPECT_EQ(tables::ElementwiseCost("rmsnorm", "bfloat16", 4, 8).bytes, (2.0 * 32 + 8) * 2);
  EXPECT_EQ(tables::ElementwiseCost("rmsnorm", "float32", 4, 8).bytes, (2.0 * 32 + 8) * 4);
  EXPECT_TRUE(HasText(ThrownMessage<Error>([] { tables::ElementwiseCost("softmax", "bfloat16", 1, 1); }),
                      "no cost model for op_name 'softmax'"));
  Table t({{"op_name", ValueType::kString},
           {"dtype", ValueType::kString},
           {"num_tokens", ValueType::kInt64},
           {"hidden_size", ValueType::kInt64},
           {"latency", ValueType::kDouble}});
  t.AppendRow({std::string("rmsnorm"), std::string("float32"), std::int64_t{4}, std::int64_t{8}, 1.0});
  t.AppendRow({std::string("rmsnorm"), std::string("bfloat16"), std::int64_t{4}, std::int64_t{8}, 1.0});
  auto sol = std::make_shared<const Sol>(H200());
  const ElementwiseTable e(t, sol);
  EXPECT_EQ(e.SolMs("rmsnorm", "float32", 4, 8), 2 * e.SolMs("rmsnorm", "bfloat16", 4, 8));
}

TEST(CostModelTest, LoadersTakeTheirKeysFromTheDeclarations) {
  const tables::TableSpec& gemm = tables::GetTableSpec("gemm_perf");
  EXPECT_EQ(gemm.LoadKeyColumns(true), (std::vector<std::string>{"gemm_dtype", "m", "n", "k"}));
  const tables::TableSpec& ctx = tables::GetTableSpec("context_attention_perf");
  const std::vector<std::string> ctx_keys = ctx.LoadKeyColumns(true);
  EXPECT_EQ(std::count(ctx_keys.begin(), ctx_keys.end(), "beam_width"), 0);
  EXPECT_EQ(ctx_keys.size(), ctx.key_columns.size() - 1);
  EXPECT_EQ(tables::GetTableSpec("nccl_perf").LoadKeyColumns(true).front(), "op_name");
  EXPECT_EQ(tables::GetTableSpec("nccl_perf").LoadKeyColumns(false).front(), "nccl_dtype");
  // A reader asking for a column the declaration lacks is told so.
  EXPECT_TRUE(HasText(ThrownMessage<Error>([&] { gemm.KeyColumn("gemm_type"); }),
                      "table gemm_perf declares no key column 'gemm_type'"));
  // Measured values (bandwidths) are not part of a row's identity.
  Table nccl({{"op_name", ValueType::kString},
              {"nccl_dtype", ValueType::kString},
              {"num_gpus", ValueType::kInt64},
              {"message_size", ValueType::kInt64},
              {"latency", ValueType::kDouble},
              {"algbw_gbps", ValueType::kDouble}});
  EXPECT_EQ(KeyColumns("nccl_perf", nccl),
            (std::vector<std::string>{"op_name", "nccl_dtype", "num_gpus", "message_size"}));
  // A table without a declaration: every column that is neither metadata nor a metric.
  Table other({{"op_name", ValueType::kString}, {"x", ValueType::kInt64}, {"latency", ValueType::kDouble}});
  EXPECT_EQ(KeyColumns("other_perf", other), (std::vector<std::string>{"op_name", "x"}));
}

}  // namespace
}  // namespace servecast::perfdb
