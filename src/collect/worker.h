#pragma once

#include <string>

#include "collect/case.h"
#include "collect/registry.h"

namespace servecast::collect {

// Options the parent passes to a worker on its command line.
struct WorkerOptions {
  std::string backend;
  int device = 0;
  bool measure_power = false;
  double timing_budget_s = 0.5;
  double memory_limit_bytes = 0;  // RLIMIT_AS for the worker (CPU backend); 0: none
  // A gang member (multi-process ops): rank of world, and the group's rendezvous token.
  int rank = 0;
  int world = 1;
  std::string group_id;
};

// Runs one case in this process the way a worker does: the capacity check, then
// the op; exceptions become failure results, and a pass without rows is a failure.
CaseResult RunCaseHere(const Registry& registry, const std::string& backend, const Case& c, const RunContext& ctx,
                       double memory_limit_bytes);

// The worker loop: reads one JSON case per line on stdin, runs it and writes one
// JSON result per line on stdout, until stdin closes. Expected failures become
// results; a crash or hang is seen by the parent. Returns the process exit code.
int RunWorker(const Registry& registry, const WorkerOptions& options);

// Exit code a worker uses after recording a failure that poisoned its device
// context; the parent restarts it without recording another error.
inline constexpr int kWorkerExitRestart = 10;

}  // namespace servecast::collect
