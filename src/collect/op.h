#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "collect/disposition.h"
#include "collect/params.h"
#include "collect/table_spec.h"
#include "collect/timing.h"

namespace servecast::collect {

// The runtime a backend runs on, detected at run time, never assumed.
struct RuntimeInfo {
  std::string backend;      // "cpu", "cuda"
  std::string version;      // library stack, e.g. "openblas0.3.21" or "13.0-cublaslt13.1-cudnn9.14-nccl2.28"
  std::string device_name;  // "NVIDIA H200", CPU model name
  std::string arch;         // "sm90" on CUDA; the CPU's architecture/core type on the CPU backend
  int sm = 0;               // SM version (90); 0 on the CPU backend
  std::string driver;       // driver version, or the kernel release on CPU
  std::map<std::string, std::string> libraries;  // name -> version
  std::set<std::string> features;                // optional capabilities found (e.g. "cblas_sbgemm")
  // GPUs (worker slots) this run can give one case: the --gpus count, or the
  // launcher's world size. With gpus_exact (launched ranks) a case must use all.
  int gpus = 1;
  bool gpus_exact = false;
};

// A condition the runtime must meet for a case to run. When `applies_when` (an
// expression over the case's parameters, see expr.h) is empty it applies to
// every case of the op. An unmet requirement makes the case `not_supported`,
// with found-vs-required evidence in the summary; it is never a silent skip.
struct Requirement {
  std::string applies_when;
  std::string library;      // with min_version: library version floor
  std::string min_version;
  std::string feature;      // a name that must be in RuntimeInfo::features
  int min_sm = 0;           // SM range (CUDA)
  int max_sm = 0;           // 0: unbounded
  // The case parameter that says how many GPUs one case spans (multi-process ops,
  // e.g. "num_gpus"): met when the run has that many (RuntimeInfo::gpus).
  std::string gpus_param;

  // Empty when met; else a sentence with what was found and what is required.
  std::optional<std::string> Check(const RuntimeInfo& rt, const Params& params = {}) const;
};

// What a worker passes to an op for one case.
struct RunContext {
  int device = 0;
  const RuntimeInfo* runtime = nullptr;
  TimingConfig timing;
  bool measure_power = false;
  // Multi-process ops: this process is `rank` of `world`, one per GPU; every rank
  // runs the same case at the same time. `group_id` is the rendezvous token the
  // parent (or rank 0 of a launcher's job) made with Backend::NewGroupId.
  int rank = 0;
  int world = 1;
  std::string group_id;
};

// The outcome of one case.
struct CaseResult {
  Disposition disposition = Disposition::kFailed;
  FailureClass failure_class = FailureClass::kNone;
  std::string error_type;  // short name: "IncorrectOutput", "std::bad_alloc", ...
  std::string message;
  std::vector<Params> rows;  // full table rows, in the table's column order
  // The failure poisoned the device context (e.g. a sticky CUDA error): the
  // worker records the result first, then exits so the parent starts a fresh one.
  bool poisoned = false;

  static CaseResult Passed(std::vector<Params> rows);
  static CaseResult Failure(Disposition d, FailureClass c, std::string type, std::string message);
};

struct Case;

// One collector op on one backend: declares its table, parameters, limits and
// maturity, and runs a case through prepare -> check against reference -> time ->
// emit rows (the CUDA ops through the phase driver, collect/phases.h, which maps
// errors to outcomes in one place). Adding an op is its file (this class, its
// parameter parse and phases), its factory's declaration in the backend's header,
// and one registration line (the backend's register.cpp or the family's
// Register*Ops); a new table also needs its TableSpec (src/tables), and
// cases/base_ops/<op>.yaml gives it cases.
class Op {
 public:
  virtual ~Op() = default;

  virtual std::string name() const = 0;
  virtual const TableSpec& table() const = 0;
  // Parameters every case of this op must carry (validated when the plan loads).
  virtual std::vector<std::string> required_params() const = 0;
  // Parameters a case may carry besides the required ones and its table's key
  // columns: invocation choices that do not enter the table key (an algorithm,
  // a scale). A plan naming any other parameter is refused when it loads.
  virtual std::vector<std::string> optional_params() const { return {}; }
  virtual double default_timeout_s() const { return 120; }
  virtual std::vector<Requirement> requirements() const { return {}; }
  // Maturity: an unverified op is skipped unless --include-unverified is given.
  virtual bool unverified() const { return false; }
  // Bytes of memory a case needs; the worker refuses a case that cannot fit
  // before allocating (disposition skipped, reason capacity). 0: not declared.
  virtual double MemoryBytes(const Params& /*params*/) const { return 0; }
  // Processes (one per GPU) that run a case together; 1 for single-GPU ops. A
  // case of a multi-process op is given to `Ranks` workers at once (a gang).
  virtual int Ranks(const Params& /*params*/) const { return 1; }

  virtual CaseResult Run(const Case& c, const RunContext& ctx) = 0;
};

// An op whose case parameters are its table's key columns: its name and table
// given once, at construction.
class TableOp : public Op {
 public:
  TableOp(std::string name, const TableSpec& table) : table_(table), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  const TableSpec& table() const override { return table_; }
  std::vector<std::string> required_params() const override { return table_.KeyColumnNames(); }

 protected:
  const TableSpec& table_;

 private:
  std::string name_;
};

// Builds the full row of a table for a case: the common prefix (framework =
// backend, version, device, op_name, kernel_source), the table's key columns
// taken from `key` (by name), then the timing columns, the table's extra columns
// taken from `extra` (by name), and power when measured.
Params MakeRow(const TableSpec& table, const RuntimeInfo& rt, const std::string& op_name,
               const std::string& kernel_source, const Params& key, const TimingStats& stats,
               bool with_power, const Params& extra = {});

}  // namespace servecast::collect
