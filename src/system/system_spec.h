#pragma once

// System specs: the hardware facts servecast needs about one kind of machine,
// loaded from `systems/<name>.yaml`. The schema (every key, its unit, who reads
// it, where the shipped values come from) is documented in docs/systems.md.

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace servecast::systems {

// One accelerator. For a "cpu" system this describes the host processor, and
// every number is a generous ceiling rather than a datasheet figure.
struct GpuSpec {
  std::string device_name;                       // e.g. "NVIDIA H200"
  std::vector<std::string> device_name_aliases;  // names a runtime may report for this system
  int sm_version = 0;                            // 90 for Hopper; 0 for a cpu system
  double mem_capacity_bytes = 0;
  double mem_bw_bytes_per_s = 0;                   // peak device-memory bandwidth
  std::map<std::string, double> peak_flops_per_s;  // dense peak by dtype (only those the chip has)
  double l2_bytes = 0;                             // last-level on-chip cache
  double power_w = 0;                              // board power limit
  double mem_bw_efficiency = 1;                    // empirical fraction of peak bandwidth reached
  double mem_latency_s = 0;                        // constant latency of a memory-bound kernel
};

// One node: how many accelerators it holds and how they are connected.
// Bandwidths are per accelerator, in one direction.
struct NodeSpec {
  int gpus_per_node = 1;
  double intra_node_bw_bytes_per_s = 0;
  double inter_node_bw_bytes_per_s = 0;
  double pcie_bw_bytes_per_s = 0;
  double p2p_latency_s = 0;
  // Rack-scale systems (GB200/GB300 NVL72): GPUs one NVLink domain spans, and the
  // per-GPU bandwidth between racks. 0 when the spec has no rack level: then every
  // group beyond a node uses inter_node_bw_bytes_per_s.
  int gpus_per_rack = 0;
  double inter_rack_bw_bytes_per_s = 0;
};

// Which collective-library tables the system's perf data uses: the NCCL version
// under <system>/comm/nccl/, and a OneCCL version (Intel XPUs) read when no NCCL
// table exists. Empty: the newest present.
struct CollectiveSpec {
  std::string nccl_version;
  std::string oneccl_version;
};

// Device memory the serving memory model sets aside before weights and KV cache.
struct MemoryReserves {
  std::map<int, double> nccl_bytes_by_gpus;  // communicator buffers, by GPUs in the group
  double other_bytes = 0;                    // runtime, allocator slack, activations not modelled
};

struct SystemSpec {
  std::string name;         // file stem: "h200_sxm"
  std::string kind;         // "gpu" or "cpu"
  std::string source_file;  // path it was loaded from
  GpuSpec gpu;
  NodeSpec node;
  MemoryReserves reserves;
  CollectiveSpec collectives;  // optional in the file
  std::string notes;
};

// Loads and validates one spec; `name` is the file stem. Every problem is a
// ConfigError naming the file, the line, the key and what was expected.
SystemSpec LoadSystem(const std::string& path);

// Loads `<systems_dir>/<name>.yaml`. An unknown name is a ConfigError that lists
// the systems available in the directory.
SystemSpec LoadSystemByName(const std::string& systems_dir, const std::string& name);

// Stems of the `*.yaml` files in `systems_dir`, sorted. ConfigError when the
// directory does not exist.
std::vector<std::string> ListSystems(const std::string& systems_dir);

// Per-GPU bandwidth (bytes/s, one direction) of a collective over `gpus` GPUs:
// intra-node within a node, inter-node within a rack (or beyond a node when the
// spec has no rack level), inter-rack beyond a rack.
double GroupBandwidth(const SystemSpec& s, int gpus);

// Dense peak FLOP/s (ops/s for integer dtypes) of `dtype`. When not listed,
// fp8_block falls back to fp8's rate and float16 to bfloat16's. Throws Error
// naming the dtype and the dtypes the system has.
double PeakFlops(const SystemSpec& s, std::string_view dtype);

// The dtype names a `peak_flops_per_s` table may use.
const std::vector<std::string>& KnownFlopsDtypes();

}  // namespace servecast::systems
