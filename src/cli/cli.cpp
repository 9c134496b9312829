#include "cli/cli.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <climits>
#include <filesystem>
#include <iostream>

#include "backends/cpu/register.h"
#include "cli/db_convert.h"
#include "cli/default_cmd.h"
#include "cli/estimate.h"
#include "cli/generate_cmd.h"
#include "cli/recommend_cmd.h"
#include "cli/support_cmd.h"
#include "cli/validate_cmd.h"
#ifdef SERVECAST_HAVE_CUDA
#include "backends/cuda/register.h"
#endif
#include "collect/check.h"
#include "collect/collector.h"
#include "collect/finalize.h"
#include "collect/worker.h"
#include "core/build_info.h"
#include "core/error.h"
#include "core/log.h"
#include "core/parquet.h"
#include "system/system_spec.h"
#include "perfdb/discovery.h"
#include "perfdb/attention.h"
#include "perfdb/gemm.h"
#include "perfdb/comm.h"
#include "perfdb/modes.h"
#include "perfdb/moe.h"
#include "perfdb/quantize.h"
#include "perfdb/perf_database.h"
#include "perfdb/sol.h"

namespace servecast::cli {
namespace {

namespace fs = std::filesystem;

std::string SelfExe(const char* argv0) {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) return p.string();
  return fs::absolute(argv0).string();
}

// Finds a resource folder (cases/, systems/): $SERVECAST_HOME, the working
// directory, then beside the binary (build/bin/ in a checkout, or an install prefix).
std::string FindResource(const std::string& name, const std::string& exe) {
  std::vector<fs::path> candidates;
  if (const char* home = std::getenv("SERVECAST_HOME")) candidates.emplace_back(fs::path(home) / name);
  candidates.emplace_back(fs::current_path() / name);
  // Beside the binary: an install prefix (bin/../share/servecast), or a checkout
  // whose build tree holds the binary a few levels down (build/<preset>/bin).
  fs::path dir = fs::path(exe).parent_path();
  candidates.emplace_back(dir / ".." / "share" / "servecast" / name);
  fs::path up = dir;
  for (int level = 0; level < 4; ++level) {
    up = up.parent_path();
    if (up.empty()) break;
    candidates.emplace_back(up / name);
  }
  for (const auto& c : candidates)
    if (fs::is_directory(c)) return fs::weakly_canonical(c).string();
  return (fs::current_path() / name).string();
}

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
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace

int Main(int argc, char** argv, const std::function<void(collect::Registry&)>& extra) {
  collect::Registry registry;
  cpu::RegisterCpuBackend(registry);
#ifdef SERVECAST_HAVE_CUDA
  cuda::RegisterCudaBackend(registry);
#endif
  if (extra) extra(registry);
  std::string exe = SelfExe(argv[0]);

  CLI::App app{"servecast: measure the kernels of LLM inference on your GPUs, and estimate how to serve a model from those measurements"};
  app.require_subcommand(0, 1);
  bool show_version = false;
  app.add_flag("--version", show_version, "print the version and build commit");
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "debug logging");

