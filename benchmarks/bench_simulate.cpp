// One simulated aggregated point (servecast estimate --mode agg --simulate, without
// the printing): Llama-3.1-8B, tp 1, closed-loop clients, 1,000 measured requests
// after 2 x c warm-up, lengths uniform in [0.8 L, L], on AIC's H200 trtllm
// 1.3.0rc20 tables (../shared/reference/aic-parquet) and on a SOL-mode database.
// Tables are opened once; each iteration runs serve::SimulateAgg from scratch (the
// memory model, a fresh step-cost memo, the event loop), as a search point would.
// BM_SimulateDisagg*: one disaggregated point (estimate --mode disagg --simulate):
// P prefill and D decode workers of tp 1, decode batch b per worker, c = D x b
// clients, 1,000 measured requests, serve::SimulateDisagg from scratch.
// Target: <= 10 ms per point. Results: benchmarks/RESULTS.md.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "model/model_config.h"
#include "model/ops.h"
#include "perfdb/modes.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "serve/session.h"
#include "serve/simulate.h"
#include "system/system_spec.h"

namespace {

namespace sv = servecast::serve;
namespace md = servecast::model;

const std::string kSource = SERVECAST_SOURCE_DIR;
const std::string kParquet = std::string(SERVECAST_SHARED_DIR) + "/reference/aic-parquet";

struct Setup {
  md::ParallelConfig par;
  md::OpList ops;
  std::optional<sv::Deployment> deployment;
  const sv::Database* db = nullptr;
  sv::EngineProfile engine;
};

std::unique_ptr<Setup> MakeSetup(servecast::perfdb::DatabaseMode mode, md::Engine engine) {
  auto s = std::make_unique<Setup>();
  servecast::systems::SystemSpec spec = servecast::systems::LoadSystemByName(kSource + "/systems", "h200_sxm");
  sv::Deployment& d = s->deployment.emplace(md::LoadModel("meta-llama/Meta-Llama-3.1-8B", kSource + "/models"), spec);
  const md::OpListOptions oo = sv::OpOptionsFor(engine, spec);
  sv::DatabaseOptions dbo;
  dbo.roots = {kParquet};
  dbo.backend = "trtllm";
  dbo.version = "1.3.0rc20";
  dbo.mode = mode;
  s->db = &d.OpenData(dbo, d.Needs({s->par}, oo));
  s->ops = d.Ops(s->par, oo);
  s->engine = sv::LoadEngineProfileByName(kSource + "/engines", engine);
  return s;
}

// args: concurrency, isl, osl
void Run(benchmark::State& state, servecast::perfdb::DatabaseMode mode, md::Engine engine) {
  if (mode != servecast::perfdb::DatabaseMode::kSol && !std::filesystem::exists(kParquet + "/h200_sxm")) {
    state.SkipWithError(("AIC parquet tables not found at " + kParquet + "/h200_sxm").c_str());
    return;
  }
  const auto s = MakeSetup(mode, engine);
  sv::SimWorkload w;
  w.concurrency = state.range(0);
  w.isl = state.range(1);
  w.osl = state.range(2);
  w.requests = 1000;
  w.warmup = 2 * w.concurrency;
  sv::SimDeployment last;
  for (auto _ : state) {
    last = sv::SimulateAgg(s->deployment->model(), s->par, s->ops, *s->db, s->engine, w);
    benchmark::DoNotOptimize(last.sim.steps);
  }
  const double ttft = last.sim.ttft_ms.mean, tpot = last.sim.tpot_ms.mean;
  state.counters["requests"] = static_cast<double>(last.sim.measured + w.warmup);
  state.counters["steps"] = static_cast<double>(last.sim.steps);
  state.counters["shapes"] = static_cast<double>(last.cost_evaluations);
  state.counters["ttft_ms"] = ttft;
  state.counters["tpot_ms"] = tpot;
}

// args: prefill workers, decode workers, decode batch per worker, isl, osl
void RunDisagg(benchmark::State& state, md::Engine engine) {
  if (!std::filesystem::exists(kParquet + "/h200_sxm")) {
    state.SkipWithError(("AIC parquet tables not found at " + kParquet + "/h200_sxm").c_str());
    return;
  }
  const auto s = MakeSetup(servecast::perfdb::DatabaseMode::kSilicon, engine);
  sv::DisaggSimInputs in;
  in.prefill_workers = static_cast<int>(state.range(0));
  in.decode_workers = static_cast<int>(state.range(1));
  in.prefill_batch = 1;
  in.decode_batch = state.range(2);
  sv::SimWorkload w;
  w.concurrency = in.decode_batch * in.decode_workers;
  w.isl = state.range(3);
  w.osl = state.range(4);
  w.requests = 1000;
  w.warmup = 2 * w.concurrency;
  sv::SimDisaggDeployment last;
  for (auto _ : state) {
    last = sv::SimulateDisagg(s->deployment->model(), s->par, s->ops, s->par, s->ops, *s->db, s->engine, in, w);
    benchmark::DoNotOptimize(last.result.sim.steps);
  }
  state.counters["requests"] = static_cast<double>(last.result.sim.measured + w.warmup);
  state.counters["steps"] = static_cast<double>(last.result.sim.steps + last.result.prefill_steps);
  state.counters["shapes"] = static_cast<double>(last.cost_evaluations);
  state.counters["ttft_ms"] = last.result.sim.ttft_ms.mean;
  state.counters["tpot_ms"] = last.result.sim.tpot_ms.mean;
  state.counters["prefill_busy"] = last.result.prefill_utilization;
}

void BM_SimulateDisaggTrtllm(benchmark::State& state) { RunDisagg(state, md::Engine::kTrtllm); }
void BM_SimulateDisaggSglang(benchmark::State& state) { RunDisagg(state, md::Engine::kSglang); }

void BM_SimulateSiliconVllm(benchmark::State& state) {
  Run(state, servecast::perfdb::DatabaseMode::kSilicon, md::Engine::kVllm);
}
void BM_SimulateSiliconSglang(benchmark::State& state) {
  Run(state, servecast::perfdb::DatabaseMode::kSilicon, md::Engine::kSglang);
}
void BM_SimulateSolVllm(benchmark::State& state) { Run(state, servecast::perfdb::DatabaseMode::kSol, md::Engine::kVllm); }

}  // namespace

BENCHMARK(BM_SimulateSiliconVllm)->Args({100, 1024, 128})->Args({64, 1000, 1000})->Args({8, 2000, 500})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimulateSiliconSglang)->Args({100, 1024, 128})->Args({64, 1000, 1000})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimulateSolVllm)->Args({100, 1024, 128})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimulateDisaggTrtllm)->Args({1, 2, 64, 1024, 128})->Args({2, 4, 32, 4000, 500})->Args({14, 9, 96, 4000, 1000})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimulateDisaggSglang)->Args({1, 2, 64, 1024, 128})->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
