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

// Runs the cases of multi-process ops (Op::Ranks > 1). A case of n ranks goes to
// a gang of n workers at once, on the first n devices, started with --rank,
// --world and --group-id (a fresh token from `new_group_id` each time a gang
// starts). Its record is rank 0's result when every rank passed, else the first
// failing rank's, named. A rank that dies, or a case past its timeout, kills the
// whole gang (the case is charged) and a new gang starts for the next case; so
// does any failed case, since a failed collective can leave the group unusable.
// Cases run one at a time, grouped by rank count in order of appearance.
std::size_t RunGangCases(const Registry& registry, const std::string& backend, const std::vector<Case>& cases,
                         const SchedulerOptions& options, const std::function<std::string()>& new_group_id,
                         JournalWriter& journal, const std::function<void(const JournalRecord&)>& on_record,
                         const std::function<void(const SchedulerProgress&)>& on_progress,
                         const std::function<bool()>& stop);

}  // namespace servecast::collect
