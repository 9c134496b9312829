#include "perfdb/comm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "system/system_spec.h"

namespace servecast::perfdb {
namespace {

std::shared_ptr<const Sol> H200() {
  return std::make_shared<const Sol>(systems::LoadSystemByName(SERVECAST_SOURCE_DIR "/systems", "h200_sxm"));
}

Table SyntheticNccl() {
  return Table::ParseCsv(
      "version,op_name,kernel_source,nccl_dtype,num_gpus,message_size,latency\n"
      "x,all_reduce,NCCL,half,2,4096,0.02\n"
      "x,all_reduce,NCCL,half,2,1024,0.01\n"
      "x,all_reduce,NCCL,half,8,1024,0.03\n"
      "x,all_reduce,NCCL,half,8,4096,0.05\n"
      "x,all_gather,NCCL,int8,2,1024,0.007\n",
      "nccl.csv");
}

NcclQuery Nq(double size, std::int64_t gpus = 2, std::string dtype = "half", std::string op = "all_reduce") {
  NcclQuery q;
  q.op = std::move(op);
  q.dtype = std::move(dtype);
  q.num_gpus = gpus;
  q.message_size = size;
  return q;
}

TEST(NcclTest, ExactLerpAndLinearProxyBeyondTheSweep) {
  const NcclTable t(SyntheticNccl(), H200());
  ASSERT_EQ(t.slices().size(), 3u);
  Estimate e = t.Query(Nq(1024));
  EXPECT_EQ(e.latency_ms, 0.01);
  EXPECT_EQ(e.source, EstimateSource::kSilicon);
  EXPECT_DOUBLE_EQ(e.sol_fraction, t.SolMs(Nq(1024)) / 0.01);
  e = t.Query(Nq(2048));  // 0.01 + 0.01 * 1024 / 3072
  EXPECT_DOUBLE_EQ(e.latency_ms, 0.01 + 0.01 / 3);
  EXPECT_EQ(e.source, EstimateSource::kInterpolated);
  // The proxy SOL is proportional to the size: latency scales with it.
  e = t.Query(Nq(8192));
  EXPECT_DOUBLE_EQ(e.latency_ms, 0.04);
  EXPECT_EQ(e.source, EstimateSource::kExtrapolated);
  EXPECT_DOUBLE_EQ(t.Query(Nq(512)).latency_ms, 0.005);
  EXPECT_DOUBLE_EQ(t.Query(Nq(40960, 8)).latency_ms, 0.5);
  // 16-bit names are one key.
  EXPECT_EQ(t.Query(Nq(4096, 8, "bfloat16")).latency_ms, 0.05);
  EXPECT_EQ(t.Query(Nq(1024, 2, "int8", "all_gather")).latency_ms, 0.007);
}

// servecast's own nccl_perf has send_recv rows (point-to-point, a pipeline step):
// the table loads them as a slice of its own beside the collectives.
TEST(NcclTest, SendRecvRowsAreASliceOfTheirOwn) {
  const NcclTable t(Table::ParseCsv("version,op_name,kernel_source,nccl_dtype,num_gpus,message_size,latency\n"
                                    "x,all_reduce,nccl,half,2,1024,0.01\n"
                                    "x,send_recv,nccl,half,2,1024,0.008\n"
                                    "x,send_recv,nccl,half,2,4096,0.012\n",
                                    "nccl.csv"),
                    H200());
  ASSERT_EQ(t.slices().size(), 2u);
  EXPECT_EQ(t.Query(Nq(1024, 2, "half", "send_recv")).latency_ms, 0.008);
  EXPECT_DOUBLE_EQ(t.Query(Nq(2048, 2, "half", "send_recv")).latency_ms, 0.008 + 0.004 / 3);
  EXPECT_EQ(t.Query(Nq(1024)).latency_ms, 0.01);
}

TEST(NcclTest, GpuCountsBeyondTheDataBorrowTheBoundarySlice) {
  const NcclTable t(SyntheticNccl(), H200());
  // 8-GPU donor at 1024 elements: 0.03 ms over NVLink (450 GB/s). 16 GPUs cross
  // the node: 50 GB/s. SOL_16 / SOL_8 = (15/16) / (7/8) * 450 / 50 = 135 / 14.
  CommEstimate e = t.QueryWithDonor(Nq(1024, 16));
  EXPECT_DOUBLE_EQ(e.latency_ms, 0.03 * 135 / 14);
  EXPECT_EQ(e.source, EstimateSource::kExtrapolated);
  ASSERT_TRUE(e.borrowed_from_gpus.has_value());
  EXPECT_EQ(*e.borrowed_from_gpus, 8);
  // The donor's util is held: sol_fraction at 16 GPUs equals the donor's at 8.
  EXPECT_DOUBLE_EQ(e.sol_fraction, t.SolMs(Nq(1024, 8)) / 0.03);
  EXPECT_DOUBLE_EQ(e.sol_fraction, t.SolMs(Nq(1024, 16)) / e.latency_ms);
  // Inside the donor's sweep (lerp, 2048 -> 0.03 + 0.02 / 3) and beyond it (linear proxy).
  EXPECT_DOUBLE_EQ(t.Query(Nq(2048, 16)).latency_ms, (0.03 + 0.02 / 3) * 135 / 14);
  EXPECT_DOUBLE_EQ(t.Query(Nq(8192, 16)).latency_ms, 0.1 * 135 / 14);
  // 32 GPUs: (31/32) / (7/8) * 9 = 279 / 28.
  EXPECT_DOUBLE_EQ(t.Query(Nq(4096, 32)).latency_ms, 0.05 * 279 / 28);
  // A collected count names no donor.
  EXPECT_FALSE(t.QueryWithDonor(Nq(1024, 8)).borrowed_from_gpus.has_value());
}

TEST(NcclTest, MissingSlicesAreTypedMisses) {
  const NcclTable t(SyntheticNccl(), H200());
  try {
    t.Query(Nq(1024, 4));  // inside the collected range but not collected
    FAIL() << "expected a miss";
  } catch (const CommGpusBeyondDataError&) {
    FAIL() << "4 GPUs is not beyond the data";
  } catch (const InterpolationMissError& e) {
    EXPECT_EQ(e.reason(), "no slice with this key");
    EXPECT_NE(std::string(e.what()).find("2, 8"), std::string::npos) << e.what();
  }
  try {
    t.Query(Nq(1024, 16, "half", "alltoall"));  // no slice of (half, alltoall) at all
    FAIL() << "expected a miss";
  } catch (const CommGpusBeyondDataError& e) {
    EXPECT_EQ(e.max_collected_gpus(), 0);
  }
  EXPECT_THROW(t.Query(Nq(1024, 2, "half", "alltoall")), InterpolationMissError);
  EXPECT_THROW(t.Query(Nq(1024, 1)), ConfigError);
}

TEST(CustomAllReduceTest, HalfKeyMatchesBfloat16RowsAndHoldsLinearly) {
  const CustomAllReduceTable t(Table::ParseCsv("version,op_name,kernel_source,allreduce_dtype,num_gpus,message_size,"
                                               "latency,implementation\n"
                                               "x,all_reduce,TRTLLM,bfloat16,2,128,0.002,trtllm\n"
                                               "x,all_reduce,TRTLLM,bfloat16,2,1024,0.004,trtllm\n",
                                               "ar.csv"),
                               H200());
  CustomAllReduceQuery q;
  q.tp = 2;
  q.message_size = 128;
  EXPECT_EQ(t.Query(q).latency_ms, 0.002);
  q.message_size = 576;  // midway
  EXPECT_DOUBLE_EQ(t.Query(q).latency_ms, 0.003);
  q.message_size = 2048;
  EXPECT_DOUBLE_EQ(t.Query(q).latency_ms, 0.008);
  EXPECT_DOUBLE_EQ(t.Query(q).sol_fraction, t.SolMs(q) / 0.008);
  // Fan-out from tp = 2: inside the node SOL_4 / SOL_2 = (3/4) / (1/2) = 1.5;
  // across it SOL_16 / SOL_2 = (15/16) / (1/2) * 450 / 50 = 16.875.
  q.tp = 4;
  q.message_size = 576;
  CommEstimate e = t.QueryWithDonor(q);
  EXPECT_DOUBLE_EQ(e.latency_ms, 0.003 * 1.5);
  EXPECT_EQ(e.source, EstimateSource::kExtrapolated);
  EXPECT_EQ(e.borrowed_from_gpus, std::optional<std::int64_t>(2));
  q.tp = 16;
  q.message_size = 128;
  EXPECT_DOUBLE_EQ(t.Query(q).latency_ms, 0.002 * 16.875);
  q.dtype = "int8";  // no int8 slice at all
  EXPECT_THROW(t.Query(q), CommGpusBeyondDataError);
}

// ------------------------------------------------------------ AIC's H200 data

PerfDatabase RealDb() {
  return PerfDatabase::Open({SERVECAST_SHARED_DIR "/reference/aic-parquet"}, "h200_sxm", "trtllm", "1.3.0rc20");
}

TEST(NcclTest, RealH200RowsExactBetweenAndBeyond) {
  const NcclTable t = NcclTable::FromLoaded(RealDb().Table("nccl_perf"), H200());
  EXPECT_EQ(t.slices().size(), 24u);
  Estimate e = t.Query(Nq(1048576, 8));
  EXPECT_DOUBLE_EQ(e.latency_ms, 0.03746);
  EXPECT_EQ(e.source, EstimateSource::kSilicon);
  EXPECT_DOUBLE_EQ(t.Query(Nq(1572864, 8)).latency_ms, (0.03746 + 0.05137) / 2);
  EXPECT_DOUBLE_EQ(t.Query(Nq(2 * 268435456.0, 8)).latency_ms, 2 * 2.04031);
  // 16 GPUs borrow the 8-GPU slice: SOL_16 / SOL_8 = 135 / 14 (NVLink -> inter-node).
  const CommEstimate b = t.QueryWithDonor(Nq(1048576, 16));
  EXPECT_DOUBLE_EQ(b.latency_ms, 0.03746 * 135 / 14);
  EXPECT_EQ(b.source, EstimateSource::kExtrapolated);
  EXPECT_EQ(b.borrowed_from_gpus, std::optional<std::int64_t>(8));
}

TEST(CustomAllReduceTest, RealH200RowsExactAndBetween) {
  const CustomAllReduceTable t = CustomAllReduceTable::FromLoaded(RealDb().Table("custom_allreduce_perf"), H200());
  CustomAllReduceQuery q;
  q.tp = 8;
  q.message_size = 128;
  EXPECT_DOUBLE_EQ(t.Query(q).latency_ms, 0.0030470401048660277);
  q.message_size = 192;
  EXPECT_DOUBLE_EQ(t.Query(q).latency_ms, (0.0030470401048660277 + 0.0030748799443244936) / 2);
  q.message_size = 536870912;
  EXPECT_DOUBLE_EQ(t.Query(q).latency_ms, 4.00305908203125);
  EXPECT_EQ(t.Query(q).source, EstimateSource::kSilicon);
}

TEST(NcclTest, RealH200LeaveOneOut) {
  const NcclTable t = NcclTable::FromLoaded(RealDb().Table("nccl_perf"), H200());
  std::vector<double> err;
  for (const auto& [k, s] : t.slices()) {
    for (std::size_t i = 1; i + 1 < s.points.size(); ++i) {
      std::vector<GridPoint> rest = s.points;
      rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
      const AxisCurve c("loo", "message_size", std::move(rest), s.sol);
      const double truth = s.points[i].latency_ms;
      err.push_back(std::abs(c.Query(s.points[i].coords[0]).latency_ms - truth) / truth);
    }
  }
  ASSERT_FALSE(err.empty());
  std::sort(err.begin(), err.end());
  const double median = err[err.size() / 2], p90 = err[err.size() * 9 / 10];
  std::printf("nccl_perf LOO (interior, %zu points): median %.2f%%, p90 %.2f%%\n", err.size(), 100 * median, 100 * p90);
  EXPECT_LT(median, 0.10);
}

}  // namespace
}  // namespace servecast::perfdb