  // collect
  collect::CollectOptions co;
  co.worker_exe = exe;
  std::string gpus, shard, cases_dir, systems_dir, rerun_where, rerun_before;
  bool smoke = false;
  std::vector<std::string> filters;
  auto* collect_cmd = app.add_subcommand("collect", "benchmark ops over their case plan and write perf tables");
  collect_cmd->add_option("--backend", co.plan.backend, "collector backend: cpu, or cuda in builds with SERVECAST_CUDA")->required();
  collect_cmd->add_option("--ops", co.plan.ops, "ops to collect (default: every op of the backend)");
  collect_cmd->add_option("--system", co.system, "system name (systems/<name>.yaml); default: from the detected device");
  collect_cmd->add_flag("--smoke", smoke, "shuffle and run 4 cases per op: a gate before a full run");
  collect_cmd->add_option("--limit", co.plan.limit, "at most N cases per op (after skips and shuffle)")->check(CLI::NonNegativeNumber);
  collect_cmd->add_flag("--shuffle", co.plan.shuffle, "shuffle each op's cases (deterministic, see --seed)");
  collect_cmd->add_option("--seed", co.plan.seed, "shuffle seed")->capture_default_str();
  collect_cmd->add_option("--model", co.plan.models, "keep only the cases these models need (cases/models/*.yaml)");
  collect_cmd->add_option("--case-filter", filters, "keep cases whose parameter K equals V (K=V; repeat: same K ORs, different K ANDs)");
  collect_cmd->add_flag("--plan-only", co.plan_only, "print per-op case counts at each plan stage; run nothing");
  collect_cmd->add_flag("--list", co.list, "with --plan-only: list the case IDs");
  collect_cmd->add_option("--out", co.out_root, "data root; tables land in <out>/<system>/<family>/<backend>/<version>/")->capture_default_str();
  collect_cmd->add_option("--run-dir", co.run_dir, "run folder: journal, plan, log, summary, error ledgers (default runs/<backend>-<time>)");
  collect_cmd->add_flag("--resume", co.resume, "continue the run in --run-dir; finished cases are not re-run");
  collect_cmd->add_flag("--retry-failed", co.retry_failed, "with --resume: re-run the failed cases too");
  collect_cmd
      ->add_option("--rerun-where", rerun_where,
                   "with --resume: also re-run the finished (not failed) cases whose parameters satisfy "
                   "EXPR, one expression given once, e.g. 'gemm_dtype == \"fp8\" && m * k > 33554432'; "
                   "a case lacking a parameter EXPR names does not match; failed cases still need "
                   "--retry-failed; the new records supersede the old ones in the tables")
      ->type_name("EXPR");
  collect_cmd
      ->add_option("--rerun-before", rerun_before,
                   "with --rerun-where: re-run a matching case only if its newest journal record is older than "
                   "TIME, a UTC time YYYY-MM-DDTHH:MM:SSZ (e.g. 2026-11-30T09:38:40Z); give the time the first "
                   "rerun call started, and repeating the call with the same TIME continues an interrupted rerun "
                   "without re-measuring the cases it already re-ran")
      ->type_name("TIME");
  collect_cmd->add_option("--gpus", gpus, "worker slots, one per device index (cpu backend: one worker per listed core)");
  collect_cmd->add_option("--timeout-s", co.timeout_s, "per-case time limit in seconds (default: the op's own)");
  collect_cmd->add_flag("--measure-power", co.measure_power, "add power columns: mean board power over >= 1 s of replays and the enforced limit (cuda backend; NVML)");
  collect_cmd->add_option("--format", co.format, "table format: auto (each table in the format it is already kept in, a new table as csv; the bundled tables are parquet), csv (diffable) or parquet (zstd, row groups by slice; what AIC ships)")->capture_default_str();
  collect_cmd->add_option("--shard", shard, "I/N: collect the deterministic I-th of N slices of the plan (0-based)");
  collect_cmd->add_flag("--include-unverified", co.plan.include_unverified, "also run ops marked unverified");
  collect_cmd->add_flag("--launched", co.launched, "this process is one rank started by mpirun or srun (rank and world from the launcher's environment): the ranks run the collectives (all_reduce, all_gather, reduce_scatter, alltoall, send_recv, custom_allreduce) together; needs --run-dir on a folder every rank sees");
  collect_cmd->add_option("--timing-budget-s", co.timing_budget_s, "timed seconds per case before the stop rule gives up on 1% spread")->capture_default_str();
  collect_cmd->add_option("--worker-memory-gb", co.worker_memory_bytes, "cpu backend: address-space limit per worker in GiB (default 75% of RAM / workers)");
  collect_cmd->add_option("--cases", cases_dir, "case plan folder (default: cases/ of the installation)");
  collect_cmd->add_option("--systems", systems_dir, "system spec folder (default: systems/ of the installation)");

  // check
  collect::CheckOptions ch;
  auto* check_cmd = app.add_subcommand("check", "judge perf tables by their content (quality gates)");
  check_cmd->add_option("data_dir", ch.data_dir, "data folder: a data root, a system folder or one version folder")->required();
  check_cmd->add_option("--plan", ch.plan_run_dir, "run dir whose plan.jsonl lists the planned cases (names missing keys)");
  check_cmd->add_option("--against", ch.against, "another data dir or CSV table: ratio distribution on shared keys");
  check_cmd->add_flag("--json", ch.json, "print one JSON document");
  check_cmd->add_option("--physics-tolerance", ch.physics_tolerance, "fraction by which a row may beat its speed-of-light bound")->capture_default_str();
  check_cmd->add_option("--systems", systems_dir, "system spec folder (default: systems/ of the installation)");

  // finalize
  std::vector<std::string> fin_dirs;
  std::string fin_out = "systems/data";
  auto* fin_cmd = app.add_subcommand("finalize", "merge the journals of run dirs (e.g. the shards of one plan) into perf tables");
  fin_cmd->add_option("--run-dir", fin_dirs, "run dir; repeat for each shard")->required();
  fin_cmd->add_option("--out", fin_out, "data root")->capture_default_str();
  std::string fin_format = "auto";
  fin_cmd->add_option("--format", fin_format, "table format: auto (each table's existing format, else csv), csv or parquet")->capture_default_str();

