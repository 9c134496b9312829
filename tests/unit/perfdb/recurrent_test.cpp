// The tables of issue 25 (hybrid and sparse attention): gdn_perf, mamba2_perf and
// the DSA module tables, declared in AIC's schemas (tables/table_spec.cpp) and
// read by the generic declared-table path (perfdb/declared.h): their floors, a
// layer's kernels (kernel_source) summed, a table servecast cannot collect yet
// answered by its labelled roofline, and AIC's own H200 files read as they are.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "core/error.h"
#include "perfdb/declared.h"
#include "perfdb/perf_database.h"
#include "shared_data.h"
#include "system/system_spec.h"
#include "tables/cost_model.h"
#include "tables/table_spec.h"

namespace servecast::perfdb {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<const Sol> H200() {
  return std::make_shared<const Sol>(systems::LoadSystemByName(SERVECAST_SOURCE_DIR "/systems", "h200_sxm"));
}

TEST(RecurrentTest, GdnRooflineCountsConvolutionScanAndState) {
  // hk 2, dk 64, hv 4, dv 64, c 4: C = 512 channels, state 16384 per sequence.
  const tables::OpCost c = tables::GdnRoofline("context", 2, 64, 4, 2, 64, 4, 64);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 4 * 128 * 512 + 6.0 * 128 * 16384);
  EXPECT_DOUBLE_EQ(c.bytes, 4.0 * 128 * 512 + 128.0 * 1024 + 2.0 * 128 * 256 + 2.0 * 16384 * 4);
  const tables::OpCost g = tables::GdnRoofline("generation", 2, 1, 4, 2, 64, 4, 64);
  EXPECT_DOUBLE_EQ(g.bytes, 4.0 * 2 * 512 + 2.0 * 1024 + 2.0 * 2 * 256 + 2 * (8.0 * 16384 + 4.0 * 512 * 3));
  // A row's floor (one kernel of the layer) stays below the layer's roofline.
  const tables::OpCost f = tables::GdnFloor("context", 2, 64, 4, 2, 64, 4, 64);
  EXPECT_LT(f.flops, c.flops);
  EXPECT_LT(f.bytes, c.bytes);
  EXPECT_THROW(tables::GdnRoofline("prefill", 1, 1, 4, 1, 1, 1, 1), Error);
  // Mamba2: nh 8, p 64, g 1, N 128: C = 512 + 256 = 768; state 8 x 64 x 128.
  const tables::OpCost m = tables::Mamba2Roofline("generation", 1, 1, 4, 8, 64, 1, 128);
  EXPECT_DOUBLE_EQ(m.flops, 2.0 * 4 * 768 + 4.0 * 8 * 64 * 128);
  EXPECT_DOUBLE_EQ(m.bytes, 4.0 * 768 + (2.0 * 768 + 32) + 2.0 * 512 + (8.0 * 65536 + 4.0 * 768 * 3));
}

TEST(RecurrentTest, DsaModuleKeepsTopkKeysAndSkippingTheIndexerDropsIt) {
  // Decode past the top-k: the attention reads 2048 latents, the indexer every key.
  const tables::OpCost near = tables::DsaModuleCost("generation", "DeepseekV32ForCausalLM", "fp8_block", "fp8", 16, 1,
                                                    1, 2048, true);
  const tables::OpCost far = tables::DsaModuleCost("generation", "DeepseekV32ForCausalLM", "fp8_block", "fp8", 16, 1,
                                                   1, 4096, true);
  EXPECT_DOUBLE_EQ(far.bytes - near.bytes, 2048.0 * 128);  // only the index keys grow
  EXPECT_EQ(far.compute_dtype, "fp8");
  const tables::OpCost skip = tables::DsaModuleCost("context", "GlmMoeDsaForCausalLM", "bfloat16", "bfloat16", 8, 1,
                                                    128, 0, false);
  const tables::OpCost with = tables::DsaModuleCost("context", "GlmMoeDsaForCausalLM", "bfloat16", "bfloat16", 8, 1,
                                                    128, 0, true);
  EXPECT_LT(skip.flops, with.flops);
  EXPECT_LT(skip.bytes, with.bytes);
  EXPECT_THROW(tables::DsaGeometryOf("DeepseekV3ForCausalLM"), Error);
}

