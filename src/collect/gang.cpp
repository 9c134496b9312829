#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <optional>

#include "collect/scheduler.h"
#include "collect/worker.h"
#include "collect/worker_process.h"
#include "core/error.h"
#include "core/log.h"

namespace servecast::collect {
namespace {

double Since(WorkerClock::time_point t) { return std::chrono::duration<double>(WorkerClock::now() - t).count(); }

class Gang {
 public:
  Gang(const SchedulerOptions& opt, const std::string& backend, int ranks) : opt_(opt), backend_(backend) {
    slots_.resize(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) slots_[static_cast<std::size_t>(r)].device = opt.devices[static_cast<std::size_t>(r)];
  }
  ~Gang() { Stop(false); }

  bool alive() const { return alive_; }
  int size() const { return static_cast<int>(slots_.size()); }

  // Starts every rank with a fresh group id and waits for all to report ready.
  // Returns an empty string, or why the gang could not start.
  std::string Start(const std::string& group_id) {
    const std::string world = std::to_string(slots_.size());
    for (std::size_t r = 0; r < slots_.size(); ++r) {
      slots_[r].extra_args = {"--rank", std::to_string(r), "--world", world, "--group-id", group_id};
      Spawn(slots_[r], opt_, backend_);
    }
    alive_ = true;
    auto started = WorkerClock::now();
    for (;;) {
      bool all = true;
      for (const auto& s : slots_) all = all && s.ready;
      if (all) return "";
      if (Since(started) > kStartupTimeoutS) {
        Stop(true);
        return "no ready report from every rank within " + std::to_string(static_cast<int>(kStartupTimeoutS)) + " s";
      }
      std::vector<pollfd> fds;
      for (auto& s : slots_) fds.push_back(pollfd{s.from_worker, POLLIN, 0});
      int rc = ::poll(fds.data(), fds.size(), 250);
      if (rc < 0 && errno != EINTR) throw SystemError("poll on gang workers failed", errno);
      for (std::size_t r = 0; r < slots_.size() && rc > 0; ++r) {
        if (!(fds[r].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        std::vector<std::string> lines;
        if (!ReadLines(slots_[r], lines)) {
          int status = 0;
          ::waitpid(slots_[r].pid, &status, 0);
          slots_[r].pid = -1;
          Stop(true);
          return "rank " + std::to_string(r) + " (device " + std::to_string(slots_[r].device) +
                 ") failed to start: " + DescribeExit(status);
        }
        for (const auto& line : lines) {
          if (IsReadyLine(line)) slots_[r].ready = true;
          else log::Error("gang rank " + std::to_string(r) + " wrote before reporting ready: " + line);
        }
      }
    }
  }

  // Ends every rank: gracefully (stdin closed, a short wait) or at once.
  void Stop(bool kill_now) {
    if (!alive_) return;
    for (auto& s : slots_) CloseFd(s.to_worker);
    for (auto& s : slots_) {
      if (s.pid < 0) continue;
      if (kill_now) {
        KillAndReap(s);
        continue;
      }
      int status = 0;
      bool gone = false;
      for (int i = 0; i < 100 && !gone; ++i) {
        gone = ::waitpid(s.pid, &status, WNOHANG) == s.pid;
        if (!gone) ::usleep(20000);
      }
      if (gone) s.pid = -1;
      KillAndReap(s);
    }
    alive_ = false;
  }

  std::vector<Slot>& slots() { return slots_; }

 private:
  const SchedulerOptions& opt_;
  std::string backend_;
  std::vector<Slot> slots_;
  bool alive_ = false;
};

}  // namespace

std::size_t RunGangCases(const Registry& registry, const std::string& backend, const std::vector<Case>& cases,
                         const SchedulerOptions& opt, const std::function<std::string()>& new_group_id,
                         JournalWriter& journal, const std::function<void(const JournalRecord&)>& on_record,
                         const std::function<void(const SchedulerProgress&)>& on_progress,
                         const std::function<bool()>& stop) {
  ::signal(SIGPIPE, SIG_IGN);
  SchedulerProgress progress;
  progress.total = cases.size();
  std::size_t recorded = 0;

  auto commit = [&](std::size_t idx, Disposition d, FailureClass cls, std::string type, std::string message,
                    std::vector<Params> rows, int worker, double elapsed) {
    JournalRecord r =
        MakeRecord(cases[idx], d, cls, std::move(type), std::move(message), std::move(rows), worker, elapsed);
    journal.Add(r);
    journal.Commit();
    ++recorded;
    ++progress.done;
    if (IsFailure(r.status)) ++progress.failed;
    if (on_record) on_record(r);
    if (on_progress) on_progress(progress);
  };
  auto timeout_of = [&](std::size_t idx) {
    if (opt.timeout_s > 0) return opt.timeout_s;
    Op* op = registry.FindOp(backend, cases[idx].op);
    return op ? op->default_timeout_s() : 120.0;
  };

  std::map<int, std::vector<std::size_t>> by_ranks;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    Op* op = registry.FindOp(backend, cases[i].op);
    by_ranks[op ? op->Ranks(cases[i].params) : 1].push_back(i);
  }

