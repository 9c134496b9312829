// The tensor-core paged-decode kernel's A/B variants (src/backends/cuda/
// attention_kernels.h: PagedDecodeVariants: tile size, cp.async ring depth,
// page-table prefetch, split target) on the shapes where the default falls short
// of the KV-streaming target: bf16 KV, 8 KV heads, head dim 128, 32 query heads
// (groups of 4) at 64 x 131072, 256 x 16384, 128 x 8192 and 1024 x 4096, and
// groups of 2 and 8 (16 and 64 query heads) at 256 x 16384. Groups of 2 plan the
// CUDA-core kernel, which has no variants: variant 0 gives its rate as a
// reference, the others are skipped.
//
// Each shape's cache (one copy, far larger than L2) and page table (pages in a
// shuffled order, as the op lays them out) are built once and shared by the
// variants. Before a variant is timed its output is compared with the default
// variant's on the same inputs; a variant that differs (max |diff| over 2% of
// max |default|, or any non-finite value) ends with an error and reports no rate.
// Timing: each launch between two CUDA events, the median of 10 per iteration.
// Counters: TBps (bytes of the visible K and V over the median launch), splits,
// ctas_per_sm (the tensor-core kernel's, from the CUDA occupancy calculator on
// this device), max_diff (against the default); the label is the plan
// (PagedDecodePlan::Describe).
//
// BM_PagedDecodeFp8: fp8 e4m3 KV (scales 0.5 for K, 1.5 for V) at 64 x 131072 and
// 256 x 16384, groups of 4 and 8 (and 2 at 256 x 16384), head dim 128, on the
// tensor-core fp8 kernel (path 0, what the plan picks) and the CUDA-core kernel
// (path 1, PagedDecodeTuning::tensor_cores_fp8 false). The CUDA-core output is the
// reference: before either path is timed its output is compared with it in the same
// way (max |diff| over 2% of max |reference|, or any non-finite value: an error and
// no rate). TBps counts the fp8 bytes of the visible K and V.
//
// BM_PagedDecodeFp8Lean: the fp8 tensor-core kernel's lean loop (lean 1, the default:
// warps independent until the final reduction) against the loop it shared with bf16
// (lean 0, PagedDecodeTuning::fp8_lean false), interleaved per shape: 32 query heads at
// 64 x 131072, 256 x 16384, 128 x 8192, 1024 x 4096, 4 x 16384, 256 x 1024, 2048 x 64
// and 16 x 64 (one page), 64 query heads at 256 x 16384 and 2048 x 64. Both are checked
// against the CUDA-core kernel's output first.
//
// BM_PagedDecodeSplitRule: the split rule's wave model (rule 0, the default:
// PlanPagedDecode picks the split count that minimizes waves of resident CTAs x (pages
// per split + a fixed cost) plus the reduce kernel's cost) against the rule before it (rule 1: the fewest splits that give every CTA slot one CTA, which can
// leave a nearly empty second wave), bf16 (kv 0) and fp8 (kv 1) KV, on small batches
// with long contexts, where the two differ: 4 x 131072, 16 x 65536 and 16 x 16384 with
// 32 query heads (groups of 4) and 16 x 65536 with 16 (groups of 2, CUDA-core kernel
// for bf16). Checked against the same reference as the other benchmarks first.
//
// Needs a GPU (skips every benchmark otherwise). Run:
//   build/gpu/bin/bench_decode_variants --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/attention_kernels.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/fill.h"
#include "gpu_bench.h"

namespace sc = servecast::cuda;