  // db: the perf database
  auto* db_cmd = app.add_subcommand("db", "inspect and convert perf-data trees and tables");
  db_cmd->require_subcommand(1);
  std::vector<std::string> inspect_roots;
  bool inspect_json = false;
  auto* inspect_cmd = db_cmd->add_subcommand("inspect", "list systems, families, backends, versions and tables with row counts");
  inspect_cmd->add_option("roots", inspect_roots, "data roots (e.g. systems/data); several are merged, the first wins")->required();
  inspect_cmd->add_flag("--json", inspect_json, "print one JSON document");
  std::string slices_system, slices_backend, slices_version;
  inspect_cmd->add_option("--slices", slices_system,
                          "SYSTEM: list the key coverage of every table of this system (needs --backend)");
  inspect_cmd->add_option("--backend", slices_backend, "with --slices: the data backend (cuda, trtllm, ...)");
  inspect_cmd->add_option("--version", slices_version, "with --slices: the version (default: newest)");
  inspect_cmd->add_option("--systems", systems_dir, "system spec folder (for --slices)");
  DbConvertArgs convert_args;
  auto* convert_cmd = AddDbConvertCommand(*db_cmd, convert_args);

  struct DbQuery {
    std::vector<std::string> roots;
    std::string system, backend, version, op, quant = "bfloat16", attn_dtype = "bfloat16", kv_dtype = "bfloat16";
    std::int64_t m = 1, n = 0, k = 0, batch = 1, seq = 0, heads = 0, kv_heads = 0, head_dim = 128, window = 0;
    std::string mode = "silicon", policy = "aggressive";
    std::int64_t tokens = 1, hidden = 0, inter = 0, topk = 1, experts = 1, moe_tp = 1, moe_ep = 1, gpus = 2;
    double size = 0;
    std::string distribution = "uniform", collective = "all_reduce", comm_dtype = "half";
    bool json = false;
  } dq;
  auto* query_cmd = db_cmd->add_subcommand("query", "latency of one op at one shape: measured, interpolated or extrapolated");
  query_cmd->add_option("--systems-path", dq.roots, "data roots (repeat; the first wins a key)")->required();
  query_cmd->add_option("--system", dq.system, "system, e.g. h200_sxm (also names systems/<system>.yaml for SOL)")->required();
  query_cmd->add_option("--backend", dq.backend, "data backend: cuda, cpu (servecast) or trtllm, vllm, sglang (AIC)")->required();
  query_cmd->add_option("--version", dq.version, "data version (default: the newest with tables)");
  query_cmd->add_option("--op", dq.op,
                        "gemm, context_attention, generation_attention, moe (every --database-mode); "
                        "nccl, custom_allreduce (silicon, hybrid, empirical); compute_scale, scale_matrix (silicon)")->required();
  query_cmd->add_option("--transfer-policy", dq.policy,
                        "hybrid / empirical: which transfers may lend a utilization when the op's own slice is "
                        "empty: off, conservative (xshape), balanced (+xquant), aggressive or all (+xprofile)")
      ->capture_default_str();
  query_cmd->add_option("--tokens", dq.tokens, "moe: tokens")->capture_default_str();
  query_cmd->add_option("--hidden", dq.hidden, "moe: hidden size");
  query_cmd->add_option("--inter", dq.inter, "moe: expert intermediate size");
  query_cmd->add_option("--topk", dq.topk, "moe: experts per token")->capture_default_str();
  query_cmd->add_option("--experts", dq.experts, "moe: experts")->capture_default_str();
  query_cmd->add_option("--moe-tp", dq.moe_tp, "moe: tensor parallel")->capture_default_str();
  query_cmd->add_option("--moe-ep", dq.moe_ep, "moe: expert parallel")->capture_default_str();
  query_cmd->add_option("--distribution", dq.distribution, "moe: uniform, power_law_1.01, power_law_1.2")->capture_default_str();
  query_cmd->add_option("--collective", dq.collective, "nccl: all_reduce, all_gather, reduce_scatter, alltoall")->capture_default_str();
  query_cmd->add_option("--gpus", dq.gpus, "nccl / custom_allreduce: GPUs (tp)")->capture_default_str();
  query_cmd->add_option("--size", dq.size, "nccl / custom_allreduce: message size in elements");
  query_cmd->add_option("--comm-dtype", dq.comm_dtype, "nccl / custom_allreduce: half, int8, fp8")->capture_default_str();
  query_cmd->add_option("--quant", dq.quant, "gemm: bfloat16, fp8, fp8_block, fp8_static, ...")->capture_default_str();
  query_cmd->add_option("--m", dq.m, "gemm: tokens");
  query_cmd->add_option("--n", dq.n, "gemm: output features");
  query_cmd->add_option("--k", dq.k, "gemm: input features");
  query_cmd->add_option("--batch", dq.batch, "attention: sequences")->capture_default_str();
  query_cmd->add_option("--seq", dq.seq, "attention: prefill length (context) or cached + new tokens (generation)");
  query_cmd->add_option("--heads", dq.heads, "attention: query heads per GPU");
  query_cmd->add_option("--kv-heads", dq.kv_heads, "attention: KV heads per GPU (default: = heads)");
  query_cmd->add_option("--head-dim", dq.head_dim, "attention: head dimension")->capture_default_str();
  query_cmd->add_option("--window", dq.window, "attention: sliding window, 0 = full")->capture_default_str();
  query_cmd->add_option("--attn-dtype", dq.attn_dtype, "context attention math: bfloat16 or fp8")->capture_default_str();
  query_cmd->add_option("--kv-dtype", dq.kv_dtype, "attention KV cache: bfloat16 or fp8")->capture_default_str();
  query_cmd->add_flag("--json", dq.json, "print one JSON document");
  query_cmd->add_option("--database-mode", dq.mode,
                        "silicon (tables only; a miss is an error), hybrid (tables, then util-empirical), "
                        "empirical (util-empirical), sol (rooflines)")->capture_default_str();
  query_cmd->add_option("--systems", systems_dir, "system spec folder (default: systems/ of the installation)");

