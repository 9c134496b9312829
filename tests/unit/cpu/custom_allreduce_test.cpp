#include "backends/cpu/custom_allreduce.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_timer.h"
#include "cpu_test_util.h"

namespace servecast::cpu {
namespace {

using collect::Disposition;
using testing::Describe;

collect::Params AllReduceParams(std::int64_t world, std::int64_t n) {
  collect::Params p;
  p.Set("allreduce_dtype", std::string("float32"));
  p.Set("num_gpus", world);
  p.Set("message_size", n);
  return p;
}

// Ranks as threads of this process: each maps the segment itself, as processes do.
std::vector<collect::CaseResult> RunRanks(const collect::Case& c, int world, const std::string& group_id) {
  auto op = MakeCustomAllReduceOp();
  std::vector<collect::CaseResult> results(static_cast<std::size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      collect::RunContext ctx = testing::SmallContext();
      ctx.rank = r;
      ctx.world = world;
      ctx.group_id = group_id;
      results[static_cast<std::size_t>(r)] = op->Run(c, ctx);
    });
  for (auto& t : threads) t.join();
  return results;
}

bool SegmentsLeft(const std::string& group_id) {
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
    if (e.path().filename().string().rfind(group_id + "-", 0) == 0) return true;
  return false;
}

TEST(CustomAllReduceOpTest, EveryRankPassesWithTheSameSamplesAndRow) {
  CpuBackend backend;
  for (int world : {2, 3}) {
    const std::string group = backend.NewGroupId();
    collect::Case c = testing::MakeCase("custom_allreduce", AllReduceParams(world, 4099));
    auto results = RunRanks(c, world, group);
    for (int r = 0; r < world; ++r) {
      const auto& res = results[static_cast<std::size_t>(r)];
      ASSERT_EQ(res.disposition, Disposition::kPassed) << "rank " << r << ": " << Describe(res);
      ASSERT_EQ(res.rows.size(), 1u);
      EXPECT_EQ(res.rows[0].Str("kernel_source"), "servecast_shm_allreduce");
      EXPECT_EQ(res.rows[0].Str("implementation"), "shm");
      EXPECT_EQ(res.rows[0].Int("message_size"), 4099);
      EXPECT_GT(res.rows[0].Num("latency"), 0);
      // The ranks agreed on every timing decision: same samples, same calls per sample.
      EXPECT_EQ(res.rows[0].Num("samples"), results[0].rows[0].Num("samples"));
      double w = world;
      EXPECT_NEAR(res.rows[0].Num("busbw_gbps"), res.rows[0].Num("algbw_gbps") * 2 * (w - 1) / w, 1e-9);
    }
    EXPECT_FALSE(SegmentsLeft(group));  // rank 0 unlinked it once all had mapped it
  }
}

TEST(CustomAllReduceOpTest, RefusesWhatItCannotRun) {
  auto op = MakeCustomAllReduceOp();
  collect::RunContext ctx = testing::SmallContext();
  ctx.world = 2;
  ctx.group_id = "servecast-test-group";
  auto bf16 = AllReduceParams(2, 16);
  bf16.Set("allreduce_dtype", std::string("bfloat16"));
  EXPECT_EQ(op->Run(testing::MakeCase("custom_allreduce", bf16), ctx).disposition, Disposition::kNotSupported);
  EXPECT_EQ(op->Run(testing::MakeCase("custom_allreduce", AllReduceParams(1, 16)), ctx).disposition,
            Disposition::kNotSupported);
  // A case of 4 ranks given to a gang of 2, or a rank without a group: collector bugs, not hangs.
  EXPECT_EQ(op->Run(testing::MakeCase("custom_allreduce", AllReduceParams(4, 16)), ctx).disposition,
            Disposition::kFailed);
  ctx.group_id = "";
  EXPECT_EQ(op->Run(testing::MakeCase("custom_allreduce", AllReduceParams(2, 16)), ctx).disposition,
            Disposition::kFailed);
  EXPECT_EQ(op->Ranks(AllReduceParams(2, 16)), 2);
  ASSERT_EQ(op->requirements().size(), 1u);
  EXPECT_EQ(op->requirements()[0].gpus_param, "num_gpus");
}

TEST(CustomAllReduceOpTest, GroupIdsAreUniqueAndTheirLeftoversAreUnlinked) {
  CpuBackend backend;
  std::string a = backend.NewGroupId(), b = backend.NewGroupId();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("servecast-", 0), 0u);
  // A segment a killed gang left behind (rank 0 made it, then died).
  std::string leftover = ShmAllReduceSegmentName(b, "custom_allreduce:x");
  int fd = ::shm_open(leftover.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_TRUE(SegmentsLeft(b));
  backend.NewGroupId();  // the next gang: the previous ids' segments go
  EXPECT_FALSE(SegmentsLeft(b));
}

TEST(TimeCpuAgreedTest, EveryDecisionFollowsTheAgreedValue) {
  // "Agree" always answers 1: end the warm-up after one call, one call per sample,
  // stop after the first sample, whatever this rank measured.
  int calls = 0, decisions = 0;
  collect::TimingConfig cfg;
  cfg.warmup_runs = 5;
  cfg.min_samples = 10;
  cfg.min_sample_s = 1;  // alone it would ask for many calls per sample
  auto stats = TimeCpuAgreed([&] { ++calls; }, cfg,
                             [&](std::int64_t) {
                               ++decisions;
                               return std::int64_t{1};
                             });
  EXPECT_EQ(stats.samples, 1);
  EXPECT_EQ(stats.calls_per_sample, 1);
  EXPECT_EQ(calls, 2);      // one warm-up call, one sample of one call
  EXPECT_EQ(decisions, 3);  // end of warm-up, calls per sample, stop
}

}  // namespace
}  // namespace servecast::cpu
