#include "collect/launched.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "collect/worker.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"

namespace servecast::collect {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

int EnvInt(const char* name) {
  std::string v = Env(name);
  try {
    std::size_t used = 0;
    int n = std::stoi(v, &used);
    if (used == v.size()) return n;
  } catch (const std::exception&) {
  }
  throw UsageError(std::string("launcher environment: ") + name + "='" + v + "' is not an integer");
}

bool Set(const char* name) { return !Env(name).empty(); }

// Ends the process when a case overruns its limit; rank 0 records it first.
class Watchdog {
 public:
  explicit Watchdog(std::function<void(const std::string&)> on_expiry) : on_expiry_(std::move(on_expiry)) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Arm(const std::string& id, double seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    id_ = id;
    deadline_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                       std::chrono::duration<double>(seconds));
    armed_ = true;
    cv_.notify_all();
  }
  void Disarm() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = false;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!quit_) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      if (cv_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ && !quit_ &&
          std::chrono::steady_clock::now() >= deadline_) {
        on_expiry_(id_);
        std::_Exit(4);
      }
    }
  }
  std::function<void(const std::string&)> on_expiry_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
  std::string id_;
  std::chrono::steady_clock::time_point deadline_;
  bool armed_ = false;
  bool quit_ = false;
};

}  // namespace

LaunchInfo DetectLaunch() {
  LaunchInfo li;
  if (Set("SERVECAST_RANK")) {
    li.launcher = "servecast";
    li.rank = EnvInt("SERVECAST_RANK");
    li.world = EnvInt("SERVECAST_WORLD");
    li.local_rank = Set("SERVECAST_LOCAL_RANK") ? EnvInt("SERVECAST_LOCAL_RANK") : li.rank;
    li.job_key = Env("SERVECAST_LAUNCH_ID");
    if (li.job_key.empty()) throw UsageError("--launched: SERVECAST_RANK is set but SERVECAST_LAUNCH_ID is not");
  } else if (Set("OMPI_COMM_WORLD_RANK")) {
    li.launcher = "openmpi";
    li.rank = EnvInt("OMPI_COMM_WORLD_RANK");
    li.world = EnvInt("OMPI_COMM_WORLD_SIZE");
    li.local_rank = Set("OMPI_COMM_WORLD_LOCAL_RANK") ? EnvInt("OMPI_COMM_WORLD_LOCAL_RANK") : li.rank;
    for (const char* k : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid"})
      if (li.job_key.empty()) li.job_key = Env(k);
  } else if (Set("SLURM_PROCID") && Set("SLURM_NTASKS")) {
    li.launcher = "slurm";
    li.rank = EnvInt("SLURM_PROCID");
    li.world = EnvInt("SLURM_NTASKS");
    li.local_rank = Set("SLURM_LOCALID") ? EnvInt("SLURM_LOCALID") : 0;
    li.job_key = Env("SLURM_JOB_ID") + "." + Env("SLURM_STEP_ID");
  } else if (Set("PMI_RANK")) {
    li.launcher = "pmi";
    li.rank = EnvInt("PMI_RANK");
    li.world = EnvInt("PMI_SIZE");
    li.local_rank = Set("MPI_LOCALRANKID") ? EnvInt("MPI_LOCALRANKID") : li.rank;
    li.job_key = Env("PMI_JOBID");
  } else {
    throw UsageError(
        "--launched: no launcher environment found (looked for SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_RANK, "
        "PMI_RANK, SERVECAST_RANK); start the ranks with mpirun or srun, or run without --launched");
  }
  if (li.world < 1 || li.rank < 0 || li.rank >= li.world)
    throw UsageError("--launched: rank " + std::to_string(li.rank) + " of world " + std::to_string(li.world) +
                     " (from " + li.launcher + ") is not a valid rank");
  if (li.job_key.empty())
    throw UsageError("--launched: the " + li.launcher +
                     " environment names no job id to tell this launch apart; set SERVECAST_LAUNCH_ID to a value "
                     "unique to this launch in every rank's environment");
  for (char& ch : li.job_key)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '-' && ch != '_') ch = '_';
  return li;
}

std::string Rendezvous(const LaunchInfo& li, const std::string& dir, const std::function<std::string()>& make_content,
                       double wait_s) {
  const std::string path = dir + "/rendezvous-" + li.job_key + ".id";
  if (li.rank == 0) {
    std::string content = make_content();
    WriteFileAtomic(path, content);
    return content;
  }
  auto start = std::chrono::steady_clock::now();
  while (!PathExists(path)) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > wait_s)
      throw StartupError("rank " + std::to_string(li.rank) + ": rank 0 wrote no " + path + " within " +
                         std::to_string(static_cast<int>(wait_s)) +
                         " s; the run dir must be one folder every rank sees (a shared file system across nodes)");
    ::usleep(100000);
  }
  std::string content = ReadFile(path);
  if (content.empty()) throw StartupError(path + " is empty");
  return content;
}

std::size_t RunLaunchedCases(const Registry& registry, const LaunchInfo& li, const LaunchedRunOptions& opt,
                             const RuntimeInfo& rt, const std::vector<Case>& cases, JournalWriter* journal,
                             const std::function<void(std::size_t, std::size_t)>& on_progress,
                             const std::function<bool()>& stop) {
  RunContext ctx;
  ctx.device = opt.device;
  ctx.runtime = &rt;
  ctx.measure_power = opt.measure_power;
  ctx.timing.budget_s = opt.timing_budget_s;
  ctx.rank = li.rank;
  ctx.world = li.world;
  ctx.group_id = opt.group_id;

  auto make_record = [&](const Case& c, const CaseResult& r, double elapsed) {
    return MakeRecord(c, r.disposition, r.failure_class, r.error_type, r.message, r.rows, opt.device, elapsed);
  };
  std::atomic<const Case*> running{nullptr};
  std::mutex journal_mu;
  Watchdog dog([&](const std::string& id) {
    log::Error("rank " + std::to_string(li.rank) + ": case " + id + " exceeded its time limit; ending this rank");
    if (!journal || !running) return;
    std::lock_guard<std::mutex> lock(journal_mu);
    journal->Add(make_record(*running.load(),
                             CaseResult::Failure(Disposition::kTimeout, FailureClass::kTimeout, "Timeout",
                                                 "exceeded the per-case limit; every rank of the launch ended "
                                                 "(continue with --resume)"),
                             0));
    journal->Commit();
  });

  std::size_t done = 0, failed = 0;
  for (const auto& c : cases) {
    if (stop && stop()) break;
    Op* op = registry.FindOp(opt.backend, c.op);
    double limit = opt.timeout_s > 0 ? opt.timeout_s : (op ? op->default_timeout_s() : 120.0);
    running = &c;
    dog.Arm(c.id, limit);
    auto start = std::chrono::steady_clock::now();
    CaseResult r = RunCaseHere(registry, opt.backend, c, ctx, 0);
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    dog.Disarm();
    ++done;
    if (IsFailure(r.disposition)) {
      ++failed;
      log::Error("rank " + std::to_string(li.rank) + ": " + c.id + ": " + std::string(ToString(r.disposition)) + " [" +
                 r.error_type + "] " + r.message);
    }
    if (journal) {
      std::lock_guard<std::mutex> lock(journal_mu);
      journal->Add(make_record(c, r, elapsed));
      journal->Commit();
    }
    if (on_progress) on_progress(done, failed);
    if (r.poisoned)
      throw StartupError("rank " + std::to_string(li.rank) + ": case " + c.id +
                         " left the device unusable; start the launch again with --resume");
  }
  running = nullptr;
  return done;
}

}  // namespace servecast::collect
