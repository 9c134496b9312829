// GEMM latency queries on AIC's H200 trtllm 1.3.0rc20 gemm_perf table: a fixed
// mix of 1,024 (quant, m, n, k) queries from dense-model shapes (Llama-3 8B/70B,
// Qwen3-32B, Qwen2.5-7B at TP 1/2/4/8; QKV, O, gate-up and down projections;
// 16 token counts), repeated. Target (issue 3): >= 1,000,000 warm queries/s on
// one core. Results: docs/perfdb.md, "GEMM queries".
#include <benchmark/benchmark.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "perfdb/gemm.h"
#include "perfdb/perf_database.h"
#include "perfdb/sol.h"
#include "system/system_spec.h"

namespace {

using servecast::perfdb::GemmPerf;

struct Query {
  const char* quant;
  std::int64_t m, n, k;
};

struct Model {
  std::int64_t hidden, inter, heads, kv_heads, head_dim;
};

std::vector<Query> ModelQueries() {
  const Model models[] = {
      {4096, 14336, 32, 8, 128},  // Llama-3 8B
      {8192, 28672, 64, 8, 128},  // Llama-3 70B
      {5120, 25600, 64, 8, 128},  // Qwen3-32B
      {3584, 18944, 28, 4, 128},  // Qwen2.5-7B
  };
  const std::int64_t tps[] = {1, 2, 4, 8};
  const std::int64_t tokens[] = {1, 2, 3, 8, 16, 31, 64, 100, 256, 512, 777, 1024, 2048, 4096, 8192, 12000};
  const char* quants[] = {"bfloat16", "fp8", "fp8_block", "fp8_static"};
  std::vector<Query> out;
  int qi = 0;
  for (const Model& md : models)
    for (std::int64_t tp : tps) {
      std::int64_t kv = std::max<std::int64_t>(1, md.kv_heads / tp);
      const std::int64_t shapes[4][2] = {
          {(md.heads / tp + 2 * kv) * md.head_dim, md.hidden},  // QKV
          {md.hidden, md.heads / tp * md.head_dim},             // O
          {2 * md.inter / tp, md.hidden},                       // gate-up
          {md.hidden, md.inter / tp},                           // down
      };
      for (const auto& s : shapes)
        for (std::int64_t m : tokens) out.push_back({quants[qi++ % 4], m, s[0], s[1]});
    }
  return out;
}

struct Fixture {
  std::unique_ptr<GemmPerf> perf;
  std::vector<Query> queries;
};

const Fixture* Load() {
  static std::unique_ptr<Fixture> f = [] {
    std::string root = std::string(SERVECAST_SHARED_DIR) + "/reference/aic-parquet";
    if (!std::filesystem::exists(root)) return std::unique_ptr<Fixture>();
    auto db = servecast::perfdb::PerfDatabase::Open({root}, "h200_sxm", "trtllm", "1.3.0rc20");
    servecast::perfdb::Sol sol(servecast::systems::LoadSystemByName(SERVECAST_SOURCE_DIR "/systems", "h200_sxm"));
    auto fx = std::make_unique<Fixture>();
    fx->perf = std::make_unique<GemmPerf>(db.Table("gemm_perf").table, sol);
    fx->queries = ModelQueries();
    return fx;
  }();
  return f.get();
}

// Warm: every query has been answered once; the cache serves the rest.
void BM_GemmQueryWarm(benchmark::State& state) {
  const Fixture* f = Load();
  if (!f) {
    state.SkipWithError("../shared/reference/aic-parquet not found");
    return;
  }
  double by_source[3] = {0, 0, 0};
  for (const Query& q : f->queries) by_source[static_cast<int>(f->perf->Query(q.quant, q.m, q.n, q.k).source)] += 1;
  std::size_t i = 0, n = f->queries.size();
  for (auto _ : state) {
    const Query& q = f->queries[i];
    benchmark::DoNotOptimize(f->perf->Query(q.quant, q.m, q.n, q.k).latency_ms);
    if (++i == n) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["distinct_queries"] = static_cast<double>(n);
  state.counters["silicon"] = by_source[0];
  state.counters["interpolated"] = by_source[1];
  state.counters["extrapolated"] = by_source[2];
}
BENCHMARK(BM_GemmQueryWarm);

// Cold: the resolver itself, no cache (known sites and scattered-site blends).
void BM_GemmQueryCold(benchmark::State& state) {
  const Fixture* f = Load();
  if (!f) {
    state.SkipWithError("../shared/reference/aic-parquet not found");
    return;
  }
  std::size_t i = 0, n = f->queries.size();
  for (auto _ : state) {
    const Query& q = f->queries[i];
    benchmark::DoNotOptimize(f->perf->Slice(q.quant).Resolve(q.m, q.n, q.k).result.latency_ms);
    if (++i == n) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_GemmQueryCold);

}  // namespace

BENCHMARK_MAIN();