  bool stopping = false;
  for (const auto& [ranks, idxs] : by_ranks) {
    if (stopping) break;
    if (ranks < 1 || static_cast<std::size_t>(ranks) > opt.devices.size()) {
      for (std::size_t idx : idxs)
        commit(idx, Disposition::kFailed, FailureClass::kCollectorBug, "GangTooLarge",
               "the case needs " + std::to_string(ranks) + " GPUs and the run has " +
                   std::to_string(opt.devices.size()) + "; the plan should have dropped it",
               {}, -1, 0);
      continue;
    }
    Gang gang(opt, backend, ranks);
    int start_failures = 0;
    std::size_t next = 0;
    while (next < idxs.size()) {
      if (stop && stop()) {
        stopping = true;
        break;
      }
      if (!gang.alive()) {
        std::string why = gang.Start(new_group_id());
        if (!why.empty()) {
          log::Error("gang of " + std::to_string(ranks) + " could not start: " + why +
                     "; the ranks' stderr is in the run's collector.log");
          if (++start_failures < kMaxStartupFailures) continue;
          if (recorded == 0 && next == 0)
            throw StartupError("no gang of " + std::to_string(ranks) + " workers could start (" + why +
                               "); see the run's collector.log");
          for (; next < idxs.size(); ++next)
            commit(idxs[next], Disposition::kFailed, FailureClass::kCollectorBug, "GangCannotStart",
                   "a gang of " + std::to_string(ranks) + " workers failed to start " +
                       std::to_string(kMaxStartupFailures) + " times in a row: " + why,
                   {}, -1, 0);
          break;
        }
        start_failures = 0;
      }

      const std::size_t idx = idxs[next];
      const Case& c = cases[idx];
      auto& slots = gang.slots();
      std::vector<std::optional<WorkerResult>> results(slots.size());
      auto sent = WorkerClock::now();
      std::optional<std::size_t> dead;  // rank whose worker died
      int dead_status = 0;
      for (auto& s : slots)
        if (!SendCase(s, c)) break;  // a dead rank shows up as end of file below
      bool timed_out = false;
      for (;;) {
        bool all = true;
        for (const auto& r : results) all = all && r.has_value();
        if (all) break;
        double left = timeout_of(idx) - Since(sent);
        if (left <= 0) {
          timed_out = true;
          break;
        }
        std::vector<pollfd> fds;
        for (auto& s : slots) fds.push_back(pollfd{s.from_worker, POLLIN, 0});
        int rc = ::poll(fds.data(), fds.size(), static_cast<int>(std::min(left, 0.25) * 1000) + 1);
        if (rc < 0 && errno != EINTR) throw SystemError("poll on gang workers failed", errno);
        for (std::size_t r = 0; r < slots.size() && rc > 0 && !dead; ++r) {
          if (!(fds[r].revents & (POLLIN | POLLHUP | POLLERR))) continue;
          std::vector<std::string> lines;
          if (!ReadLines(slots[r], lines)) {
            ::waitpid(slots[r].pid, &dead_status, 0);
            slots[r].pid = -1;
            dead = r;
            break;
          }
          for (const auto& line : lines)
            if (!results[r]) results[r] = ParseWorkerResult(line, c.id);
        }
        if (dead) break;
      }
      const double elapsed = Since(sent);
      ++next;
      if (timed_out) {
        gang.Stop(true);
        std::string waiting;
        for (std::size_t r = 0; r < results.size(); ++r)
          if (!results[r]) waiting += (waiting.empty() ? "" : ", ") + std::to_string(r);
        commit(idx, Disposition::kTimeout, FailureClass::kTimeout, "Timeout",
               "exceeded the per-case limit of " + std::to_string(timeout_of(idx)) + " s (ranks without a result: " +
                   waiting + "); gang killed",
               {}, slots[0].device, elapsed);
        continue;
      }
      if (dead) {
        gang.Stop(true);
        FailureClass cls = FailureClass::kCollectorBug;
        std::string type = WIFSIGNALED(dead_status) ? "WorkerSignalCrash" : "WorkerAbnormalExit";
        if (WIFSIGNALED(dead_status) && WTERMSIG(dead_status) == SIGKILL) {
          cls = FailureClass::kResource;
          type = "WorkerKilled";
        }
        commit(idx, Disposition::kCrashed, cls, type,
               "rank " + std::to_string(*dead) + ": " + DescribeExit(dead_status) + " while running this case", {},
               slots[*dead].device, elapsed);
        continue;
      }
      std::optional<std::size_t> bad;
      for (std::size_t r = 0; r < results.size() && !bad; ++r)
        if (results[r]->status != Disposition::kPassed) bad = r;
      if (!bad) {
        commit(idx, Disposition::kPassed, FailureClass::kNone, "", "", std::move(results[0]->rows), slots[0].device,
               elapsed);
        continue;
      }
      WorkerResult& b = *results[*bad];
      commit(idx, b.status, b.cls, b.type, "rank " + std::to_string(*bad) + ": " + b.message, {},
             slots[*bad].device, elapsed);
      if (IsFailure(b.status)) gang.Stop(false);  // a fresh group for the next case
    }
    gang.Stop(stopping);
  }
  return recorded;
}

}  // namespace servecast::collect
