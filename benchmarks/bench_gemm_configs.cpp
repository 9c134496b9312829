// Exhaustive cuBLASLt configuration search for one GEMM shape: does any algorithm
// configuration beat what the heuristic returns? The gemm op autotunes over the
// heuristic's top 4 (bench_gemm_autotune showed that top 16 finds nothing faster for
// fp8 8192³); this benchmark goes further and enumerates every algorithm id cuBLASLt
// lists for the dtype, and for each its tile and stage ids (from the algorithm's
// capabilities), a set of cluster shapes and CTA swizzling, keeps what
// cublasLtMatmulAlgoCheck accepts, times each with a short probe, re-times the 12
// fastest and the heuristic's first choice with more launches, and compares the best
// configurations' output with the heuristic's (a configuration that computed
// something else cannot report a rate).
//
// The GEMM alone (no activation quantization), the layout and descriptor of the gemm
// op (weights [n][k] as A transposed, activations [m][k] as B, bf16 D [m][n]; fp8 with
// per-tensor scale pointers and fast accumulation), weights rotated over two copies
// so that they are not L2-resident.
//
// Needs a GPU (skips otherwise). Run:
//   build/gpu/bin/bench_gemm_configs --benchmark_counters_tabular=true
// The table of the fastest configurations goes to stdout.
#include <benchmark/benchmark.h>
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cuda/attention_kernels.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/fill.h"
#include "backends/cuda/gemm_internal.h"
#include "gpu_bench.h"

namespace sc = servecast;

namespace {

using servecast::bench::HaveGpu;

template <class T>
void SetDesc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& v) {
  SC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &v, sizeof(v)));
}

template <class T>
std::vector<T> CapArray(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  std::size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS || bytes == 0)
    return {};
  std::vector<T> v(bytes / sizeof(T));
  SC_CUBLAS_CHECK(cublasLtMatmulAlgoCapGetAttribute(&algo, attr, v.data(), bytes, &bytes));
  return v;
}

template <class T>
T CapValue(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  T v{};
  std::size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &v, sizeof(v), &bytes) != CUBLAS_STATUS_SUCCESS) return T{};
  return v;
}

template <class T>
void SetConfig(cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr, T v) {
  SC_CUBLAS_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&algo, attr, &v, sizeof(v)));
}

