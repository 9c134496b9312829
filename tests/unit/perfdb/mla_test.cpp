// The MLA readers (src/perfdb/mla.{h,cpp}) and rooflines (tables/cost_model.h):
// sqrt blending on the prefill sequence, raw blending on decode, the BMM's
// bfloat16 rows standing for fp8, the mode rules, and a missing table naming
// itself and the collector op.
#include "perfdb/mla.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "perfdb/declared.h"
#include "system/system_spec.h"
#include "tables/cost_model.h"
#include "tables/table_spec.h"

namespace servecast::perfdb {
namespace {

std::shared_ptr<const Sol> H200() {
  return std::make_shared<const Sol>(systems::LoadSystemByName(SERVECAST_SOURCE_DIR "/systems", "h200_sxm"));
}

const char* kMlaHeader = "mla_dtype,kv_cache_dtype,num_heads,batch_size,isl,tp_size,step,latency\n";

TEST(MlaTest, RooflinesFollowTheDeepSeekGeometry) {
  const tables::OpCost c = tables::ContextMlaRoofline(2, 4, 0, 16, "bfloat16", "fp8");
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 16 * 320 * 16);                     // b n (192 + 128) s^2
  EXPECT_DOUBLE_EQ(c.bytes, 2.0 * 16 * (1 * 4 * 320 + 2 * 4 * 320));  // b n (kv x s x 320 + 2 s 320)
  EXPECT_EQ(c.compute_dtype, "bfloat16");
  const tables::OpCost g = tables::GenerationMlaRoofline(2, 9, 16, "fp8", 90);
  EXPECT_DOUBLE_EQ(g.flops, 2.0 * 2 * 16 * 1088 * 9);
  EXPECT_DOUBLE_EQ(g.bytes, 2.0 * (2 * 16 * 1088 + 8 * 576 * 1));
  EXPECT_EQ(g.compute_dtype, "fp8");  // fp8 cache on sm 90
  const tables::OpCost b = tables::MlaBmmRoofline("fp8", 3, 16);
  EXPECT_DOUBLE_EQ(b.flops, 2.0 * 3 * 16 * 128 * 512);
  EXPECT_DOUBLE_EQ(b.bytes, 16.0 * (640 * 3 + 128 * 512) * 1);
}

TEST(MlaTest, ContextBlendsTheSequenceInSqrtSpace) {
  const ContextMlaTable t(Table::ParseCsv(std::string(kMlaHeader) + "bfloat16,bfloat16,16,1,1,8,0,1\n"
                                                                    "bfloat16,bfloat16,16,1,4,8,0,4\n"
                                                                    "bfloat16,fp8,16,1,1,8,0,2\n",
                                          "ctx.csv"),
                          H200());
  ASSERT_EQ(t.slices().size(), 2u);
  ContextMlaQuery q{1, 4, 16, "bfloat16", "bfloat16"};
  EXPECT_EQ(t.Query(q).latency_ms, 4);
  EXPECT_EQ(t.Query(q).source, EstimateSource::kSilicon);
  q.seq = 2;  // (1 + (2 - 1) / 3)^2
  EXPECT_DOUBLE_EQ(t.Query(q).latency_ms, 16.0 / 9.0);
  EXPECT_EQ(t.Query(q).source, EstimateSource::kInterpolated);
  q.mla_dtype = "fp8";
  try {
    t.Query(q);
    ADD_FAILURE() << "expected a miss";
  } catch (const InterpolationMissError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("mla_dtype=fp8"), std::string::npos) << m;
    EXPECT_NE(m.find("mla_dtype=bfloat16, kv_cache_dtype=bfloat16"), std::string::npos) << m;  // what exists
  }
}

TEST(MlaTest, GenerationSeqIsIslPlusStepBlendedRaw) {
  const GenerationMlaTable t(Table::ParseCsv(std::string(kMlaHeader) + "bfloat16,fp8,16,4,1,8,3,2\n"
                                                                       "bfloat16,fp8,16,4,1,8,7,4\n",
                                             "gen.csv"),
                             H200());
  GenerationMlaQuery q{4, 8, 16, "fp8"};
  EXPECT_EQ(t.Query(q).latency_ms, 4);
  q.seq = 6;  // raw: halfway between 4 (2 ms) and 8 (4 ms)
  EXPECT_DOUBLE_EQ(t.Query(q).latency_ms, 3);
}

