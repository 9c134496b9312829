#include "cli/collect_cmd.h"

#include <limits>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "cli/value_checks.h"
#include "collect/expr.h"
#include "core/error.h"

namespace servecast::cli {

CLI::App* AddCollectCommand(CLI::App& app, CollectArgs& a) {
  collect::CollectOptions& co = a.options;
  auto* c = app.add_subcommand("collect", "benchmark ops over their case plan and write perf tables");
  c->add_option("--backend", co.plan.backend, "collector backend: cpu, or cuda in builds with SERVECAST_CUDA")
      ->required();
  c->add_option("--ops", co.plan.ops, "ops to collect (default: every op of the backend)");
  c->add_option("--system", co.system, "system name (systems/<name>.yaml); default: from the detected device");
  c->add_flag("--smoke", a.smoke, "shuffle and run 4 cases per op: a gate before a full run");
  c->add_option("--limit", co.plan.limit, "at most N cases per op (after skips and shuffle)")
      ->check(IntIn(0, collect::kMaxPlanCases));
  c->add_flag("--shuffle", co.plan.shuffle, "shuffle each op's cases (deterministic, see --seed)");
  c->add_option("--seed", co.plan.seed, "shuffle seed")
      ->capture_default_str()
      ->check(IntIn(0, std::numeric_limits<std::int64_t>::max()));
  c->add_option("--model", co.plan.models, "keep only the cases these models need (cases/models/*.yaml)");
  c->add_option("--case-filter", a.filters,
                "keep cases whose parameter K equals V (K=V; repeat: same K ORs, different K ANDs)");
  c->add_flag("--plan-only", co.plan_only, "print per-op case counts at each plan stage; run nothing");
  c->add_flag("--list", co.list, "with --plan-only: list the case IDs");
  c->add_option("--out", co.out_root, "data root; tables land in <out>/<system>/<family>/<backend>/<version>/")
      ->capture_default_str();
  c->add_option("--run-dir", co.run_dir,
                "run folder: journal, plan, log, summary, error ledgers (default runs/<backend>-<time>)");
  c->add_flag("--resume", co.resume, "continue the run in --run-dir; finished cases are not re-run");
  c->add_flag("--retry-failed", co.retry_failed, "with --resume: re-run the failed cases too");
  a.rerun_where_option =
      c->add_option("--rerun-where", a.rerun_where,
                    "with --resume: also re-run the finished (not failed) cases whose parameters satisfy "
                    "EXPR, one expression given once, e.g. 'gemm_dtype == \"fp8\" && m * k > 33554432'; "
                    "a case lacking a parameter EXPR names does not match; failed cases still need "
                    "--retry-failed; the new records supersede the old ones in the tables")
          ->type_name("EXPR");
  a.rerun_before_option =
      c->add_option("--rerun-before", a.rerun_before,
                    "with --rerun-where: re-run a matching case only if its newest journal record is older than "
                    "TIME, a UTC time YYYY-MM-DDTHH:MM:SSZ (e.g. 2026-11-30T09:38:40Z); give the time the first "
                    "rerun call started, and repeating the call with the same TIME continues an interrupted rerun "
                    "without re-measuring the cases it already re-ran")
          ->type_name("TIME");
  c->add_option("--gpus", a.gpus, "worker slots, one per device index (cuda: a visible GPU, an absent index exits 2; cpu backend: one worker "
                "per listed core, modulo the cores it may run on)")
      ->check(NonEmpty("device indices, e.g. 0,1,2"));
  c->add_option("--timeout-s", co.timeout_s, "per-case time limit in seconds (default: the op's own)")
      ->check(NumberIn(0, 7 * 86400, true));
  c->add_flag("--measure-power", co.measure_power,
              "add power columns: mean board power over >= 1 s of replays and the enforced limit (cuda backend; NVML)");
  c->add_option("--format", co.format,
                "table format: auto (each table in the format it is already kept in, a new table as csv; the bundled "
                "tables are parquet), csv (diffable) or parquet (zstd, row groups by slice; what AIC ships)")
      ->capture_default_str();
  c->add_option("--shard", a.shard, "I/N: collect the deterministic I-th of N slices of the plan (0-based)");
  c->add_flag("--include-unverified", co.plan.include_unverified, "also run ops marked unverified");
  c->add_flag("--launched", co.launched,
              "this process is one rank started by mpirun or srun (rank and world from the launcher's environment): "
              "the ranks run the collectives (all_reduce, all_gather, reduce_scatter, alltoall, send_recv, "
              "custom_allreduce) together; needs --run-dir on a folder every rank sees");
  c->add_option("--timing-budget-s", co.timing_budget_s,
                "timed seconds per case before the stop rule gives up on 1% spread")
      ->capture_default_str()
      ->check(NumberIn(0, 3600, true));
  c->add_option("--worker-memory-gb", co.worker_memory_bytes,
                "cpu backend: address-space limit per worker in GiB (default 75% of RAM / workers)")
      ->check(NumberIn(0, 1 << 20, true));
  c->add_option("--cases", co.plan.cases_dir, "case plan folder (default: cases/ of the installation)");
  c->add_option("--systems", co.systems_dir, "system spec folder (default: systems/ of the installation)");
  return c;
}

namespace {

std::vector<int> ParseDevices(const std::string& text) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    try {
      std::size_t used = 0;
      int v = std::stoi(item, &used);
      if (used != item.size() || v < 0) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw UsageError("--gpus '" + text + "': '" + item + "' is not a device index; expected e.g. 0,1,2");
    }
    if (std::count(out.begin(), out.end(), out.back()) > 1)
      throw UsageError("--gpus '" + text + "': device " + item + " is listed twice; expected each index once");
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace

int RunCollect(const CollectArgs& a, const collect::Registry& registry, const std::string& worker_exe,
               const std::function<std::string(const std::string&)>& find) {
  collect::CollectOptions co = a.options;
  co.worker_exe = worker_exe;
  if (co.plan.cases_dir.empty()) co.plan.cases_dir = find("cases");
  if (co.systems_dir.empty()) co.systems_dir = find("systems");
  if (a.smoke) {
    co.plan.shuffle = true;
    if (co.plan.limit < 0) co.plan.limit = 4;
  }
  if (!a.gpus.empty()) co.devices = ParseDevices(a.gpus);
  co.worker_memory_bytes *= 1024.0 * 1024.0 * 1024.0;
  for (const auto& f : a.filters) {
    auto eq = f.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError("--case-filter '" + f + "': expected K=V, e.g. gemm_dtype=float32");
    co.plan.case_filters.emplace_back(f.substr(0, eq), f.substr(eq + 1));
  }
  if (!a.shard.empty()) {
    int i = -1, n = -1;
    char tail = 0;
    if (std::sscanf(a.shard.c_str(), "%d/%d%c", &i, &n, &tail) != 2 || n < 1 || i < 0 || i >= n)
      throw UsageError("--shard '" + a.shard + "': expected I/N with 0 <= I < N, e.g. 0/4");
    co.plan.shard_index = i;
    co.plan.shard_count = n;
  }
  if (co.list && !co.plan_only) throw UsageError("--list needs --plan-only");
  if (a.rerun_where_option->count() > 0) {
    try {
      co.rerun_where = collect::Expr::Parse(a.rerun_where);
    } catch (const Error& e) {
      throw UsageError("--rerun-where: " + std::string(e.what()));
    }
  }
  if (a.rerun_before_option->count() > 0) co.rerun_before = a.rerun_before;  // Collect checks its format first
  return collect::Collect(registry, co);
}

}  // namespace servecast::cli
