#include "system/system_spec.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"

namespace servecast::systems {
namespace {

namespace fs = std::filesystem;

const std::string kSystemsDir = std::string(SERVECAST_SOURCE_DIR) + "/systems";

// A small valid spec; the error tests break one thing in it at a time.
const std::string kGoodSpec = R"(schema_version: 1
kind: gpu
notes: a test system
gpu:
  device_name: Test GPU
  device_name_aliases: [Test GPU, Test GPU Max]
  sm_version: 90
  mem_capacity_bytes: 80e9
  mem_bw_bytes_per_s: 3.35e12
  mem_bw_efficiency: 0.8
  mem_latency_s: 3e-6
  l2_bytes: 52428800
  power_w: 700
  peak_flops_per_s:
    float32: 67e12
    bfloat16: 989e12
    fp8: 1979e12
node:
  gpus_per_node: 8
  intra_node_bw_bytes_per_s: 450e9
  inter_node_bw_bytes_per_s: 50e9
  pcie_bw_bytes_per_s: 64e9
  p2p_latency_s: 1e-5
reserves:
  nccl_bytes_by_gpus: {1: 0, 2: 358612992, 8: 411041792}
  other_bytes: 3758096384
)";

// 1-based number of the first line of `text` that contains `needle`.
int LineOf(const std::string& text, const std::string& needle) {
  const auto pos = text.find(needle);
  if (pos == std::string::npos) return -1;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << "test bug: '" << from << "' not in the spec";
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

class SystemSpecFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("servecast_system_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string Write(const std::string& file_name, const std::string& text) {
    const std::string path = (dir_ / file_name).string();
    std::ofstream(path) << text;
    return path;
  }

  // Loads `text` from a file and expects a ConfigError naming the file, `line` and `key`.
  void ExpectError(const std::string& text, int line, const std::string& key, const std::string& what = "") {
    const std::string path = Write("bad_system.yaml", text);
    try {
      LoadSystem(path);
      ADD_FAILURE() << "no error for:\n" << text;
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path + ":" + std::to_string(line) + ":"), std::string::npos)
          << "want file and line " << line << " in: " << msg;
      if (!key.empty()) {
        EXPECT_NE(msg.find("key '" + key + "'"), std::string::npos) << "want key " << key << " in: " << msg;
      }
      if (!what.empty()) {
        EXPECT_NE(msg.find(what), std::string::npos) << "want '" << what << "' in: " << msg;
      }
    }
  }

  fs::path dir_;
};

bool Near(double a, double b, double rel) {
  return std::fabs(a - b) <= rel * std::fabs(b);
}

// ---------------------------------------------------------------- shipped specs

