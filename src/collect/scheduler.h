#pragma once

#include <functional>
#include <string>
#include <vector>

#include "collect/case.h"
#include "collect/journal.h"
#include "collect/registry.h"

namespace servecast::collect {

struct SchedulerOptions {
  std::string worker_exe;                 // this binary; started as `<exe> __worker ...`
  std::vector<std::string> worker_args;   // backend, device and timing flags are added per worker
  std::vector<int> devices;               // one worker slot per entry
  double timeout_s = 0;                   // per case; 0: the op's default
  int prefetch = 2;                       // cases queued per worker beyond the running one
  std::string worker_log;                 // worker stderr is appended here ("" : inherit)
  int max_restarts_per_slot = 1000;
};

// Progress after each committed batch.
struct SchedulerProgress {
  std::size_t done = 0, total = 0, failed = 0;
};

// Runs cases on worker processes pulling from one queue. Every finished case,
// including crashes (classified from the signal) and timeouts (the worker is
// killed), becomes one journal record; records are committed (fdatasync) in
// batches before progress is reported. Stops early, leaving the rest unrecorded,
// when `stop` returns true (SIGINT/SIGTERM). Returns the number of cases recorded.
std::size_t RunCases(const Registry& registry, const std::string& backend, const std::vector<Case>& cases,
                     const SchedulerOptions& options, JournalWriter& journal,
                     const std::function<void(const JournalRecord&)>& on_record,
                     const std::function<void(const SchedulerProgress&)>& on_progress,
                     const std::function<bool()>& stop);

}  // namespace servecast::collect
