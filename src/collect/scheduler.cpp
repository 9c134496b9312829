#include "collect/scheduler.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>

#include "collect/worker.h"
#include "collect/worker_process.h"
#include "core/error.h"
#include "core/log.h"

namespace servecast::collect {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

std::size_t RunCases(const Registry& registry, const std::string& backend, const std::vector<Case>& cases,
                     const SchedulerOptions& opt, JournalWriter& journal,
                     const std::function<void(const JournalRecord&)>& on_record,
                     const std::function<void(const SchedulerProgress&)>& on_progress,
                     const std::function<bool()>& stop) {
  ::signal(SIGPIPE, SIG_IGN);
  std::deque<std::size_t> pending;
  for (std::size_t i = 0; i < cases.size(); ++i) pending.push_back(i);
  std::vector<Slot> slots(opt.devices.size());
  for (std::size_t i = 0; i < slots.size(); ++i) slots[i].device = opt.devices[i];

  SchedulerProgress progress;
  progress.total = cases.size();
  std::size_t recorded = 0;
  std::vector<JournalRecord> batch;

  auto timeout_of = [&](std::size_t idx) {
    if (opt.timeout_s > 0) return opt.timeout_s;
    Op* op = registry.FindOp(backend, cases[idx].op);
    return op ? op->default_timeout_s() : 120.0;
  };
  auto record = [&](std::size_t idx, Disposition d, FailureClass cls, std::string type, std::string message,
                    std::vector<Params> rows, int worker, double elapsed) {
    batch.push_back(
        MakeRecord(cases[idx], d, cls, std::move(type), std::move(message), std::move(rows), worker, elapsed));
  };
  // A dead worker: its running case is charged with `why`; cases queued behind it go back to the queue front.
  auto bury = [&](Slot& s, int status, bool timed_out) {
    CloseFd(s.to_worker);
    CloseFd(s.from_worker);
    s.pid = -1;
    double elapsed = std::chrono::duration<double>(Clock::now() - s.head_started).count();
    bool clean_restart = WIFEXITED(status) && WEXITSTATUS(status) == kWorkerExitRestart;
    if (!s.ready) {
      // Died (or hung) before its device was set up: no case ran, none is charged.
      for (auto it = s.inflight.rbegin(); it != s.inflight.rend(); ++it) pending.push_front(*it);
      s.inflight.clear();
      ++s.startup_failures;
      log::Error("worker for device " + std::to_string(s.device) + " failed to start (" +
                 (timed_out ? std::string("no ready report within ") + std::to_string(static_cast<int>(kStartupTimeoutS)) + " s"
                            : DescribeExit(status)) +
                 "); its stderr is in the run's collector.log");
      if (s.startup_failures >= kMaxStartupFailures) {
        s.retired = true;
        log::Error("worker slot for device " + std::to_string(s.device) + " retired after " +
                   std::to_string(kMaxStartupFailures) + " failed starts in a row");
      }
      return;
    }
    if (!s.inflight.empty()) {
      std::size_t head = s.inflight.front();
      s.inflight.pop_front();
      if (timed_out) {
        record(head, Disposition::kTimeout, FailureClass::kTimeout, "Timeout",
               "exceeded the per-case limit of " + std::to_string(timeout_of(head)) + " s; worker killed", {},
               s.device, elapsed);
      } else {
        Disposition d = Disposition::kCrashed;
        FailureClass cls = FailureClass::kCollectorBug;
        std::string type = WIFSIGNALED(status) ? "WorkerSignalCrash" : "WorkerAbnormalExit";
        // Killed by the kernel's OOM killer or over its memory limit.
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
          cls = FailureClass::kResource;
          type = "WorkerKilled";
        }
        record(head, d, cls, type, DescribeExit(status) + " while running this case", {}, s.device, elapsed);
      }
    }
    for (auto it = s.inflight.rbegin(); it != s.inflight.rend(); ++it) pending.push_front(*it);
    s.inflight.clear();
    if (!clean_restart) ++s.restarts;
    if (s.restarts > opt.max_restarts_per_slot) {
      s.retired = true;
      log::Error("worker slot " + std::to_string(s.device) + " restarted more than " +
                 std::to_string(opt.max_restarts_per_slot) + " times; retiring it");
    }
  };
  auto commit = [&] {
    if (batch.empty()) return;
    for (const auto& r : batch) journal.Add(r);
    journal.Commit();
    for (const auto& r : batch) {
      ++recorded;
      ++progress.done;
      if (IsFailure(r.status)) ++progress.failed;
      if (on_record) on_record(r);
    }
    batch.clear();
    if (on_progress) on_progress(progress);
  };