// The GEMM of one shape with its operands, descriptors and weight copies.
class Problem {
 public:
  Problem(bool fp8, std::int64_t m, std::int64_t n, std::int64_t k) : fp8_(fp8), m_(m), n_(n), k_(k) {
    sc::cuda::DeviceContext& dc = sc::cuda::Context();
    st_ = dc.stream;
    const std::size_t esz = fp8 ? 1 : 2;
    const std::size_t w_bytes = static_cast<std::size_t>(n * k) * esz;
    const int copies = std::max(1, static_cast<int>(std::ceil(2.0 * static_cast<double>(dc.l2_bytes) /
                                                              static_cast<double>(w_bytes))));
    for (int c = 0; c < copies; ++c) {
      w_.emplace_back(w_bytes);
      Fill(w_.back().get(), static_cast<std::size_t>(n * k), 11 + c);
    }
    x_ = sc::cuda::DeviceBuffer(static_cast<std::size_t>(m * k) * esz);
    Fill(x_.get(), static_cast<std::size_t>(m * k), 7);
    d_ = sc::cuda::DeviceBuffer(static_cast<std::size_t>(m * n) * 2);
    scales_ = sc::cuda::DeviceBuffer(16);
    const float ones[4] = {1, 1, 1, 1};
    SC_CUDA_CHECK(cudaMemcpyAsync(scales_.get(), ones, sizeof(ones), cudaMemcpyHostToDevice, st_));
    SC_CUDA_CHECK(cudaStreamSynchronize(st_));

    const cudaDataType_t ab = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    SC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    SetDesc(desc_, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    SetDesc(desc_, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
    if (fp8) {
      SetDesc(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, scales_.get());
      SetDesc(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, scales_.get());
      SetDesc(desc_, CUBLASLT_MATMUL_DESC_FAST_ACCUM, static_cast<std::int8_t>(1));
    }
    SC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, ab, static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(n), k));
    SC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_, ab, static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(m), k));
    SC_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&dl_, CUDA_R_16BF, static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(m), n));
    SC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref_));
    const std::uint64_t ws = dc.workspace_bytes;
    SC_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  }
  ~Problem() {
    cublasLtMatmulPreferenceDestroy(pref_);
    cublasLtMatrixLayoutDestroy(dl_);
    cublasLtMatrixLayoutDestroy(b_);
    cublasLtMatrixLayoutDestroy(a_);
    cublasLtMatmulDescDestroy(desc_);
  }
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;

  double flops() const { return 2.0 * static_cast<double>(m_) * static_cast<double>(n_) * static_cast<double>(k_); }

  // The heuristic's first choice, if any.
  bool Heuristic(cublasLtMatmulAlgo_t& out) const {
    cublasLtMatmulHeuristicResult_t r{};
    int returned = 0;
    if (cublasLtMatmulAlgoGetHeuristic(sc::cuda::Context().lt, desc_, a_, b_, dl_, dl_, pref_, 1, &r, &returned) !=
            CUBLAS_STATUS_SUCCESS ||
        returned == 0)
      return false;
    out = r.algo;
    return true;
  }

  // Every configuration cublasLtMatmulAlgoCheck accepts (split-K off).
  std::vector<cublasLtMatmulAlgo_t> Configurations(int& tried) const {
    const sc::cuda::DeviceContext& dc = sc::cuda::Context();
    const cudaDataType_t ab = fp8_ ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    int ids[256];
    int n_ids = 0;
    SC_CUBLAS_CHECK(cublasLtMatmulAlgoGetIds(dc.lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, ab, ab, CUDA_R_16BF, CUDA_R_16BF,
                                             256, ids, &n_ids));
    const std::uint16_t clusters[] = {CUBLASLT_CLUSTER_SHAPE_AUTO, CUBLASLT_CLUSTER_SHAPE_1x1x1,
                                      CUBLASLT_CLUSTER_SHAPE_2x1x1, CUBLASLT_CLUSTER_SHAPE_1x2x1,
                                      CUBLASLT_CLUSTER_SHAPE_2x2x1, CUBLASLT_CLUSTER_SHAPE_4x1x1,
                                      CUBLASLT_CLUSTER_SHAPE_1x4x1};
    std::vector<cublasLtMatmulAlgo_t> out;
    tried = 0;
    for (int i = 0; i < n_ids; ++i) {
      cublasLtMatmulAlgo_t algo{};
      if (cublasLtMatmulAlgoInit(dc.lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, ab, ab, CUDA_R_16BF, CUDA_R_16BF, ids[i],
                                 &algo) != CUBLAS_STATUS_SUCCESS)
        continue;
      std::vector<std::uint32_t> tiles = CapArray<std::uint32_t>(algo, CUBLASLT_ALGO_CAP_TILE_IDS);
      std::vector<std::uint32_t> stages = CapArray<std::uint32_t>(algo, CUBLASLT_ALGO_CAP_STAGES_IDS);
      if (tiles.empty()) tiles.push_back(CUBLASLT_MATMUL_TILE_UNDEFINED);
      if (stages.empty()) stages.push_back(CUBLASLT_MATMUL_STAGES_UNDEFINED);
      const bool swizzle = CapValue<std::uint32_t>(algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT) != 0;
      for (std::uint32_t tile : tiles)
        for (std::uint32_t stage : stages)
          for (std::uint16_t cluster : clusters)
            for (std::uint32_t swz = 0; swz <= (swizzle ? 1u : 0u); ++swz) {
              cublasLtMatmulAlgo_t a = algo;
              SetConfig(a, CUBLASLT_ALGO_CONFIG_TILE_ID, tile);
              SetConfig(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, stage);
              SetConfig(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, static_cast<std::int32_t>(1));
              SetConfig(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, swz);
              SetConfig(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, cluster);
              ++tried;
              cublasLtMatmulHeuristicResult_t r{};
              if (cublasLtMatmulAlgoCheck(dc.lt, desc_, a_, b_, dl_, dl_, &a, &r) != CUBLAS_STATUS_SUCCESS) continue;
              if (r.workspaceSize > dc.workspace_bytes) continue;
              out.push_back(a);
            }
    }
    return out;
  }

  // Mean ms per call over `calls` launches (weights rotated), after one warm call; a
  // negative value when the configuration fails to launch.
  double TimeMs(const cublasLtMatmulAlgo_t& algo, int calls) {
    if (Launch(algo, 0) != CUBLAS_STATUS_SUCCESS) {
      cudaGetLastError();
      return -1;
    }
    cudaEvent_t start = nullptr, stop = nullptr;
    SC_CUDA_CHECK(cudaEventCreate(&start));
    SC_CUDA_CHECK(cudaEventCreate(&stop));
    SC_CUDA_CHECK(cudaEventRecord(start, st_));
    bool ok = true;
    for (int i = 0; i < calls && ok; ++i) ok = Launch(algo, i + 1) == CUBLAS_STATUS_SUCCESS;
    SC_CUDA_CHECK(cudaEventRecord(stop, st_));
    SC_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    SC_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (!ok) {
      cudaGetLastError();
      return -1;
    }
    return static_cast<double>(ms) / calls;
  }

  // D of one call with `algo` on weight copy 0, as float.
  std::vector<float> Output(const cublasLtMatmulAlgo_t& algo) {
    SC_CUDA_CHECK(cudaMemsetAsync(d_.get(), 0xFF, d_.bytes(), st_));  // NaN: an unwritten output shows
    SC_CUBLAS_CHECK(Launch(algo, 0));
    std::vector<std::uint16_t> bits(d_.bytes() / 2);
    SC_CUDA_CHECK(cudaMemcpyAsync(bits.data(), d_.get(), d_.bytes(), cudaMemcpyDeviceToHost, st_));
    SC_CUDA_CHECK(cudaStreamSynchronize(st_));
    std::vector<float> out(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) {
      const std::uint32_t u = static_cast<std::uint32_t>(bits[i]) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      out[i] = f;
    }
    return out;
  }

 private:
  void Fill(void* dst, std::size_t n, std::uint64_t seed) {
    if (fp8_)
      sc::cuda::FillUniformFp8E4m3(dst, n, seed, 1.0f, st_);
    else
      sc::cuda::FillUniformBf16(dst, n, seed, 1.0f, st_);
  }
  cublasStatus_t Launch(const cublasLtMatmulAlgo_t& algo, int it) {
    const sc::cuda::DeviceContext& dc = sc::cuda::Context();
    const float alpha = 1.0f, beta = 0.0f;
    const void* w = w_[static_cast<std::size_t>(it) % w_.size()].get();
    return cublasLtMatmul(dc.lt, desc_, &alpha, w, a_, x_.get(), b_, &beta, d_.get(), dl_, d_.get(), dl_, &algo,
                          dc.workspace, dc.workspace_bytes, st_);
  }

  bool fp8_;
  std::int64_t m_, n_, k_;
  cudaStream_t st_ = nullptr;
  std::vector<sc::cuda::DeviceBuffer> w_;
  sc::cuda::DeviceBuffer x_, d_, scales_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, dl_ = nullptr;
  cublasLtMatmulPreference_t pref_ = nullptr;
};

