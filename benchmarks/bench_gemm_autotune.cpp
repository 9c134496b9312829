// How much the gemm op's autotuning depth matters on large shapes: the op's own case
// run (src/backends/cuda/gemm.cpp: activation quantization for the fp8 dtypes, then
// the cuBLASLt GEMM, weights rotated, the collector's timing harness) with the
// heuristic's top 1, 4 (the op's default), 8 and 16 algorithms timed on the real shape
// and the fastest kept. Reports the row's median latency as the iteration time,
// TFLOP/s, and the chosen algorithm as the label.
//
// Needs a GPU (skips otherwise). Run:
//   build/gpu/bin/bench_gemm_autotune --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/device.h"
#include "backends/cuda/gemm_internal.h"
#include "collect/case.h"
#include "collect/op.h"
#include "gpu_bench.h"

namespace sc = servecast;

namespace {

using servecast::bench::HaveGpu;

const sc::collect::RuntimeInfo& Runtime() {
  static const sc::collect::RuntimeInfo rt = sc::cuda::CudaBackend().DetectRuntime();
  return rt;
}

// args: dtype (0 bfloat16, 1 fp8, 2 fp8_block), m, n, k, candidates
void BM_GemmAutotuneDepth(benchmark::State& state) {
  if (!HaveGpu()) {
    state.SkipWithError("no GPU");
    return;
  }
  sc::cuda::InitDevice(0);
  static const char* kDtypes[] = {"bfloat16", "fp8", "fp8_block"};
  const std::string dtype = kDtypes[state.range(0)];
  const std::int64_t m = state.range(1), n = state.range(2), k = state.range(3);
  sc::collect::Case c;
  c.op = "gemm";
  c.params = sc::collect::Params{{"gemm_dtype", dtype}, {"m", m}, {"n", n}, {"k", k}};
  c.id = sc::collect::MakeCaseId(c.op, c.params);
  sc::collect::RunContext ctx;  // the collector's default timing
  ctx.runtime = &Runtime();
  sc::cuda::gemm::GemmRunOptions opt;
  opt.algo_candidates = static_cast<int>(state.range(4));
  double latency_ms = 0;
  for (auto _ : state) {
    const sc::cuda::gemm::GemmRunReport rep = sc::cuda::gemm::RunGemmCase(c, ctx, opt);
    if (rep.result.disposition != sc::collect::Disposition::kPassed || rep.result.rows.empty()) {
      state.SkipWithError((rep.result.error_type + ": " + rep.result.message).c_str());
      return;
    }
    latency_ms = rep.result.rows[0].Num("latency");
    state.SetIterationTime(latency_ms / 1e3);
    state.SetLabel(rep.kernel_source + (rep.result.rows[0].Int("throttled") ? " throttled" : ""));
  }
  state.counters["TFLOPs"] = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) /
                             (latency_ms * 1e-3) / 1e12;
}

}  // namespace

BENCHMARK(BM_GemmAutotuneDepth)
    ->ArgNames({"dtype", "m", "n", "k", "algos"})
    ->ArgsProduct({{0, 1}, {8192}, {8192}, {8192}, {1, 4, 8, 16}})
    ->ArgsProduct({{1}, {4096, 16384}, {8192}, {8192}, {4, 16}})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
