// The deployment search of `servecast default`, end to end in one process: read
// the system spec, the model config and the engine profile, open the perf data
// (read and index every table the search needs), search agg and disagg, pick.
// Printing is left out. Data: AIC's H200 trtllm 1.3.0rc20 tables
// (../shared/reference/aic-parquet, the size class servecast's own tables have);
// skipped when absent. Targets (issue 7): dense on 32 GPUs <= 0.2 s, MoE
// (Qwen3-235B-A22B) on 16 GPUs <= 1 s. Results: benchmarks/RESULTS.md.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include "model/model_config.h"
#include "search/search.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "serve/session.h"
#include "system/system_spec.h"

namespace {

namespace sv = servecast::serve;
namespace md = servecast::model;
namespace se = servecast::search;

const std::string kSource = SERVECAST_SOURCE_DIR;
const std::string kParquet = std::string(SERVECAST_SHARED_DIR) + "/reference/aic-parquet";

void RunDefault(benchmark::State& state, const std::string& model_id, int gpus, std::int64_t isl, std::int64_t osl,
                double ttft, double tpot, bool simulate = false) {
  if (!std::filesystem::is_directory(kParquet + "/h200_sxm")) {
    state.SkipWithError(("no AIC H200 tables at " + kParquet).c_str());
    return;
  }
  std::size_t estimates = 0, points = 0, simulated = 0;
  for (auto _ : state) {
    servecast::systems::SystemSpec spec = servecast::systems::LoadSystemByName(kSource + "/systems", "h200_sxm");
    sv::Deployment d(md::LoadModel(model_id, kSource + "/models"), std::move(spec));
    se::SearchInputs in;
    in.engine = md::Engine::kTrtllm;
    in.total_gpus = gpus;
    in.isl = isl;
    in.osl = osl;
    in.ttft_ms = ttft;
    in.tpot_ms = tpot;
    in.simulate = simulate;
    sv::DatabaseOptions dbo;
    dbo.roots = {kParquet};
    dbo.backend = "trtllm";
    dbo.version = "1.3.0rc20";
    const sv::Database* db = &d.OpenData(dbo, se::SearchNeeds(d, in));
    const md::ModelConfig& m = d.model();
    const sv::EngineProfile engine = sv::LoadEngineProfileByName(kSource + "/engines", in.engine);
    const se::SearchResult r = se::RunSearch(m, *db, engine, in);
    if (r.chosen < 0) {
      state.SkipWithError("the search found no deployment");
      return;
    }
    estimates = 0;
    points = 0;
    simulated = 0;
    for (const auto& mode : r.modes) {
      estimates += mode.evaluated;
      points += mode.points.size();
      for (const auto& p : mode.points) simulated += p.sim && p.sim->simulated ? 1 : 0;
    }
    if (simulate && simulated == 0) {
      state.SkipWithError("--simulate simulated no point");
      return;
    }
    benchmark::DoNotOptimize(r.chosen_ratio);
  }
  state.counters["estimates"] = static_cast<double>(estimates);
  state.counters["points"] = static_cast<double>(points);
  if (simulate) state.counters["simulated"] = static_cast<double>(simulated);
}

// AIC's defaults: isl 4000, osl 1000, TTFT 2000 ms, TPOT 30 ms.
void BM_DefaultDenseQwen3_32B_32Gpus(benchmark::State& s) { RunDefault(s, "Qwen/Qwen3-32B", 32, 4000, 1000, 2000, 30); }
void BM_DefaultMoeQwen3_235B_16Gpus(benchmark::State& s) {
  RunDefault(s, "Qwen/Qwen3-235B-A22B", 16, 4000, 1000, 2000, 30);
}
// AIC's README example (it reports 6.5 s for this search).
void BM_AicReadmeQwen3_32B_FP8_32Gpus(benchmark::State& s) {
  RunDefault(s, "Qwen/Qwen3-32B-FP8", 32, 4000, 500, 300, 10);
}
// The same search with --simulate: each mode's candidates simulated request by
// request after the closed form ranks them (issue 26: <= 2x the search without).
void BM_AicReadmeQwen3_32B_FP8_32Gpus_Simulate(benchmark::State& s) {
  RunDefault(s, "Qwen/Qwen3-32B-FP8", 32, 4000, 500, 300, 10, true);
}
void BM_DefaultDenseQwen3_32B_32Gpus_Simulate(benchmark::State& s) {
  RunDefault(s, "Qwen/Qwen3-32B", 32, 4000, 1000, 2000, 30, true);
}

BENCHMARK(BM_DefaultDenseQwen3_32B_32Gpus)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_DefaultMoeQwen3_235B_16Gpus)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);
BENCHMARK(BM_AicReadmeQwen3_32B_FP8_32Gpus)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_AicReadmeQwen3_32B_FP8_32Gpus_Simulate)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_DefaultDenseQwen3_32B_32Gpus_Simulate)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