TEST(ShippedSystems, ListsTheFiveSystems) {
  const std::vector<std::string> names = ListSystems(kSystemsDir);
  const std::vector<std::string> want = {"a100_sxm", "b200_sxm", "cpu_host", "h100_sxm", "h200_sxm"};
  for (const auto& w : want)
    EXPECT_NE(std::find(names.begin(), names.end(), w), names.end()) << w << " missing from " << kSystemsDir;
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(ShippedSystems, EveryFileLoadsAndIsPhysicallyConsistent) {
  std::set<std::string> all_aliases;
  for (const auto& name : ListSystems(kSystemsDir)) {
    SCOPED_TRACE(name);
    const SystemSpec s = LoadSystemByName(kSystemsDir, name);
    EXPECT_EQ(s.name, name);
    EXPECT_EQ(s.source_file, kSystemsDir + "/" + name + ".yaml");
    EXPECT_TRUE(s.kind == "gpu" || s.kind == "cpu");
    for (const auto& alias : s.gpu.device_name_aliases)
      EXPECT_TRUE(all_aliases.insert(alias).second) << "device name '" << alias << "' maps to two systems";
    // Narrower types are never slower than wider ones on the same chip.
    const double bf16 = PeakFlops(s, "bfloat16");
    if (s.gpu.peak_flops_per_s.count("float32")) {
      EXPECT_GT(bf16, PeakFlops(s, "float32"));
    }
    EXPECT_EQ(PeakFlops(s, "float16"), bf16);
    if (s.gpu.peak_flops_per_s.count("tf32")) {
      EXPECT_TRUE(Near(PeakFlops(s, "tf32"), bf16 / 2, 0.01));
    }
    // fp8 runs at twice the bf16 rate, or at the bf16 rate where the chip has no
    // fp8 path (AIC's b60). int8 is not checked: Blackwell Ultra (b300, gb300) cut
    // it to a fraction of bf16.
    if (s.gpu.peak_flops_per_s.count("fp8")) {
      EXPECT_TRUE(Near(PeakFlops(s, "fp8"), 2 * bf16, 0.01) || Near(PeakFlops(s, "fp8"), bf16, 0.01));
    }
    if (s.gpu.peak_flops_per_s.count("nvfp4")) {
      EXPECT_GE(PeakFlops(s, "nvfp4"), 0.99 * 4 * bf16);
    }
    if (s.node.gpus_per_rack > 0) {
      EXPECT_GE(s.node.gpus_per_rack, s.node.gpus_per_node);
    }
    // Reserves leave room for weights and KV cache.
    double max_nccl = 0;
    for (const auto& [gpus, bytes] : s.reserves.nccl_bytes_by_gpus) max_nccl = std::max(max_nccl, bytes);
    EXPECT_LT(max_nccl + s.reserves.other_bytes, 0.2 * s.gpu.mem_capacity_bytes);  // b60 (24 GiB): 16%
    EXPECT_LE(s.gpu.l2_bytes, s.gpu.mem_capacity_bytes);
  }
}

TEST(ShippedSystems, H200Facts) {
  const SystemSpec s = LoadSystemByName(kSystemsDir, "h200_sxm");
  EXPECT_EQ(s.kind, "gpu");
  EXPECT_EQ(s.gpu.device_name, "NVIDIA H200");
  EXPECT_EQ(s.gpu.sm_version, 90);
  EXPECT_TRUE(Near(PeakFlops(s, "bfloat16"), 989e12, 0.01));
  EXPECT_TRUE(Near(PeakFlops(s, "fp8"), 1979e12, 0.01));
  EXPECT_EQ(PeakFlops(s, "fp8_block"), PeakFlops(s, "fp8"));  // fallback
  EXPECT_DOUBLE_EQ(s.gpu.mem_capacity_bytes, 151397597184.0);
  EXPECT_DOUBLE_EQ(s.gpu.mem_bw_bytes_per_s, 4.8e12);  // written as 4.8e12
  EXPECT_DOUBLE_EQ(s.gpu.mem_bw_efficiency, 0.8);
  EXPECT_DOUBLE_EQ(s.gpu.mem_latency_s, 3e-6);
  EXPECT_DOUBLE_EQ(s.gpu.power_w, 700);
  EXPECT_EQ(s.node.gpus_per_node, 8);
  EXPECT_DOUBLE_EQ(s.node.intra_node_bw_bytes_per_s, 450e9);
  EXPECT_DOUBLE_EQ(s.node.pcie_bw_bytes_per_s, 64e9);
  EXPECT_DOUBLE_EQ(s.reserves.nccl_bytes_by_gpus.at(8), 411041792.0);
  EXPECT_DOUBLE_EQ(s.reserves.other_bytes, 3758096384.0);
  EXPECT_THROW(PeakFlops(s, "nvfp4"), Error);  // Hopper has no fp4 tensor cores
}

TEST(ShippedSystems, OtherGpuFacts) {
  const SystemSpec h100 = LoadSystemByName(kSystemsDir, "h100_sxm");
  EXPECT_EQ(h100.gpu.sm_version, 90);
  EXPECT_DOUBLE_EQ(h100.gpu.mem_bw_bytes_per_s, 3.35e12);
  EXPECT_EQ(PeakFlops(h100, "bfloat16"), PeakFlops(LoadSystemByName(kSystemsDir, "h200_sxm"), "bfloat16"));

  const SystemSpec a100 = LoadSystemByName(kSystemsDir, "a100_sxm");
  EXPECT_EQ(a100.gpu.sm_version, 80);
  EXPECT_TRUE(Near(PeakFlops(a100, "bfloat16"), 312e12, 0.01));
  EXPECT_THROW(PeakFlops(a100, "fp8"), Error);        // Ampere has no fp8
  EXPECT_THROW(PeakFlops(a100, "fp8_block"), Error);  // nor a fallback for it

  const SystemSpec b200 = LoadSystemByName(kSystemsDir, "b200_sxm");
  EXPECT_EQ(b200.gpu.sm_version, 100);
  EXPECT_TRUE(Near(PeakFlops(b200, "nvfp4"), 9e15, 0.01));
  EXPECT_DOUBLE_EQ(b200.node.intra_node_bw_bytes_per_s, 900e9);
}

TEST(ShippedSystems, RackScaleAndXpuFacts) {
  // GB200 NVL72: 4 GPUs per tray, NVLink across the 72-GPU rack, InfiniBand beyond.
  const SystemSpec gb200 = LoadSystemByName(kSystemsDir, "gb200");
  EXPECT_EQ(gb200.node.gpus_per_node, 4);
  EXPECT_EQ(gb200.node.gpus_per_rack, 72);
  EXPECT_DOUBLE_EQ(GroupBandwidth(gb200, 4), 900e9);
  EXPECT_DOUBLE_EQ(GroupBandwidth(gb200, 8), 900e9);
  EXPECT_DOUBLE_EQ(GroupBandwidth(gb200, 72), 900e9);
  EXPECT_DOUBLE_EQ(GroupBandwidth(gb200, 144), 100e9);
  EXPECT_EQ(gb200.collectives.nccl_version, "2.23");
  // No rack level: beyond a node is inter-node.
  const SystemSpec b300 = LoadSystemByName(kSystemsDir, "b300_sxm");
  EXPECT_EQ(b300.gpu.sm_version, 103);
  EXPECT_DOUBLE_EQ(GroupBandwidth(b300, 8), 900e9);
  EXPECT_DOUBLE_EQ(GroupBandwidth(b300, 16), 100e9);
  // Intel B60: not a CUDA device, collectives through OneCCL.
  const SystemSpec b60 = LoadSystemByName(kSystemsDir, "b60");
  EXPECT_EQ(b60.gpu.sm_version, 0);
  EXPECT_DOUBLE_EQ(b60.gpu.mem_bw_efficiency, 0.5);
  EXPECT_EQ(b60.collectives.oneccl_version, "2021.17.2");
}

TEST(ShippedSystems, CpuHostIsAGenerousCeiling) {
  const SystemSpec s = LoadSystemByName(kSystemsDir, "cpu_host");
  EXPECT_EQ(s.kind, "cpu");
  EXPECT_EQ(s.gpu.device_name, "host CPU");
  EXPECT_EQ(s.gpu.sm_version, 0);
  EXPECT_EQ(s.node.gpus_per_node, 1);
  // At least a 64-core AVX-512 host at 3.5 GHz with 2 FMA pipes (64 flops/cycle).
  EXPECT_GE(PeakFlops(s, "float32"), 64 * 3.5e9 * 64);
  // At least the same host with AMX tiles (1024 bf16 flops/cycle).
  EXPECT_GE(PeakFlops(s, "bfloat16"), 64 * 3.5e9 * 1024);
  // At least 12 channels of DDR5-6400 on each of two sockets.
  EXPECT_GE(s.gpu.mem_bw_bytes_per_s, 2 * 12 * 6400e6 * 8);
  EXPECT_DOUBLE_EQ(s.gpu.mem_bw_efficiency, 1);  // a ceiling is not derated
  EXPECT_DOUBLE_EQ(s.gpu.mem_latency_s, 0);
  EXPECT_NE(s.notes.find("ceiling"), std::string::npos);
}

// ---------------------------------------------------------------- loading and validation

TEST_F(SystemSpecFiles, GoodSpecLoads) {
  const std::string path = Write("my_gpu.yaml", kGoodSpec);
  const SystemSpec s = LoadSystem(path);
  EXPECT_EQ(s.name, "my_gpu");
  EXPECT_EQ(s.source_file, path);
  EXPECT_EQ(s.notes, "a test system");
  EXPECT_EQ(s.gpu.device_name_aliases, (std::vector<std::string>{"Test GPU", "Test GPU Max"}));
  EXPECT_DOUBLE_EQ(s.gpu.mem_capacity_bytes, 80e9);
  EXPECT_DOUBLE_EQ(s.gpu.l2_bytes, 52428800);
  EXPECT_DOUBLE_EQ(s.node.p2p_latency_s, 1e-5);
  EXPECT_EQ(s.reserves.nccl_bytes_by_gpus.size(), 3u);
  EXPECT_DOUBLE_EQ(s.reserves.nccl_bytes_by_gpus.at(1), 0);
  EXPECT_DOUBLE_EQ(PeakFlops(s, "float16"), 989e12);     // falls back to bfloat16
  EXPECT_DOUBLE_EQ(PeakFlops(s, "fp8_block"), 1979e12);  // falls back to fp8
}

TEST_F(SystemSpecFiles, ExplicitRateWinsOverFallback) {
  const std::string text = Replace(kGoodSpec, "    fp8: 1979e12\n", "    fp8: 1979e12\n    fp8_block: 1500e12\n");
  const SystemSpec s = LoadSystem(Write("x.yaml", text));
  EXPECT_DOUBLE_EQ(PeakFlops(s, "fp8_block"), 1500e12);
}

TEST_F(SystemSpecFiles, MalformedYaml) {
  const std::string text = Replace(kGoodSpec, "  power_w: 700\n", "  power_w: [700\n");
  const std::string path = Write("bad_system.yaml", text);
  try {
    LoadSystem(path);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path + ":"), std::string::npos) << msg;
    EXPECT_NE(msg.find("malformed YAML"), std::string::npos) << msg;
    // yaml-cpp reports where it noticed the problem: at or after the bad line.
    const int bad = LineOf(text, "power_w");
    bool has_line = false;
    for (int line = bad; line <= bad + 3; ++line)
      has_line = has_line || msg.find(path + ":" + std::to_string(line) + ":") != std::string::npos;
    EXPECT_TRUE(has_line) << msg;
  }
}