// Largest |a - b| over max |b|; infinity when a value is not finite.
double RelativeMaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, mag = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    mag = std::max(mag, std::fabs(static_cast<double>(b[i])));
  }
  return mag > 0 ? diff / mag : diff;
}

// args: dtype (0 bfloat16, 1 fp8), m, n, k
void BM_GemmConfigSearch(benchmark::State& state) {
  if (!HaveGpu()) {
    state.SkipWithError("no GPU");
    return;
  }
  sc::cuda::InitDevice(0);
  const bool fp8 = state.range(0) == 1;
  Problem p(fp8, state.range(1), state.range(2), state.range(3));
  cublasLtMatmulAlgo_t heuristic{};
  if (!p.Heuristic(heuristic)) {
    state.SkipWithError("the heuristic returned no algorithm");
    return;
  }
  for (auto _ : state) {
    int tried = 0;
    const std::vector<cublasLtMatmulAlgo_t> configs = p.Configurations(tried);
    struct Timed {
      double ms;
      std::size_t index;
    };
    std::vector<Timed> probe;
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const double ms = p.TimeMs(configs[i], 3);
      if (ms > 0) probe.push_back({ms, i});
    }
    std::sort(probe.begin(), probe.end(), [](const Timed& a, const Timed& b) { return a.ms < b.ms; });
    const double heuristic_ms = p.TimeMs(heuristic, 30);
    const std::vector<float> want = p.Output(heuristic);
    std::printf("\n%s m=%lld n=%lld k=%lld: %d configurations tried, %zu accepted by AlgoCheck, %zu ran\n",
                fp8 ? "fp8" : "bfloat16", static_cast<long long>(state.range(1)),
                static_cast<long long>(state.range(2)), static_cast<long long>(state.range(3)), tried, configs.size(),
                probe.size());
    std::printf("  heuristic  %.4f ms  %7.1f TFLOP/s  %s\n", heuristic_ms, p.flops() / (heuristic_ms * 1e-3) / 1e12,
                sc::cuda::gemm::AlgoString(heuristic).c_str());
    double best_ms = heuristic_ms;
    std::string best_name = "heuristic";
    for (std::size_t r = 0; r < std::min<std::size_t>(12, probe.size()); ++r) {
      const cublasLtMatmulAlgo_t& algo = configs[probe[r].index];
      const double ms = p.TimeMs(algo, 30);
      const double diff = RelativeMaxDiff(p.Output(algo), want);
      const bool same = diff <= 1e-2;
      std::printf("  #%-2zu       %.4f ms  %7.1f TFLOP/s  %s  max diff %.2g%s\n", r + 1, ms,
                  p.flops() / (ms * 1e-3) / 1e12, sc::cuda::gemm::AlgoString(algo).c_str(), diff,
                  same ? "" : "  DIFFERENT OUTPUT: not counted");
      if (same && ms > 0 && ms < best_ms) {
        best_ms = ms;
        best_name = sc::cuda::gemm::AlgoString(algo);
      }
    }
    std::fflush(stdout);
    state.SetIterationTime(best_ms / 1e3);
    state.counters["heuristic_TFLOPs"] = p.flops() / (heuristic_ms * 1e-3) / 1e12;
    state.counters["best_TFLOPs"] = p.flops() / (best_ms * 1e-3) / 1e12;
    state.counters["configs"] = static_cast<double>(probe.size());
    state.SetLabel(best_name);
  }
}

}  // namespace

BENCHMARK(BM_GemmConfigSearch)
    ->ArgNames({"dtype", "m", "n", "k"})
    ->Args({1, 8192, 8192, 8192})
    ->Args({0, 8192, 8192, 8192})
    ->Args({1, 4096, 8192, 8192})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
