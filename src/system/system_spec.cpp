#include "system/system_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <set>
#include <system_error>

#include "core/error.h"
#include "core/yaml_util.h"

namespace servecast::systems {
namespace {

constexpr std::int64_t kSchemaVersion = 1;

std::string JoinKey(const YamlReader& r, const std::string& key) {
  return r.path().empty() ? key : r.path() + "." + key;
}

std::string JoinList(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// The text of a scalar as written in the file, for messages.
std::string Written(const YAML::Node& n) {
  return n.IsScalar() ? "'" + n.Scalar() + "'" : "value";
}

// Rejects keys outside `allowed` (typos); a repeated key is refused when the
// file loads (LoadYamlFile).
void CheckKeys(const YamlReader& r, const std::vector<std::string>& allowed) { r.AllowOnlyKeys(allowed); }

// A number that must be finite and > 0 (or >= 0 when `allow_zero`); `unit` goes
// into the message.
double CheckNumber(const std::string& file, const YAML::Node& n, const std::string& key, double v, bool allow_zero,
                   const std::string& unit) {
  const bool ok = std::isfinite(v) && (allow_zero ? v >= 0 : v > 0);
  if (!ok) {
    const std::string want = allow_zero ? "a finite number >= 0" : "a finite number > 0";
    throw ConfigError(YamlWhere(file, n, key),
                      "value " + Written(n) + (allow_zero ? " is negative or not finite" : " is not positive"),
                      want + " (" + unit + ")");
  }
  return v;
}

double Positive(const YamlReader& r, const std::string& key, const std::string& unit) {
  const double v = r.RequiredDouble(key);
  return CheckNumber(r.file(), r.node()[key], JoinKey(r, key), v, false, unit);
}

double NonNegative(const YamlReader& r, const std::string& key, const std::string& unit) {
  const double v = r.RequiredDouble(key);
  return CheckNumber(r.file(), r.node()[key], JoinKey(r, key), v, true, unit);
}

int IntInRange(const YamlReader& r, const std::string& key, std::int64_t lo, std::int64_t hi,
               const std::string& expected) {
  const std::int64_t v = r.RequiredInt(key);
  if (v < lo || v > hi) throw ConfigError(r.Where(key), "value " + std::to_string(v) + " is out of range", expected);
  return static_cast<int>(v);
}

std::string NonEmptyString(const YamlReader& r, const std::string& key) {
  std::string v = r.RequiredString(key);
  if (v.empty()) throw ConfigError(r.Where(key), "empty string", "a non-empty string");
  return v;
}

GpuSpec ReadGpu(const YamlReader& g, const std::string& kind) {
  CheckKeys(g, {"device_name", "device_name_aliases", "sm_version", "mem_capacity_bytes", "mem_bw_bytes_per_s",
                "mem_bw_efficiency", "mem_latency_s", "l2_bytes", "power_w", "peak_flops_per_s"});
  GpuSpec out;
  out.device_name = NonEmptyString(g, "device_name");

  if (!g.Has("device_name_aliases"))
    throw ConfigError(g.Where("device_name_aliases"), "missing key", "a non-empty list of device names");
  out.device_name_aliases = g.StringList("device_name_aliases");
  std::set<std::string> seen;
  for (const auto& alias : out.device_name_aliases) {
    if (alias.empty()) throw ConfigError(g.Where("device_name_aliases"), "empty device name", "non-empty device names");
    if (!seen.insert(alias).second)
      throw ConfigError(g.Where("device_name_aliases"), "device name '" + alias + "' is listed twice",
                        "each name once");
  }
  if (!seen.count(out.device_name))
    throw ConfigError(g.Where("device_name_aliases"), "the list does not contain device_name '" + out.device_name + "'",
                      "a list that includes device_name");

  if (kind == "cpu") {
    out.sm_version = IntInRange(g, "sm_version", 0, 0, "0 for a cpu system");
  } else {
    out.sm_version = IntInRange(g, "sm_version", 0, 9999,
                                "a CUDA SM version such as 90 (major*10 + minor), or 0 for a non-CUDA accelerator");
  }
  out.mem_capacity_bytes = Positive(g, "mem_capacity_bytes", "bytes");
  out.mem_bw_bytes_per_s = Positive(g, "mem_bw_bytes_per_s", "bytes per second");
  out.mem_bw_efficiency = Positive(g, "mem_bw_efficiency", "fraction of peak bandwidth");
  if (out.mem_bw_efficiency > 1)
    throw ConfigError(g.Where("mem_bw_efficiency"), "value " + Written(g.node()["mem_bw_efficiency"]) + " exceeds 1",
                      "a fraction in (0, 1]");
  out.mem_latency_s = NonNegative(g, "mem_latency_s", "seconds");
  out.l2_bytes = Positive(g, "l2_bytes", "bytes");
  out.power_w = Positive(g, "power_w", "watts");

  YamlReader flops = g.Child("peak_flops_per_s");
  CheckKeys(flops, KnownFlopsDtypes());
  for (const auto& kv : flops.node()) {
    const std::string dtype = kv.first.Scalar();
    const std::string key = JoinKey(flops, dtype);
    const double v = YamlToDouble(g.file(), kv.second, key);
    out.peak_flops_per_s[dtype] = CheckNumber(g.file(), kv.second, key, v, false, "FLOP/s");
  }
  if (out.peak_flops_per_s.empty())
    throw ConfigError(g.Where("peak_flops_per_s"), "no dtypes listed",
                      "at least one of: " + JoinList(KnownFlopsDtypes()));
  return out;
}

NodeSpec ReadNode(const YamlReader& n, const std::string& kind) {
  CheckKeys(n, {"gpus_per_node", "intra_node_bw_bytes_per_s", "inter_node_bw_bytes_per_s", "pcie_bw_bytes_per_s",
                "p2p_latency_s", "gpus_per_rack", "inter_rack_bw_bytes_per_s"});
  NodeSpec out;
  out.gpus_per_node = kind == "cpu" ? IntInRange(n, "gpus_per_node", 1, 1, "1 for a cpu system")
                                    : IntInRange(n, "gpus_per_node", 1, 4096, "an integer from 1 to 4096");
  out.intra_node_bw_bytes_per_s = Positive(n, "intra_node_bw_bytes_per_s", "bytes per second, one direction");
  out.inter_node_bw_bytes_per_s = Positive(n, "inter_node_bw_bytes_per_s", "bytes per second, one direction");
  out.pcie_bw_bytes_per_s = Positive(n, "pcie_bw_bytes_per_s", "bytes per second, one direction");
  out.p2p_latency_s = NonNegative(n, "p2p_latency_s", "seconds");
  // Optional rack level: both keys or neither.
  const bool has_rack = n.Has("gpus_per_rack"), has_rack_bw = n.Has("inter_rack_bw_bytes_per_s");
  if (has_rack != has_rack_bw)
    throw ConfigError(n.Where(has_rack ? "gpus_per_rack" : "inter_rack_bw_bytes_per_s"),
                      "rack level half specified", "both gpus_per_rack and inter_rack_bw_bytes_per_s, or neither");
  if (has_rack) {
    out.gpus_per_rack = IntInRange(n, "gpus_per_rack", 1, 1 << 20, "an integer >= gpus_per_node");
    if (out.gpus_per_rack < out.gpus_per_node)
      throw ConfigError(n.Where("gpus_per_rack"), "fewer GPUs per rack than per node", "an integer >= gpus_per_node");
    out.inter_rack_bw_bytes_per_s = Positive(n, "inter_rack_bw_bytes_per_s", "bytes per second, one direction");
  }
  return out;
}

CollectiveSpec ReadCollectives(const YamlReader& c) {
  CheckKeys(c, {"nccl_version", "oneccl_version"});
  CollectiveSpec out;
  out.nccl_version = c.OptionalString("nccl_version", "");
  out.oneccl_version = c.OptionalString("oneccl_version", "");
  return out;
}

MemoryReserves ReadReserves(const YamlReader& r, double mem_capacity_bytes) {
  CheckKeys(r, {"nccl_bytes_by_gpus", "other_bytes"});
  MemoryReserves out;
  YamlReader nccl = r.Child("nccl_bytes_by_gpus");
  double max_nccl = 0;
  for (const auto& kv : nccl.node()) {
    const std::string key = JoinKey(nccl, kv.first.Scalar());
    const std::int64_t gpus = YamlToInt(r.file(), kv.first, key);
    if (gpus < 1 || gpus > 1 << 20)
      throw ConfigError(YamlWhere(r.file(), kv.first, key), "GPU count " + std::to_string(gpus) + " is out of range",
                        "a GPU count >= 1");
    const double bytes = CheckNumber(r.file(), kv.second, key, YamlToDouble(r.file(), kv.second, key), true, "bytes");
    out.nccl_bytes_by_gpus[static_cast<int>(gpus)] = bytes;
    max_nccl = std::max(max_nccl, bytes);
  }
  if (out.nccl_bytes_by_gpus.empty())
    throw ConfigError(r.Where("nccl_bytes_by_gpus"), "no GPU counts listed", "a mapping of GPU count to bytes");
  out.other_bytes = NonNegative(r, "other_bytes", "bytes");
  if (out.other_bytes + max_nccl >= mem_capacity_bytes)
    throw ConfigError(r.Where("other_bytes"), "reserves leave no device memory",
                      "other_bytes plus the largest nccl reserve below gpu.mem_capacity_bytes");
  return out;
}

}  // namespace

const std::vector<std::string>& KnownFlopsDtypes() {
  static const std::vector<std::string> kDtypes = {"float32",   "tf32", "float16", "bfloat16", "fp8",
                                                   "fp8_block", "int8", "nvfp4",   "mxfp4"};
  return kDtypes;
}

SystemSpec LoadSystem(const std::string& path) {
  YamlReader root(path, LoadYamlFile(path));
  if (!root.node().IsMap())
    throw ConfigError(SourceLocation{path, 1, ""}, "empty system spec",
                      "a mapping with schema_version, kind, gpu, node, reserves");
  CheckKeys(root, {"schema_version", "kind", "notes", "gpu", "node", "reserves", "collectives"});

  SystemSpec out;
  out.name = std::filesystem::path(path).stem().string();
  out.source_file = path;
  IntInRange(root, "schema_version", kSchemaVersion, kSchemaVersion,
             "schema_version " + std::to_string(kSchemaVersion));
  out.kind = root.RequiredString("kind");
  if (out.kind != "gpu" && out.kind != "cpu")
    throw ConfigError(root.Where("kind"), "unknown kind '" + out.kind + "'", "gpu or cpu");
  out.notes = root.OptionalString("notes", "");
  out.gpu = ReadGpu(root.Child("gpu"), out.kind);
  out.node = ReadNode(root.Child("node"), out.kind);
  out.reserves = ReadReserves(root.Child("reserves"), out.gpu.mem_capacity_bytes);
  if (root.Has("collectives")) out.collectives = ReadCollectives(root.Child("collectives"));
  return out;
}

std::vector<std::string> ListSystems(const std::string& systems_dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(systems_dir, ec))
    throw ConfigError(SourceLocation{systems_dir, 0, ""}, "systems directory not found",
                      "a directory holding <name>.yaml system specs");
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(systems_dir, ec)) {
    if (!entry.is_regular_file(ec) || entry.path().extension() != ".yaml") continue;
    out.push_back(entry.path().stem().string());
  }
  if (ec) throw ConfigError(SourceLocation{systems_dir, 0, ""}, "cannot list directory: " + ec.message(), "");
  std::sort(out.begin(), out.end());
  return out;
}

