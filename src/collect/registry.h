#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collect/op.h"

namespace servecast::collect {

// A collector backend: how to detect its runtime and set up a worker.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Detects the library stack and device. Throws StartupError (exit 3) when the
  // backend cannot run here (no GPU, missing library).
  virtual RuntimeInfo DetectRuntime() const = 0;
  // Worker slots used when --gpus is not given.
  virtual std::vector<int> DefaultDevices() const = 0;
  // Why `device` (an entry of --gpus) cannot be a worker slot on this machine; ""
  // when it can. The cuda backend refuses an index past the visible GPUs; the cpu
  // backend maps any index onto the cores it may run on (modulo their count).
  virtual std::string DeviceProblem(int device) const;
  // The system name (systems/<name>.yaml) that the detected device maps to.
  virtual std::string DefaultSystem(const RuntimeInfo& rt) const = 0;
  // Runs in the worker process before its first case.
  virtual void InitWorker(int device) const = 0;
  // A fresh rendezvous token for one group of ranks (multi-process ops): the
  // processes started with it find each other. Called by the parent before it
  // starts a gang, or by rank 0 of a launcher's job. Throws Error when the
  // backend has no multi-process ops.
  virtual std::string NewGroupId() const;
};

// Every backend and op the binary knows. Filled once at start-up by explicit
// registration functions (RegisterCpuBackend, ...), never by static initializers.
class Registry {
 public:
  void AddBackend(std::unique_ptr<Backend> backend);
  void AddOp(const std::string& backend, std::unique_ptr<Op> op);

  const Backend* FindBackend(const std::string& name) const;
  Op* FindOp(const std::string& backend, const std::string& op) const;
  std::vector<std::string> BackendNames() const;
  std::vector<std::string> OpNames(const std::string& backend) const;  // sorted

 private:
  std::map<std::string, std::unique_ptr<Backend>> backends_;
  std::map<std::string, std::map<std::string, std::unique_ptr<Op>>> ops_;
};

}  // namespace servecast::collect