TEST_F(SystemSpecFiles, MissingKey) {
  const std::string text = Replace(kGoodSpec, "  mem_bw_bytes_per_s: 3.35e12\n", "");
  // A missing key is reported at the mapping that should hold it.
  ExpectError(text, LineOf(text, "  device_name:"), "gpu.mem_bw_bytes_per_s", "missing key");
}

TEST_F(SystemSpecFiles, MissingSection) {
  const std::string text = Replace(kGoodSpec, "node:\n  gpus_per_node: 8\n", "nodes:\n  gpus_per_node: 8\n");
  ExpectError(text, LineOf(text, "nodes:"), "nodes", "unknown key");
}

TEST_F(SystemSpecFiles, UnknownKey) {
  const std::string text = Replace(kGoodSpec, "  power_w: 700\n", "  power_w: 700\n  mem_bandwidth: 3e12\n");
  ExpectError(text, LineOf(text, "mem_bandwidth"), "gpu.mem_bandwidth", "unknown key");
}

TEST_F(SystemSpecFiles, UnknownDtype) {
  const std::string text = Replace(kGoodSpec, "    fp8: 1979e12\n", "    bf16: 989e12\n");
  ExpectError(text, LineOf(text, "bf16:"), "gpu.peak_flops_per_s.bf16", "unknown key");
}