  // estimate
  EstimateArgs est;
  auto* estimate_cmd = AddEstimateCommand(app, est);
  DefaultArgs dflt;
  auto* default_cmd = AddDefaultCommand(app, dflt);
  ValidateArgs val;
  auto* validate_cmd = AddValidateCommand(app, val);
  RecommendArgs rec;
  auto* recommend_cmd = AddRecommendCommand(app, rec);
  SupportArgs sup;
  auto* support_cmd = AddSupportCommand(app, sup);
  GenerateArgs gen;
  auto* generate_cmd = AddGenerateCommand(app, gen);

  // worker (internal)
  collect::WorkerOptions wo;
  auto* worker_cmd = app.add_subcommand("__worker", "");
  worker_cmd->group("");
  worker_cmd->add_option("--backend", wo.backend)->required();
  worker_cmd->add_option("--device", wo.device);
  worker_cmd->add_flag("--measure-power", wo.measure_power);
  worker_cmd->add_option("--timing-budget", wo.timing_budget_s);
  worker_cmd->add_option("--memory-limit-bytes", wo.memory_limit_bytes);
  worker_cmd->add_option("--rank", wo.rank);
  worker_cmd->add_option("--world", wo.world);
  worker_cmd->add_option("--group-id", wo.group_id);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "servecast: %s\n", e.what());
    std::fprintf(stderr, "run 'servecast --help' or 'servecast <command> --help' for usage\n");
    return collect::kExitUsage;
  }
  if (show_version) {
    std::printf("servecast %s (commit %s)\n", std::string(BuildVersion()).c_str(), std::string(BuildCommit()).c_str());
    return 0;
  }
  if (verbose) log::SetLevel(log::Level::kDebug);

  try {
    if (*worker_cmd) return collect::RunWorker(registry, wo);
    if (*estimate_cmd) return RunEstimate(est, [&](const std::string& name) { return FindResource(name, exe); });
    if (*default_cmd) return RunDefault(dflt, [&](const std::string& name) { return FindResource(name, exe); });
    if (*validate_cmd) return RunValidate(val, [&](const std::string& name) { return FindResource(name, exe); });
    if (*recommend_cmd) return RunRecommend(rec, [&](const std::string& name) { return FindResource(name, exe); });
    if (*support_cmd) return RunSupport(sup, [&](const std::string& name) { return FindResource(name, exe); });
    if (*generate_cmd) return RunGenerate(gen, [&](const std::string& name) { return FindResource(name, exe); });
    if (*collect_cmd) {
      co.plan.cases_dir = cases_dir.empty() ? FindResource("cases", exe) : cases_dir;
      co.systems_dir = systems_dir.empty() ? FindResource("systems", exe) : systems_dir;
      if (smoke) {
        co.plan.shuffle = true;
        if (co.plan.limit < 0) co.plan.limit = 4;
      }
      if (!gpus.empty()) co.devices = ParseDevices(gpus);
      co.worker_memory_bytes *= 1024.0 * 1024.0 * 1024.0;
      for (const auto& f : filters) {
        auto eq = f.find('=');
        if (eq == std::string::npos || eq == 0)
          throw UsageError("--case-filter '" + f + "': expected K=V, e.g. gemm_dtype=float32");
        co.plan.case_filters.emplace_back(f.substr(0, eq), f.substr(eq + 1));
      }
      if (!shard.empty()) {
        int i = -1, n = -1;
        char tail = 0;
        if (std::sscanf(shard.c_str(), "%d/%d%c", &i, &n, &tail) != 2 || n < 1 || i < 0 || i >= n)
          throw UsageError("--shard '" + shard + "': expected I/N with 0 <= I < N, e.g. 0/4");
        co.plan.shard_index = i;
        co.plan.shard_count = n;
      }
      if (co.list && !co.plan_only) throw UsageError("--list needs --plan-only");
      if (collect_cmd->count("--rerun-where") > 0) {
        try {
          co.rerun_where = collect::Expr::Parse(rerun_where);
        } catch (const Error& e) {
          throw UsageError("--rerun-where: " + std::string(e.what()));
        }
      }
      if (collect_cmd->count("--rerun-before") > 0) co.rerun_before = rerun_before;  // Collect checks its format first
      return collect::Collect(registry, co);
    }
    if (*check_cmd) {
      ch.systems_dir = systems_dir.empty() ? FindResource("systems", exe) : systems_dir;
      return collect::Check(ch);
    }
    if (*inspect_cmd && !slices_system.empty()) {
      if (slices_backend.empty()) throw UsageError("db inspect --slices needs --backend");
      std::string sys_dir = systems_dir.empty() ? FindResource("systems", exe) : systems_dir;
      auto sol = std::make_shared<const perfdb::Sol>(systems::LoadSystemByName(sys_dir, slices_system));
      auto db = perfdb::PerfDatabase::Open(inspect_roots, slices_system, slices_backend, slices_version);
      auto range = [](const std::vector<perfdb::GridPoint>& pts) {
        double lo = 1e300, hi = -1e300;
        for (const auto& p : pts) {
          lo = std::min(lo, p.coords.back());
          hi = std::max(hi, p.coords.back());
        }
        return FormatDouble(lo) + ".." + FormatDouble(hi);
      };
      std::printf("%s / %s / %s\n", slices_system.c_str(), slices_backend.c_str(), db.version().c_str());
      for (const auto& name : db.TableNames()) {
        std::printf("%s\n", name.c_str());
        try {
          if (name == "gemm_perf") {
            perfdb::GemmPerf gemm(db.Table(name).table, *sol);
            for (const auto& dt : gemm.gemm_dtypes()) {
              const auto& sites = gemm.Slice(dt).sites();
              std::size_t points = 0;
              std::int64_t mlo = INT64_MAX, mhi = 0, nlo = INT64_MAX, nhi = 0, klo = INT64_MAX, khi = 0;
              for (const auto& site : sites) {
                points += site.m.size();
                mlo = std::min(mlo, site.m.front());
                mhi = std::max(mhi, site.m.back());
                nlo = std::min(nlo, site.n);
                nhi = std::max(nhi, site.n);
                klo = std::min(klo, site.k);
                khi = std::max(khi, site.k);
              }
              std::printf("  gemm_dtype=%s: %zu (n, k) sites, %zu points; m %lld..%lld, n %lld..%lld, k %lld..%lld\n",
                          dt.c_str(), sites.size(), points, (long long)mlo, (long long)mhi, (long long)nlo,
                          (long long)nhi, (long long)klo, (long long)khi);
            }
          } else if (name == "context_attention_perf" || name == "generation_attention_perf") {
            const auto& loaded = db.Table(name);
            auto print = [&](const auto& table) {
              for (const auto& [key, grid] : table.slices())
                std::printf("  %s: %zu points; %s\n", key.ToString().c_str(), grid.points().size(),
                            grid.CoveredRange().c_str());
            };
            if (name == "context_attention_perf") print(perfdb::ContextAttentionTable::FromLoaded(loaded, sol));
            else print(perfdb::GenerationAttentionTable::FromLoaded(loaded, sol));
          } else if (name == "moe_perf") {
            auto t = perfdb::MoeTable::FromLoaded(db.Table(name), sol);
            for (const auto& [key, slice] : t.slices())
              std::printf("  %s: %zu token counts %s\n", key.ToString().c_str(), slice.points.size(),
                          range(slice.points).c_str());
          } else if (name == "nccl_perf" || name == "custom_allreduce_perf") {
            const auto& loaded = db.Table(name);
            auto print = [&](const auto& table) {
              for (const auto& [key, slice] : table.slices())
                std::printf("  %s: %zu sizes %s elements\n", key.ToString().c_str(), slice.points.size(),
                            range(slice.points).c_str());
            };
            if (name == "nccl_perf") print(perfdb::NcclTable::FromLoaded(loaded, sol));
            else print(perfdb::CustomAllReduceTable::FromLoaded(loaded, sol));
          } else if (name == "computescale_perf") {
            auto t = perfdb::ComputeScaleTable::FromLoaded(db.Table(name), sol);
            for (const auto& [key, grid] : t.slices())
              std::printf("  %s: %zu points; %s\n", key.c_str(), grid.points().size(), grid.CoveredRange().c_str());
          } else {
            std::printf("  %zu rows (no slice model for this table yet)\n", db.Table(name).table.num_rows());
          }
        } catch (const Error& e) {
          std::printf("  cannot slice: %s\n", e.what());
        }
      }
      return 0;
    }
    if (*inspect_cmd) {
      auto tree = perfdb::DataTree::Scan(inspect_roots);
      auto dirs = perfdb::Inventory(tree, true);
      collect::Json doc = collect::Json::array();
      for (const auto& d : dirs) {
        collect::Json tables = collect::Json::array();
        for (const auto& t : d.tables)
          tables.push_back({{"table", t.name}, {"files", t.files}, {"rows", t.rows}, {"error", t.error}});
        collect::Json reuse = collect::Json::array();
        for (const auto& r : d.reuse) reuse.push_back({{"table", r.table}, {"from_version", r.from_version}});
        doc.push_back({{"system", d.system}, {"family", d.family}, {"backend", d.backend}, {"version", d.version},
                       {"marker_only", d.marker_only}, {"collection_meta", d.has_collection_meta},
                       {"reuse", reuse}, {"tables", tables}});
      }
      if (inspect_json) {
        std::printf("%s\n", collect::Json{{"dirs", doc}, {"problems", tree.problems()}}.dump(2).c_str());
      } else {
        for (const auto& d : dirs) {
          std::printf("%s/%s/%s/%s%s%s\n", d.system.c_str(), d.family.c_str(), d.backend.c_str(), d.version.c_str(),
                      d.marker_only ? "  (marker only)" : "", d.reuse.empty() ? "" : "  (reuse.yaml)");
          for (const auto& r : d.reuse)
            std::printf("    reuses %s from %s\n", r.table.c_str(), r.from_version.c_str());
          for (const auto& t : d.tables) {
            if (t.rows >= 0) std::printf("    %-34s %10lld rows\n", t.name.c_str(), static_cast<long long>(t.rows));
            else std::printf("    %-34s  unreadable: %s\n", t.name.c_str(), t.error.c_str());
          }
        }
        for (const auto& p : tree.problems()) std::printf("problem: %s\n", p.c_str());
      }
      return 0;
    }
    if (*query_cmd) {
      std::string sys_dir = systems_dir.empty() ? FindResource("systems", exe) : systems_dir;
      auto sol = std::make_shared<const perfdb::Sol>(systems::LoadSystemByName(sys_dir, dq.system));
      perfdb::OpenOptions open_options;
      open_options.shared_layer = dq.mode == "silicon" || dq.mode == "hybrid";
      auto db = perfdb::PerfDatabase::Open(dq.roots, dq.system, dq.backend, dq.version, open_options);
      collect::Json out{{"system", dq.system}, {"backend", dq.backend}, {"version", db.version()}, {"op", dq.op}};
      perfdb::DatabaseMode mode = perfdb::ParseDatabaseMode(dq.mode);
      perfdb::TransferPolicy policy = perfdb::ParseTransferPolicy(dq.policy);
      bool need_tables = mode != perfdb::DatabaseMode::kSol;
      std::optional<perfdb::GemmPerf> gemm;
      std::optional<perfdb::ContextAttentionTable> ctx;
      std::optional<perfdb::GenerationAttentionTable> gen;
      perfdb::OpEstimate est;
      if (dq.op == "gemm") {
        if (dq.n <= 0 || dq.k <= 0) throw UsageError("db query --op gemm needs --m, --n and --k");
        if (need_tables) gemm.emplace(db.Table("gemm_perf").table, *sol);
        perfdb::OpEstimator e(*sol, mode, gemm ? &*gemm : nullptr, nullptr, nullptr, policy);
        est = e.Gemm(dq.quant, dq.m, dq.n, dq.k);
        out["shape"] = {{"quant", dq.quant}, {"m", dq.m}, {"n", dq.n}, {"k", dq.k}};
      } else if (dq.op == "context_attention" || dq.op == "generation_attention") {
        if (dq.seq <= 0 || dq.heads <= 0) throw UsageError("db query --op " + dq.op + " needs --seq and --heads");
        std::int64_t kv = dq.kv_heads > 0 ? dq.kv_heads : dq.heads;
        if (dq.op == "context_attention") {
          if (need_tables) ctx.emplace(perfdb::ContextAttentionTable::FromLoaded(db.Table("context_attention_perf"), sol));
          perfdb::OpEstimator e(*sol, mode, nullptr, ctx ? &*ctx : nullptr, nullptr, policy);
          est = e.ContextAttention({dq.batch, dq.seq, dq.heads, kv, dq.head_dim, dq.window, dq.attn_dtype, dq.kv_dtype});
          out["shape"] = {{"batch", dq.batch}, {"seq", dq.seq}, {"heads", dq.heads}, {"kv_heads", kv},
                          {"head_dim", dq.head_dim}, {"window", dq.window}, {"attn_dtype", dq.attn_dtype},
                          {"kv_dtype", dq.kv_dtype}};
        } else {
          if (need_tables)
            gen.emplace(perfdb::GenerationAttentionTable::FromLoaded(db.Table("generation_attention_perf"), sol));
          perfdb::OpEstimator e(*sol, mode, nullptr, nullptr, gen ? &*gen : nullptr, policy);
          est = e.GenerationAttention({dq.batch, dq.seq, dq.heads, kv, dq.head_dim, dq.window, dq.kv_dtype});
          out["shape"] = {{"batch", dq.batch}, {"seq", dq.seq}, {"heads", dq.heads}, {"kv_heads", kv},
                          {"head_dim", dq.head_dim}, {"window", dq.window}, {"kv_dtype", dq.kv_dtype}};
        }
      } else if (dq.op == "moe") {
        if (dq.hidden <= 0 || dq.inter <= 0) throw UsageError("db query --op moe needs --hidden and --inter");
        std::optional<perfdb::MoeTable> moe;
        if (need_tables) moe.emplace(perfdb::MoeTable::FromLoaded(db.Table("moe_perf"), sol));
        perfdb::OpEstimator e(*sol, mode, nullptr, nullptr, nullptr, policy, moe ? &*moe : nullptr);
        est = e.Moe({dq.tokens, dq.hidden, dq.inter, dq.topk, dq.experts, dq.moe_tp, dq.moe_ep, dq.quant, dq.distribution});
        out["shape"] = {{"tokens", dq.tokens}, {"hidden", dq.hidden}, {"inter", dq.inter}, {"topk", dq.topk},
                        {"experts", dq.experts}, {"moe_tp", dq.moe_tp}, {"moe_ep", dq.moe_ep}, {"quant", dq.quant},
                        {"distribution", dq.distribution}};
      } else if (dq.op == "nccl" || dq.op == "custom_allreduce" || dq.op == "compute_scale" ||
                 dq.op == "scale_matrix") {
        const bool comm_op = dq.op == "nccl" || dq.op == "custom_allreduce";
        if (mode == perfdb::DatabaseMode::kSol || (!comm_op && mode != perfdb::DatabaseMode::kSilicon))
          throw UsageError("db query --op " + dq.op + ": only --database-mode silicon" +
                           (comm_op ? ", hybrid and empirical cover" : " covers") + " this op so far");
        perfdb::Estimate e;
        // Collectives: the table (silicon), util-empirical over message size
        // (empirical), or the table with a util-empirical fallback (hybrid).
        auto comm_query = [&](const auto& table, const auto& q) {
          const perfdb::CommEstimate ce = mode == perfdb::DatabaseMode::kEmpirical ? table.QueryEmpirical(q)
                                          : mode == perfdb::DatabaseMode::kHybrid  ? table.QueryHybrid(q)
                                                                                   : table.QueryWithDonor(q);
          if (ce.borrowed_from_gpus) out["borrowed_from_gpus"] = *ce.borrowed_from_gpus;
          if (mode == perfdb::DatabaseMode::kEmpirical || !ce.silicon_miss.empty()) {
            est.detail = "util-empirical over " + table.name();
            if (!ce.silicon_miss.empty()) est.detail += "; silicon miss: " + ce.silicon_miss;
          }
          return ce;
        };
        if (dq.op == "nccl") {
          if (dq.size <= 0) throw UsageError("db query --op nccl needs --size");
          const auto& loaded = db.Table("nccl_perf");
          // NCCL tables are system-wide (<system>/comm/nccl/<version>): name that source.
          if (!loaded.sources.empty()) out["data_source"] = loaded.sources[0].backend + "/" + loaded.sources[0].version;
          auto t = perfdb::NcclTable::FromLoaded(loaded, sol);
          e = comm_query(t, perfdb::NcclQuery{dq.collective, dq.comm_dtype, dq.gpus, dq.size});
          out["shape"] = {{"collective", dq.collective}, {"gpus", dq.gpus}, {"size", dq.size}, {"dtype", dq.comm_dtype}};
        } else if (dq.op == "custom_allreduce") {
          if (dq.size <= 0) throw UsageError("db query --op custom_allreduce needs --size");
          auto t = perfdb::CustomAllReduceTable::FromLoaded(db.Table("custom_allreduce_perf"), sol);
          e = comm_query(t, perfdb::CustomAllReduceQuery{dq.gpus, dq.size, dq.comm_dtype});
          out["shape"] = {{"tp", dq.gpus}, {"size", dq.size}, {"dtype", dq.comm_dtype}};
        } else if (dq.op == "scale_matrix") {
          if (dq.k <= 0) throw UsageError("db query --op scale_matrix needs --m and --k");
          auto t = perfdb::ScaleMatrixTable::FromLoaded(db.Table("scale_matrix_perf"), sol);
          e = t.Query({dq.m, dq.k, "fp8"});
          out["shape"] = {{"m", dq.m}, {"k", dq.k}, {"quant_dtype", "fp8"}};
        } else {
          if (dq.k <= 0) throw UsageError("db query --op compute_scale needs --m and --k");
          auto t = perfdb::ComputeScaleTable::FromLoaded(db.Table("computescale_perf"), sol);
          e = t.Query({dq.m, dq.k, "fp8"});
          out["shape"] = {{"m", dq.m}, {"k", dq.k}, {"quant_dtype", "fp8"}};
        }
        est.latency_ms = e.latency_ms;
        est.source = est.detail.empty() ? perfdb::EstimateSourceName(e.source) : "empirical";
        est.sol_fraction = e.sol_fraction;
        est.sol_ms = e.sol_fraction * e.latency_ms;
      } else {
        throw UsageError("db query --op '" + dq.op +
                         "'; expected gemm, context_attention, generation_attention, moe, nccl, custom_allreduce, "
                         "compute_scale or scale_matrix");
      }
      double latency = est.latency_ms, sol_fraction = est.sol_fraction;
      std::string source = est.source;
      out["database_mode"] = dq.mode;
      out["transfer_policy"] = dq.policy;
      out["sol_ms"] = est.sol_ms;
      if (!est.detail.empty()) out["detail"] = est.detail;
      out["latency_ms"] = latency;
      out["source"] = source;
      out["sol_fraction"] = sol_fraction;
      if (dq.json) std::printf("%s\n", out.dump(2).c_str());
      else
        std::printf("%s %s: %.6g ms (%s, %.1f%% of speed of light) from %s\n", dq.op.c_str(),
                    out["shape"].dump().c_str(), latency, source.c_str(), 100 * sol_fraction,
                    out.value("data_source", dq.backend + "/" + db.version()).c_str());
      return 0;
    }
    if (*convert_cmd) return RunDbConvert(convert_args);
    if (*fin_cmd) {
      auto res = collect::Finalize(fin_dirs, fin_out, fin_format);
      for (const auto& [t, o] : res.tables)
        std::printf("%s: %zu rows -> %s [%s, %zu of %zu planned keys missing]\n", t.c_str(), o.rows_after,
                    o.path.c_str(), o.status.c_str(), o.missing, o.planned);
      bool complete = true;
      for (const auto& [_, o] : res.tables) complete = complete && o.status == "complete";
      return complete ? 0 : 1;
    }
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const perfdb::MissingDataError& e) {
    std::fprintf(stderr, "servecast: no data: %s\n", e.what());
    return collect::kExitCaseFailures;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "servecast: %s\n", e.what());
    return collect::kExitUsage;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "servecast: %s\n", e.what());
    return collect::kExitUsage;
  } catch (const DataError& e) {
    std::fprintf(stderr, "servecast: %s\n", e.what());
    return collect::kExitUsage;
  } catch (const StartupError& e) {
    std::fprintf(stderr, "servecast: cannot start: %s\n", e.what());
    return collect::kExitCannotStart;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "servecast: internal error: %s\n", e.what());
    return collect::kExitCaseFailures;
  }
}

}  // namespace servecast::cli
