#include "backends/cpu/cpu_backend.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/utsname.h>

#include "backends/cpu/openblas.h"
#include "backends/cpu/register.h"
#include "cpu_test_util.h"

namespace servecast::cpu {
namespace {

TEST(CpuBackendTest, DetectRuntimeReportsOpenBlasAndHost) {
  collect::RuntimeInfo rt = CpuBackend().DetectRuntime();
  EXPECT_EQ(rt.backend, "cpu");
  ASSERT_EQ(rt.version.rfind("openblas", 0), 0u) << rt.version;
  ASSERT_EQ(rt.libraries.count("openblas"), 1u);
  EXPECT_EQ(rt.version, "openblas" + rt.libraries.at("openblas"));
  // The version is the one the loaded library reports.
  EXPECT_NE(std::string(LoadOpenBlas().get_config()).find(rt.libraries.at("openblas")), std::string::npos);
  EXPECT_FALSE(rt.device_name.empty());
  utsname uts{};
  ASSERT_EQ(uname(&uts), 0);
  EXPECT_EQ(rt.driver, uts.release);
  EXPECT_EQ(rt.arch.rfind(std::string(uts.machine) + "-", 0), 0u) << rt.arch;
  EXPECT_GT(rt.arch.size(), std::string(uts.machine).size() + 1);
  EXPECT_EQ(rt.sm, 0);
  // Asked of the library itself (already opened by DetectRuntime), not through LoadOpenBlas.
  void* lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) lib = dlopen("libopenblas.so", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr);
  bool has_sbgemm = dlsym(lib, "cblas_sbgemm") != nullptr;
  EXPECT_EQ(rt.features.count("cblas_sbgemm") == 1, has_sbgemm);
}

TEST(CpuBackendTest, ParsesOpenBlasConfig) {
  const char* config = "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64";
  EXPECT_EQ(OpenBlasVersionFromConfig(config), "0.3.21");
  EXPECT_EQ(OpenBlasCoreFromConfig(config), "Haswell");
  EXPECT_EQ(OpenBlasVersionFromConfig("OpenBLAS 0.3.26.dev SkylakeX MAX_THREADS=8"), "0.3.26.dev");
  EXPECT_EQ(OpenBlasCoreFromConfig("OpenBLAS 0.3.26.dev SkylakeX MAX_THREADS=8"), "SkylakeX");
  EXPECT_EQ(OpenBlasVersionFromConfig("something else"), "");
  EXPECT_EQ(OpenBlasCoreFromConfig(""), "");
}

TEST(CpuBackendTest, ParsesCpuModelName) {
  const char* cpuinfo =
      "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz  \n"
      "cpu MHz\t\t: 2200.000\n\nprocessor\t: 1\nmodel name\t: Other\n";
  EXPECT_EQ(CpuModelFromCpuinfo(cpuinfo), "Intel(R) Xeon(R) CPU @ 2.20GHz");
  EXPECT_EQ(CpuModelFromCpuinfo("processor\t: 0\nFeatures\t: fp asimd\n"), "unknown CPU");
}

TEST(CpuBackendTest, DefaultsAreOneWorkerOnCpuHost) {
  CpuBackend backend;
  EXPECT_EQ(backend.name(), "cpu");
  EXPECT_EQ(backend.DefaultDevices(), std::vector<int>{0});
  EXPECT_EQ(backend.DefaultSystem(testing::Runtime()), "cpu_host");
}

TEST(CpuBackendTest, InitWorkerUsesOneThreadAndPinsTheProcess) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  CpuBackend().InitWorker(1);
  EXPECT_EQ(LoadOpenBlas().get_num_threads(), 1);
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_EQ(CPU_COUNT(&after), 1);
  // The pinned core is one the process was allowed to use.
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &after)) {
      EXPECT_TRUE(CPU_ISSET(cpu, &before)) << cpu;
    }
  }
  sched_setaffinity(0, sizeof before, &before);  // leave the test process as it was
}

TEST(CpuBackendTest, RegistersBackendAndOps) {
  collect::Registry registry;
  RegisterCpuBackend(registry);
  ASSERT_NE(registry.FindBackend("cpu"), nullptr);
  EXPECT_EQ(registry.OpNames("cpu"),
            (std::vector<std::string>{"attention_context", "attention_generation", "custom_allreduce", "gemm", "moe",
                                      "rmsnorm", "silu_and_mul"}));
  const std::map<std::string, std::string> tables = {{"gemm", "gemm_perf"},
                                                     {"attention_context", "context_attention_perf"},
                                                     {"attention_generation", "generation_attention_perf"},
                                                     {"rmsnorm", "elementwise_perf"},
                                                     {"silu_and_mul", "elementwise_perf"},
                                                     {"custom_allreduce", "custom_allreduce_perf"},
                                                     {"moe", "moe_perf"}};
  for (const auto& [op_name, table] : tables) {
    collect::Op* op = registry.FindOp("cpu", op_name);
    ASSERT_NE(op, nullptr) << op_name;
    EXPECT_EQ(op->name(), op_name);
    EXPECT_EQ(op->table().name, table);
    std::vector<std::string> keys;
    for (const auto& col : op->table().key_columns) keys.push_back(col.name);
    EXPECT_EQ(op->required_params(), keys) << op_name;
  }
}

}  // namespace
}  // namespace servecast::cpu