TEST_F(SystemSpecFiles, RepeatedKey) {
  const std::string text = Replace(kGoodSpec, "  power_w: 700\n", "  power_w: 700\n  power_w: 800\n");
  ExpectError(text, LineOf(text, "power_w: 800"), "gpu.power_w", "more than once");
}

TEST_F(SystemSpecFiles, WrongTypes) {
  std::string text = Replace(kGoodSpec, "sm_version: 90", "sm_version: ninety");
  ExpectError(text, LineOf(text, "sm_version"), "gpu.sm_version", "not an integer");

  text = Replace(kGoodSpec, "sm_version: 90", "sm_version: 9.5");
  ExpectError(text, LineOf(text, "sm_version"), "gpu.sm_version", "not an integer");

  text = Replace(kGoodSpec, "mem_bw_bytes_per_s: 3.35e12", "mem_bw_bytes_per_s: 3.35TB/s");
  ExpectError(text, LineOf(text, "mem_bw_bytes_per_s"), "gpu.mem_bw_bytes_per_s", "not a number");

  text = Replace(kGoodSpec, "  peak_flops_per_s:\n    float32: 67e12\n    bfloat16: 989e12\n    fp8: 1979e12\n",
                 "  peak_flops_per_s: 989e12\n");
  ExpectError(text, LineOf(text, "peak_flops_per_s"), "gpu.peak_flops_per_s", "not a mapping");

  text = Replace(kGoodSpec, "    bfloat16: 989e12", "    bfloat16: [989e12]");
  ExpectError(text, LineOf(text, "bfloat16"), "gpu.peak_flops_per_s.bfloat16", "not a scalar");

  text = Replace(kGoodSpec, "{1: 0, 2: 358612992, 8: 411041792}", "{1: 0, two: 358612992}");
  ExpectError(text, LineOf(text, "nccl_bytes_by_gpus"), "reserves.nccl_bytes_by_gpus.two", "not an integer");

  text = Replace(kGoodSpec, "device_name_aliases: [Test GPU, Test GPU Max]", "device_name_aliases: {a: b}");
  ExpectError(text, LineOf(text, "device_name_aliases"), "gpu.device_name_aliases", "not a list");
}