const char* kGdnHeader =
    "framework,version,device,op_name,kernel_source,phase,batch_size,seq_len,num_tokens,d_model,d_conv,num_k_heads,"
    "head_k_dim,num_v_heads,head_v_dim,model_name,latency\n";

Params GdnKey(std::int64_t batch, std::int64_t seq) {
  return Params{{"phase", std::string("context")}, {"d_conv", std::int64_t{4}},     {"num_k_heads", std::int64_t{2}},
                {"head_k_dim", std::int64_t{128}},  {"num_v_heads", std::int64_t{8}}, {"head_v_dim", std::int64_t{128}},
                {"batch_size", batch},              {"seq_len", seq}};
}

TEST(RecurrentTest, TheLayersKernelsAreSummed) {
  const tables::TableSpec& spec = tables::GetTableSpec("gdn_perf");
  const std::string p = "x,1,H200,gdn,";
  const std::string shape = ",4,2,128,8,128,m,";
  const DeclaredTable t(
      Table::ParseCsv(std::string(kGdnHeader) + p + "conv,context,1,64,64,4096" + shape + "0.01\n" + p +
                          "conv,context,1,128,128,4096" + shape + "0.02\n" + p + "scan,context,1,64,64,4096" + shape +
                          "0.10\n" + p + "scan,context,1,128,128,4096" + shape + "0.30\n",
                      "gdn.csv"),
      spec, H200());
  EXPECT_EQ(t.slices().size(), 2u);  // one grid per kernel
  const Estimate exact = t.Query(GdnKey(1, 128));
  EXPECT_DOUBLE_EQ(exact.latency_ms, 0.32);
  EXPECT_EQ(exact.source, EstimateSource::kSilicon);
  const Estimate mid = t.Query(GdnKey(1, 96));  // each kernel blended raw, then summed
  EXPECT_DOUBLE_EQ(mid.latency_ms, 0.015 + 0.20);
  EXPECT_EQ(mid.source, EstimateSource::kInterpolated);
  EXPECT_DOUBLE_EQ(mid.sol_fraction, t.SolMs(GdnKey(1, 96)) / mid.latency_ms);
  // Another head shape: the miss names the slices there are.
  Params other = GdnKey(1, 64);
  other.Set("num_v_heads", Value(std::int64_t{4}));
  EXPECT_THROW(t.Query(other), InterpolationMissError);
}

TEST(RecurrentTest, AnUncollectedTableAnswersWithItsLabelledRoofline) {
  const tables::TableSpec& spec = tables::GetTableSpec("gdn_perf");
  ASSERT_FALSE(spec.Read().uncollected.empty());
  const auto sol = H200();
  const Params key = GdnKey(4, 2048);
  for (DatabaseMode mode : {DatabaseMode::kSilicon, DatabaseMode::kHybrid, DatabaseMode::kEmpirical}) {
    const OpEstimate e = EstimateDeclared(mode, *sol, spec, nullptr, key, "context_gdn");
    EXPECT_EQ(e.source, "roofline");
    EXPECT_DOUBLE_EQ(e.latency_ms, sol->Ms(tables::GdnRoofline("context", 4, 2048, 4, 2, 128, 8, 128)));
    EXPECT_NE(e.detail.find("not measured"), std::string::npos) << e.detail;
    EXPECT_NE(e.detail.find("issue 25"), std::string::npos) << e.detail;
  }
  EXPECT_EQ(EstimateDeclared(DatabaseMode::kSol, *sol, spec, nullptr, key).source, "sol");
  // A table the estimator requires (no `uncollected`) still misses.
  const Params bmm{{"op_name", std::string("mla_gen_pre")},
                   {"bmm_dtype", std::string("bfloat16")},
                   {"num_heads", std::int64_t{16}},
                   {"num_tokens", std::int64_t{2}}};
  EXPECT_THROW(EstimateDeclared(DatabaseMode::kSilicon, *sol, tables::GetTableSpec("mla_bmm_perf"), nullptr, bmm),
               MissingDataError);
}

