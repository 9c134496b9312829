#pragma once

// The "cpu" collector backend: the host CPU with OpenBLAS, one worker pinned to
// one core.

#include <string>
#include <string_view>
#include <vector>

#include "collect/registry.h"

namespace servecast::cpu {

class CpuBackend : public collect::Backend {
 public:
  std::string name() const override { return "cpu"; }
  // backend "cpu", version "openblas<ver>", device = CPU model name, arch =
  // "<machine>-<OpenBLAS core>", driver = kernel release, libraries {openblas},
  // features {"cblas_sbgemm"} when the loaded OpenBLAS exports it. Throws
  // StartupError when the OpenBLAS version cannot be read.
  collect::RuntimeInfo DetectRuntime() const override;
  std::vector<int> DefaultDevices() const override { return {0}; }
  std::string DefaultSystem(const collect::RuntimeInfo& /*rt*/) const override { return "cpu_host"; }
  // One OpenBLAS thread; the process pinned to the device-th CPU it may run on
  // (modulo their count). A failed pin is ignored (the run is still valid, only
  // noisier).
  void InitWorker(int device) const override;
  // "servecast-<pid>-<64 random bits in hex>": names the shared-memory segments of
  // one gang's cases (custom_allreduce). Each call first unlinks whatever segments
  // of the ids it issued before are still in /dev/shm (a gang is only asked for
  // after the previous one ended; a rank killed mid-case leaves its segment), and
  // so does the destructor.
  std::string NewGroupId() const override;
  ~CpuBackend() override;

 private:
  void UnlinkIssuedSegments() const;
  mutable std::vector<std::string> issued_;
};

// Unlinks every /dev/shm entry named "<group_id>-..." (the segments of one
// custom_allreduce group); returns how many.
int UnlinkGroupSegments(const std::string& group_id);

// Parsing helpers, exposed for tests.
// "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64" -> "0.3.21"; "" when absent.
std::string OpenBlasVersionFromConfig(std::string_view config);
// The core name in the same string ("Zen"); "" when absent.
std::string OpenBlasCoreFromConfig(std::string_view config);
// The first "model name" of /proc/cpuinfo-formatted text; "unknown CPU" when absent.
std::string CpuModelFromCpuinfo(std::string_view cpuinfo);

}  // namespace servecast::cpu
