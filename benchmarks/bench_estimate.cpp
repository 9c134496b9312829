// One warm static estimate (servecast estimate --mode static, without the printing):
// Llama-3.1-8B, tp 1, batch 1, isl 1024, osl 128, stride 32 (4 decode steps
// evaluated), on AIC's H200 trtllm 1.3.0rc20 tables (../shared/reference/aic-parquet)
// and on a SOL-mode database. Tables are opened once; each iteration runs
// serve::RunStatic (context pass, decode quadrature, memory model). Target: < 50 us
// warm. Results: benchmarks/RESULTS.md.
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
#include "serve/static.h"
#include "system/system_spec.h"

namespace {

namespace sv = servecast::serve;
namespace md = servecast::model;

const std::string kSource = SERVECAST_SOURCE_DIR;
const std::string kParquet = std::string(SERVECAST_SHARED_DIR) + "/reference/aic-parquet";

struct Setup {
  md::ModelConfig model;
  md::ParallelConfig par;
  md::OpList ops;
  std::optional<sv::Deployment> deployment;
  const sv::Database* db = nullptr;
  sv::EngineProfile engine;
  sv::Workload work;
};

std::unique_ptr<Setup> MakeSetup(servecast::perfdb::DatabaseMode mode) {
  auto s = std::make_unique<Setup>();
  servecast::systems::SystemSpec spec = servecast::systems::LoadSystemByName(kSource + "/systems", "h200_sxm");
  sv::Deployment& d = s->deployment.emplace(md::LoadModel("meta-llama/Meta-Llama-3.1-8B", kSource + "/models"), spec);
  const md::OpListOptions oo = sv::OpOptionsFor(md::Engine::kTrtllm, spec);
  sv::DatabaseOptions dbo;
  dbo.roots = {kParquet};
  dbo.backend = "trtllm";
  dbo.version = "1.3.0rc20";
  dbo.mode = mode;
  s->db = &d.OpenData(dbo, d.Needs({s->par}, oo));
  s->model = d.model();
  s->ops = d.Ops(s->par, oo);
  s->engine = sv::LoadEngineProfileByName(kSource + "/engines", md::Engine::kTrtllm);
  s->work.batch = 1;
  s->work.isl = 1024;
  s->work.osl = 128;
  s->work.stride = 32;
  return s;
}

void Run(benchmark::State& state, servecast::perfdb::DatabaseMode mode) {
  if (mode != servecast::perfdb::DatabaseMode::kSol && !std::filesystem::exists(kParquet + "/h200_sxm")) {
    state.SkipWithError(("AIC parquet tables not found at " + kParquet + "/h200_sxm").c_str());
    return;
  }
  const auto s = MakeSetup(mode);
  sv::StaticEstimate warm = sv::RunStatic(s->model, s->par, s->ops, *s->db, s->engine, s->work);  // fills caches
  for (auto _ : state) {
    sv::StaticEstimate r = sv::RunStatic(s->model, s->par, s->ops, *s->db, s->engine, s->work);
    benchmark::DoNotOptimize(r.tpot_ms);
  }
  state.counters["ttft_ms"] = warm.ttft_ms;
  state.counters["tpot_ms"] = warm.tpot_ms;
  state.counters["steps"] = static_cast<double>(warm.decode_steps_evaluated);
}

void BM_EstimateStaticSilicon(benchmark::State& state) { Run(state, servecast::perfdb::DatabaseMode::kSilicon); }
void BM_EstimateStaticSol(benchmark::State& state) { Run(state, servecast::perfdb::DatabaseMode::kSol); }

BENCHMARK(BM_EstimateStaticSilicon)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EstimateStaticSol)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