  bool stopping = false;
  bool ever_ready = false;
  for (;;) {
    if (!stopping && stop && stop()) stopping = true;
    bool any_inflight = false;
    for (auto& s : slots) any_inflight = any_inflight || !s.inflight.empty();
    if (stopping || (pending.empty() && !any_inflight)) break;

    // Start workers and keep each one's queue topped up.
    bool any_alive = false;
    for (auto& s : slots) {
      if (s.retired) continue;
      if (s.pid < 0 && !pending.empty()) Spawn(s, opt, backend);
      if (s.pid < 0) continue;
      any_alive = true;
      while (!pending.empty() && s.inflight.size() < static_cast<std::size_t>(1 + opt.prefetch)) {
        std::size_t idx = pending.front();
        if (s.inflight.empty()) s.head_started = Clock::now();
        if (!SendCase(s, cases[idx])) break;
        pending.pop_front();
        s.inflight.push_back(idx);
      }
    }
    if (!any_alive && !pending.empty() && !any_inflight && !ever_ready)
      throw StartupError("no worker could start on any of the " + std::to_string(slots.size()) +
                         " device(s); see the run's collector.log for their errors");
    if (!any_alive && !pending.empty() && !any_inflight) {
      // Every slot retired: the rest can never run.
      for (std::size_t idx : pending)
        record(idx, Disposition::kFailed, FailureClass::kCollectorBug, "WorkerOrphanedTask",
               "no worker slot left to run this case", {}, -1, 0);
      pending.clear();
      commit();
      break;
    }

    // Wait for results or the nearest deadline.
    std::vector<pollfd> fds;
    std::vector<Slot*> owners;
    auto now = Clock::now();
    double wait_s = 0.25;
    for (auto& s : slots) {
      if (s.pid < 0) continue;
      fds.push_back(pollfd{s.from_worker, POLLIN, 0});
      owners.push_back(&s);
      if (!s.inflight.empty() && s.ready) {
        double left = timeout_of(s.inflight.front()) - std::chrono::duration<double>(now - s.head_started).count();
        wait_s = std::min(wait_s, std::max(0.0, left));
      }
    }
    int rc = ::poll(fds.data(), fds.size(), static_cast<int>(wait_s * 1000) + 1);
    if (rc < 0 && errno != EINTR) throw SystemError("poll on workers failed", errno);

    for (std::size_t f = 0; f < fds.size() && rc > 0; ++f) {
      Slot& s = *owners[f];
      if (!(fds[f].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      std::vector<std::string> lines;
      if (!ReadLines(s, lines)) {
        int status = 0;
        ::waitpid(s.pid, &status, 0);
        bury(s, status, false);
        continue;
      }
      for (const std::string& line : lines) {
        if (!s.ready) {
          if (IsReadyLine(line)) {
            s.ready = true;
            s.startup_failures = 0;
            ever_ready = true;
            s.head_started = Clock::now();
          } else {
            log::Error("worker for device " + std::to_string(s.device) + " wrote before reporting ready: " + line);
          }
          continue;
        }
        if (s.inflight.empty()) continue;
        const std::size_t idx = s.inflight.front();
        WorkerResult w = ParseWorkerResult(line, cases[idx].id);
        record(idx, w.status, w.cls, std::move(w.type), std::move(w.message), std::move(w.rows), s.device,
               w.elapsed_s);
        s.inflight.pop_front();
        s.head_started = Clock::now();
      }
    }

    // Per-case timeouts.
    now = Clock::now();
    for (auto& s : slots) {
      if (s.pid >= 0 && !s.ready && std::chrono::duration<double>(now - s.spawned).count() >= kStartupTimeoutS) {
        ::kill(s.pid, SIGKILL);
        int status = 0;
        ::waitpid(s.pid, &status, 0);
        bury(s, status, true);
        continue;
      }
      if (s.pid < 0 || s.inflight.empty() || !s.ready) continue;
      double ran = std::chrono::duration<double>(now - s.head_started).count();
      if (ran >= timeout_of(s.inflight.front())) {
        ::kill(s.pid, SIGKILL);
        int status = 0;
        ::waitpid(s.pid, &status, 0);
        bury(s, status, true);
      }
    }
    commit();
  }
  commit();

  // Shut down: closing stdin ends a worker's loop; a stuck one is killed.
  for (auto& s : slots) CloseFd(s.to_worker);
  for (auto& s : slots) {
    if (s.pid < 0) continue;
    if (stopping) ::kill(s.pid, SIGKILL);
    int status = 0;
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(s.pid, &status, WNOHANG) == s.pid) break;
      if (i == 99) {
        ::kill(s.pid, SIGKILL);
        ::waitpid(s.pid, &status, 0);
      }
      ::usleep(20000);
    }
    CloseFd(s.from_worker);
    s.pid = -1;
  }
  return recorded;
}

}  // namespace servecast::collect
