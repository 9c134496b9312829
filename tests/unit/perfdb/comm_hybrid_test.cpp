// HYBRID collectives (src/perfdb/comm.h, QueryHybrid) and elementwise
// util-empirical (src/perfdb/elementwise.h, QueryEmpirical). Collective SOLs are
// proportional to the message size, so util-held answers are hand-checkable:
// latency = latency(sample) x size / size(sample).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/table.h"
#include "perfdb/comm.h"
#include "perfdb/elementwise.h"
#include "system/system_spec.h"

namespace servecast::perfdb {
namespace {

bool Has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::shared_ptr<const Sol> H200() {
  return std::make_shared<const Sol>(systems::LoadSystemByName(SERVECAST_SOURCE_DIR "/systems", "h200_sxm"));
}

// all_reduce over 2 GPUs: size 1000 -> 0.01 ms, size 2000 -> 0 ms (a zero row:
// no positive-util anchor above 2000; util-empirical drops it). 8 GPUs: 1000 -> 0.02.
Table NcclCsv() {
  return Table::ParseCsv(
      "nccl_dtype,op_name,num_gpus,message_size,latency\n"
      "half,all_reduce,2,1000,0.01\n"
      "half,all_reduce,2,2000,0\n"
      "half,all_reduce,8,1000,0.02\n",
      "nccl.csv");
}

TEST(CommHybridTest, NcclFallsBackToUtilEmpiricalOnACurveMiss) {
  const auto sol = H200();
  const NcclTable t(NcclCsv(), sol);
  NcclQuery q{"all_reduce", "half", 2, 4000};
  // The table cannot anchor 4000 (its boundary row is 0 ms).
  EXPECT_THROW(t.QueryWithDonor(q), MissingDataError);
  // HYBRID: the util of the 1000 sample, held: 0.01 x 4000 / 1000 = 0.04 ms.
  const CommEstimate h = t.QueryHybrid(q);
  EXPECT_NEAR(h.latency_ms, 0.04, 1e-12);
  EXPECT_TRUE(Has(h.silicon_miss, "no positive-util boundary anchor")) << h.silicon_miss;
  EXPECT_NEAR(t.QueryEmpirical(q).latency_ms, 0.04, 1e-12);
  // Inside the curve the table answers (lerp 1000..2000 at 1500: 0.005), no fallback.
  q.message_size = 1500;
  const CommEstimate in = t.QueryHybrid(q);
  EXPECT_NEAR(in.latency_ms, 0.005, 1e-15);
  EXPECT_EQ(in.source, EstimateSource::kInterpolated);
  EXPECT_TRUE(in.silicon_miss.empty());
  // 4 GPUs (inside the collected 2..8, never collected): util-empirical has no
  // slice to read either -> one miss carrying both reasons.
  q.num_gpus = 4;
  try {
    t.QueryHybrid(q);
    ADD_FAILURE();
  } catch (const MissingDataError& err) {
    EXPECT_TRUE(Has(err.what(), "silicon: ")) << err.what();
    EXPECT_TRUE(Has(err.what(), "; empirical: ")) << err.what();
  }
  // A (dtype, op) with no slice at all: the table's own miss, unchanged.
  q = NcclQuery{"all_gather", "half", 2, 1000};
  try {
    t.QueryHybrid(q);
    ADD_FAILURE();
  } catch (const CommGpusBeyondDataError& err) {
    EXPECT_EQ(err.max_collected_gpus(), 0);
  }
}

TEST(CommHybridTest, CustomAllReduceFallsBackToUtilEmpirical) {
  const auto sol = H200();
  const Table csv = Table::ParseCsv(
      "allreduce_dtype,num_gpus,message_size,latency\n"
      "bfloat16,2,1024,0.005\n"
      "bfloat16,2,2048,0\n",
      "car.csv");
  const CustomAllReduceTable t(csv, sol);
  const CustomAllReduceQuery q{2, 4096, "half"};
  EXPECT_THROW(t.QueryWithDonor(q), MissingDataError);
  const CommEstimate h = t.QueryHybrid(q);
  EXPECT_NEAR(h.latency_ms, 0.005 * 4, 1e-12);  // 0.005 x 4096 / 1024
  EXPECT_FALSE(h.silicon_miss.empty());
}

// rmsnorm (bfloat16) at hidden 1024: tokens 1 -> 0.002 ms, tokens 64 -> 0.004 ms.
TEST(ElementwiseEmpiricalTest, UtilIdwOverHiddenAndTokens) {
  const auto sol = H200();
  const Table csv = Table::ParseCsv(
      "op_name,dtype,num_tokens,hidden_size,latency\n"
      "rmsnorm,bfloat16,1,1024,0.002\n"
      "rmsnorm,bfloat16,64,1024,0.004\n",
      "ew.csv");
  const ElementwiseTable t(csv, sol);
  auto sol_ms = [&](double tokens) { return sol->MemMs((2 * tokens * 1024 + 1024) * 2); };
  const double u1 = sol_ms(1) / 0.002, u64 = sol_ms(64) / 0.004;
  // On a sample: its own latency.
  EXPECT_NEAR(t.QueryEmpirical("rmsnorm", "bfloat16", 64, 1024).latency_ms, 0.004, 1e-15);
  // tokens 8: normalised ln 8 / ln 64 = 0.5 (hidden has span 0): equidistant -> mean util.
  Estimate e = t.QueryEmpirical("rmsnorm", "bfloat16", 8, 1024);
  EXPECT_NEAR(e.latency_ms, sol_ms(8) / ((u1 + u64) / 2), 1e-15);
  EXPECT_NEAR(e.sol_fraction, (u1 + u64) / 2, 1e-15);
  // tokens 512: clamped to the 64 sample's util.
  e = t.QueryEmpirical("rmsnorm", "bfloat16", 512, 1024);
  EXPECT_NEAR(e.latency_ms, sol_ms(512) / u64, 1e-15);
  // An absent slice is the table's miss.
  EXPECT_THROW(t.QueryEmpirical("silu_and_mul", "bfloat16", 8, 1024), InterpolationMissError);
}

}  // namespace
}  // namespace servecast::perfdb