namespace {

constexpr std::int64_t kKvHeads = 8, kHeadDim = 128;
// Query values in [-9, 9) against keys in [-1, 1): scores with a standard deviation
// of about 3 (after the 1/sqrt(d) scale), so the softmax is peaked, outputs are of
// order 0.1-1, and a tile read wrongly or twice shows in the comparison.
constexpr float kQueryRange = 9.0f, kKeyValueRange = 1.0f;

using servecast::bench::HaveGpu;

int Multiprocessors() {
  int device = 0, sms = 0;
  SC_CUDA_CHECK(cudaGetDevice(&device));
  SC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

// fp8 KV scales other than 1 (as the op's), so a path that ignored them would differ.
constexpr float kFp8KScale = 0.5f, kFp8VScale = 1.5f;

// One shape's inputs and the reference output (bf16: the default variant's; fp8: the
// CUDA-core kernel's), kept while consecutive benchmarks share the shape (the
// arguments are ordered shape-major).
struct Workload {
  sc::PagedDecodeShape shape;
  sc::KvDtype kv = sc::KvDtype::kBf16;
  sc::DeviceBuffer k, v, table, q;
  std::vector<float> reference;
  float reference_max = 0;
};

std::vector<float> Download(const sc::DeviceBuffer& out, std::size_t n, cudaStream_t st) {
  std::vector<std::uint16_t> bits(n);
  SC_CUDA_CHECK(cudaMemcpyAsync(bits.data(), out.get(), n * 2, cudaMemcpyDeviceToHost, st));
  SC_CUDA_CHECK(cudaStreamSynchronize(st));
  std::vector<float> f(n);
  for (std::size_t i = 0; i < n; ++i) f[i] = sc::Bf16ToF32(bits[i]);
  return f;
}

void Launch(const Workload& w, const sc::PagedDecodePlan& plan, const sc::DeviceBuffer& out,
            const sc::DeviceBuffer& workspace, cudaStream_t st) {
  const bool fp8 = w.kv == sc::KvDtype::kFp8E4m3;
  sc::LaunchPagedDecode(w.shape, plan, w.kv, w.q.get(), w.k.get(), w.v.get(), w.table.as<std::int32_t>(),
                        fp8 ? kFp8KScale : 1.0f, fp8 ? kFp8VScale : 1.0f, out.get(), workspace.get(), st);
}

sc::PagedDecodePlan PlanFor(const sc::PagedDecodeShape& s, int variant) {
  sc::PagedDecodeTuning tuning;
  tuning.variant = variant;
  return sc::PlanPagedDecode(s, Multiprocessors(), sc::KvDtype::kBf16, tuning);
}

// fp8 KV: the plan with the tensor-core fp8 kernel allowed (the default) or not, with
// its lean loop (the default) or the full one.
sc::PagedDecodePlan PlanFp8(const sc::PagedDecodeShape& s, bool tensor_cores, bool lean = true) {
  sc::PagedDecodeTuning tuning;
  tuning.tensor_cores_fp8 = tensor_cores;
  tuning.fp8_lean = lean;
  return sc::PlanPagedDecode(s, Multiprocessors(), sc::KvDtype::kFp8E4m3, tuning);
}

Workload& Prepare(const sc::PagedDecodeShape& s, sc::KvDtype kv, cudaStream_t st) {
  static Workload w;
  if (w.k.get() && w.kv == kv && w.shape.batch == s.batch && w.shape.tokens == s.tokens &&
      w.shape.num_heads == s.num_heads)
    return w;
  w = Workload{};  // frees the previous shape's cache first
  w.shape = s;
  w.kv = kv;
  const bool fp8 = kv == sc::KvDtype::kFp8E4m3;
  const std::int64_t pages = s.pages_per_seq();
  const std::size_t table_n = static_cast<std::size_t>(s.batch * pages);
  const std::size_t pool = table_n * static_cast<std::size_t>(kKvHeads * sc::kPagedKvPageSize * kHeadDim);
  const std::size_t q_elems = static_cast<std::size_t>(s.batch * s.num_heads * kHeadDim);
  w.k = sc::DeviceBuffer(pool * (fp8 ? 1 : 2));
  w.v = sc::DeviceBuffer(pool * (fp8 ? 1 : 2));
  w.table = sc::DeviceBuffer(table_n * 4);
  w.q = sc::DeviceBuffer(q_elems * 2);
  if (fp8) {
    sc::FillUniformFp8E4m3(w.k.get(), pool, 11, kKeyValueRange, st);
    sc::FillUniformFp8E4m3(w.v.get(), pool, 12, kKeyValueRange, st);
  } else {
    sc::FillUniformBf16(w.k.get(), pool, 11, kKeyValueRange, st);
    sc::FillUniformBf16(w.v.get(), pool, 12, kKeyValueRange, st);
  }
  sc::FillUniformBf16(w.q.get(), q_elems, 13, kQueryRange, st);
  std::vector<std::int32_t> host_table(table_n);
  std::iota(host_table.begin(), host_table.end(), 0);
  std::uint64_t state = 0x9e3779b97f4a7c15ULL;  // splitmix64: a fixed shuffle of the pages
  for (std::size_t i = table_n; i > 1; --i) {
    state += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    std::swap(host_table[i - 1], host_table[static_cast<std::size_t>(z % i)]);
  }
  SC_CUDA_CHECK(cudaMemcpyAsync(w.table.get(), host_table.data(), table_n * 4, cudaMemcpyHostToDevice, st));
  const sc::PagedDecodePlan plan = fp8 ? PlanFp8(s, false) : PlanFor(s, 0);
  sc::DeviceBuffer out(q_elems * 2), workspace(std::max<std::size_t>(plan.workspace_bytes, 16));
  Launch(w, plan, out, workspace, st);
  w.reference = Download(out, q_elems, st);
  for (float x : w.reference) w.reference_max = std::max(w.reference_max, std::fabs(x));
  return w;
}

// Compares the plan's output on w with w.reference, then (when it matches) times it:
// each launch between two CUDA events, the median of 10 per iteration. False (and the
// benchmark skipped with the reason) when the output differs; max_diff is set either way.
bool CheckThenTime(benchmark::State& state, const Workload& w, const sc::PagedDecodePlan& plan,
                   const std::string& reference_name, double& max_diff) {
  cudaStream_t st = nullptr;
  SC_CUDA_CHECK(cudaStreamCreate(&st));
  const std::size_t q_elems = w.reference.size();
  sc::DeviceBuffer out(q_elems * 2), workspace(std::max<std::size_t>(plan.workspace_bytes, 16));
  sc::FillPoison(out.get(), out.bytes(), st);

  // Correctness against the reference before anything is timed.
  Launch(w, plan, out, workspace, st);
  const std::vector<float> got = Download(out, q_elems, st);
  max_diff = 0;
  bool finite = std::isfinite(w.reference_max) && w.reference_max > 0;
  for (std::size_t i = 0; i < q_elems; ++i) {
    if (!std::isfinite(got[i])) finite = false;
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(got[i] - w.reference[i])));
  }
  const double tolerance = 2e-2 * w.reference_max;
  if (!finite || !(max_diff <= tolerance)) {
    const std::string why = "differs from " + reference_name + ": max |diff| " + std::to_string(max_diff) + " > " +
                            std::to_string(tolerance) + (finite ? "" : " (non-finite values)");
    state.SkipWithError(why.c_str());  // the message is copied
    cudaStreamDestroy(st);
    return false;
  }