TEST_F(SystemSpecFiles, NumbersMustBePositiveAndFinite) {
  std::string text = Replace(kGoodSpec, "power_w: 700", "power_w: -700");
  ExpectError(text, LineOf(text, "power_w"), "gpu.power_w", "not positive");

  text = Replace(kGoodSpec, "pcie_bw_bytes_per_s: 64e9", "pcie_bw_bytes_per_s: 0");
  ExpectError(text, LineOf(text, "pcie_bw_bytes_per_s"), "node.pcie_bw_bytes_per_s", "not positive");

  text = Replace(kGoodSpec, "bfloat16: 989e12", "bfloat16: -989e12");
  ExpectError(text, LineOf(text, "bfloat16"), "gpu.peak_flops_per_s.bfloat16", "not positive");

  text = Replace(kGoodSpec, "mem_capacity_bytes: 80e9", "mem_capacity_bytes: inf");
  ExpectError(text, LineOf(text, "mem_capacity_bytes"), "gpu.mem_capacity_bytes", "not positive");

  text = Replace(kGoodSpec, "p2p_latency_s: 1e-5", "p2p_latency_s: -1e-5");
  ExpectError(text, LineOf(text, "p2p_latency_s"), "node.p2p_latency_s", "negative");

  text = Replace(kGoodSpec, "other_bytes: 3758096384", "other_bytes: -1");
  ExpectError(text, LineOf(text, "other_bytes"), "reserves.other_bytes", "negative");

  text = Replace(kGoodSpec, "{1: 0, 2: 358612992", "{1: 0, 2: -358612992");
  ExpectError(text, LineOf(text, "nccl_bytes_by_gpus"), "reserves.nccl_bytes_by_gpus.2", "negative");

  text = Replace(kGoodSpec, "gpus_per_node: 8", "gpus_per_node: 0");
  ExpectError(text, LineOf(text, "gpus_per_node"), "node.gpus_per_node", "out of range");

  text = Replace(kGoodSpec, "mem_bw_efficiency: 0.8", "mem_bw_efficiency: 1.2");
  ExpectError(text, LineOf(text, "mem_bw_efficiency"), "gpu.mem_bw_efficiency", "exceeds 1");

  // Zero latency is legal (a ceiling adds no constant time).
  text = Replace(kGoodSpec, "mem_latency_s: 3e-6", "mem_latency_s: 0");
  EXPECT_DOUBLE_EQ(LoadSystem(Write("zero_latency.yaml", text)).gpu.mem_latency_s, 0);
}

