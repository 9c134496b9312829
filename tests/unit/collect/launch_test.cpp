// DetectLaunch reads rank, world, local rank and a job id from each launcher's
// environment, and refuses what it cannot use with the variables it looked for.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "collect/launched.h"
#include "core/error.h"

namespace servecast::collect {
namespace {

// Sets variables for one test and restores the launcher-related environment after.
class Env {
 public:
  Env() {
    for (const char* k : kAll) {
      if (const char* v = std::getenv(k)) saved_.emplace_back(k, v);
      ::unsetenv(k);
    }
  }
  ~Env() {
    for (const char* k : kAll) ::unsetenv(k);
    for (const auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }
  void Set(const char* k, const char* v) { ::setenv(k, v, 1); }

 private:
  static constexpr const char* kAll[] = {"SERVECAST_RANK", "SERVECAST_WORLD", "SERVECAST_LOCAL_RANK",
                                         "SERVECAST_LAUNCH_ID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                         "OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid",
                                         "OMPI_MCA_orte_ess_jobid", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                                         "SLURM_JOB_ID", "SLURM_STEP_ID", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
                                         "PMI_JOBID"};
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST(DetectLaunchTest, Slurm) {
  Env env;
  env.Set("SLURM_PROCID", "11");
  env.Set("SLURM_NTASKS", "16");
  env.Set("SLURM_LOCALID", "3");
  env.Set("SLURM_JOB_ID", "4242");
  env.Set("SLURM_STEP_ID", "0");
  const LaunchInfo li = DetectLaunch();
  EXPECT_EQ(li.launcher, "slurm");
  EXPECT_EQ(li.rank, 11);
  EXPECT_EQ(li.world, 16);
  EXPECT_EQ(li.local_rank, 3);
  EXPECT_EQ(li.job_key, "4242.0");
}

TEST(DetectLaunchTest, OpenMpiWithPmixNamespace) {
  Env env;
  env.Set("OMPI_COMM_WORLD_RANK", "1");
  env.Set("OMPI_COMM_WORLD_SIZE", "2");
  env.Set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  env.Set("PMIX_NAMESPACE", "prterun-host-123@1");
  const LaunchInfo li = DetectLaunch();
  EXPECT_EQ(li.launcher, "openmpi");
  EXPECT_EQ(li.rank, 1);
  EXPECT_EQ(li.world, 2);
  EXPECT_EQ(li.local_rank, 1);
  EXPECT_EQ(li.job_key, "prterun-host-123_1");  // '@' is not kept in a file name
}

TEST(DetectLaunchTest, Refusals) {
  {
    Env env;
    try {
      DetectLaunch();
      FAIL() << "no launcher environment must be refused";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("SLURM_PROCID"), std::string::npos) << e.what();
    }
  }
  {
    Env env;
    env.Set("SLURM_PROCID", "4");
    env.Set("SLURM_NTASKS", "4");
    env.Set("SLURM_JOB_ID", "1");
    EXPECT_THROW(DetectLaunch(), UsageError);  // rank 4 of 4
  }
  {
    Env env;
    env.Set("OMPI_COMM_WORLD_RANK", "0");
    env.Set("OMPI_COMM_WORLD_SIZE", "two");
    EXPECT_THROW(DetectLaunch(), UsageError);
  }
  {
    Env env;
    env.Set("SERVECAST_RANK", "0");
    env.Set("SERVECAST_WORLD", "2");
    try {
      DetectLaunch();
      FAIL() << "SERVECAST_RANK without SERVECAST_LAUNCH_ID must be refused";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("SERVECAST_LAUNCH_ID"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace servecast::collect
