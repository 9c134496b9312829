// Loading perf tables: every table file of AIC's H200 tree (36 Parquet files,
// ~1.56 M rows) through servecast's own Parquet reader. Target (issue 3): < 0.5 s
// for all H200 tables. Results: benchmarks/RESULTS.md.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/table_file.h"

namespace {

std::vector<std::string> H200Files() {
  std::vector<std::string> files;
  std::string root = std::string(SERVECAST_SHARED_DIR) + "/reference/aic-parquet/h200_sxm";
  if (!std::filesystem::exists(root)) return files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root))
    if (e.is_regular_file() && servecast::IsTableFile(e.path().string())) files.push_back(e.path().string());
  return files;
}

void BM_LoadAllH200Tables(benchmark::State& state) {
  auto files = H200Files();
  if (files.empty()) {
    state.SkipWithError("../shared/reference/aic-parquet/h200_sxm not found");
    return;
  }
  std::size_t rows = 0;
  for (auto _ : state) {
    rows = 0;
    for (const auto& f : files) rows += servecast::ReadTableFile(f).num_rows();
  }
  state.counters["files"] = static_cast<double>(files.size());
  state.counters["rows"] = static_cast<double>(rows);
}
BENCHMARK(BM_LoadAllH200Tables)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
