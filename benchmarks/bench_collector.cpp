// Throughput of the collector's orchestration: cases dispatched to real worker
// processes over pipes, results parsed, and journal records made durable
// (fdatasync), on trivial cases so that the orchestration is all that is timed.
// Target (issue 2): >= 2,000 cases/s on 2 cores. Results: benchmarks/RESULTS.md.
//
// The binary is its own worker: `bench_collector __worker ...` runs the worker
// loop with the test-only ops registered.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "cli/cli.h"
#include "collect/case.h"
#include "collect/journal.h"
#include "collect/registry.h"
#include "collect/scheduler.h"
#include "backends/cpu/register.h"
#include "fault_ops.h"

namespace {

using namespace servecast;

std::string SelfExe() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

std::vector<collect::Case> TrivialCases(int n) {
  std::vector<collect::Case> cases;
  for (int i = 0; i < n; ++i) {
    collect::Case c;
    c.op = "trivial";
    c.params.Set("i", std::int64_t{i});
    c.id = collect::MakeCaseId(c.op, c.params);
    cases.push_back(std::move(c));
  }
  return cases;
}

void BM_SchedulerTrivialCases(benchmark::State& state) {
  collect::Registry registry;
  cpu::RegisterCpuBackend(registry);
  testing::RegisterTestOps(registry);
  const int n = 4000;
  auto cases = TrivialCases(n);
  collect::SchedulerOptions opt;
  opt.worker_exe = SelfExe();
  opt.devices.assign(static_cast<std::size_t>(state.range(0)), 0);
  for (std::size_t i = 0; i < opt.devices.size(); ++i) opt.devices[i] = static_cast<int>(i);
  opt.prefetch = static_cast<int>(state.range(1));
  std::string dir = std::filesystem::temp_directory_path() / ("sc_bench_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::size_t total = 0;
  int round = 0;
  for (auto _ : state) {
    std::string path = dir + "/journal" + std::to_string(round++) + ".jsonl";
    collect::JournalHeader h;
    h.backend = "cpu";
    auto journal = collect::JournalWriter::Create(path, h);
    total += collect::RunCases(registry, "cpu", cases, opt, journal, nullptr, nullptr, nullptr);
    if (total % n != 0) state.SkipWithError("not every case was recorded");
  }
  state.counters["cases_per_s"] = benchmark::Counter(static_cast<double>(total), benchmark::Counter::kIsRate);
  std::filesystem::remove_all(dir);
}
// (workers, prefetch)
BENCHMARK(BM_SchedulerTrivialCases)->Args({1, 2})->Args({2, 2})->Args({2, 8})->Unit(benchmark::kMillisecond)->UseRealTime();

// Journal commits alone: one record per fdatasync vs 32 per fdatasync.
void BM_JournalCommit(benchmark::State& state) {
  std::string dir = std::filesystem::temp_directory_path() / ("sc_jbench_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  collect::JournalHeader h;
  auto journal = collect::JournalWriter::Create(dir + "/journal.jsonl", h);
  collect::JournalRecord r;
  r.id = "gemm:gemm_dtype=bfloat16,m=1,n=4096,k=4096";
  r.op = "gemm";
  r.status = collect::Disposition::kPassed;
  collect::Params row;
  for (int i = 0; i < 19; ++i) row.Set("col" + std::to_string(i), 1.5 * i);
  r.rows.push_back(row);
  const int batch = static_cast<int>(state.range(0));
  std::size_t n = 0;
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i) journal.Add(r);
    journal.Commit();
    n += static_cast<std::size_t>(batch);
  }
  state.counters["records_per_s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsRate);
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_JournalCommit)->Arg(1)->Arg(32)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "__worker") == 0)
    return servecast::cli::Main(argc, argv, servecast::testing::RegisterTestOps);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
