#pragma once

// The parent's side of one worker process: start it, send it cases, describe its
// end. Shared by the per-GPU scheduler and the gang scheduler (internal header).

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <string>
#include <vector>

#include "collect/case.h"
#include "collect/disposition.h"
#include "collect/params.h"
#include "collect/scheduler.h"

namespace servecast::collect {

using WorkerClock = std::chrono::steady_clock;

struct Slot {
  int device = 0;
  std::vector<std::string> extra_args;  // e.g. --rank/--world/--group-id of a gang member
  pid_t pid = -1;
  int to_worker = -1;    // write end of the worker's stdin
  int from_worker = -1;  // read end of the worker's stdout
  std::string buffer;
  std::deque<std::size_t> inflight;  // case indices, in the order sent
  WorkerClock::time_point head_started;
  WorkerClock::time_point spawned;
  bool ready = false;        // the worker reported that its device is set up
  int restarts = 0;
  int startup_failures = 0;  // in a row; a slot whose worker cannot start is retired
  bool retired = false;
};

// A worker that has not reported ready after this long is stuck in start-up.
inline constexpr double kStartupTimeoutS = 180;
inline constexpr int kMaxStartupFailures = 3;

void CloseFd(int& fd);
// Starts `<exe> __worker --backend B --device D <worker_args> <extra_args>` with
// pipes on stdin/stdout; the worker dies with its parent.
void Spawn(Slot& s, const SchedulerOptions& opt, const std::string& backend);
// Writes one case line; false when the worker is gone.
bool SendCase(Slot& s, const Case& c);
// "worker killed by signal 11 (Segmentation fault)", ...
std::string DescribeExit(int status);
// Kills the worker (if running) and reaps it; returns its wait status.
int KillAndReap(Slot& s);

// Reads what the worker has written; appends its complete lines to `lines`.
// Returns false at end of file (the worker is gone).
bool ReadLines(Slot& s, std::vector<std::string>& lines);
// The worker's start-up line ({"ready": true, ...}).
bool IsReadyLine(const std::string& line);

// One worker result line for the case `want_id`. A line that does not parse, or
// answers another case, becomes a failed/collector_bug "ProtocolError" result.
struct WorkerResult {
  Disposition status = Disposition::kFailed;
  FailureClass cls = FailureClass::kCollectorBug;
  std::string type, message;
  std::vector<Params> rows;
  double elapsed_s = 0;
};
WorkerResult ParseWorkerResult(const std::string& line, const std::string& want_id);

}  // namespace servecast::collect
