#include "collect/summary.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collect_test_util.h"
#include "core/fs.h"

namespace servecast::collect {
namespace {

using namespace servecast::collect::testing;

Case MakeCase(const std::string& op, std::int64_t m) {
  Case c;
  c.op = op;
  c.params = Params{{"gemm_dtype", std::string("bfloat16")}, {"m", m}, {"n", std::int64_t{8}}, {"k", std::int64_t{8}}};
  c.id = MakeCaseId(op, c.params);
  c.owner = "test";
  return c;
}

// A plan whose ops each have `n` final cases, m = 1..n.
Plan MakePlan(const std::vector<std::pair<std::string, int>>& ops) {
  Plan plan;
  plan.backend = "test";
  plan.plan_hash = std::string(64, 'c');
  for (const auto& [op, n] : ops) {
    plan.ops.push_back(op);
    StageCounts& c = plan.counts[op];
    c.raw = c.selected = c.after_skips = c.after_maturity = c.supported = c.after_shard = c.final = n;
    for (int i = 1; i <= n; ++i) {
      plan.cases.push_back(MakeCase(op, i));
      plan.supported.push_back(plan.cases.back());
    }
  }
  plan.supported_total = static_cast<std::int64_t>(plan.cases.size());
  return plan;
}

JournalRecord Passed(const Case& c, int rows = 1) {
  JournalRecord r;
  r.id = c.id;
  r.op = c.op;
  r.params = c.params;
  r.status = Disposition::kPassed;
  for (int i = 0; i < rows; ++i) r.rows.push_back(Params{{"latency", 1.0 + i}});
  return r;
}

JournalRecord Failed(const Case& c, Disposition d = Disposition::kFailed,
                     FailureClass cls = FailureClass::kFrameworkBug) {
  JournalRecord r;
  r.id = c.id;
  r.op = c.op;
  r.params = c.params;
  r.status = d;
  r.failure_class = cls;
  r.error_type = "SomeError";
  r.message = "it broke";
  r.worker = 0;
  return r;
}

JournalHeader Header() {
  JournalHeader h;
  h.backend = "test";
  h.version = "v1";
  h.device = "dev";
  h.arch = "arch";
  h.system = "sys";
  h.plan_hash = std::string(64, 'c');
  return h;
}

std::size_t Count(const std::map<std::string, std::size_t>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? 0 : it->second;
}

TEST(SummarizeTest, StatusesRowsErrorsAndCasesNotRun) {
  Plan plan = MakePlan({{"gemm", 4}});
  const auto& c = plan.cases;
  std::vector<JournalRecord> records = {Passed(c[0], 2),
                                        Failed(c[1], Disposition::kFailed, FailureClass::kCollectorBug),
                                        Failed(c[2], Disposition::kTimeout, FailureClass::kTimeout)};
  RunSummary s = Summarize(plan, records);
  const OpSummary& o = s.ops.at("gemm");
  EXPECT_EQ(Count(o.by_status, "passed"), 1u);
  EXPECT_EQ(Count(o.by_status, "failed"), 1u);
  EXPECT_EQ(Count(o.by_status, "timeout"), 1u);
  EXPECT_EQ(o.not_run, 1u);
  EXPECT_EQ(o.rows, 2u);
  ASSERT_EQ(o.errors.size(), 2u);
  EXPECT_EQ(o.errors[0]->id, c[1].id);
  EXPECT_EQ(o.errors[1]->id, c[2].id);
  EXPECT_EQ(Count(o.errors_by_class, "collector_bug"), 1u);
  EXPECT_EQ(Count(o.errors_by_class, "timeout"), 1u);
  EXPECT_TRUE(o.transient.empty());
  EXPECT_FALSE(o.zero_rows);
  EXPECT_EQ(s.failures, 3u);  // two errors and one case that never ran
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(o.stages.final, 4);
}

TEST(SummarizeTest, AllPassedIsOk) {
  Plan plan = MakePlan({{"gemm", 3}});
  std::vector<JournalRecord> records;
  for (const auto& c : plan.cases) records.push_back(Passed(c));
  RunSummary s = Summarize(plan, records);
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.failures, 0u);
  EXPECT_EQ(s.ops.at("gemm").rows, 3u);
  EXPECT_EQ(Count(s.ops.at("gemm").by_status, "passed"), 3u);
}

TEST(SummarizeTest, AFailureThatLaterPassedIsTransientNotAnError) {
  Plan plan = MakePlan({{"gemm", 2}});
  const auto& c = plan.cases;
  std::vector<JournalRecord> records = {Failed(c[0], Disposition::kCrashed, FailureClass::kResource), Passed(c[1]),
                                        Passed(c[0])};
  RunSummary s = Summarize(plan, records);
  const OpSummary& o = s.ops.at("gemm");
  EXPECT_EQ(Count(o.by_status, "passed"), 2u);
  EXPECT_EQ(Count(o.by_status, "crashed"), 0u);  // only the latest record of a case counts
  ASSERT_EQ(o.transient.size(), 1u);
  EXPECT_EQ(o.transient[0]->id, c[0].id);
  EXPECT_EQ(Count(o.errors_by_class, "transient"), 1u);
  EXPECT_TRUE(o.errors.empty());
  EXPECT_TRUE(s.ok());
}

TEST(SummarizeTest, APassThatLaterFailedIsAnError) {
  Plan plan = MakePlan({{"gemm", 1}});
  std::vector<JournalRecord> records = {Passed(plan.cases[0]), Failed(plan.cases[0])};
  RunSummary s = Summarize(plan, records);
  const OpSummary& o = s.ops.at("gemm");
  EXPECT_EQ(o.errors.size(), 1u);
  EXPECT_TRUE(o.transient.empty());
  EXPECT_EQ(o.rows, 0u);
  EXPECT_TRUE(o.zero_rows);
  EXPECT_EQ(s.failures, 2u);  // the error and the op without rows
}

TEST(SummarizeTest, APassRerunThatPassesAgainIsNeitherTransientNorAnError) {
  // --rerun-where appends a second passed record: the newest counts, once.
  Plan plan = MakePlan({{"gemm", 2}});
  const auto& c = plan.cases;
  RunSummary s = Summarize(plan, {Passed(c[0]), Passed(c[1]), Passed(c[1], 2)});
  const OpSummary& o = s.ops.at("gemm");
  EXPECT_EQ(Count(o.by_status, "passed"), 2u);
  EXPECT_EQ(o.rows, 3u);  // the newest record's rows only (1 + 2)
  EXPECT_TRUE(o.transient.empty());
  EXPECT_EQ(Count(o.errors_by_class, "transient"), 0u);
  EXPECT_TRUE(o.errors.empty());
  EXPECT_TRUE(s.ok());
}

TEST(SummarizeTest, APassRerunThatNowFailsIsAFailureAndPassingOnRetryIsTransient) {
  Plan plan = MakePlan({{"gemm", 2}});
  const auto& c = plan.cases;
  std::vector<JournalRecord> records = {Passed(c[0]), Passed(c[1]), Failed(c[1])};
  RunSummary s = Summarize(plan, records);
  const OpSummary& o = s.ops.at("gemm");
  EXPECT_EQ(Count(o.by_status, "passed"), 1u);
  EXPECT_EQ(Count(o.by_status, "failed"), 1u);
  ASSERT_EQ(o.errors.size(), 1u);
  EXPECT_EQ(o.errors[0]->id, c[1].id);
  EXPECT_TRUE(o.transient.empty());
  EXPECT_EQ(s.failures, 1u);
  // --retry-failed then passes it: the failure was transient.
  records.push_back(Passed(c[1]));
  s = Summarize(plan, records);
  EXPECT_TRUE(s.ok());
  ASSERT_EQ(s.ops.at("gemm").transient.size(), 1u);
  EXPECT_EQ(s.ops.at("gemm").transient[0]->id, c[1].id);
}

TEST(SummarizeTest, ATransientCaseStaysTransientWhenARerunPassesItAgain) {
  // failed, passed on retry, passed again in a rerun: its history still holds the
  // failure, so the ledger keeps it as transient (never as an error).
  Plan plan = MakePlan({{"gemm", 1}});
  const auto& c = plan.cases;
  RunSummary s =
      Summarize(plan, {Failed(c[0], Disposition::kTimeout, FailureClass::kTimeout), Passed(c[0]), Passed(c[0])});
  const OpSummary& o = s.ops.at("gemm");
  EXPECT_EQ(o.transient.size(), 1u);
  EXPECT_TRUE(o.errors.empty());
  EXPECT_TRUE(s.ok());
}

TEST(SummarizeTest, PlanTimeDropsAndCapacitySkipsAreCountedWithReasons) {
  Plan plan = MakePlan({{"gemm", 2}});
  plan.dropped.push_back({MakeCase("gemm", 10), "skips", "kernel rejects it (source: issue 1)"});
  plan.dropped.push_back({MakeCase("gemm", 11), "skips", "kernel rejects it (source: issue 1)"});
  plan.dropped.push_back({MakeCase("gemm", 12), "maturity", "op 'gemm' is marked unverified"});
  plan.dropped.push_back({MakeCase("gemm", 13), "requirements", "requires testlib >= 2.0; found 1.5"});
  JournalRecord capacity = Failed(plan.cases[1], Disposition::kSkipped, FailureClass::kNone);
  capacity.error_type = "capacity";
  capacity.message = "needs 96 GiB";
  RunSummary s = Summarize(plan, {Passed(plan.cases[0]), capacity});
  const OpSummary& o = s.ops.at("gemm");
  EXPECT_EQ(Count(o.by_status, "skipped"), 4u);
  EXPECT_EQ(Count(o.by_status, "not_supported"), 1u);
  EXPECT_EQ(Count(o.skipped_by_reason, "skips: kernel rejects it (source: issue 1)"), 2u);
  EXPECT_EQ(Count(o.skipped_by_reason, "maturity: op 'gemm' is marked unverified"), 1u);
  EXPECT_EQ(Count(o.skipped_by_reason, "not_supported: requires testlib >= 2.0; found 1.5"), 1u);
  EXPECT_EQ(Count(o.skipped_by_reason, "capacity: needs 96 GiB"), 1u);
  EXPECT_TRUE(o.errors.empty());
  EXPECT_TRUE(s.ok());
}

TEST(SummarizeTest, PlannedOpWithoutRowsIsAFailure) {
  Plan plan = MakePlan({{"gemm", 2}, {"norm", 2}});
  std::vector<JournalRecord> records = {Passed(plan.cases[0]), Passed(plan.cases[1]),
                                        Failed(plan.cases[2], Disposition::kIncorrect, FailureClass::kCollectorBug),
                                        Failed(plan.cases[3], Disposition::kIncorrect, FailureClass::kCollectorBug)};
  RunSummary s = Summarize(plan, records);
  EXPECT_FALSE(s.ops.at("gemm").zero_rows);
  EXPECT_TRUE(s.ops.at("norm").zero_rows);
  EXPECT_EQ(s.failures, 3u);
}

TEST(SummarizeTest, AShardThatReceivedNoCasesOfAnOpIsNotAZeroRowsFailure) {
  Plan plan = MakePlan({{"gemm", 1}});
  plan.ops.push_back("norm");
  StageCounts& n = plan.counts["norm"];
  n.raw = n.selected = n.after_skips = n.after_maturity = n.supported = 1;
  n.after_shard = n.final = 0;  // its only case went to another shard
  RunSummary s = Summarize(plan, {Passed(plan.cases[0])});
  EXPECT_FALSE(s.ops.at("norm").zero_rows);
  EXPECT_TRUE(s.ok());
}

TEST(SummarizeTest, AnOpWhosePlanDroppedEveryCaseIsNotAZeroRowsFailure) {
  // A 2-GPU op on a run with one --gpus entry: every case dropped at plan time with
  // its reason; nothing of it was planned, so no rows is not a failure.
  Plan plan = MakePlan({{"gemm", 1}});
  plan.ops.push_back("allreduce");
  StageCounts& a = plan.counts["allreduce"];
  a.raw = a.selected = a.after_skips = a.after_maturity = 2;
  a.supported = a.after_shard = a.final = 0;
  plan.dropped.push_back({MakeCase("allreduce", 1), "requirements", "needs 2 GPUs; this run has 1 (--gpus)"});
  plan.dropped.push_back({MakeCase("allreduce", 2), "requirements", "needs 2 GPUs; this run has 1 (--gpus)"});
  RunSummary s = Summarize(plan, {Passed(plan.cases[0])});
  const OpSummary& o = s.ops.at("allreduce");
  EXPECT_FALSE(o.zero_rows);
  EXPECT_EQ(Count(o.by_status, "not_supported"), 2u);
  EXPECT_EQ(Count(o.skipped_by_reason, "not_supported: needs 2 GPUs; this run has 1 (--gpus)"), 2u);
  EXPECT_TRUE(s.ok());
}

// The first line of `text` containing `needle` (empty when none).
std::string LineWith(const std::string& text, const std::string& needle) {
  std::size_t at = text.find(needle);
  if (at == std::string::npos) return "";
  std::size_t start = text.rfind('\n', at);
  start = start == std::string::npos ? 0 : start + 1;
  return text.substr(start, text.find('\n', at) - start);
}

class WriteSummaryTest : public ::testing::Test {
 protected:
  Json ReadSummary() { return Json::parse(ReadFile(dir_.File("collection_summary_test.json"))); }
  TempDir dir_;
};

TEST_F(WriteSummaryTest, FiveFailuresOfOneClassAreSystemic) {
  Plan plan = MakePlan({{"gemm", 6}, {"norm", 4}});
  std::vector<JournalRecord> records;
  for (int i = 0; i < 5; ++i) records.push_back(Failed(plan.cases[i]));  // gemm: 5 framework_bug
  records.push_back(Passed(plan.cases[5]));
  for (int i = 6; i < 10; ++i) records.push_back(Failed(plan.cases[i], Disposition::kFailed, FailureClass::kResource));
  RunSummary s = Summarize(plan, records);
  WriteSummaryFiles(dir_.path(), Header(), plan, s, Json{{"exit_code", 1}});

  Json doc = ReadSummary();
  const Json& summary = doc["summary"];
  ASSERT_EQ(summary["systemic"].size(), 1u) << doc.dump(2);
  EXPECT_EQ(summary["systemic"][0]["op"], "gemm");
  EXPECT_EQ(summary["systemic"][0]["class"], "framework_bug");
  EXPECT_EQ(summary["systemic"][0]["count"], 5);
  EXPECT_EQ(summary["planned"], 10);
  EXPECT_EQ(summary["failures"], s.failures);
  EXPECT_EQ(summary["plan_hash"], "sha256:" + std::string(64, 'c'));
  EXPECT_EQ(summary["backend"], "test");
  EXPECT_EQ(summary["exit_code"], 1);  // extra keys join the summary
  EXPECT_EQ(doc["ops"]["gemm"]["cases"]["failed"], 5);
  EXPECT_EQ(doc["ops"]["gemm"]["errors_by_class"]["framework_bug"], 5);
  EXPECT_EQ(doc["ops"]["norm"]["errors_by_class"]["resource"], 4);  // four is not systemic
  EXPECT_EQ(doc["ops"]["norm"]["zero_rows"], true);
  EXPECT_EQ(doc["errors"].size(), 9u);

  Json errs = Json::parse(ReadFile(dir_.File("errors_test.gemm.json")));
  ASSERT_EQ(errs.size(), 5u);
  EXPECT_EQ(errs[0]["case_id"], plan.cases[0].id);
  EXPECT_EQ(errs[0]["classification"], "framework_bug");
  EXPECT_EQ(errs[0]["error_type"], "SomeError");
  EXPECT_EQ(errs[0]["message"], "it broke");
  EXPECT_TRUE(PathExists(dir_.File("errors_test.norm.json")));

  std::string text = FormatSummary(plan, s);
  std::string bug_line = LineWith(text, "framework_bug"), resource_line = LineWith(text, "resource");
  EXPECT_TRUE(HasText(bug_line, " 5  (systemic)"));
  EXPECT_TRUE(HasText(resource_line, " 4"));
  EXPECT_EQ(resource_line.find("systemic"), std::string::npos) << resource_line;
  EXPECT_TRUE(HasText(LineWith(text, "norm "), "planned but produced no rows"));
}

TEST_F(WriteSummaryTest, TransientFailuresAreNeverSystemic) {
  Plan plan = MakePlan({{"gemm", 5}});
  std::vector<JournalRecord> records;
  for (const auto& c : plan.cases) records.push_back(Failed(c, Disposition::kTimeout, FailureClass::kTimeout));
  for (const auto& c : plan.cases) records.push_back(Passed(c));
  RunSummary s = Summarize(plan, records);
  WriteSummaryFiles(dir_.path(), Header(), plan, s, Json::object());
  Json doc = ReadSummary();
  EXPECT_TRUE(doc["summary"]["systemic"].empty());
  EXPECT_EQ(doc["ops"]["gemm"]["errors_by_class"]["transient"], 5);
  Json errs = Json::parse(ReadFile(dir_.File("errors_test.gemm.json")));
  ASSERT_EQ(errs.size(), 5u);
  EXPECT_EQ(errs[0]["classification"], "transient");
}

TEST_F(WriteSummaryTest, StaleErrorFilesAreRemoved) {
  Plan plan = MakePlan({{"gemm", 1}});
  WriteSummaryFiles(dir_.path(), Header(), plan, Summarize(plan, {Failed(plan.cases[0])}), Json::object());
  ASSERT_TRUE(PathExists(dir_.File("errors_test.gemm.json")));
  WriteSummaryFiles(dir_.path(), Header(), plan, Summarize(plan, {Passed(plan.cases[0])}), Json::object());
  EXPECT_FALSE(PathExists(dir_.File("errors_test.gemm.json")));
  EXPECT_EQ(ReadSummary()["summary"]["failures"], 0);
}

}  // namespace
}  // namespace servecast::collect
