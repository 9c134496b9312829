// Achieved rates of the CUDA ops at large shapes, each case run through its op
// exactly as a collection runs it (reference check, then the timing harness), so
// the figure is the table row's. These were print-only GPU "tests" (they asserted
// nothing about speed) in tests/gpu/; they live here since issue 28.
//
// BM_GemmFp8RowParts: the fp8 8192^3 gemm row (quantization then GEMM), the GEMM
// alone and the quantization alone, each timed like a table row (part 0 row,
// 1 gemm only, 2 quant only). Counters: latency_ms, clock_mhz_before/after.
// BM_GemmFp8ForcedTiles: the same row with the op's autotuned configuration
// (config 0) against the tiles bench_gemm_configs found faster for the GEMM alone
// (1: 176x128, 2: 168x128, 3: 256x128, each cluster 1x2). Counters: latency_ms,
// TFLOPps. A configuration cuBLASLt refuses is skipped with its message.
// BM_MlaDecode: the MLA decode kernel at batch x heads x tokens (kv 0 bf16, 1 fp8).
// Counters: latency_ms, TBps (latent bytes read), TFLOPps.
// BM_AttentionContext: causal bf16 (attn 0) or fp8 (attn 1, over an fp8 KV cache:
// kv 1) context attention at the target shapes. Counters: latency_ms,
// TFLOPps.
// BM_AttentionDecode: paged decode (32 query / 8 KV heads, head dim 128) on the
// tensor-core (tc 1) or CUDA-core (tc 0) kernel, bf16 (kv 0) or fp8 (kv 1) KV.
// Counters: latency_ms, TBps (KV bytes read).
// BM_Elementwise: each elementwise op (op: index into ElementwiseOpNames) at a few
// planned shapes, the largest last. Counters: latency_ms, TBps (the bytes of the
// elementwise_perf cost model), rsd. BM_DeviceCopy: a 2 GiB device-to-device copy, the
// ceiling they are read against. Counters: latency_ms, TBps (read + write).
//
// Every case must pass its reference check; one that does not ends its benchmark
// with an error and reports no rate. The label is the row's kernel_source.
// Needs a GPU (skips every benchmark otherwise). Run:
//   build/gpu/bin/bench_op_rates --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "backends/cuda/attention_kernels.h"
#include "backends/cuda/attention_ops.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/device.h"
#include "backends/cuda/elementwise_ops.h"
#include "backends/cuda/gemm_internal.h"
#include "backends/cuda/mla_ops.h"
#include "collect/case.h"
#include "collect/op.h"
#include "collect/table_spec.h"
#include "gpu_bench.h"

namespace sc = servecast::cuda;
namespace collect = servecast::collect;

