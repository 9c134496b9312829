#include "collect/worker.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <new>
#include <string>

#include "collect/case.h"
#include "collect/journal.h"
#include "core/error.h"

namespace servecast::collect {
namespace {

double AvailableHostMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

Json ResultJson(const std::string& id, const CaseResult& r, double elapsed_s) {
  Json rows = Json::array();
  for (const auto& row : r.rows) rows.push_back(ParamsToJson(row));
  return Json{{"id", id},
              {"status", std::string(ToString(r.disposition))},
              {"class", std::string(ToString(r.failure_class))},
              {"error_type", r.error_type},
              {"message", r.message},
              {"rows", std::move(rows)},
              {"elapsed_s", elapsed_s}};
}

// The result channel: the parent's pipe, moved off stdout at start-up so that a
// library writing to stdout (NCCL's warnings, say) cannot corrupt a result line.
int g_result_fd = STDOUT_FILENO;

void Emit(const Json& j) {
  std::string line = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  line += '\n';
  // One write per result so a crash cannot interleave a partial line with the next.
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(g_result_fd, p, left);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      std::_Exit(3);  // the parent is gone
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace

CaseResult RunCaseHere(const Registry& registry, const std::string& backend, const Case& c, const RunContext& ctx,
                       double memory_limit_bytes) {
  CaseResult result;
  try {
    Op* op = registry.FindOp(backend, c.op);
    if (!op) {
      result = CaseResult::Failure(Disposition::kFailed, FailureClass::kCollectorBug, "UnknownOp",
                                   "worker has no op '" + c.op + "' for backend '" + backend + "'");
    } else {
      double need = op->MemoryBytes(c.params);
      double avail = backend == "cpu" ? AvailableHostMemoryBytes() : 0;
      if (memory_limit_bytes > 0 && (avail == 0 || memory_limit_bytes < avail)) avail = memory_limit_bytes;
      if (need > 0 && avail > 0 && need > 0.9 * avail) {
        result = CaseResult::Failure(Disposition::kSkipped, FailureClass::kResource, "Capacity",
                                     "capacity: needs " + std::to_string(static_cast<long long>(need)) +
                                         " bytes; " + std::to_string(static_cast<long long>(avail)) +
                                         " available to the worker");
      } else {
        result = op->Run(c, ctx);
      }
    }
  } catch (const std::bad_alloc&) {
    result = CaseResult::Failure(Disposition::kFailed, FailureClass::kResource, "OutOfMemory",
                                 "allocation failed (std::bad_alloc) while running the case");
  } catch (const Error& e) {
    result = CaseResult::Failure(Disposition::kFailed, FailureClass::kCollectorBug, "Error", e.what());
  } catch (const std::exception& e) {
    result = CaseResult::Failure(Disposition::kFailed, FailureClass::kCollectorBug, "UnhandledException", e.what());
  }
  if (result.disposition == Disposition::kPassed && result.rows.empty())
    result = CaseResult::Failure(Disposition::kFailed, FailureClass::kCollectorBug, "NoRows",
                                 "the op reported success but produced no rows");
  return result;
}

int RunWorker(const Registry& registry, const WorkerOptions& opt) {
  if (int fd = ::dup(STDOUT_FILENO); fd >= 0) {
    g_result_fd = fd;
    ::dup2(STDERR_FILENO, STDOUT_FILENO);  // stray library output goes to the worker log
  }
  const Backend* backend = registry.FindBackend(opt.backend);
  if (!backend) {
    std::cerr << "worker: unknown backend '" << opt.backend << "'\n";
    return 2;
  }
  if (opt.memory_limit_bytes > 0) {
    rlimit lim{static_cast<rlim_t>(opt.memory_limit_bytes), static_cast<rlim_t>(opt.memory_limit_bytes)};
    setrlimit(RLIMIT_AS, &lim);
  }
  rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  RuntimeInfo rt;
  try {
    backend->InitWorker(opt.device);
    rt = backend->DetectRuntime();
  } catch (const std::exception& e) {
    std::cerr << "worker " << opt.device << ": cannot start: " << e.what() << "\n";
    return 3;
  }
  // Tell the parent the worker is up: time before this (CUDA context creation,
  // library handles) is start-up, not charged to any case.
  Emit(Json{{"ready", true}, {"pid", static_cast<long long>(::getpid())}});
  RunContext ctx;
  ctx.device = opt.device;
  ctx.runtime = &rt;
  ctx.measure_power = opt.measure_power;
  ctx.timing.budget_s = opt.timing_budget_s;
  ctx.rank = opt.rank;
  ctx.world = opt.world;
  ctx.group_id = opt.group_id;

  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    std::string id = "?";
    auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    CaseResult result;
    try {
      Json msg = Json::parse(line);
      id = msg.at("id").get<std::string>();
      Case c;
      c.id = id;
      c.op = msg.at("op").get<std::string>();
      c.params = ParamsFromJson(msg.at("params"), "case " + id);
      result = RunCaseHere(registry, opt.backend, c, ctx, opt.memory_limit_bytes);
    } catch (const std::exception& e) {
      result = CaseResult::Failure(Disposition::kFailed, FailureClass::kCollectorBug, "ProtocolError",
                                   std::string("malformed case message: ") + e.what());
    }
    Emit(ResultJson(id, result, elapsed()));
    if (result.poisoned) return kWorkerExitRestart;
  }
  return 0;
}

}  // namespace servecast::collect
