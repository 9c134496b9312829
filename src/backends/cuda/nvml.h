#pragma once

#include <string>

namespace servecast::cuda {

// NVML readings for one GPU. NVML is loaded at run time (libnvidia-ml.so.1 comes
// with the driver, not the toolkit); every reading reports availability instead
// of failing the case, and `available()` says whether NVML could be used at all.
class Nvml {
 public:
  // The device with the given PCI bus id (from cudaDeviceGetPCIBusId, so the
  // mapping is right under CUDA_VISIBLE_DEVICES).
  static Nvml& ForPciBusId(const std::string& bus_id);

  bool available() const { return device_ != nullptr; }
  const std::string& why_unavailable() const { return why_; }
  double SmClockMhz() const;             // 0 when unavailable
  double PowerWatts() const;             // < 0 when unavailable
  double PowerLimitWatts() const;        // < 0 when unavailable
  // True when NVML reports a thermal or power slowdown right now.
  bool SlowdownActive() const;
  std::string DriverVersion() const;     // "" when unavailable

 private:
  Nvml() = default;
  void* device_ = nullptr;
  std::string why_;
};

}  // namespace servecast::cuda
