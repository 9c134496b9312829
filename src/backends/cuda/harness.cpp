#include "backends/cuda/harness.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/nvml.h"

namespace servecast::cuda {
namespace {

using Clock = std::chrono::steady_clock;

struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    SC_CUDA_CHECK(cudaEventCreate(&start));
    SC_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  float Elapsed() const {
    float ms = 0;
    SC_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms;
  }
};

struct Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~Graph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
};

// Samples board power every 20 ms on a thread while the timed replays run.
class PowerSampler {
 public:
  explicit PowerSampler(const Nvml* nvml) : nvml_(nvml) {
    if (nvml_) thread_ = std::thread([this] { Loop(); });
  }
  ~PowerSampler() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  double MeanWatts() const {
    if (samples_.empty()) return -1;
    double s = 0;
    for (double w : samples_) s += w;
    return s / static_cast<double>(samples_.size());
  }
  double SecondsSampled() const { return 0.02 * static_cast<double>(samples_.size()); }

 private:
  void Loop() {
    while (!stop_) {
      double w = nvml_->PowerWatts();
      if (w >= 0) samples_.push_back(w);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  const Nvml* nvml_;
  std::atomic<bool> stop_{false};
  std::vector<double> samples_;
  std::thread thread_;
};

const Nvml& DeviceNvml(const DeviceContext& ctx) {
  char bus[32] = {0};
  SC_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof(bus), ctx.device));
  return Nvml::ForPciBusId(bus);
}

}  // namespace

int CopiesForColdL2(double bytes_per_copy, int max_copies, double memory_fraction) {
  if (bytes_per_copy <= 0) return 1;
  const DeviceContext& ctx = Context();
  int want = static_cast<int>(std::ceil(2.0 * static_cast<double>(ctx.l2_bytes) / bytes_per_copy));
  want = std::clamp(want, 1, std::max(1, max_copies));
  std::size_t free_bytes = 0, total = 0;
  MemInfo(free_bytes, total);
  int fit = static_cast<int>(memory_fraction * static_cast<double>(free_bytes) / bytes_per_copy);
  return std::max(1, std::min(want, fit));
}

collect::TimingStats TimeOnDevice(const LaunchFn& launch, const collect::TimingConfig& cfg, const TimeOptions& opt,
                                  bool measure_power) {
  DeviceContext& ctx = Context();
  cudaStream_t stream = ctx.stream;
  const int copies = std::max(1, opt.copies);
  const Nvml& nvml = DeviceNvml(ctx);
  if (measure_power && !nvml.available())
    throw Error("--measure-power needs NVML, which is unavailable here: " + nvml.why_unavailable());

  // 1. Warm-up (module load, handle set-up, first-touch) outside the numbers.
  for (int i = 0; i < std::max(1, cfg.warmup_runs); ++i) launch(stream, i);
  SC_CUDA_CHECK(cudaStreamSynchronize(stream));

  // 2. One call's time, over a full rotation of the copies.
  EventPair probe;
  SC_CUDA_CHECK(cudaEventRecord(probe.start, stream));
  for (int i = 0; i < copies; ++i) launch(stream, i);
  SC_CUDA_CHECK(cudaEventRecord(probe.stop, stream));
  SC_CUDA_CHECK(cudaEventSynchronize(probe.stop));
  double call_ms = std::max(1e-4, static_cast<double>(probe.Elapsed()) / copies);
  const double min_sample_s = opt.min_sample_s > 0 ? opt.min_sample_s : cfg.min_sample_s;
  int calls = static_cast<int>(std::ceil(min_sample_s * 1e3 / call_ms));
  calls = std::clamp(calls, 1, 2000);
  calls = ((calls + copies - 1) / copies) * copies;  // whole rotations
  auto agree = [&](long long v) { return opt.agree_min ? opt.agree_min(v) : v; };
  calls = static_cast<int>(agree(calls));

  // 3. Capture the calls in a graph; fall back to eager launches if capture fails.
  collect::TimingStats stats;
  stats.calls_per_sample = calls;
  Graph graph;
  bool use_graph = true;
  try {
    SC_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      for (int i = 0; i < calls; ++i) launch(stream, i);
    } catch (...) {
      cudaGraph_t partial = nullptr;
      cudaStreamEndCapture(stream, &partial);
      if (partial) cudaGraphDestroy(partial);
      throw;
    }
    SC_CUDA_CHECK(cudaStreamEndCapture(stream, &graph.graph));
    SC_CUDA_CHECK(cudaGraphInstantiate(&graph.exec, graph.graph, 0));
  } catch (const CudaError& e) {
    if (e.sticky() || !opt.allow_eager_fallback) throw;
    cudaGetLastError();  // clear the capture error; eager launches still run
    use_graph = false;
  }
  if (opt.agree_min && agree(use_graph ? 1 : 0) == 0 && use_graph) {
    // Another rank could not capture: every rank launches eagerly.
    use_graph = false;
  }
  stats.method = use_graph ? "graph" : "eager";
  auto replay = [&] {
    if (use_graph) SC_CUDA_CHECK(cudaGraphLaunch(graph.exec, stream));
    else
      for (int i = 0; i < calls; ++i) launch(stream, i);
  };
  replay();  // warm the replay path
  SC_CUDA_CHECK(cudaStreamSynchronize(stream));

  // 4. Timed replays.
  stats.clock_mhz_before = nvml.SmClockMhz();
  bool slowdown = nvml.SlowdownActive();
  PowerSampler power(measure_power && nvml.available() ? &nvml : nullptr);
  std::vector<double> samples;
  EventPair ev;
  auto started = Clock::now();
  for (;;) {
    SC_CUDA_CHECK(cudaEventRecord(ev.start, stream));
    replay();
    SC_CUDA_CHECK(cudaEventRecord(ev.stop, stream));
    SC_CUDA_CHECK(cudaEventSynchronize(ev.stop));
    samples.push_back(static_cast<double>(ev.Elapsed()) / calls);
    slowdown = slowdown || nvml.SlowdownActive();
    int n = static_cast<int>(samples.size());
    double spent = std::chrono::duration<double>(Clock::now() - started).count();
    bool power_done = !measure_power || power.SecondsSampled() >= 1.0 || spent > 10 * cfg.budget_s;
    bool done = false;
    if (n >= cfg.max_samples && power_done) done = true;
    else if (!power_done) done = false;
    else if (n >= cfg.min_samples && collect::RelativeStdDev(samples) < cfg.target_rsd) done = true;
    else if (spent >= cfg.budget_s && (n >= cfg.min_samples || samples.front() * calls * 1e-3 >= cfg.budget_s))
      done = true;
    // Ranks stop together: when every rank is done (each keeps its own rule).
    if (opt.agree_min) done = agree(done ? 1 : 0) == 1;
    if (done) break;
  }
  power.Stop();
  stats.clock_mhz_after = nvml.SmClockMhz();
  stats.throttled = slowdown || (stats.clock_mhz_before > 0 && stats.clock_mhz_after < 0.9 * stats.clock_mhz_before);
  if (measure_power) {
    stats.power_w = power.MeanWatts();
    stats.power_limit_w = nvml.PowerLimitWatts();
  }
  collect::ComputeStats(samples, stats);
  stats.l2 = opt.rotated_bytes >= 2.0 * static_cast<double>(ctx.l2_bytes) ? "cold" : "warm";
  return stats;
}

}  // namespace servecast::cuda