  constexpr int kCalls = 10;
  std::vector<cudaEvent_t> events(kCalls + 1);
  for (cudaEvent_t& e : events) SC_CUDA_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < 2; ++i) Launch(w, plan, out, workspace, st);
  SC_CUDA_CHECK(cudaStreamSynchronize(st));
  std::vector<float> ms(kCalls);
  for (auto _ : state) {
    SC_CUDA_CHECK(cudaEventRecord(events[0], st));
    for (int i = 0; i < kCalls; ++i) {
      Launch(w, plan, out, workspace, st);
      SC_CUDA_CHECK(cudaEventRecord(events[static_cast<std::size_t>(i) + 1], st));
    }
    SC_CUDA_CHECK(cudaEventSynchronize(events[kCalls]));
    for (int i = 0; i < kCalls; ++i)
      SC_CUDA_CHECK(cudaEventElapsedTime(&ms[static_cast<std::size_t>(i)], events[static_cast<std::size_t>(i)],
                                         events[static_cast<std::size_t>(i) + 1]));
    std::nth_element(ms.begin(), ms.begin() + kCalls / 2, ms.end());
    state.SetIterationTime(static_cast<double>(ms[kCalls / 2]) / 1e3);
  }
  for (cudaEvent_t e : events) cudaEventDestroy(e);
  cudaStreamDestroy(st);
  return true;
}