TEST_F(SystemSpecFiles, CrossFieldChecks) {
  std::string text = Replace(kGoodSpec, "kind: gpu", "kind: tpu");
  ExpectError(text, LineOf(text, "kind"), "kind", "gpu or cpu");

  text = Replace(kGoodSpec, "kind: gpu", "kind: cpu");  // a cpu system must say sm_version 0
  ExpectError(text, LineOf(text, "sm_version"), "gpu.sm_version", "cpu system");

  text = Replace(kGoodSpec, "sm_version: 90", "sm_version: -1");  // 0 = a non-CUDA accelerator
  ExpectError(text, LineOf(text, "sm_version"), "gpu.sm_version", "out of range");

  text = Replace(kGoodSpec, "  p2p_latency_s: 1e-5\n", "  p2p_latency_s: 1e-5\n  gpus_per_rack: 72\n");
  ExpectError(text, LineOf(text, "gpus_per_rack"), "node.gpus_per_rack", "neither");

  text = Replace(kGoodSpec, "  p2p_latency_s: 1e-5\n",
                 "  p2p_latency_s: 1e-5\n  gpus_per_rack: 4\n  inter_rack_bw_bytes_per_s: 100e9\n");
  ExpectError(text, LineOf(text, "gpus_per_rack"), "node.gpus_per_rack", "gpus_per_node");

  text = Replace(kGoodSpec, "[Test GPU, Test GPU Max]", "[Test GPU Max]");
  ExpectError(text, LineOf(text, "device_name_aliases"), "gpu.device_name_aliases", "device_name");

  text = Replace(kGoodSpec, "[Test GPU, Test GPU Max]", "[Test GPU, Test GPU]");
  ExpectError(text, LineOf(text, "device_name_aliases"), "gpu.device_name_aliases", "twice");

  text = Replace(kGoodSpec, "other_bytes: 3758096384", "other_bytes: 80e9");
  ExpectError(text, LineOf(text, "other_bytes"), "reserves.other_bytes", "no device memory");

  text = Replace(kGoodSpec, "schema_version: 1", "schema_version: 2");
  ExpectError(text, 1, "schema_version", "out of range");

  text = Replace(kGoodSpec, "{1: 0, 2: 358612992, 8: 411041792}", "{0: 0}");
  ExpectError(text, LineOf(text, "nccl_bytes_by_gpus"), "reserves.nccl_bytes_by_gpus.0", "out of range");
}

TEST_F(SystemSpecFiles, EmptyOrNonMappingFile) {
  const std::string empty = Write("empty.yaml", "# nothing here\n");
  EXPECT_THROW(LoadSystem(empty), ConfigError);
  const std::string list = Write("list.yaml", "- a\n- b\n");
  EXPECT_THROW(LoadSystem(list), ConfigError);
  EXPECT_THROW(LoadSystem((dir_ / "absent.yaml").string()), ConfigError);
}

// ---------------------------------------------------------------- lookup

TEST(PeakFlops, UnknownDtypeNamesItAndListsWhatTheSystemHas) {
  const SystemSpec s = LoadSystemByName(kSystemsDir, "h200_sxm");
  try {
    PeakFlops(s, "nvfp4");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'nvfp4'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("h200_sxm"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bfloat16"), std::string::npos) << msg;
    EXPECT_NE(msg.find("fp8"), std::string::npos) << msg;
  }
  EXPECT_THROW(PeakFlops(s, ""), Error);
  EXPECT_THROW(PeakFlops(s, "bf16"), Error);  // no aliases: dtype names are exact
}

TEST(LoadSystemByName, UnknownNameListsAvailableSystems) {
  try {
    LoadSystemByName(kSystemsDir, "h300_sxm");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'h300_sxm'"), std::string::npos) << msg;
    for (const char* name : {"a100_sxm", "b200_sxm", "cpu_host", "h100_sxm", "h200_sxm"})
      EXPECT_NE(msg.find(name), std::string::npos) << name << " not listed in: " << msg;
  }
  // Names are plain stems, never paths.
  EXPECT_THROW(LoadSystemByName(kSystemsDir, "../systems/h200_sxm"), ConfigError);
  EXPECT_THROW(LoadSystemByName(kSystemsDir, ""), ConfigError);
}

TEST_F(SystemSpecFiles, ListSystemsSortsStemsOfYamlFilesOnly) {
  Write("zeta.yaml", kGoodSpec);
  Write("alpha.yaml", kGoodSpec);
  Write("readme.md", "not a system");
  Write("beta.yml", kGoodSpec);
  fs::create_directories(dir_ / "data.yaml");  // a directory, not a spec
  EXPECT_EQ(ListSystems(dir_.string()), (std::vector<std::string>{"alpha", "zeta"}));
  EXPECT_EQ(LoadSystemByName(dir_.string(), "zeta").name, "zeta");
  EXPECT_THROW(ListSystems((dir_ / "absent").string()), ConfigError);
}

}  // namespace
}  // namespace servecast::systems
