// Collectives on two GPUs through the real binary: a gang of two workers runs
// every NCCL op and the custom all-reduce on two message sizes, each checked
// exactly before it is timed; the tables have the rows and pass `check`.
// Skips where fewer than two GPUs are visible (CI, one-GPU machines).

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/table.h"
#include "core/table_file.h"
#include "process.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;

int VisibleGpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string FindTable(const std::string& root, const std::string& name) {
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.path().filename() == name) return e.path().string();
  return "";
}

TEST(CommGpu, TwoGpuGangRunsEveryCollectiveCheckedAndTimed) {
  if (VisibleGpus() < 2) GTEST_SKIP() << "needs two GPUs; this machine has " << VisibleGpus();
  const std::string dir = MakeTempDir("servecast_comm_gpu");
  const ProcessResult r = RunProcess(
      {SERVECAST_BIN, "collect", "--backend", "cuda", "--gpus", "0,1", "--ops", "all_reduce",
       "all_gather", "reduce_scatter", "alltoall", "send_recv", "custom_allreduce", "--case-filter", "num_gpus=2",
       "--case-filter", "message_size=4096", "--case-filter", "message_size=1048576", "--timing-budget-s", "0.05",
       "--cases", SERVECAST_SOURCE_DIR "/cases", "--systems", SERVECAST_SOURCE_DIR "/systems", "--out", dir + "/data",
       "--run-dir", dir + "/run"},
      600);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

  const std::string nccl = FindTable(dir + "/data", "nccl_perf.csv");
  const std::string car = FindTable(dir + "/data", "custom_allreduce_perf.csv");
  ASSERT_FALSE(nccl.empty()) << r.out;
  ASSERT_FALSE(car.empty()) << r.out;
  const Table n = ReadTableFile(nccl);
  const Table c = ReadTableFile(car);
  EXPECT_EQ(n.num_rows(), 5u * 2u * 2u);  // 5 ops x {half, int8} x 2 sizes
  EXPECT_EQ(c.num_rows(), 2u);
  for (const Table* t : {&n, &c}) {
    const std::size_t lat = t->ColumnIndex("latency"), bus = t->ColumnIndex("busbw_gbps");
    for (std::size_t i = 0; i < t->num_rows(); ++i) {
      EXPECT_GT(AsDouble(t->Get(i, lat)), 0.0);
      EXPECT_GT(AsDouble(t->Get(i, bus)), 0.0);
    }
  }
  const ProcessResult chk =
      RunProcess({SERVECAST_BIN, "check", dir + "/data", "--systems", SERVECAST_SOURCE_DIR "/systems"}, 120);
  EXPECT_EQ(chk.exit_code, 0) << chk.out << chk.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servecast::testing
