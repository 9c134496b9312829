// The moe op's grouped expert GEMMs (src/backends/cuda/moe_grouped_gemm.h: mma.sync,
// and the wgmma one in Hopper builds) alone, on the GPU: E experts with r rows each
// (balanced), weights [n x k] per expert, every rows-per-tile variant. Counters: TFLOP/s (2·E·r·n·k per call) and the weight stream
// in TB/s (E·n·k elements per call), the two roofs of a MoE GEMM. The weights rotate
// over copies that together exceed 2x L2, as when the collector times the op.
//
// Needs a GPU (skips every benchmark otherwise). Run:
//   build/gpu/bin/bench_moe_grouped --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/fill.h"
#include "backends/cuda/moe_grouped_gemm.h"
#include "gpu_bench.h"

namespace sc = servecast::cuda;

namespace {

using servecast::bench::HaveGpu;

// args: type (0 bf16, 1 fp8, 2 fp8_block, 3 w4 mxfp4, 4 w4 int4), experts, rows per expert, n, k, bt, kernel (0 mma.sync, 1 wgmma)
void BM_MoeGroupedGemm(benchmark::State& state) {
  if (!HaveGpu()) {
    state.SkipWithError("no GPU");
    return;
  }
  const auto type = static_cast<sc::MoeGemmType>(state.range(0));
  const std::int64_t experts = state.range(1), rows = state.range(2), n = state.range(3), k = state.range(4);
  const int bt = static_cast<int>(state.range(5));
  const bool wgmma = state.range(6) != 0;
  if (!sc::MoeGroupedGemmSupported(type, n, k) ||
      !(wgmma ? sc::MoeGroupedWgmmaRuns() && sc::MoeGroupedWgmmaValidBt(bt) : sc::MoeGroupedGemmValidBt(type, bt))) {
    state.SkipWithError("shape, bt or kernel not supported");
    return;
  }
  const bool w4 = sc::IsW4(type);
  const std::int64_t esz = type == sc::MoeGemmType::kFp8 || type == sc::MoeGemmType::kFp8Block ? 1 : 2;  // activations
  // Weight bytes per expert as the kernel reads them (4-bit types: codes and group scales).
  const std::int64_t w_read = w4 ? sc::MoeW4LayoutOf(type, n, k).Bytes() : n * k * esz;
  const std::int64_t w_bytes = (w_read + 255) / 256 * 256;
  const int copies = static_cast<int>(
      std::clamp<std::int64_t>((256LL << 20) / std::max<std::int64_t>(experts * w_bytes, 1) + 1, 1, 8));
  cudaStream_t st = nullptr;
  SC_CUDA_CHECK(cudaStreamCreate(&st));
  const std::int64_t total_rows = experts * rows;
  sc::DeviceBuffer a(static_cast<std::size_t>(total_rows * k * esz)), d(static_cast<std::size_t>(total_rows * n * 2));
  std::vector<sc::DeviceBuffer> w;
  for (int c = 0; c < copies; ++c) w.emplace_back(static_cast<std::size_t>(experts * w_bytes));
  // Random bytes: bf16 in [-1, 1]; for the fp8 types the same bits read as e4m3 are
  // finite numbers of every magnitude except the NaN codes 0x7f/0xff, which occur in
  // under 1% of bytes and only change the arithmetic's values, not its speed. The 4-bit
  // types read them as codes and scales (some scales overflow to inf: values, not speed).
  sc::FillUniformBf16(a.get(), a.bytes() / 2, 1, 1.0f, st);
  for (int c = 0; c < copies; ++c) sc::FillUniformBf16(w[c].get(), w[c].bytes() / 2, 2 + c, 0.05f, st);
  const std::int64_t kb = (k + 127) / 128, nb = (n + 127) / 128;
  sc::DeviceBuffer a_scale(static_cast<std::size_t>(std::max<std::int64_t>(kb * total_rows, 4) * 4));
  sc::DeviceBuffer w_scale(static_cast<std::size_t>(experts * std::max<std::int64_t>(nb * kb, 4) * 4));
  sc::FillUniformF32(a_scale.as<float>(), a_scale.bytes() / 4, 3, 0.01f, st);
  sc::FillUniformF32(w_scale.as<float>(), w_scale.bytes() / 4, 4, 0.01f, st);

  std::vector<sc::MoeGemmSegment> segs;
  for (std::int64_t e = 0; e < experts; ++e)
    segs.push_back({e * rows, rows, e * w_bytes, e * (type == sc::MoeGemmType::kFp8Block ? nb * kb : 4)});
  const std::vector<sc::MoeGemmTile> tiles = sc::MoeGemmTiles(segs, n, bt);
  sc::DeviceBuffer tiles_dev(tiles.size() * sizeof(sc::MoeGemmTile));
  SC_CUDA_CHECK(cudaMemcpyAsync(tiles_dev.get(), tiles.data(), tiles_dev.bytes(), cudaMemcpyHostToDevice, st));
  SC_CUDA_CHECK(cudaStreamSynchronize(st));

  sc::MoeGroupedGemmArgs g;
  g.type = type;
  g.a = a.get();
  g.d = d.get();
  g.n = n;
  g.k = k;
  g.tiles = tiles_dev.as<sc::MoeGemmTile>();
  g.num_tiles = static_cast<int>(tiles.size());
  g.a_scale = a_scale.as<float>();
  g.w_scale = w_scale.as<float>();
  g.w_scale_ld = kb;
  auto call = [&](int i) {
    g.w = w[static_cast<std::size_t>(i % copies)].get();
    if (wgmma)
      sc::LaunchMoeGroupedGemmWgmma(g, bt, st);
    else
      sc::LaunchMoeGroupedGemm(g, bt, st);
  };
  for (int i = 0; i < 3; ++i) call(i);
  SC_CUDA_CHECK(cudaStreamSynchronize(st));
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  SC_CUDA_CHECK(cudaEventCreate(&e0));
  SC_CUDA_CHECK(cudaEventCreate(&e1));
  constexpr int kCalls = 10;
  for (auto _ : state) {
    SC_CUDA_CHECK(cudaEventRecord(e0, st));
    for (int i = 0; i < kCalls; ++i) call(i);
    SC_CUDA_CHECK(cudaEventRecord(e1, st));
    SC_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    SC_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    state.SetIterationTime(static_cast<double>(ms) / 1e3 / kCalls);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(st);
  const double flops = 2.0 * static_cast<double>(total_rows) * static_cast<double>(n) * static_cast<double>(k);
  const double wbytes = static_cast<double>(experts) * static_cast<double>(w_read);
  state.counters["TFLOPs"] = benchmark::Counter(flops / 1e12, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["TBps_w"] = benchmark::Counter(wbytes / 1e12, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tiles"] = static_cast<double>(tiles.size());
}

// The bundled models' expert GEMMs at decode-, mid- and prefill-sized rows per expert.
void Shapes(benchmark::internal::Benchmark* b) {
  struct S {
    std::int64_t experts, n, k;
  };
  // Qwen3-30B-A3B gate+up (tp 1, 128 experts, 2048 -> 1536), Qwen3-235B-A22B gate+up
  // (4096 -> 3072) and DeepSeek-V3 gate+up at ep 8 (32 experts, 7168 -> 4096).
  const std::vector<S> shapes = {{128, 1536, 2048}, {128, 3072, 4096}, {32, 4096, 7168}};
  for (int type : {0, 1, 2})
    for (const S& s : shapes)
      for (std::int64_t rows : {4, 64, 256})
        for (int bt : {8, 16, 32, 64, 128}) {
          if (bt > 2 * rows && bt > 8) continue;
          if ((rows >= 64 && bt < 32) || (rows >= 256 && bt < 64)) continue;
          for (int wgmma : {0, 1}) b->Args({type, s.experts, rows, s.n, s.k, bt, wgmma});
        }
  // The weight-only 4-bit types: gpt-oss-120b's gate+up (128 experts,
  // 2880 -> 5760) and down (5760/2 -> 2880) at moe_tp 1, and Kimi-K2.5's gate+up at ep 8
  // (48 experts, 7168 -> 4096), int4.
  const std::vector<std::pair<int, S>> w4_shapes = {
      {3, {128, 5760, 2880}}, {3, {128, 2880, 2880}}, {4, {48, 4096, 7168}}};
  for (const auto& [type, s] : w4_shapes)
    for (std::int64_t rows : {4, 64, 256})
      for (int bt : {8, 16, 32, 64, 128}) {
        if (bt > 2 * rows && bt > 8) continue;
        if ((rows >= 64 && bt < 32) || (rows >= 256 && bt < 64)) continue;
        for (int wgmma : {0, 1}) b->Args({type, s.experts, rows, s.n, s.k, bt, wgmma});
      }
}

}  // namespace

BENCHMARK(BM_MoeGroupedGemm)
    ->ArgNames({"type", "E", "rows", "n", "k", "bt", "wg"})
    ->Apply(Shapes)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond)
    ->Iterations(5);

BENCHMARK_MAIN();
