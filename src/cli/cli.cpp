#include "cli/cli.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "backends/cpu/register.h"
#include "cli/check_cmd.h"
#include "cli/collect_cmd.h"
#include "cli/db_cmd.h"
#include "cli/default_cmd.h"
#include "cli/estimate.h"
#include "cli/exp_cmd.h"
#include "cli/finalize_cmd.h"
#include "cli/generate_cmd.h"
#include "cli/recommend_cmd.h"
#include "cli/support_cmd.h"
#include "cli/validate_cmd.h"
#include "cli/value_checks.h"
#ifdef SERVECAST_HAVE_CUDA
#include "backends/cuda/register.h"
#endif
#include "collect/collector.h"
#include "collect/worker.h"
#include "core/build_info.h"
#include "core/error.h"
#include "core/log.h"
#include "perfdb/perf_database.h"

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

}  // namespace

int Main(int argc, char** argv, const std::function<void(collect::Registry&)>& extra) {
  collect::Registry registry;
  cpu::RegisterCpuBackend(registry);
#ifdef SERVECAST_HAVE_CUDA
  cuda::RegisterCudaBackend(registry);
#endif
  if (extra) extra(registry);
  const std::string exe = SelfExe(argv[0]);
  const auto find = [&](const std::string& name) { return FindResource(name, exe); };

  CLI::App app{"servecast: measure the kernels of LLM inference on your GPUs, and estimate how to serve a model from those measurements"};
  app.require_subcommand(0, 1);
  bool show_version = false;
  app.add_flag("--version", show_version, "print the version and build commit");
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "debug logging");

  // The subcommands, in the order --help lists them.
  CollectArgs col;
  auto* collect_cmd = AddCollectCommand(app, col);
  CheckArgs chk;
  auto* check_cmd = AddCheckCommand(app, chk);
  FinalizeArgs fin;
  auto* finalize_cmd = AddFinalizeCommand(app, fin);
  DbArgs db;
  auto* db_cmd = AddDbCommand(app, db);
  EstimateArgs est;
  auto* estimate_cmd = AddEstimateCommand(app, est);
  DefaultArgs dflt;
  auto* default_cmd = AddDefaultCommand(app, dflt);
  ExpArgs exp_args;
  auto* exp_cmd = AddExpCommand(app, exp_args);
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

  RefuseEmptyPaths(app);
  if (const auto unchecked = UncheckedNumericOptions(app); !unchecked.empty()) {
    std::string list;
    for (const auto& o : unchecked) list += (list.empty() ? "" : ", ") + o;
    std::fprintf(stderr, "servecast: internal error: numeric options without a range check: %s\n", list.c_str());
    return 1;
  }
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
    if (*estimate_cmd) return RunEstimate(est, find);
    if (*default_cmd) return RunDefault(dflt, find);
    if (*exp_cmd) return RunExp(exp_args, find);
    if (*validate_cmd) return RunValidate(val, find);
    if (*recommend_cmd) return RunRecommend(rec, find);
    if (*support_cmd) return RunSupport(sup, find);
    if (*generate_cmd) return RunGenerate(gen, find);
    if (*collect_cmd) return RunCollect(col, registry, exe, find);
    if (*check_cmd) return RunCheck(chk, find);
    if (*db_cmd) return RunDb(db, find);
    if (*finalize_cmd) return RunFinalize(fin);
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
  } catch (const SystemError& e) {
    // A path or disk fault (the message names the path and the OS's reason): the environment, not a bug.
    std::fprintf(stderr, "servecast: %s\n", e.what());
    return collect::kExitCannotStart;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "servecast: internal error: %s\n", e.what());
    return collect::kExitCaseFailures;
  }
}

}  // namespace servecast::cli
