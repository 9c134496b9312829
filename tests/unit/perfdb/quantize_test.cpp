#include "perfdb/quantize.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "system/system_spec.h"

namespace servecast::perfdb {
namespace {

std::shared_ptr<const Sol> H200() {
  return std::make_shared<const Sol>(systems::LoadSystemByName(SERVECAST_SOURCE_DIR "/systems", "h200_sxm"));
}

ComputeScaleQuery Q(std::int64_t m, std::int64_t k) {
  ComputeScaleQuery q;
  q.m = m;
  q.k = k;
  return q;
}

ComputeScaleTable Synthetic() {
  return ComputeScaleTable(Table::ParseCsv("op_name,m,k,quant_dtype,latency\n"
                                           "compute_scale,1,32,fp8,0.0\n"  // zero latency is legal
                                           "compute_scale,1,128,fp8,0.004\n"
                                           "compute_scale,4,32,fp8,0.002\n"
                                           "compute_scale,4,128,fp8,0.006\n",
                                           "cs.csv"),
                           H200());
}

TEST(ComputeScaleTest, ExactAndRawBlendInsideTheEnvelope) {
  const ComputeScaleTable t = Synthetic();
  Estimate e = t.Query(Q(4, 128));
  EXPECT_EQ(e.latency_ms, 0.006);
  EXPECT_EQ(e.source, EstimateSource::kSilicon);
  EXPECT_DOUBLE_EQ(e.sol_fraction, t.SolMs(Q(4, 128)) / 0.006);
  // m = 2 (w = 1/3), k = 64 (w = 1/3): m=1 -> 0.004/3, m=4 -> 0.002 + 0.004/3; blend -> 0.002.
  e = t.Query(Q(2, 64));
  EXPECT_DOUBLE_EQ(e.latency_ms, 0.002);
  EXPECT_EQ(e.source, EstimateSource::kInterpolated);
}

TEST(ComputeScaleTest, ZeroLatencyReportsZeroSolFraction) {
  const ComputeScaleTable t = Synthetic();
  const Estimate e = t.Query(Q(1, 32));
  EXPECT_EQ(e.latency_ms, 0);
  EXPECT_EQ(e.sol_fraction, 0);
  EXPECT_EQ(e.source, EstimateSource::kSilicon);
}

TEST(ComputeScaleTest, BeyondTheEnvelopeIsClampedAndHeldFlat) {
  const ComputeScaleTable t = Synthetic();
  Estimate e = t.Query(Q(100, 64));  // clamped to (4, 64): 0.002 + 0.004/3
  EXPECT_DOUBLE_EQ(e.latency_ms, 0.002 + 0.004 / 3);
  EXPECT_EQ(e.source, EstimateSource::kExtrapolated);
  EXPECT_DOUBLE_EQ(e.sol_fraction, t.SolMs(Q(100, 64)) / e.latency_ms);  // SOL at the query itself
  EXPECT_EQ(t.Query(Q(1000, 100000)).latency_ms, 0.006);                 // corner
  e = t.Query(Q(1, 8));                                                  // clamped onto the zero leaf
  EXPECT_EQ(e.latency_ms, 0);
  EXPECT_EQ(e.sol_fraction, 0);
  EXPECT_EQ(e.source, EstimateSource::kExtrapolated);
}

TEST(ComputeScaleTest, UnknownQuantIsAMissNamingWhatExists) {
  const ComputeScaleTable t = Synthetic();
  ComputeScaleQuery q = Q(4, 128);
  q.quant_dtype = "nvfp4";
  try {
    t.Query(q);
    FAIL() << "expected a miss";
  } catch (const InterpolationMissError& e) {
    EXPECT_NE(std::string(e.what()).find("fp8"), std::string::npos) << e.what();
  }
}

TEST(ComputeScaleTest, RealH200RowsExactBetweenAndFlat) {
  auto db = PerfDatabase::Open({SERVECAST_SHARED_DIR "/reference/aic-parquet"}, "h200_sxm", "trtllm", "1.3.0rc20");
  const ComputeScaleTable t = ComputeScaleTable::FromLoaded(db.Table("computescale_perf"), H200());
  EXPECT_DOUBLE_EQ(t.Query(Q(64, 4096)).latency_ms, 0.00786773314078649);
  EXPECT_DOUBLE_EQ(t.Query(Q(1, 32)).latency_ms, 0.007148800293604534);
  Estimate e = t.Query(Q(32768, 51200));
  EXPECT_DOUBLE_EQ(e.latency_ms, 2.4196331024169924);
  EXPECT_EQ(e.source, EstimateSource::kSilicon);
  e = t.Query(Q(65536, 51200));
  EXPECT_DOUBLE_EQ(e.latency_ms, 2.4196331024169924);
  EXPECT_EQ(e.source, EstimateSource::kExtrapolated);
  e = t.Query(Q(80, 4096));  // a collected row
  EXPECT_EQ(e.source, EstimateSource::kSilicon);
  e = t.Query(Q(72, 4096));  // between rows m = 65 and m = 80
  EXPECT_EQ(e.source, EstimateSource::kInterpolated);
  EXPECT_GT(e.latency_ms, 0);
}

// ------------------------------------------------------------ scale_matrix

ScaleMatrixTable SyntheticScaleMatrix() {
  return ScaleMatrixTable(Table::ParseCsv("op_name,m,k,quant_dtype,latency\n"
                                          "scale_matrix,1,32,fp8,0.0\n"
                                          "scale_matrix,1,128,fp8,0.004\n"
                                          "scale_matrix,4,32,fp8,0.002\n"
                                          "scale_matrix,4,128,fp8,0.006\n",
                                          "sm.csv"),
                          H200());
}

TEST(ScaleMatrixTest, ExactAndRawBlendInsideTheEnvelope) {
  const ScaleMatrixTable t = SyntheticScaleMatrix();
  Estimate e = t.Query(Q(4, 128));
  EXPECT_EQ(e.latency_ms, 0.006);
  EXPECT_EQ(e.source, EstimateSource::kSilicon);
  EXPECT_DOUBLE_EQ(e.sol_fraction, t.SolMs(Q(4, 128)) / 0.006);
  e = t.Query(Q(2, 64));  // as compute_scale: 0.002
  EXPECT_DOUBLE_EQ(e.latency_ms, 0.002);
  EXPECT_EQ(e.source, EstimateSource::kInterpolated);
}

TEST(ScaleMatrixTest, BeyondTheEnvelopeScalesBySolRatio) {
  const ScaleMatrixTable t = SyntheticScaleMatrix();
  // (100, 64) clamps to (4, 64) = 0.01 / 3; SOL ratio 2*100*64 / (2*4*64) = 25.
  Estimate e = t.Query(Q(100, 64));
  EXPECT_DOUBLE_EQ(e.latency_ms, 0.25 / 3);
  EXPECT_EQ(e.source, EstimateSource::kExtrapolated);
  EXPECT_DOUBLE_EQ(e.sol_fraction, t.SolMs(Q(100, 64)) / e.latency_ms);
  // The clamped point's util is held: sol_fraction equals that of (4, 64).
  EXPECT_DOUBLE_EQ(e.sol_fraction, t.SolMs(Q(4, 64)) / (0.01 / 3));
  // Corner (1000, 100000) -> (4, 128): ratio 1e8 / 512 = 195312.5.
  EXPECT_DOUBLE_EQ(t.Query(Q(1000, 100000)).latency_ms, 0.006 * 195312.5);
  // Below the k range: (4, 16) -> (4, 32) = 0.002, ratio 1/2.
  EXPECT_DOUBLE_EQ(t.Query(Q(4, 16)).latency_ms, 0.001);
  e = t.Query(Q(1, 8));  // the zero leaf stays zero
  EXPECT_EQ(e.latency_ms, 0);
  EXPECT_EQ(e.sol_fraction, 0);
  EXPECT_EQ(e.source, EstimateSource::kExtrapolated);
}

TEST(ScaleMatrixTest, UnknownQuantIsAMissNamingWhatExists) {
  const ScaleMatrixTable t = SyntheticScaleMatrix();
  ScaleMatrixQuery q = Q(4, 128);
  q.quant_dtype = "nvfp4";
  try {
    t.Query(q);
    FAIL() << "expected a miss";
  } catch (const InterpolationMissError& e) {
    EXPECT_NE(std::string(e.what()).find("scale_matrix_perf"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fp8"), std::string::npos) << e.what();
  }
}

TEST(ScaleMatrixTest, RealH200RowsExactBetweenAndSolScaled) {
  auto db = PerfDatabase::Open({SERVECAST_SHARED_DIR "/reference/aic-parquet"}, "h200_sxm", "trtllm", "1.3.0rc20");
  const ScaleMatrixTable t = ScaleMatrixTable::FromLoaded(db.Table("scale_matrix_perf"), H200());
  ASSERT_EQ(t.slices().size(), 1u);
  EXPECT_DOUBLE_EQ(t.Query(Q(64, 4096)).latency_ms, 0.0015594666202863058);
  EXPECT_DOUBLE_EQ(t.Query(Q(1, 32)).latency_ms, 0.001202133297920227);
  EXPECT_DOUBLE_EQ(t.Query(Q(80, 4096)).latency_ms, 0.0015360000232855478);
  Estimate e = t.Query(Q(32768, 51200));
  EXPECT_DOUBLE_EQ(e.latency_ms, 1.1693546295166015);
  EXPECT_EQ(e.source, EstimateSource::kSilicon);
  e = t.Query(Q(65536, 51200));  // twice the top m: twice the latency
  EXPECT_DOUBLE_EQ(e.latency_ms, 2 * 1.1693546295166015);
  EXPECT_EQ(e.source, EstimateSource::kExtrapolated);
  e = t.Query(Q(72, 4096));  // between rows m = 65 and m = 80
  EXPECT_EQ(e.source, EstimateSource::kInterpolated);
  EXPECT_DOUBLE_EQ(e.latency_ms, 0.0015210667004187902 + (0.0015360000232855478 - 0.0015210667004187902) * 7 / 15);
}

}  // namespace
}  // namespace servecast::perfdb