// mla_bmm_perf is read by the generic declared-table path (perfdb/declared.h)
// from its declaration's estimator read.
TEST(MlaTest, BmmFp8ReadsTheBfloat16Rows) {
  const tables::TableSpec& spec = tables::GetTableSpec("mla_bmm_perf");
  const DeclaredTable t(Table::ParseCsv("op_name,bmm_dtype,num_tokens,num_heads,latency\n"
                                        "mla_gen_pre,bfloat16,1,16,1\n"
                                        "mla_gen_pre,bfloat16,3,16,3\n"
                                        "mla_gen_post,fp8,1,16,5\n",
                                        "bmm.csv"),
                        spec, H200());
  const Params pre{{"op_name", "mla_gen_pre"},
                   {"bmm_dtype", "fp8"},
                   {"num_heads", std::int64_t{16}},
                   {"num_tokens", std::int64_t{2}}};
  EXPECT_EQ(t.RowsSlice(pre), (DeclaredTable::SliceKey{"mla_gen_pre", "bfloat16", std::int64_t{16}}));
  const Estimate e = t.Query(pre);
  EXPECT_DOUBLE_EQ(e.latency_ms, 2);
  EXPECT_DOUBLE_EQ(e.sol_fraction, t.SolMs(pre) / 2);  // against the query's fp8 roofline
  EXPECT_DOUBLE_EQ(t.SolMs(pre), H200()->MlaBmmMs("fp8", 2, 16));
  // Util-empirical: the bfloat16 rows' util over their own (bfloat16) roofline.
  // tokens 2 between the samples at 1 and 3 (ln space, normalised by ln 3),
  // blended by inverse distance.
  const Estimate em = t.QueryEmpirical(pre);
  const double d1 = std::log(2.0) / std::log(3.0), d3 = 1 - d1;
  const double u1 = H200()->MlaBmmMs("bfloat16", 1, 16) / 1, u3 = H200()->MlaBmmMs("bfloat16", 3, 16) / 3;
  const double util = (u1 / d1 + u3 / d3) / (1 / d1 + 1 / d3);
  EXPECT_NEAR(em.latency_ms, H200()->MlaBmmMs("bfloat16", 2, 16) / util, 1e-12 * em.latency_ms);
  const OpEstimate fb = EstimateDeclared(DatabaseMode::kSilicon, *H200(), spec, &t, pre, "mla_bmm");
  EXPECT_NE(fb.detail.find("mla_bmm_perf: {op_name=mla_gen_pre, bmm_dtype=fp8, num_heads=16, num_tokens=2 (read "
                           "from the bfloat16 rows)}"),
            std::string::npos)
      << fb.detail;
  const Params post{{"op_name", "mla_gen_post"},
                    {"bmm_dtype", "fp8"},
                    {"num_heads", std::int64_t{16}},
                    {"num_tokens", std::int64_t{1}}};
  EXPECT_EQ(t.RowsSlice(post), (DeclaredTable::SliceKey{"mla_gen_post", "fp8", std::int64_t{16}}));  // its own rows
  EXPECT_EQ(t.Query(post).latency_ms, 5);
  // A dtype with rows for the op but not at these heads misses (no fallback).
  const Params post8{{"op_name", "mla_gen_post"},
                     {"bmm_dtype", "fp8"},
                     {"num_heads", std::int64_t{8}},
                     {"num_tokens", std::int64_t{1}}};
  EXPECT_THROW(t.Query(post8), InterpolationMissError);
  EXPECT_THROW(DeclaredTable(Table::ParseCsv("op_name,bmm_dtype,num_tokens,num_heads,latency\n"
                                             "mla_gen_side,bfloat16,1,16,1\n",
                                             "bad.csv"),
                             spec, H200()),
               Error);
}

TEST(MlaTest, ModesAndTheMissingTable) {
  auto sol = H200();
  const ContextMlaTable t(Table::ParseCsv(std::string(kMlaHeader) + "bfloat16,bfloat16,16,1,1024,8,0,0.5\n"
                                                                    "bfloat16,bfloat16,16,1,2048,8,0,1.5\n",
                                          "ctx.csv"),
                          sol);
  const ContextMlaQuery q{1, 1024, 16, "bfloat16", "bfloat16"};
  const OpEstimate s = EstimateContextMla(DatabaseMode::kSol, *sol, nullptr, q);
  EXPECT_EQ(s.source, "sol");
  EXPECT_DOUBLE_EQ(s.latency_ms, t.SolMs(q));
  const OpEstimate si = EstimateContextMla(DatabaseMode::kSilicon, *sol, &t, q);
  EXPECT_EQ(si.source, "silicon");
  EXPECT_DOUBLE_EQ(si.latency_ms, 0.5);
  // util-empirical at a sample gives that sample back.
  const OpEstimate em = EstimateContextMla(DatabaseMode::kEmpirical, *sol, &t, q);
  EXPECT_EQ(em.source, "empirical");
  EXPECT_NEAR(em.latency_ms, 0.5, 1e-12);
  for (DatabaseMode mode : {DatabaseMode::kSilicon, DatabaseMode::kHybrid, DatabaseMode::kEmpirical}) {
    try {
      EstimateContextMla(mode, *sol, nullptr, q);
      ADD_FAILURE() << "expected a miss";
    } catch (const MissingDataError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("context_mla_perf is not in the data source"), std::string::npos) << m;
      EXPECT_NE(m.find("--ops mla_context"), std::string::npos) << m;
    }
  }
  try {
    EstimateDeclared(DatabaseMode::kSilicon, *sol, tables::GetTableSpec("mla_bmm_perf"), nullptr,
                     {{"op_name", "mla_gen_post"},
                      {"bmm_dtype", "fp8"},
                      {"num_heads", std::int64_t{16}},
                      {"num_tokens", std::int64_t{4}}});
    ADD_FAILURE() << "expected a miss";
  } catch (const MissingDataError& e) {
    EXPECT_NE(std::string(e.what()).find("--ops mla_gen_pre mla_gen_post"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace servecast::perfdb
