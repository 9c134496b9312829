#include "backends/cuda/nvml.h"

#include <dlfcn.h>

#include <map>
#include <memory>
#include <mutex>

namespace servecast::cuda {
namespace {

// The few NVML entry points used, declared from the public NVML API.
using NvmlReturn = int;  // NVML_SUCCESS == 0
using NvmlDevice = void*;
constexpr int kNvmlClockSm = 1;
// nvmlClocksEventReasons bits: SW power cap, HW slowdown, SW thermal, HW thermal, HW power brake.
constexpr unsigned long long kSlowdownReasons = 0x4ULL | 0x8ULL | 0x20ULL | 0x40ULL | 0x80ULL;

struct Api {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*by_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*power)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*power_limit)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*reasons)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*driver)(char*, unsigned) = nullptr;
  std::string error;
  bool ok = false;
};

const Api& LoadApi() {
  static Api api = [] {
    Api a;
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      a.error = std::string("cannot load libnvidia-ml.so.1: ") + dlerror();
      return a;
    }
    auto sym = [&](const char* name) { return dlsym(lib, name); };
    a.init = reinterpret_cast<decltype(a.init)>(sym("nvmlInit_v2"));
    a.by_bus_id = reinterpret_cast<decltype(a.by_bus_id)>(sym("nvmlDeviceGetHandleByPciBusId_v2"));
    a.clock = reinterpret_cast<decltype(a.clock)>(sym("nvmlDeviceGetClockInfo"));
    a.power = reinterpret_cast<decltype(a.power)>(sym("nvmlDeviceGetPowerUsage"));
    a.power_limit = reinterpret_cast<decltype(a.power_limit)>(sym("nvmlDeviceGetEnforcedPowerLimit"));
    a.reasons = reinterpret_cast<decltype(a.reasons)>(sym("nvmlDeviceGetCurrentClocksEventReasons"));
    if (!a.reasons) a.reasons = reinterpret_cast<decltype(a.reasons)>(sym("nvmlDeviceGetCurrentClocksThrottleReasons"));
    a.driver = reinterpret_cast<decltype(a.driver)>(sym("nvmlSystemGetDriverVersion"));
    if (!a.init || !a.by_bus_id || !a.clock) {
      a.error = "libnvidia-ml.so.1 lacks nvmlInit_v2 / nvmlDeviceGetHandleByPciBusId_v2 / nvmlDeviceGetClockInfo";
      return a;
    }
    NvmlReturn r = a.init();
    if (r != 0) {
      a.error = "nvmlInit_v2 returned " + std::to_string(r);
      return a;
    }
    a.ok = true;
    return a;
  }();
  return api;
}

}  // namespace

Nvml& Nvml::ForPciBusId(const std::string& bus_id) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Nvml>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[bus_id];
  if (!slot) {
    slot.reset(new Nvml());
    const Api& api = LoadApi();
    if (!api.ok) {
      slot->why_ = api.error;
    } else {
      NvmlDevice dev = nullptr;
      NvmlReturn r = api.by_bus_id(bus_id.c_str(), &dev);
      if (r != 0) slot->why_ = "nvmlDeviceGetHandleByPciBusId_v2(" + bus_id + ") returned " + std::to_string(r);
      else slot->device_ = dev;
    }
  }
  return *slot;
}

double Nvml::SmClockMhz() const {
  unsigned v = 0;
  if (!device_ || LoadApi().clock(device_, kNvmlClockSm, &v) != 0) return 0;
  return v;
}

double Nvml::PowerWatts() const {
  unsigned mw = 0;
  if (!device_ || !LoadApi().power || LoadApi().power(device_, &mw) != 0) return -1;
  return mw / 1000.0;
}

double Nvml::PowerLimitWatts() const {
  unsigned mw = 0;
  if (!device_ || !LoadApi().power_limit || LoadApi().power_limit(device_, &mw) != 0) return -1;
  return mw / 1000.0;
}

bool Nvml::SlowdownActive() const {
  unsigned long long reasons = 0;
  if (!device_ || !LoadApi().reasons || LoadApi().reasons(device_, &reasons) != 0) return false;
  return (reasons & kSlowdownReasons) != 0;
}

std::string Nvml::DriverVersion() const {
  char buf[96] = {0};
  if (!LoadApi().ok || !LoadApi().driver || LoadApi().driver(buf, sizeof(buf)) != 0) return "";
  return buf;
}

}  // namespace servecast::cuda
