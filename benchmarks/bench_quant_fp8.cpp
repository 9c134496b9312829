// Dynamic per-tensor fp8 quantization of a bf16 activation [m x k]: the two-kernel
// path the gemm op times inside its fp8 rows (QuantFp8TensorAmax, then
// QuantFp8TensorApply) against the fused one-kernel path (QuantFp8TensorFused), and
// the static quantization alone (QuantFp8TensorApply with a known scale). Before
// timing, the fused path's scale and bytes must equal the two-kernel path's.
// Inputs rotate over copies that exceed 2x L2, as the gemm op's activations do not
// (they are one tensor), so small shapes here read from HBM, which is the harder case.
//
// Counters: us per call and TB/s of the minimum traffic (read 2 bytes, write 1 byte
// per element). Needs a GPU (skips otherwise). Run:
//   build/gpu/bin/bench_quant_fp8 --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/fill.h"
#include "backends/cuda/harness.h"
#include "collect/timing.h"
#include "backends/cuda/quantize.h"
#include "gpu_bench.h"
#include "quant_fp8_fused.h"

namespace sc = servecast;

namespace {

using servecast::bench::HaveGpu;

// args: mode (0 two kernels, 1 fused, 2 static apply only), m, k
void BM_QuantFp8Tensor(benchmark::State& state) {
  if (!HaveGpu()) {
    state.SkipWithError("no GPU");
    return;
  }
  sc::cuda::InitDevice(0);
  sc::cuda::DeviceContext& dc = sc::cuda::Context();
  cudaStream_t st = dc.stream;
  const int mode = static_cast<int>(state.range(0));
  const std::size_t n = static_cast<std::size_t>(state.range(1) * state.range(2));
  const int copies = std::max(1, static_cast<int>(std::ceil(2.0 * static_cast<double>(dc.l2_bytes) / (2.0 * n))));
  std::vector<sc::cuda::DeviceBuffer> xs;
  for (int c = 0; c < copies; ++c) {
    xs.emplace_back(n * 2);
    sc::cuda::FillUniformBf16(xs.back().get(), n, 77 + c, 2.0f, st);
  }
  sc::cuda::DeviceBuffer q(n), q_ref(n), st2(8), stf(12), scale(4), scale_ref(4);
  SC_CUDA_CHECK(cudaMemsetAsync(st2.get(), 0, 8, st));
  SC_CUDA_CHECK(cudaMemsetAsync(stf.get(), 0, 12, st));

  // Correctness before timing: the fused path against the two-kernel path on copy 0.
  sc::cuda::QuantFp8TensorAmax(xs[0].get(), n, st2.as<unsigned>(), scale_ref.as<float>(), st);
  sc::cuda::QuantFp8TensorApply(xs[0].get(), n, scale_ref.as<float>(), q_ref.get(), st);
  sc::cuda::QuantFp8TensorFused(xs[0].get(), n, stf.as<unsigned>(), scale.as<float>(), q.get(), st);
  std::vector<std::uint8_t> a(n), b(n);
  float sa = 0, sb = 0;
  SC_CUDA_CHECK(cudaMemcpyAsync(a.data(), q_ref.get(), n, cudaMemcpyDeviceToHost, st));
  SC_CUDA_CHECK(cudaMemcpyAsync(b.data(), q.get(), n, cudaMemcpyDeviceToHost, st));
  SC_CUDA_CHECK(cudaMemcpyAsync(&sa, scale_ref.get(), 4, cudaMemcpyDeviceToHost, st));
  SC_CUDA_CHECK(cudaMemcpyAsync(&sb, scale.get(), 4, cudaMemcpyDeviceToHost, st));
  SC_CUDA_CHECK(cudaStreamSynchronize(st));
  if (sa != sb || a != b) {
    state.SkipWithError("the fused path's scale or bytes differ from the two-kernel path's");
    return;
  }

  const sc::cuda::LaunchFn call = [&](cudaStream_t s, int it) {
    const void* x = xs[static_cast<std::size_t>(it % copies)].get();
    if (mode == 0) {
      sc::cuda::QuantFp8TensorAmax(x, n, st2.as<unsigned>(), scale.as<float>(), s);
      sc::cuda::QuantFp8TensorApply(x, n, scale.as<float>(), q.get(), s);
    } else if (mode == 1) {
      sc::cuda::QuantFp8TensorFused(x, n, stf.as<unsigned>(), scale.as<float>(), q.get(), s);
    } else {
      sc::cuda::QuantFp8TensorApply(x, n, scale_ref.as<float>(), q.get(), s);
    }
  };
  // The collector's harness (graph replay of whole rotations, median of samples); its
  // `method` says whether the calls were captured in a graph or, if capture failed
  // (e.g. for the cooperative launch), launched eagerly, which would not compare fairly.
  sc::cuda::TimeOptions topt;
  topt.copies = copies;
  topt.rotated_bytes = 2.0 * static_cast<double>(n) * copies;
  double ms = 0;
  std::string method;
  for (auto _ : state) {
    const sc::collect::TimingStats stats = sc::cuda::TimeOnDevice(call, sc::collect::TimingConfig{}, topt, false);
    ms = stats.median_ms;
    method = stats.method;
    state.SetIterationTime(ms / 1e3);
  }
  state.counters["us"] = ms * 1e3;
  state.counters["TBps_min_traffic"] = 3.0 * static_cast<double>(n) / (ms * 1e-3) / 1e12;
  state.SetLabel(std::string(mode == 0 ? "amax+apply" : mode == 1 ? "fused" : "static apply") + " (" + method + ")");
}

}  // namespace

BENCHMARK(BM_QuantFp8Tensor)
    ->ArgNames({"mode", "m", "k"})
    ->ArgsProduct({{0, 1, 2}, {256, 1024, 4096, 8192, 16384}, {8192}})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