SystemSpec LoadSystemByName(const std::string& systems_dir, const std::string& name) {
  const bool plain = !name.empty() && name.front() != '.' && name.find('/') == std::string::npos &&
                     name.find('\\') == std::string::npos;
  const std::string path = systems_dir + "/" + name + ".yaml";
  std::error_code ec;
  if (!plain || !std::filesystem::is_regular_file(path, ec)) {
    const std::vector<std::string> available = ListSystems(systems_dir);
    throw ConfigError(SourceLocation{systems_dir, 0, ""}, "unknown system '" + name + "'",
                      available.empty() ? "a <name>.yaml system spec (none found)" : "one of: " + JoinList(available));
  }
  return LoadSystem(path);
}

double GroupBandwidth(const SystemSpec& s, int gpus) {
  if (gpus <= s.node.gpus_per_node) return s.node.intra_node_bw_bytes_per_s;
  if (s.node.gpus_per_rack <= 0 || gpus <= s.node.gpus_per_rack) return s.node.inter_node_bw_bytes_per_s;
  return s.node.inter_rack_bw_bytes_per_s;
}

double PeakFlops(const SystemSpec& s, std::string_view dtype) {
  const auto& table = s.gpu.peak_flops_per_s;
  auto it = table.find(std::string(dtype));
  if (it == table.end() && dtype == "fp8_block") it = table.find("fp8");
  if (it == table.end() && dtype == "float16") it = table.find("bfloat16");
  if (it != table.end()) return it->second;
  std::vector<std::string> have;
  for (const auto& kv : table) have.push_back(kv.first);
  throw Error("system '" + s.name + "' (" + s.source_file + ") has no peak FLOP/s for dtype '" + std::string(dtype) +
              "'; it has: " + (have.empty() ? std::string("none") : JoinList(have)) +
              " (fp8_block falls back to fp8, float16 to bfloat16)");
}

}  // namespace servecast::systems
