#include "backends/cpu/cpu_backend.h"

#include <dirent.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <random>

#include <fstream>
#include <sstream>

#include "backends/cpu/openblas.h"
#include "core/error.h"

namespace servecast::cpu {
namespace {

std::vector<std::string> SplitWords(std::string_view s) {
  std::vector<std::string> out;
  std::istringstream in{std::string(s)};
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string ReadFile(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  if (in) text << in.rdbuf();
  return text.str();
}

// openblas_get_corename is exported by every OpenBLAS since 0.2; it is optional
// anyway so that a build without it falls back to the config string.
std::string OpenBlasCore(const std::string& config) {
  if (auto fn = LoadOpenBlas().get_corename) {
    const char* core = fn();
    if (core && *core) return core;
  }
  return OpenBlasCoreFromConfig(config);
}

}  // namespace

std::string OpenBlasVersionFromConfig(std::string_view config) {
  auto words = SplitWords(config);
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (!w.empty() && w[0] >= '0' && w[0] <= '9' && w.find('.') != std::string::npos &&
        w.find('=') == std::string::npos)
      return w;
  }
  return "";
}

std::string OpenBlasCoreFromConfig(std::string_view config) {
  // Build flags (NO_LAPACKE, DYNAMIC_ARCH, ...) carry an underscore and settings
  // (MAX_THREADS=64) an '='; the core name is the last word after the version
  // with neither.
  auto words = SplitWords(config);
  std::string version = OpenBlasVersionFromConfig(config);
  std::string core;
  bool after_version = false;
  for (const auto& w : words) {
    if (w == version) {
      after_version = true;
      continue;
    }
    if (after_version && w.find('_') == std::string::npos && w.find('=') == std::string::npos) core = w;
  }
  return core;
}

std::string CpuModelFromCpuinfo(std::string_view cpuinfo) {
  std::istringstream in{std::string(cpuinfo)};
  for (std::string line; std::getline(in, line);) {
    std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    if (key != "model name") continue;
    std::string value = line.substr(colon + 1);
    std::size_t b = value.find_first_not_of(" \t");
    std::size_t e = value.find_last_not_of(" \t\r");
    if (b != std::string::npos) return value.substr(b, e - b + 1);
  }
  return "unknown CPU";
}

collect::RuntimeInfo CpuBackend::DetectRuntime() const {
  const OpenBlas& blas = LoadOpenBlas();
  const char* raw_config = blas.get_config();
  std::string config = raw_config ? raw_config : "";
  std::string version = OpenBlasVersionFromConfig(config);
  if (version.empty())
    throw StartupError("cpu backend: cannot read the OpenBLAS version from openblas_get_config() = '" + config +
                       "'; expected 'OpenBLAS <major>.<minor>.<patch> ...'");

  collect::RuntimeInfo rt;
  rt.backend = "cpu";
  rt.version = "openblas" + version;
  rt.device_name = CpuModelFromCpuinfo(ReadFile("/proc/cpuinfo"));
  utsname uts{};
  bool have_uts = uname(&uts) == 0;
  std::string machine = have_uts ? uts.machine : "unknown";
  std::string core = OpenBlasCore(config);
  rt.arch = machine + "-" + (core.empty() ? "unknown" : core);
  rt.sm = 0;
  rt.driver = have_uts ? uts.release : "unknown";
  rt.libraries["openblas"] = version;
  if (blas.sbgemm) rt.features.insert("cblas_sbgemm");
  return rt;
}

void CpuBackend::InitWorker(int device) const {
  LoadOpenBlas().set_num_threads(1);
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  int count = CPU_COUNT(&allowed);
  if (count <= 0) return;
  int wanted = (device % count + count) % count;
  for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (seen++ == wanted) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      (void)sched_setaffinity(0, sizeof one, &one);  // a failed pin only adds noise
      return;
    }
  }
}

int UnlinkGroupSegments(const std::string& group_id) {
  if (group_id.empty()) return 0;
  const std::string prefix = group_id + "-";
  std::vector<std::string> names;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (const dirent* e = ::readdir(dir)) {
      std::string n = e->d_name;
      if (n.compare(0, prefix.size(), prefix) == 0) names.push_back(n);
    }
    ::closedir(dir);
  }
  int removed = 0;
  for (const auto& n : names)
    if (::shm_unlink(("/" + n).c_str()) == 0) ++removed;
  return removed;
}

void CpuBackend::UnlinkIssuedSegments() const {
  for (const auto& id : issued_) UnlinkGroupSegments(id);
  issued_.clear();
}

std::string CpuBackend::NewGroupId() const {
  UnlinkIssuedSegments();
  std::random_device rd;
  std::uint64_t bits = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  char buf[64];
  std::snprintf(buf, sizeof buf, "servecast-%ld-%016llx", static_cast<long>(::getpid()),
                static_cast<unsigned long long>(bits));
  issued_.push_back(buf);
  return buf;
}

CpuBackend::~CpuBackend() { UnlinkIssuedSegments(); }

}  // namespace servecast::cpu
