// The CUDA backend's one error mapping (cuda_check.h) through the phase driver, on
// the host: the errors are made with the checking macros' own throwers, from real
// status codes, so no GPU is needed.
#include "backends/cuda/cuda_check.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace servecast::cuda {
namespace {

using collect::CaseResult;
using collect::Disposition;
using collect::FailureClass;

// A case whose Check phase runs `fail`; Time and Emit must not run after it throws.
class FailingCheck : public collect::CasePhases {
 public:
  explicit FailingCheck(std::function<void()> fail) : fail_(std::move(fail)) {}
  bool timed = false;
  std::optional<CaseResult> Prepare() override { return std::nullopt; }
  std::optional<CaseResult> Check() override {
    fail_();
    return std::nullopt;
  }
  void Time() override { timed = true; }
  std::vector<collect::Params> Emit() override { return {}; }

 private:
  std::function<void()> fail_;
};

CaseResult RunFailing(std::function<void()> fail, FailureClass library_class) {
  FailingCheck p(std::move(fail));
  CaseResult r = RunCudaPhases(p, library_class);
  EXPECT_FALSE(p.timed);
  return r;
}

TEST(CudaErrorMapping, AStickyRuntimeErrorPoisonsTheContext) {
  CaseResult r = RunFailing([] { SC_CUDA_CHECK(cudaErrorIllegalAddress); }, FailureClass::kCollectorBug);
  EXPECT_EQ(r.disposition, Disposition::kFailed);
  EXPECT_EQ(r.failure_class, FailureClass::kCollectorBug);
  EXPECT_EQ(r.error_type, "CudaError");
  EXPECT_NE(r.message.find("cudaErrorIllegalAddress"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("cuda_check_test.cpp"), std::string::npos) << r.message;  // where
  EXPECT_TRUE(r.poisoned);
}

TEST(CudaErrorMapping, ANonStickyErrorTakesTheOpsLibraryClass) {
  for (FailureClass c : {FailureClass::kFrameworkBug, FailureClass::kCollectorBug}) {
    CaseResult r = RunFailing([] { SC_CUDA_CHECK(cudaErrorInvalidValue); }, c);
    EXPECT_EQ(r.disposition, Disposition::kFailed);
    EXPECT_EQ(r.failure_class, c);
    EXPECT_EQ(r.error_type, "CudaError");
    EXPECT_FALSE(r.poisoned);
  }
}

TEST(CudaErrorMapping, OutOfMemoryIsAResourceFailure) {
  CaseResult r = RunFailing([] { SC_CUDA_CHECK(cudaErrorMemoryAllocation); }, FailureClass::kFrameworkBug);
  EXPECT_EQ(r.disposition, Disposition::kFailed);
  EXPECT_EQ(r.failure_class, FailureClass::kResource);
  EXPECT_EQ(r.error_type, "CudaOutOfMemory");
  EXPECT_FALSE(r.poisoned);
}

TEST(CudaErrorMapping, CublasStatusesMapLikeRuntimeErrors) {
  CaseResult failed = RunFailing([] { SC_CUBLAS_CHECK(CUBLAS_STATUS_EXECUTION_FAILED); }, FailureClass::kFrameworkBug);
  EXPECT_EQ(failed.failure_class, FailureClass::kFrameworkBug);
  EXPECT_TRUE(failed.poisoned);
  EXPECT_NE(failed.message.find("CUBLAS_STATUS_EXECUTION_FAILED"), std::string::npos) << failed.message;
  CaseResult oom = RunFailing([] { SC_CUBLAS_CHECK(CUBLAS_STATUS_ALLOC_FAILED); }, FailureClass::kFrameworkBug);
  EXPECT_EQ(oom.failure_class, FailureClass::kResource);
  EXPECT_EQ(oom.error_type, "CudaOutOfMemory");
  EXPECT_FALSE(oom.poisoned);
  CaseResult invalid = RunFailing([] { SC_CUBLAS_CHECK(CUBLAS_STATUS_INVALID_VALUE); }, FailureClass::kFrameworkBug);
  EXPECT_FALSE(invalid.poisoned);
}

TEST(CudaErrorMapping, OtherExceptionsAreLeftToTheWorker) {
  FailingCheck p([] { throw Error("gemm: RunContext without runtime info"); });
  EXPECT_THROW(RunCudaPhases(p, FailureClass::kFrameworkBug), Error);
  EXPECT_FALSE(ClassifyCudaError(std::runtime_error("x"), FailureClass::kFrameworkBug).has_value());
}

}  // namespace
}  // namespace servecast::cuda