TEST(RecurrentTest, DeclarationsRefuseBadParts) {
  tables::TableSpec s{"toy_parts_perf", "toy", {{"n", ValueType::kInt64}}, false, [](const Params& p) {
                        return tables::OpCost{0, p.Num("n"), "bfloat16"};
                      }};
  s.estimator = tables::EstimatorRead{{}, {{"n", tables::AxisBlend::kLinear, tables::AxisSource::kTokens}}};
  s.estimator->parts = "latency";
  EXPECT_THROW(tables::AddTableSpec(s), Error);
  s.estimator->parts = "op_name";
  EXPECT_THROW(tables::AddTableSpec(s), Error);
  // The loader tells a layer's kernels apart.
  const auto keys = tables::GetTableSpec("gdn_perf").LoadKeyColumns(true);
  EXPECT_EQ(keys.back(), "kernel_source");
}

// ------------------------------------------------------------ AIC's H200 files

const std::string kMore = SERVECAST_SHARED_DIR "/reference/aic-h200-more";

TEST(RecurrentAicTest, ReadsAicsGdnMamba2AndDsaFiles) {
  SERVECAST_NEED_SHARED(fs::is_directory(kMore + "/h200_sxm/linear_attention"), "no AIC linear-attention tables");
  const auto sol = H200();
  {
    const auto db = PerfDatabase::Open({kMore}, "h200_sxm", "vllm", "0.24.0");
    const DeclaredTable t = DeclaredTable::FromLoaded(db.Table("gdn_perf"), sol);
    // Qwen3.5 key heads 16, value heads 64 (tp 1), prefill of 1024 tokens: the
    // convolution plus the chunked scan; two models share the shape (d_model is
    // not a key), the first rows in the file win (Qwen3.5-122B's).
    Params k{{"phase", std::string("context")}, {"d_conv", std::int64_t{4}},   {"num_k_heads", std::int64_t{16}},
             {"head_k_dim", std::int64_t{128}}, {"num_v_heads", std::int64_t{64}}, {"head_v_dim", std::int64_t{128}},
             {"batch_size", std::int64_t{1}},   {"seq_len", std::int64_t{1024}}};
    EXPECT_NEAR(t.Query(k).latency_ms, 0.024805 + 0.059839, 1e-6);
    k.Set("phase", Value(std::string("generation")));
    k.Set("batch_size", Value(std::int64_t{8}));
    k.Set("seq_len", Value(std::int64_t{1}));
    EXPECT_NEAR(t.Query(k).latency_ms, 0.002125 + 0.016989, 1e-6);  // conv update + recurrent step
  }
  {
    const auto db = PerfDatabase::Open({kMore}, "h200_sxm", "trtllm", "1.3.0rc20");
    const DeclaredTable m = DeclaredTable::FromLoaded(db.Table("mamba2_perf"), sol);
    // Nemotron-3-Nano's shape; AIC's file has the convolution kernels only.
    const Params k{{"phase", std::string("generation")}, {"d_state", std::int64_t{128}}, {"d_conv", std::int64_t{4}},
                   {"nheads", std::int64_t{64}},         {"head_dim", std::int64_t{64}}, {"n_groups", std::int64_t{8}},
                   {"chunk_size", std::int64_t{128}},    {"batch_size", std::int64_t{8}}, {"seq_len", std::int64_t{1}}};
    EXPECT_NEAR(m.Query(k).latency_ms, 0.003914, 1e-6);
    const DeclaredTable d = DeclaredTable::FromLoaded(db.Table("dsa_generation_module_perf"), sol);
    const Params g{{"op_name", std::string("dsa_generation_module")},
                   {"architecture", std::string("DeepseekV32ForCausalLM")},
                   {"mla_dtype", std::string("bfloat16")},
                   {"kv_cache_dtype", std::string("bfloat16")},
                   {"gemm_type", std::string("fp8_block")},
                   {"num_heads", std::int64_t{16}},
                   {"batch_size", std::int64_t{8}},
                   {"isl", std::int64_t{1}},
                   {"step", std::int64_t{4096}}};
    EXPECT_NEAR(d.Query(g).latency_ms, 0.2982, 1e-9);
    EXPECT_EQ(d.Query(g).source, EstimateSource::kSilicon);
  }
}

}  // namespace
}  // namespace servecast::perfdb