namespace {

using servecast::bench::HaveGpu;
using collect::Disposition;

const collect::RuntimeInfo& Runtime() {
  static const collect::RuntimeInfo rt = sc::CudaBackend().DetectRuntime();
  return rt;
}

// The collection's timing, with a budget long enough for large shapes.
collect::RunContext Context(double budget_s) {
  collect::RunContext ctx;
  ctx.runtime = &Runtime();
  ctx.timing.min_samples = 10;
  ctx.timing.budget_s = budget_s;
  return ctx;
}

bool Start(benchmark::State& state) {
  if (!HaveGpu()) {
    state.SkipWithError("no CUDA GPU");
    return false;
  }
  sc::InitDevice(0);
  return true;
}

collect::Case MakeCase(const std::string& op, collect::Params params) {
  collect::Case c;
  c.op = op;
  c.params = std::move(params);
  c.id = collect::MakeCaseId(op, c.params);
  return c;
}

double Num(const collect::Params& row, const char* column) { return servecast::AsDouble(row.Get(column)); }

// The case's row, or nullptr after ending the benchmark with the failure.
const collect::Params* RowOf(benchmark::State& state, const collect::CaseResult& r) {
  if (r.disposition != Disposition::kPassed || r.rows.empty()) {
    state.SkipWithError((std::string(collect::ToString(r.disposition)) + ": " + r.error_type + " " + r.message).c_str());
    return nullptr;
  }
  state.SetLabel(std::get<std::string>(r.rows[0].Get("kernel_source")));
  return &r.rows[0];
}

// Runs `op` on `c` once per benchmark iteration: the row's latency as latency_ms,
// then `rates(row, ms)` sets the benchmark's own counters. Ends the benchmark with
// the failure when a run gives no row.
template <typename Rates>
void RunOpCase(benchmark::State& state, collect::Op& op, const collect::Case& c, const collect::RunContext& ctx,
               Rates rates) {
  for (auto _ : state) {
    const collect::CaseResult r = op.Run(c, ctx);
    const collect::Params* row = RowOf(state, r);
    if (!row) return;
    const double ms = Num(*row, "latency");
    state.counters["latency_ms"] = ms;
    rates(*row, ms);
  }
}

void BM_GemmFp8RowParts(benchmark::State& state) {
  if (!Start(state)) return;
  using Timed = sc::gemm::GemmRunOptions::Timed;
  const Timed parts[] = {Timed::kRow, Timed::kGemmOnly, Timed::kQuantOnly};
  const collect::Case c = MakeCase("gemm", {{"gemm_dtype", "fp8"}, {"m", std::int64_t{8192}},
                                            {"n", std::int64_t{8192}}, {"k", std::int64_t{8192}}});
  collect::RunContext ctx;
  ctx.runtime = &Runtime();
  for (auto _ : state) {
    sc::gemm::GemmRunOptions opt;
    opt.timed = parts[state.range(0)];
    const sc::gemm::GemmRunReport rep = sc::gemm::RunGemmCase(c, ctx, opt);
    const collect::Params* row = RowOf(state, rep.result);
    if (!row) return;
    state.counters["latency_ms"] = Num(*row, "latency");
    state.counters["clock_mhz_before"] = Num(*row, "clock_mhz_before");
    state.counters["clock_mhz_after"] = Num(*row, "clock_mhz_after");
  }
}
BENCHMARK(BM_GemmFp8RowParts)->ArgName("part")->DenseRange(0, 2)->Iterations(2)->Unit(benchmark::kMillisecond);

void BM_GemmFp8ForcedTiles(benchmark::State& state) {
  if (!Start(state)) return;
  struct Config {
    std::uint32_t tile;
    std::uint16_t cluster;
  };
  const Config configs[] = {{0, 0},
                            {CUBLASLT_MATMUL_TILE_176x128, CUBLASLT_CLUSTER_SHAPE_1x2x1},
                            {CUBLASLT_MATMUL_TILE_168x128, CUBLASLT_CLUSTER_SHAPE_1x2x1},
                            {CUBLASLT_MATMUL_TILE_256x128, CUBLASLT_CLUSTER_SHAPE_1x2x1}};
  const collect::Case c = MakeCase("gemm", {{"gemm_dtype", "fp8"}, {"m", std::int64_t{8192}},
                                            {"n", std::int64_t{8192}}, {"k", std::int64_t{8192}}});
  collect::RunContext ctx;
  ctx.runtime = &Runtime();
  for (auto _ : state) {
    sc::gemm::GemmRunOptions opt;
    opt.force_tile_id = configs[state.range(0)].tile;
    opt.force_cluster_id = configs[state.range(0)].cluster;
    const sc::gemm::GemmRunReport rep = sc::gemm::RunGemmCase(c, ctx, opt);
    if (rep.result.disposition == Disposition::kNotSupported) {
      state.SkipWithError(("not supported: " + rep.result.message).c_str());
      return;
    }
    const collect::Params* row = RowOf(state, rep.result);
    if (!row) return;
    const double ms = Num(*row, "latency");
    state.counters["latency_ms"] = ms;
    state.counters["TFLOPps"] = 2.0 * 8192.0 * 8192.0 * 8192.0 / (ms * 1e-3) / 1e12;
  }
}
BENCHMARK(BM_GemmFp8ForcedTiles)->ArgName("config")->DenseRange(0, 3)->Iterations(3)->Unit(benchmark::kMillisecond);

// batch, heads, step (tokens - 1), kv (0 bf16, 1 fp8)
void BM_MlaDecode(benchmark::State& state) {
  if (!Start(state)) return;
  const std::int64_t batch = state.range(0), heads = state.range(1), step = state.range(2);
  const bool fp8 = state.range(3) != 0;
  const collect::Case c =
      MakeCase("mla_generation", {{"mla_dtype", "bfloat16"},
                                  {"kv_cache_dtype", fp8 ? "fp8" : "bfloat16"},
                                  {"num_heads", heads},
                                  {"batch_size", batch},
                                  {"isl", std::int64_t{1}},
                                  {"tp_size", std::int64_t{128} / std::max<std::int64_t>(1, heads)},
                                  {"step", step}});
  std::unique_ptr<collect::Op> op = sc::MakeMlaGenerationOp();
  const collect::RunContext ctx = Context(0.5);
  const double tokens = static_cast<double>(batch) * static_cast<double>(step + 1);
  RunOpCase(state, *op, c, ctx, [&](const collect::Params&, double ms) {
    state.counters["TBps"] = tokens * 576 * (fp8 ? 1 : 2) / ms / 1e9;
    state.counters["TFLOPps"] = 2.0 * tokens * static_cast<double>(heads) * (576 + 512) / ms / 1e9;
  });
}
BENCHMARK(BM_MlaDecode)
    ->ArgNames({"batch", "heads", "step", "kv"})
    ->Args({128, 16, 16383, 0})
    ->Args({128, 16, 16383, 1})
    ->Args({64, 128, 16383, 0})
    ->Args({64, 128, 16383, 1})
    ->Args({512, 8, 4095, 0})
    ->Args({256, 16, 65535, 0})
    ->Args({64, 32, 65535, 0})
    ->Args({64, 64, 65535, 0})
    ->Args({32, 128, 65535, 0})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

collect::Params AttentionParams(std::int64_t batch, std::int64_t isl, std::int64_t heads, std::int64_t kv_heads,
                                std::int64_t head_dim, std::int64_t window, std::int64_t step, const char* attn,
                                const char* kv) {
  return {{"batch_size", batch},         {"isl", isl},         {"num_heads", heads},     {"num_key_value_heads", kv_heads},
          {"head_dim", head_dim},        {"window_size", window}, {"beam_width", std::int64_t{1}},
          {"attn_dtype", attn},          {"kv_cache_dtype", kv},  {"step", step}};
}

// batch, isl, heads, kv heads, head dim, window, attn (0 bf16, 1 fp8 over an fp8 KV cache)
void BM_AttentionContext(benchmark::State& state) {
  if (!Start(state)) return;
  const std::int64_t b = state.range(0), s = state.range(1), h = state.range(2), d = state.range(4),
                     w = state.range(5);
  const bool fp8 = state.range(6) != 0;
  const collect::Case c = MakeCase(
      "attention_context", AttentionParams(b, s, h, state.range(3), d, w, 0, fp8 ? "fp8" : "bfloat16",
                                           fp8 ? "fp8" : "bfloat16"));
  std::unique_ptr<collect::Op> op = sc::MakeAttentionContextOp();
  const collect::RunContext ctx = Context(0.5);
  const double win = static_cast<double>(w > 0 ? std::min(w, s) : s);
  const double pairs = w > 0 ? static_cast<double>(s) * win - win * (win - 1) / 2
                             : static_cast<double>(s) * static_cast<double>(s + 1) / 2.0;
  RunOpCase(state, *op, c, ctx, [&](const collect::Params&, double ms) {
    state.counters["TFLOPps"] = 4.0 * static_cast<double>(b * h * d) * pairs / (ms * 1e-3) / 1e12;
  });
}
BENCHMARK(BM_AttentionContext)
    ->ArgNames({"batch", "isl", "heads", "kv_heads", "head_dim", "window", "attn"})
    ->Args({1, 16384, 32, 8, 128, 0, 0})
    ->Args({1, 16384, 32, 8, 128, 0, 1})
    ->Args({4, 4096, 32, 8, 128, 0, 0})
    ->Args({4, 4096, 32, 8, 128, 0, 1})
    ->Args({1, 16384, 16, 2, 64, 0, 0})
    ->Args({1, 16384, 8, 4, 256, 0, 0})
    ->Args({1, 16384, 16, 2, 64, 128, 0})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// batch, step (KV length - 1), kv (0 bf16, 1 fp8), tc (1 tensor-core kernel allowed)
void BM_AttentionDecode(benchmark::State& state) {
  if (!Start(state)) return;
  const std::int64_t b = state.range(0), step = state.range(1);
  const bool fp8 = state.range(2) != 0;
  sc::PagedDecodeTuning tuning;
  tuning.tensor_cores = state.range(3) != 0;
  const collect::Case c =
      MakeCase("attention_generation", AttentionParams(b, 1, 32, 8, 128, 0, step, "bfloat16", fp8 ? "fp8" : "bfloat16"));
  std::unique_ptr<collect::Op> op = sc::MakeAttentionGenerationOp(1.0, tuning);
  const collect::RunContext ctx = Context(0.5);
  RunOpCase(state, *op, c, ctx, [&](const collect::Params&, double ms) {
    state.counters["TBps"] = 2.0 * static_cast<double>(b * (step + 1)) * 8 * 128 * (fp8 ? 1 : 2) / (ms * 1e-3) / 1e12;
  });
}
BENCHMARK(BM_AttentionDecode)
    ->ArgNames({"batch", "step", "kv", "tc"})
    ->ArgsProduct({{1}, {16383, 131071}, {0}, {0, 1}})
    ->ArgsProduct({{16}, {16383}, {0}, {0, 1}})
    ->ArgsProduct({{128}, {8191}, {0}, {0, 1}})
    ->ArgsProduct({{256}, {16383}, {0, 1}, {0, 1}})
    ->ArgsProduct({{64}, {131071}, {0, 1}, {0, 1}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// op (index into ElementwiseOpNames), tokens, hidden (silu_and_mul: the output width)
void BM_Elementwise(benchmark::State& state) {
  if (!Start(state)) return;
  const std::vector<std::string> names = sc::ElementwiseOpNames();
  if (state.range(0) >= static_cast<std::int64_t>(names.size())) {
    state.SkipWithError("no such elementwise op");
    return;
  }
  const std::string name = names[static_cast<std::size_t>(state.range(0))];
  const collect::Case c = MakeCase(
      name, {{"dtype", "bfloat16"}, {"num_tokens", state.range(1)}, {"hidden_size", state.range(2)}});
  const collect::TableSpec* table = collect::FindTableSpec("elementwise_perf");
  std::unique_ptr<collect::Op> op = sc::MakeElementwiseOp(name);
  const collect::RunContext ctx = Context(0.5);
  RunOpCase(state, *op, c, ctx, [&](const collect::Params& row, double ms) {
    state.counters["TBps"] = table->cost(row).bytes / (ms * 1e-3) / 1e12;
    state.counters["rsd"] = Num(row, "rsd");
  });
}
BENCHMARK(BM_Elementwise)
    ->ArgNames({"op", "tokens", "hidden"})
    ->ArgsProduct({benchmark::CreateDenseRange(0, 5, 1), {1, 256, 4096, 32768}, {4096}})
    ->ArgsProduct({benchmark::CreateDenseRange(0, 5, 1), {32768}, {16384}})
    ->Args({2, 32768, 28672})  // silu_and_mul at the widest output of the plan
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

void BM_DeviceCopy(benchmark::State& state) {
  if (!Start(state)) return;
  const std::size_t bytes = std::size_t{1} << 31;
  sc::DeviceBuffer src(bytes), dst(bytes);
  cudaStream_t st = sc::Context().stream;
  cudaMemsetAsync(src.get(), 1, bytes, st);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (auto _ : state) {
    std::vector<float> ms;
    for (int i = 0; i < 12; ++i) {
      cudaEventRecord(a, st);
      cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, st);
      cudaEventRecord(b, st);
      if (cudaEventSynchronize(b) != cudaSuccess) {
        state.SkipWithError("the copy failed");
        break;
      }
      float t = 0;
      cudaEventElapsedTime(&t, a, b);
      if (i >= 2) ms.push_back(t);
    }
    if (ms.empty()) break;
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    state.counters["latency_ms"] = med;
    state.counters["TBps"] = 2.0 * static_cast<double>(bytes) / (med * 1e-3) / 1e12;
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}
BENCHMARK(BM_DeviceCopy)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
