#pragma once

#include <optional>
#include <string>
#include <vector>

#include "collect/expr.h"
#include "collect/plan.h"
#include "collect/registry.h"

namespace servecast::collect {

// Everything `servecast collect` takes.
struct CollectOptions {
  PlanOptions plan;
  std::string system;       // systems/<name>.yaml; empty: from the detected device
  std::string systems_dir;  // where system YAMLs live
  std::string out_root = "systems/data";
  std::string run_dir;      // empty: runs/<backend>_<ops>_<timestamp>
  bool plan_only = false;
  bool list = false;
  bool resume = false;
  bool retry_failed = false;
  // With resume: also re-run the finished (non-failed) cases whose parameters
  // satisfy this expression; the new records supersede the old ones.
  std::optional<Expr> rerun_where;
  // With rerun_where: re-run a matching case only if its newest journal record
  // is older than this UTC time (YYYY-MM-DDTHH:MM:SSZ, the journal's `at`), so
  // that repeating an interrupted rerun with the same time skips the cases it
  // already re-ran.
  std::optional<std::string> rerun_before;
  std::vector<int> devices;  // empty: the backend's default
  double timeout_s = 0;
  bool measure_power = false;
  double timing_budget_s = 0.5;
  double worker_memory_bytes = 0;  // 0: the backend default
  std::string format = "auto";  // csv, parquet, or auto: each table's existing format, else csv
  std::string worker_exe;  // this binary
  // This process is one rank of a launcher's job (mpirun, srun): rank and world
  // come from the environment; the ranks run the multi-process cases together.
  bool launched = false;
};

// Exit codes of `collect` (COLLECTOR.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitCaseFailures = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitCannotStart = 3;

// Runs a collection end to end (plan, workers, journal, summary, finalize) and
// returns the exit code. Usage and configuration errors are thrown (the CLI maps
// them to 2), as are StartupErrors (3).
int Collect(const Registry& registry, const CollectOptions& options);

}  // namespace servecast::collect
