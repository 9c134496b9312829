#pragma once

// Shared by the collect module's tests: a backend and an op that exist only in
// tests, a registry holding them, and a temporary cases/ tree.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "../core/core_test_util.h"
#include "collect/case.h"
#include "collect/op.h"
#include "collect/plan.h"
#include "collect/registry.h"
#include "core/fs.h"

namespace servecast::collect::testing {

using servecast::testing::HasText;
using servecast::testing::TempDir;
using servecast::testing::ThrownMessage;

inline RuntimeInfo TestRuntime(int sm = 90) {
  RuntimeInfo rt;
  rt.backend = "test";
  rt.version = "testlib1.5";
  rt.device_name = "Test Device";
  rt.arch = "testarch";
  rt.sm = sm;
  rt.driver = "1.0";
  rt.libraries = {{"testlib", "1.5"}};
  return rt;
}

class TestBackend : public Backend {
 public:
  explicit TestBackend(std::string name = "test") : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  RuntimeInfo DetectRuntime() const override { return TestRuntime(); }
  std::vector<int> DefaultDevices() const override { return {0}; }
  std::string DefaultSystem(const RuntimeInfo&) const override { return "test_system"; }
  void InitWorker(int) const override {}

 private:
  std::string name_;
};

// A GEMM-shaped op writing gemm_perf (keys gemm_dtype, m, n, k); it never runs.
class TestOp : public Op {
 public:
  explicit TestOp(std::string name, bool unverified = false, std::vector<Requirement> requirements = {})
      : name_(std::move(name)), unverified_(unverified), requirements_(std::move(requirements)) {}
  std::string name() const override { return name_; }
  const TableSpec& table() const override { return *FindTableSpec("gemm_perf"); }
  std::vector<std::string> required_params() const override { return {"gemm_dtype", "m", "n", "k"}; }
  // Invocation parameters the plan tests give it (they do not enter the key).
  std::vector<std::string> optional_params() const override { return {"algo", "alpha", "scale", "zeta"}; }
  std::vector<Requirement> requirements() const override { return requirements_; }
  bool unverified() const override { return unverified_; }
  CaseResult Run(const Case&, const RunContext&) override {
    return CaseResult::Failure(Disposition::kFailed, FailureClass::kCollectorBug, "TestOp", "test ops do not run");
  }

 private:
  std::string name_;
  bool unverified_;
  std::vector<Requirement> requirements_;
};

// A registry with backend "test" and the given ops on it.
inline std::unique_ptr<Registry> MakeRegistry(std::vector<std::unique_ptr<Op>> ops) {
  auto reg = std::make_unique<Registry>();
  reg->AddBackend(std::make_unique<TestBackend>("test"));
  for (auto& op : ops) reg->AddOp("test", std::move(op));
  return reg;
}

inline std::unique_ptr<Registry> MakeRegistry(const std::vector<std::string>& op_names) {
  std::vector<std::unique_ptr<Op>> ops;
  for (const auto& n : op_names) ops.push_back(std::make_unique<TestOp>(n));
  return MakeRegistry(std::move(ops));
}

// A temporary cases/ tree: base_ops/, models/, skips.yaml.
class CasesDir {
 public:
  const std::string& path() const { return dir_.path(); }
  void BaseOp(const std::string& file, const std::string& yaml) const {
    WriteFileAtomic(dir_.path() + "/base_ops/" + file, yaml);
  }
  void Model(const std::string& file, const std::string& yaml) const {
    WriteFileAtomic(dir_.path() + "/models/" + file, yaml);
  }
  void Skips(const std::string& yaml) const { WriteFileAtomic(dir_.path() + "/skips.yaml", yaml); }

 private:
  TempDir dir_;
};

inline PlanOptions Options(const CasesDir& cases, std::vector<std::string> ops = {}) {
  PlanOptions opt;
  opt.cases_dir = cases.path();
  opt.backend = "test";
  opt.ops = std::move(ops);
  return opt;
}

inline std::vector<std::string> Ids(const std::vector<Case>& cases) {
  std::vector<std::string> out;
  for (const auto& c : cases) out.push_back(c.id);
  return out;
}

inline std::string GemmId(const std::string& op, const std::string& dtype, std::int64_t m, std::int64_t n,
                          std::int64_t k, const std::string& extra = "") {
  return op + ":gemm_dtype=" + dtype + ",m=" + std::to_string(m) + ",n=" + std::to_string(n) +
         ",k=" + std::to_string(k) + extra;
}

}  // namespace servecast::collect::testing