// Prepares the workload of `s`, checks `plan` against its reference and times it, then
// reports TB/s of the visible K and V (bytes of the KV dtype), the splits, CTAs per SM
// (tensor-core plans; 0 leaves it out) and the check's max |diff|, labelled with the plan.
void RunPlan(benchmark::State& state, const sc::PagedDecodeShape& s, sc::KvDtype kv, const sc::PagedDecodePlan& plan,
             const std::string& reference_name, int ctas_per_sm) {
  cudaStream_t st = nullptr;
  SC_CUDA_CHECK(cudaStreamCreate(&st));
  const Workload& w = Prepare(s, kv, st);
  cudaStreamDestroy(st);
  double max_diff = 0;
  if (!CheckThenTime(state, w, plan, reference_name, max_diff)) return;
  const double elem_bytes = kv == sc::KvDtype::kFp8E4m3 ? 1 : 2;
  const double kv_bytes = 2.0 * static_cast<double>(s.batch * s.tokens * s.num_kv_heads * s.head_dim) * elem_bytes;
  state.counters["TBps"] = benchmark::Counter(kv_bytes / 1e12, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["splits"] = plan.splits;
  if (ctas_per_sm > 0) state.counters["ctas_per_sm"] = ctas_per_sm;
  state.counters["max_diff"] = max_diff;
  state.SetLabel(plan.Describe());
}

// args: variant, batch, KV length, query heads (8 KV heads, head dim 128, bf16 KV)
void BM_PagedDecodeVariant(benchmark::State& state) {
  if (!HaveGpu()) {
    state.SkipWithError("no GPU");
    return;
  }
  const int variant = static_cast<int>(state.range(0));
  const sc::PagedDecodeShape s{state.range(1), state.range(3), kKvHeads, kHeadDim, state.range(2), 0};
  const sc::PagedDecodePlan plan = PlanFor(s, variant);
  if (!plan.tensor_cores && variant != 0) {
    state.SkipWithError("the plan is the CUDA-core kernel: no variants (variant 0 gives its rate)");
    return;
  }
  RunPlan(state, s, sc::KvDtype::kBf16, plan, "the default variant",
          plan.tensor_cores ? sc::PagedDecodeVariantCtasPerSm(variant, kHeadDim) : 0);
}

// args: path (0: the tensor-core fp8 kernel, as planned by default; 1: the CUDA-core
// kernel, forced), batch, KV length, query heads (8 KV heads, head dim 128, fp8 KV)
void BM_PagedDecodeFp8(benchmark::State& state) {
  if (!HaveGpu()) {
    state.SkipWithError("no GPU");
    return;
  }
  const bool tensor_cores = state.range(0) == 0;
  const sc::PagedDecodeShape s{state.range(1), state.range(3), kKvHeads, kHeadDim, state.range(2), 0};
  const sc::PagedDecodePlan plan = PlanFp8(s, tensor_cores);
  if (plan.tensor_cores != tensor_cores) {
    state.SkipWithError(tensor_cores ? "the default plan is not the tensor-core fp8 kernel"
                                     : "the forced plan is not the CUDA-core kernel");
    return;
  }
  RunPlan(state, s, sc::KvDtype::kFp8E4m3, plan, "the CUDA-core fp8 kernel",
          plan.tensor_cores ? sc::PagedDecodeFp8CtasPerSm(kHeadDim) : 0);
}

// args: lean (1: the fp8 kernel's lean loop, the default; 0: the loop the bf16 kernel
// keeps), batch, KV length, query heads (8 KV heads, head dim 128, fp8 KV, the default
// tensor-core plan). The A/B of PagedDecodeTuning::fp8_lean; both checked against the
// CUDA-core kernel's output first.
void BM_PagedDecodeFp8Lean(benchmark::State& state) {
  if (!HaveGpu()) {
    state.SkipWithError("no GPU");
    return;
  }
  const sc::PagedDecodeShape s{state.range(1), state.range(3), kKvHeads, kHeadDim, state.range(2), 0};
  const bool lean = state.range(0) == 1;
  const sc::PagedDecodePlan plan = PlanFp8(s, true, lean);
  if (!plan.tensor_cores) {
    state.SkipWithError("the default plan is not the tensor-core fp8 kernel");
    return;
  }
  RunPlan(state, s, sc::KvDtype::kFp8E4m3, plan, "the CUDA-core fp8 kernel",
          sc::PagedDecodeFp8CtasPerSm(kHeadDim, lean));
}

// args: rule (0: the wave model, the default; 1: the rule before), kv (0: bf16,
// 1: fp8 e4m3), batch, KV length, query heads (8 KV heads, head dim 128)
void BM_PagedDecodeSplitRule(benchmark::State& state) {
  if (!HaveGpu()) {
    state.SkipWithError("no GPU");
    return;
  }
  const bool balanced = state.range(0) == 0;
  const sc::KvDtype kv = state.range(1) == 1 ? sc::KvDtype::kFp8E4m3 : sc::KvDtype::kBf16;
  const sc::PagedDecodeShape s{state.range(2), state.range(4), kKvHeads, kHeadDim, state.range(3), 0};
  sc::PagedDecodeTuning tuning;
  tuning.wave_balanced_splits = balanced;
  const sc::PagedDecodePlan plan = sc::PlanPagedDecode(s, Multiprocessors(), kv, tuning);
  const bool fp8 = kv == sc::KvDtype::kFp8E4m3;
  RunPlan(state, s, kv, plan, fp8 ? "the CUDA-core fp8 kernel" : "the default variant",
          plan.tensor_cores ? (fp8 ? sc::PagedDecodeFp8CtasPerSm(kHeadDim) : sc::PagedDecodeVariantCtasPerSm(0, kHeadDim))
                            : 0);
}

void SplitRuleShapes(benchmark::internal::Benchmark* b) {
  struct S {
    std::int64_t batch, kv_len, heads;
  };
  const std::vector<S> shapes = {{4, 131072, 32}, {16, 65536, 32}, {16, 16384, 32}, {16, 65536, 16}};
  for (int kv = 0; kv < 2; ++kv)
    for (const S& s : shapes)
      for (int rule = 0; rule < 2; ++rule) b->Args({rule, kv, s.batch, s.kv_len, s.heads});
}

void Shapes(benchmark::internal::Benchmark* b) {
  struct S {
    std::int64_t batch, kv_len, heads;
  };
  const std::vector<S> shapes = {{64, 131072, 32}, {256, 16384, 32}, {128, 8192, 32},
                                 {1024, 4096, 32}, {256, 16384, 16}, {256, 16384, 64}};
  const int variants = static_cast<int>(sc::PagedDecodeVariants().size());
  for (const S& s : shapes)
    for (int v = 0; v < variants; ++v) b->Args({v, s.batch, s.kv_len, s.heads});
}

void Fp8Shapes(benchmark::internal::Benchmark* b) {
  struct S {
    std::int64_t batch, kv_len, heads;
  };
  const std::vector<S> shapes = {{64, 131072, 32}, {64, 131072, 64}, {256, 16384, 32}, {256, 16384, 64},
                                 {256, 16384, 16}};
  for (const S& s : shapes)
    for (int path = 0; path < 2; ++path) b->Args({path, s.batch, s.kv_len, s.heads});
}

void Fp8LeanShapes(benchmark::internal::Benchmark* b) {
  struct S {
    std::int64_t batch, kv_len, heads;
  };
  const std::vector<S> shapes = {{64, 131072, 32}, {256, 16384, 32}, {256, 16384, 64}, {128, 8192, 32},
                                 {1024, 4096, 32}, {4, 16384, 32},    {256, 1024, 32},
                                 {2048, 64, 64},   {2048, 64, 32},    {16, 64, 32}};  // one page: per-CTA costs
  for (const S& s : shapes)
    for (int lean = 1; lean >= 0; --lean) b->Args({lean, s.batch, s.kv_len, s.heads});
}

}  // namespace

BENCHMARK(BM_PagedDecodeFp8Lean)
    ->ArgNames({"lean", "batch", "kv_len", "heads"})
    ->Apply(Fp8LeanShapes)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

BENCHMARK(BM_PagedDecodeVariant)
    ->ArgNames({"variant", "batch", "kv_len", "heads"})
    ->Apply(Shapes)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

BENCHMARK(BM_PagedDecodeSplitRule)
    ->ArgNames({"rule", "kv", "batch", "kv_len", "heads"})
    ->Apply(SplitRuleShapes)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

BENCHMARK(BM_PagedDecodeFp8)
    ->ArgNames({"path", "batch", "kv_len", "heads"})
    ->Apply(Fp8Shapes)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

BENCHMARK_MAIN();
