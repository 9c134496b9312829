// `collect --gpus` on a GPU machine through the real binary: an index past the
// visible GPUs is a usage error (exit 2) that names it and what is visible, before
// any case runs (issue 28 item 4: the worker failed on it at run time); the
// visible indices are accepted.

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>

#include "gpu_test_util.h"
#include "process.h"

namespace servecast::testing {
namespace {

TEST(CollectGpus, AnAbsentDeviceIsAUsageErrorNamingIt) {
  SC_REQUIRE_GPU();
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  const std::string absent = std::to_string(n);
  const auto plan = [](const std::string& gpus) {
    return RunProcess({SERVECAST_BIN, "collect", "--backend", "cuda", "--gpus", gpus, "--plan-only", "--ops",
                       "rmsnorm", "--cases", SERVECAST_SOURCE_DIR "/cases", "--systems",
                       SERVECAST_SOURCE_DIR "/systems"},
                      120);
  };
  const ProcessResult bad = plan("0," + absent);
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("--gpus: device " + absent + " is not present: this machine shows " + std::to_string(n) +
                         " CUDA device"),
            std::string::npos)
      << bad.err;
  const ProcessResult ok = plan(n > 1 ? "0,1" : "0");
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
}

}  // namespace
}  // namespace servecast::testing
