#include "collect/finalize.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "collect_test_util.h"
#include "core/build_info.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/table.h"

namespace servecast::collect {
namespace {

using namespace servecast::collect::testing;

// m = 1, 2, 10: sorting must be numeric (1, 2, 10), not textual (1, 10, 2).
const char* kSweep = R"(op: tgemm
sweeps:
  - backends: [test]
    fixed: {gemm_dtype: bfloat16, n: 8, k: 16}
    axes:
      m: [10, 1, 2]
)";

class FinalizeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cases_.BaseOp("tgemm.yaml", kSweep);
    opt_ = Options(cases_);
    plan_ = BuildPlan(*registry_, opt_, rt_);
    ASSERT_EQ(plan_.cases.size(), 3u);
  }

  const Case& CaseWithM(std::int64_t m) const {
    for (const auto& c : plan_.supported)
      if (c.params.Has("m") && c.params.Int("m") == m) return c;
    throw std::runtime_error("no case with m=" + std::to_string(m));
  }

  JournalHeader Header(int shard_index = 0, int shard_count = 1) const {
    JournalHeader h;
    h.backend = "test";
    h.version = rt_.version;
    h.device = rt_.device_name;
    h.arch = rt_.arch;
    h.sm = rt_.sm;
    h.system = "sysA";
    h.plan_hash = plan_.plan_hash;
    h.shard_index = shard_index;
    h.shard_count = shard_count;
    return h;
  }

  JournalRecord Pass(std::int64_t m, double latency, bool power = false) const {
    return PassCase(CaseWithM(m), "gemm_perf", latency, power);
  }

  // A passed record of case `c` with one row of `table`.
  JournalRecord PassCase(const Case& c, const char* table, double latency, bool power = false) const {
    JournalRecord r;
    r.id = c.id;
    r.op = c.op;
    r.params = c.params;
    r.status = Disposition::kPassed;
    TimingStats st;
    st.median_ms = latency;
    st.p10_ms = latency * 0.9;
    st.p90_ms = latency * 1.1;
    st.samples = 10;
    st.rsd = 0.005;
    st.method = "cpu";
    st.l2 = "warm";
    st.power_w = 300;
    st.power_limit_w = 700;
    r.rows.push_back(MakeRow(*FindTableSpec(table), rt_, c.op, "test:kernel", c.params, st, power));
    return r;
  }

  JournalRecord Fail(std::int64_t m) const {
    const Case& c = CaseWithM(m);
    JournalRecord r;
    r.id = c.id;
    r.op = c.op;
    r.params = c.params;
    r.status = Disposition::kFailed;
    r.failure_class = FailureClass::kFrameworkBug;
    r.error_type = "Boom";
    r.message = "failed";
    return r;
  }

  // A run dir with a journal of `records` and the plan file of `plan`.
  std::string RunDir(const std::string& name, const std::vector<JournalRecord>& records, const JournalHeader& header,
                     const Plan& plan, const PlanOptions& opt) {
    std::string dir = runs_.path() + "/" + name;
    MakeDirs(dir);
    {
      JournalWriter w = JournalWriter::Create(dir + "/journal.jsonl", header);
      for (const auto& r : records) w.Add(r);
      w.Commit();
    }
    WritePlanFile(dir + "/plan.jsonl", *registry_, plan, opt, plan.supported);
    return dir;
  }
  std::string RunDir(const std::string& name, const std::vector<JournalRecord>& records) {
    return RunDir(name, records, Header(), plan_, opt_);
  }

  std::string DataDir() const { return out_.path() + "/sysA/gemm/test/" + rt_.version; }
  std::string TablePath() const { return DataDir() + "/gemm_perf.csv"; }
  YAML::Node Meta() const { return YAML::LoadFile(DataDir() + "/collection_meta.yaml"); }

  double LatencyOf(const Table& t, std::int64_t m) const {
    for (std::size_t r = 0; r < t.num_rows(); ++r)
      if (t.GetInt(r, t.ColumnIndex("m")) == m) return t.GetDouble(r, t.ColumnIndex("latency"));
    ADD_FAILURE() << "no row with m=" << m;
    return -1;
  }

  CasesDir cases_;
  TempDir runs_, out_;
  std::unique_ptr<Registry> registry_ = MakeRegistry(std::vector<std::string>{"tgemm"});
  RuntimeInfo rt_ = TestRuntime();
  PlanOptions opt_;
  Plan plan_;
};

TEST_F(FinalizeTest, WritesTheTableSortedWithAllColumnsAndCompleteMeta) {
  std::string run = RunDir("run1", {Pass(10, 3.0), Pass(1, 1.0), Pass(2, 2.0)});
  FinalizeResult res = Finalize({run}, out_.path());
  EXPECT_EQ(res.data_dir, out_.path() + "/sysA");
  ASSERT_EQ(res.tables.count("gemm_perf"), 1u);
  const TableOutcome& o = res.tables.at("gemm_perf");
  EXPECT_EQ(o.path, TablePath());
  EXPECT_EQ(o.rows_before, 0u);
  EXPECT_EQ(o.rows_added, 3u);
  EXPECT_EQ(o.rows_after, 3u);
  EXPECT_EQ(o.planned, 3u);
  EXPECT_EQ(o.missing, 0u);
  EXPECT_EQ(o.status, "complete");

  Table t = Table::ReadCsv(TablePath());
  std::vector<std::string> names, want;
  for (const auto& c : t.columns()) names.push_back(c.name);
  for (const auto& c : FindTableSpec("gemm_perf")->AllColumns(false)) want.push_back(c.name);
  EXPECT_EQ(names, want);
  ASSERT_EQ(t.num_rows(), 3u);
  std::size_t m = t.ColumnIndex("m");
  EXPECT_EQ(t.GetInt(0, m), 1);
  EXPECT_EQ(t.GetInt(1, m), 2);
  EXPECT_EQ(t.GetInt(2, m), 10);
  EXPECT_DOUBLE_EQ(LatencyOf(t, 10), 3.0);
  EXPECT_EQ(t.GetString(0, t.ColumnIndex("op_name")), "tgemm");
  EXPECT_EQ(t.GetString(0, t.ColumnIndex("framework")), "test");

  YAML::Node meta = Meta();
  EXPECT_EQ(meta["backend"].as<std::string>(), "test");
  EXPECT_EQ(meta["backend_version"].as<std::string>(), rt_.version);
  EXPECT_EQ(meta["device"].as<std::string>(), "Test Device");
  EXPECT_EQ(meta["system"].as<std::string>(), "sysA");
  YAML::Node tm = meta["tables"]["gemm_perf"];
  EXPECT_EQ(tm["status"].as<std::string>(), "complete");
  EXPECT_EQ(tm["planned"].as<int>(), 3);
  EXPECT_EQ(tm["rows"].as<int>(), 3);
  EXPECT_EQ(tm["missing"].as<int>(), 0);
  EXPECT_EQ(tm["cases"]["passed"].as<int>(), 3);
  EXPECT_EQ(tm["plan_hash"].as<std::string>(), "sha256:" + plan_.plan_hash);
  EXPECT_EQ(tm["selection"].as<std::string>(), "full");
  EXPECT_EQ(tm["shards"].as<std::string>(), "1/1");
  EXPECT_EQ(tm["file"].as<std::string>(), "gemm_perf.csv");
  EXPECT_FALSE(tm["note"].IsDefined());
}

// The rows timed while throttled, and their share of the written table, are in
// the meta (issue 28 item 10: 68% of the bundled GEMM rows are flagged).
TEST_F(FinalizeTest, MetaCountsThrottledRowsAndTheirShare) {
  JournalRecord hot = Pass(2, 2.0);
  hot.rows[0].Set("throttled", std::int64_t{1});
  std::string run = RunDir("run1", {Pass(10, 3.0), Pass(1, 1.0), hot});
  FinalizeResult res = Finalize({run}, out_.path());
  EXPECT_EQ(res.tables.at("gemm_perf").throttled_rows, 1u);
  YAML::Node tm = Meta()["tables"]["gemm_perf"];
  EXPECT_EQ(tm["throttled_rows"].as<int>(), 1);
  EXPECT_DOUBLE_EQ(tm["throttled_share"].as<double>(), 0.333);
  // Written as the rounded value reads, not yaml-cpp's 17 digits (0.33300000000000002).
  const std::string text = ReadFile(DataDir() + "/collection_meta.yaml");
  EXPECT_NE(text.find("throttled_share: 0.333\n"), std::string::npos) << text;
  // Re-measured unthrottled: the share follows the written table.
  std::string again = RunDir("run2", {Pass(2, 2.0)});
  Finalize({again}, out_.path());
  EXPECT_EQ(Meta()["tables"]["gemm_perf"]["throttled_rows"].as<int>(), 0);
  EXPECT_DOUBLE_EQ(Meta()["tables"]["gemm_perf"]["throttled_share"].as<double>(), 0);
}

// A resumed run names the collector of every row: the commit of each call that
// wrote the newest records (journal session lines; for journals from before
// them, the calls collector.log names), not the commit that finalizes.
TEST_F(FinalizeTest, EachCallsCommitIsNamedWithItsRows) {
  JournalHeader h = Header();
  h.servecast_commit = "aaaaaaaaaaaa";
  h.created_at = "2026-12-01T06:00:00Z";
  auto at = [](JournalRecord r, const char* t) {
    r.at = t;
    return r;
  };
  const std::string dir = runs_.path() + "/resumed";
  MakeDirs(dir);
  {
    JournalWriter w = JournalWriter::Create(dir + "/journal.jsonl", h);
    w.Add(at(Pass(1, 1.0), "2026-12-01T06:00:01Z"));
    w.Add(at(Pass(2, 2.0), "2026-12-01T06:00:02Z"));
    w.Add(at(Pass(10, 3.0), "2026-12-01T06:00:03Z"));
    w.AddSession({"bbbbbbbbbbbb", "2026-12-01T07:00:00Z"});
    w.Add(at(Pass(2, 2.5), "2026-12-01T07:00:05Z"));  // re-measured by the second call
    w.Commit();
  }
  WritePlanFile(dir + "/plan.jsonl", *registry_, plan_, opt_, plan_.supported);
  const JournalContents jc = ReadJournal(dir + "/journal.jsonl");
  ASSERT_EQ(jc.sessions.size(), 2u);
  EXPECT_EQ(SessionOf(jc.sessions, "2026-12-01T06:59:59Z").servecast_commit, "aaaaaaaaaaaa");
  EXPECT_EQ(SessionOf(jc.sessions, "2026-12-01T07:00:00Z").servecast_commit, "bbbbbbbbbbbb");

  Finalize({dir}, out_.path());
  YAML::Node t = Meta()["tables"]["gemm_perf"];
  EXPECT_EQ(t["collector_commit"].as<std::string>(), "bbbbbbbbbbbb");  // the newest rows' collector
  EXPECT_EQ(t["collected_at"].as<std::string>(), "2026-12-01T07:00:05Z");
  ASSERT_TRUE(t["collected_by"].IsSequence());
  ASSERT_EQ(t["collected_by"].size(), 2u);
  EXPECT_EQ(t["collected_by"][0]["commit"].as<std::string>(), "aaaaaaaaaaaa");
  EXPECT_EQ(t["collected_by"][0]["rows"].as<int>(), 2);
  EXPECT_EQ(t["collected_by"][1]["commit"].as<std::string>(), "bbbbbbbbbbbb");
  EXPECT_EQ(t["collected_by"][1]["rows"].as<int>(), 1);
  EXPECT_EQ(t["finalized_by"].as<std::string>(), std::string(BuildCommit()));

  // The same journal without its session line: collector.log's call lines stand in.
  const std::string old = runs_.path() + "/old";
  MakeDirs(old);
  {
    JournalWriter w = JournalWriter::Create(old + "/journal.jsonl", h);
    w.Add(at(Pass(1, 1.0), "2026-12-01T06:00:01Z"));
    w.Add(at(Pass(2, 2.5), "2026-12-01T07:00:05Z"));
    w.Add(at(Pass(10, 3.0), "2026-12-01T06:00:03Z"));
    w.Commit();
  }
  WritePlanFile(old + "/plan.jsonl", *registry_, plan_, opt_, plan_.supported);
  WriteFileAtomic(old + "/collector.log",
            "2026-12-01T06:00:00Z info: servecast 0.1.0 (aaaaaaaaaaaa) collect: backend test on x, system sysA\n"
            "2026-12-01T06:00:09Z info: resume: nothing\n"
            "2026-12-01T07:00:00Z info: servecast 0.1.0 (cccccccccccc) collect: backend test on x, system sysA\n");
  TempDir out2;
  Finalize({old}, out2.path());
  YAML::Node t2 = YAML::LoadFile(out2.path() + "/sysA/gemm/test/" + rt_.version + "/collection_meta.yaml")["tables"]["gemm_perf"];
  EXPECT_EQ(t2["collector_commit"].as<std::string>(), "cccccccccccc");
  ASSERT_EQ(t2["collected_by"].size(), 2u);
  EXPECT_EQ(t2["collected_by"][1]["rows"].as<int>(), 1);
}

TEST_F(FinalizeTest, MissingCasesMakeThePartialStatusWithCounts) {
  std::string run = RunDir("run1", {Pass(1, 1.0), Fail(2)});
  FinalizeResult res = Finalize({run}, out_.path());
  const TableOutcome& o = res.tables.at("gemm_perf");
  EXPECT_EQ(o.rows_after, 1u);
  EXPECT_EQ(o.missing, 2u);
  EXPECT_EQ(o.status, "partial");
  YAML::Node tm = Meta()["tables"]["gemm_perf"];
  EXPECT_EQ(tm["status"].as<std::string>(), "partial");
  EXPECT_EQ(tm["planned"].as<int>(), 3);
  EXPECT_EQ(tm["rows"].as<int>(), 1);
  EXPECT_EQ(tm["missing"].as<int>(), 2);
  EXPECT_EQ(tm["cases"]["passed"].as<int>(), 1);
  EXPECT_EQ(tm["cases"]["failed"].as<int>(), 1);
}

TEST_F(FinalizeTest, TheNewestRecordOfACaseWinsWithinAJournal) {
  std::string run = RunDir("run1", {Pass(1, 5.0), Pass(2, 2.0), Pass(10, 3.0), Pass(1, 1.5)});
  Finalize({run}, out_.path());
  Table t = Table::ReadCsv(TablePath());
  EXPECT_EQ(t.num_rows(), 3u);
  EXPECT_DOUBLE_EQ(LatencyOf(t, 1), 1.5);
}

TEST_F(FinalizeTest, ASecondFinalizeMergesAndItsRowsWin) {
  Finalize({RunDir("run1", {Pass(1, 1.0), Pass(2, 2.0), Pass(10, 3.0)})}, out_.path());
  FinalizeResult res = Finalize({RunDir("run2", {Pass(1, 9.0)})}, out_.path());
  const TableOutcome& o = res.tables.at("gemm_perf");
  EXPECT_EQ(o.rows_before, 3u);
  EXPECT_EQ(o.rows_added, 1u);
  EXPECT_EQ(o.rows_after, 3u);
  EXPECT_EQ(o.status, "complete");  // the older rows still cover the plan
  Table t = Table::ReadCsv(TablePath());
  ASSERT_EQ(t.num_rows(), 3u);
  EXPECT_DOUBLE_EQ(LatencyOf(t, 1), 9.0);
  EXPECT_DOUBLE_EQ(LatencyOf(t, 2), 2.0);
  EXPECT_DOUBLE_EQ(LatencyOf(t, 10), 3.0);
  std::size_t m = t.ColumnIndex("m");
  EXPECT_EQ(t.GetInt(0, m), 1);
  EXPECT_EQ(t.GetInt(2, m), 10);
  EXPECT_EQ(Meta()["tables"]["gemm_perf"]["rows"].as<int>(), 3);
  // Only the table and its provenance are in the data dir (atomic writes leave no temp files).
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(DataDir())) files.push_back(e.path().filename());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"collection_meta.yaml", "gemm_perf.csv"}));
}

// A table grown by a run of another plan keeps the earlier run's provenance under
// earlier_runs (plan, collector commit, counts), and a run of the same plan (a resume,
// a rerun) adds no entry; the note of a narrowed run goes with the run that wrote it.
TEST_F(FinalizeTest, AnotherPlansRunKeepsTheEarlierRunsProvenance) {
  JournalHeader first = Header();
  first.plan_hash = std::string(64, 'a');
  Finalize({RunDir("run1", {Pass(1, 1.0), Pass(2, 2.0), Pass(10, 3.0)}, first, plan_, opt_)}, out_.path());
  YAML::Node t = Meta()["tables"]["gemm_perf"];
  EXPECT_FALSE(t["earlier_runs"].IsDefined());
  const std::string first_commit = t["collector_commit"].as<std::string>();
  const std::string first_at = t["collected_at"].as<std::string>();

  JournalHeader second = Header();
  second.plan_hash = std::string(64, 'b');
  Finalize({RunDir("run2", {Pass(1, 9.0)}, second, plan_, opt_)}, out_.path());
  t = Meta()["tables"]["gemm_perf"];
  EXPECT_EQ(t["plan_hash"].as<std::string>(), "sha256:" + std::string(64, 'b'));
  ASSERT_TRUE(t["earlier_runs"].IsSequence());
  ASSERT_EQ(t["earlier_runs"].size(), 1u);
  EXPECT_EQ(t["earlier_runs"][0]["plan_hash"].as<std::string>(), "sha256:" + std::string(64, 'a'));
  EXPECT_EQ(t["earlier_runs"][0]["collector_commit"].as<std::string>(), first_commit);
  EXPECT_EQ(t["earlier_runs"][0]["collected_at"].as<std::string>(), first_at);
  EXPECT_EQ(t["earlier_runs"][0]["rows"].as<int>(), 3);
  EXPECT_EQ(t["earlier_runs"][0]["status"].as<std::string>(), "complete");

  // The same plan again: no second entry; a third plan appends after the first.
  Finalize({RunDir("run2b", {Pass(2, 8.0)}, second, plan_, opt_)}, out_.path());
  EXPECT_EQ(Meta()["tables"]["gemm_perf"]["earlier_runs"].size(), 1u);
  JournalHeader third = Header();
  third.plan_hash = std::string(64, 'c');
  Finalize({RunDir("run3", {Pass(10, 7.0)}, third, plan_, opt_)}, out_.path());
  t = Meta()["tables"]["gemm_perf"];
  ASSERT_EQ(t["earlier_runs"].size(), 2u);
  EXPECT_EQ(t["earlier_runs"][1]["plan_hash"].as<std::string>(), "sha256:" + std::string(64, 'b'));
}

TEST_F(FinalizeTest, ARerunRecordsItsExpressionAndCountUntilTheNextWrite) {
  // A finished run, then a --rerun-where invocation that re-ran m=2 and m=10: the
  // newest records win, the table stays complete, and the meta names the rerun.
  std::string run = RunDir("run1", {Pass(1, 1.0), Pass(2, 2.0), Pass(10, 3.0)});
  Finalize({run}, out_.path());
  {
    JournalWriter w = JournalWriter::Append(run + "/journal.jsonl", ReadJournal(run + "/journal.jsonl").valid_bytes);
    w.Add(Pass(2, 20.0));
    w.Add(Pass(10, 30.0));
    w.Commit();
  }
  RerunProvenance rerun{"m >= 2", {CaseWithM(2).id, CaseWithM(10).id}, "2026-11-30T09:38:40Z", {}};
  FinalizeResult res = Finalize({run}, out_.path(), "csv", &rerun);
  const TableOutcome& o = res.tables.at("gemm_perf");
  EXPECT_EQ(o.rerun_cases, 2u);
  EXPECT_EQ(o.rerun_pending, 0u);
  EXPECT_EQ(o.status, "complete");
  Table t = Table::ReadCsv(TablePath());
  ASSERT_EQ(t.num_rows(), 3u);
  EXPECT_DOUBLE_EQ(LatencyOf(t, 1), 1.0);
  EXPECT_DOUBLE_EQ(LatencyOf(t, 2), 20.0);
  EXPECT_DOUBLE_EQ(LatencyOf(t, 10), 30.0);
  YAML::Node tm = Meta()["tables"]["gemm_perf"];
  EXPECT_EQ(tm["rerun_where"].as<std::string>(), "m >= 2");
  EXPECT_EQ(tm["rerun_before"].as<std::string>(), "2026-11-30T09:38:40Z");
  EXPECT_EQ(tm["rerun_cases"].as<int>(), 2);
  EXPECT_FALSE(tm["rerun_pending"].IsDefined());  // it finished: nothing pending
  EXPECT_EQ(tm["status"].as<std::string>(), "complete");
  EXPECT_EQ(tm["selection"].as<std::string>(), "full");
  EXPECT_EQ(tm["planned"].as<int>(), 3);
  EXPECT_EQ(tm["cases"]["passed"].as<int>(), 3);  // cases, not records
  EXPECT_FALSE(tm["note"].IsDefined());

  // The entry describes the latest write: a rerun without --rerun-before drops
  // that field, a finalize without a rerun all of them.
  // An interrupted one (m=2 re-run, m=10 not reached) also counts the pending case.
  RerunProvenance unbounded{"m >= 2", {CaseWithM(2).id}, "", {CaseWithM(10).id}};
  res = Finalize({run}, out_.path(), "csv", &unbounded);
  EXPECT_EQ(res.tables.at("gemm_perf").rerun_cases, 1u);
  EXPECT_EQ(res.tables.at("gemm_perf").rerun_pending, 1u);
  tm = Meta()["tables"]["gemm_perf"];
  EXPECT_EQ(tm["rerun_where"].as<std::string>(), "m >= 2");
  EXPECT_FALSE(tm["rerun_before"].IsDefined());
  EXPECT_EQ(tm["rerun_cases"].as<int>(), 1);
  EXPECT_EQ(tm["rerun_pending"].as<int>(), 1);
  // The call that finishes it leaves nothing pending; a finalize without a rerun
  // removes every rerun field.
  Finalize({run}, out_.path(), "csv", &rerun);
  EXPECT_FALSE(Meta()["tables"]["gemm_perf"]["rerun_pending"].IsDefined());
  Finalize({run}, out_.path(), "csv", &unbounded);
  Finalize({run}, out_.path());
  tm = Meta()["tables"]["gemm_perf"];
  EXPECT_FALSE(tm["rerun_where"].IsDefined());
  EXPECT_FALSE(tm["rerun_before"].IsDefined());
  EXPECT_FALSE(tm["rerun_cases"].IsDefined());
  EXPECT_FALSE(tm["rerun_pending"].IsDefined());
  EXPECT_EQ(tm["status"].as<std::string>(), "complete");
}

TEST_F(FinalizeTest, ARerunThatSelectedNoCaseOfTheTableRecordsNothing) {
  std::string run = RunDir("run1", {Pass(1, 1.0), Pass(2, 2.0), Pass(10, 3.0)});
  RerunProvenance rerun{"m > 100", {}, "", {}};
  FinalizeResult res = Finalize({run}, out_.path(), "csv", &rerun);
  EXPECT_EQ(res.tables.at("gemm_perf").rerun_cases, 0u);
  EXPECT_EQ(res.tables.at("gemm_perf").rerun_pending, 0u);
  EXPECT_FALSE(Meta()["tables"]["gemm_perf"]["rerun_where"].IsDefined());
  EXPECT_FALSE(Meta()["tables"]["gemm_perf"]["rerun_pending"].IsDefined());
}

// An RMSNorm-shaped op writing elementwise_perf (keys dtype, num_tokens,
// hidden_size); it never runs.
class TestNormOp : public Op {
 public:
  std::string name() const override { return "rmsnorm"; }
  const TableSpec& table() const override { return *FindTableSpec("elementwise_perf"); }
  std::vector<std::string> required_params() const override { return {"dtype", "num_tokens", "hidden_size"}; }
  CaseResult Run(const Case&, const RunContext&) override {
    return CaseResult::Failure(Disposition::kFailed, FailureClass::kCollectorBug, "TestNormOp", "test ops do not run");
  }
};

TEST_F(FinalizeTest, AnInterruptedRerunCountsItsPendingCasesPerTable) {
  // Two tables: three GEMMs (gemm_perf) and two RMSNorms (elementwise_perf), all
  // passed. A rerun selected all five and was interrupted after re-running GEMM
  // m=2: GEMMs m=1 and m=10 and both RMSNorms are pending.
  std::vector<std::unique_ptr<Op>> ops;
  ops.push_back(std::make_unique<TestOp>("tgemm"));
  ops.push_back(std::make_unique<TestNormOp>());
  registry_ = MakeRegistry(std::move(ops));
  cases_.BaseOp("rmsnorm.yaml",
                "op: rmsnorm\nsweeps:\n  - backends: [test]\n    fixed: {dtype: float32, hidden_size: 1024}\n"
                "    axes:\n      num_tokens: [1, 16]\n");
  opt_ = Options(cases_);
  plan_ = BuildPlan(*registry_, opt_, rt_);
  ASSERT_EQ(plan_.cases.size(), 5u);
  std::vector<JournalRecord> records = {Pass(1, 1.0), Pass(2, 2.0), Pass(10, 3.0)};
  std::set<std::string> norm_ids;
  for (const auto& c : plan_.supported) {
    if (c.op != "rmsnorm") continue;
    records.push_back(PassCase(c, "elementwise_perf", 0.5));
    norm_ids.insert(c.id);
  }
  ASSERT_EQ(norm_ids.size(), 2u);
  std::string run = RunDir("run1", records);
  Finalize({run}, out_.path());
  {
    JournalWriter w = JournalWriter::Append(run + "/journal.jsonl", ReadJournal(run + "/journal.jsonl").valid_bytes);
    w.Add(Pass(2, 20.0));
    w.Commit();
  }
  std::set<std::string> pending = norm_ids;
  pending.insert(CaseWithM(10).id);
  pending.insert(CaseWithM(1).id);
  RerunProvenance rerun{"true", {CaseWithM(2).id}, "2026-11-30T09:38:40Z", pending};
  FinalizeResult res = Finalize({run}, out_.path(), "csv", &rerun);
  EXPECT_EQ(res.tables.at("gemm_perf").rerun_cases, 1u);
  EXPECT_EQ(res.tables.at("gemm_perf").rerun_pending, 2u);
  EXPECT_EQ(res.tables.at("elementwise_perf").rerun_cases, 0u);
  EXPECT_EQ(res.tables.at("elementwise_perf").rerun_pending, 2u);
  YAML::Node gm = Meta()["tables"]["gemm_perf"];
  EXPECT_EQ(gm["rerun_where"].as<std::string>(), "true");
  EXPECT_EQ(gm["rerun_cases"].as<int>(), 1);
  EXPECT_EQ(gm["rerun_pending"].as<int>(), 2);
  // None of the RMSNorms re-run yet: the entry still names the rerun, with
  // rerun_cases 0, so that it is not read as a table the rerun left alone.
  const std::string norm_meta = out_.path() + "/sysA/elementwise/test/" + rt_.version + "/collection_meta.yaml";
  YAML::Node nm = YAML::LoadFile(norm_meta)["tables"]["elementwise_perf"];
  EXPECT_EQ(nm["rerun_where"].as<std::string>(), "true");
  EXPECT_EQ(nm["rerun_before"].as<std::string>(), "2026-11-30T09:38:40Z");
  EXPECT_EQ(nm["rerun_cases"].as<int>(), 0);
  EXPECT_EQ(nm["rerun_pending"].as<int>(), 2);

  // The continuing call re-runs the four pending cases and finishes: nothing is
  // pending in either table.
  {
    JournalWriter w = JournalWriter::Append(run + "/journal.jsonl", ReadJournal(run + "/journal.jsonl").valid_bytes);
    w.Add(Pass(1, 10.0));
    w.Add(Pass(10, 30.0));
    for (const auto& r : records)
      if (norm_ids.count(r.id)) w.Add(r);
    w.Commit();
  }
  RerunProvenance rest{"true", pending, "2026-11-30T09:38:40Z", {}};
  res = Finalize({run}, out_.path(), "csv", &rest);
  EXPECT_EQ(res.tables.at("gemm_perf").rerun_pending, 0u);
  EXPECT_EQ(res.tables.at("elementwise_perf").rerun_pending, 0u);
  gm = Meta()["tables"]["gemm_perf"];
  EXPECT_EQ(gm["rerun_cases"].as<int>(), 2);
  EXPECT_FALSE(gm["rerun_pending"].IsDefined());
  nm = YAML::LoadFile(norm_meta)["tables"]["elementwise_perf"];
  EXPECT_EQ(nm["rerun_cases"].as<int>(), 2);
  EXPECT_FALSE(nm["rerun_pending"].IsDefined());
}

TEST_F(FinalizeTest, ARowWhoseCaseNowFailsIsKeptWithAWarning) {
  // A passed case re-run that now fails: the table keeps the earlier row (finalize
  // never deletes data) and says so; the meta counts the case as failed.
  std::string run = RunDir("run1", {Pass(1, 1.0), Pass(2, 2.0), Pass(10, 3.0)});
  Finalize({run}, out_.path());
  {
    JournalWriter w = JournalWriter::Append(run + "/journal.jsonl", ReadJournal(run + "/journal.jsonl").valid_bytes);
    w.Add(Fail(2));
    w.Commit();
  }
  ::testing::internal::CaptureStderr();
  FinalizeResult res = Finalize({run}, out_.path());
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(HasText(err, "gemm_perf: 1 row(s) kept from the existing table")) << err;
  EXPECT_TRUE(HasText(err, CaseWithM(2).id + ": failed")) << err;
  const TableOutcome& o = res.tables.at("gemm_perf");
  EXPECT_EQ(o.rows_after, 3u);
  EXPECT_EQ(o.stale_rows, 1u);
  EXPECT_EQ(o.stale_example, CaseWithM(2).id + ": failed");
  YAML::Node tm = Meta()["tables"]["gemm_perf"];
  EXPECT_EQ(tm["cases"]["passed"].as<int>(), 2);
  EXPECT_EQ(tm["cases"]["failed"].as<int>(), 1);
  // The meta names the kept row, not only the log.
  EXPECT_EQ(tm["stale_rows"].as<int>(), 1);
  EXPECT_EQ(tm["stale_example"].as<std::string>(), CaseWithM(2).id + ": failed");

  // The fields describe the table as written: a later write that finds the case
  // passed again drops them.
  {
    JournalWriter w = JournalWriter::Append(run + "/journal.jsonl", ReadJournal(run + "/journal.jsonl").valid_bytes);
    w.Add(Pass(2, 4.0));
    w.Commit();
  }
  res = Finalize({run}, out_.path());
  EXPECT_EQ(res.tables.at("gemm_perf").stale_rows, 0u);
  EXPECT_EQ(res.tables.at("gemm_perf").stale_example, "");
  tm = Meta()["tables"]["gemm_perf"];
  EXPECT_FALSE(tm["stale_rows"].IsDefined());
  EXPECT_FALSE(tm["stale_example"].IsDefined());
  EXPECT_EQ(tm["cases"]["passed"].as<int>(), 3);
}

TEST_F(FinalizeTest, SecondFinalizeKeepsTextColumnsThatLookNumeric) {
  rt_.version = "12.0";  // a library stack version that happens to parse as a number
  std::string run1 = RunDir("run1", {Pass(1, 1.0), Pass(2, 2.0), Pass(10, 3.0)});
  Finalize({run1}, out_.path());
  Finalize({RunDir("run2", {Pass(1, 9.0)})}, out_.path());
  std::string text = ReadFile(TablePath());
  std::istringstream lines(text);
  std::string line;
  std::getline(lines, line);  // header
  std::size_t rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
    EXPECT_EQ(line.rfind("test,12.0,", 0), 0u) << "version changed in:\n" << text;
  }
  EXPECT_EQ(rows, 3u);
}

TEST_F(FinalizeTest, PowerColumnsThatDifferFromTheExistingTableAreADataError) {
  Finalize({RunDir("run1", {Pass(1, 1.0, true), Pass(2, 2.0, true)})}, out_.path());
  Table t = Table::ReadCsv(TablePath());
  ASSERT_TRUE(t.FindColumn("power").has_value());
  EXPECT_DOUBLE_EQ(t.GetDouble(0, t.ColumnIndex("power")), 300);
  std::string before = ReadFile(TablePath());

  std::string run2 = RunDir("run2", {Pass(10, 3.0, false)});
  std::string msg = ThrownMessage<DataError>([&] { Finalize({run2}, out_.path()); });
  EXPECT_TRUE(HasText(msg, TablePath()));
  EXPECT_TRUE(HasText(msg, "power"));
  EXPECT_TRUE(HasText(msg, "differ"));
  EXPECT_EQ(ReadFile(TablePath()), before);  // untouched
}

TEST_F(FinalizeTest, AJournalMixingPowerAndNoPowerRowsIsADataError) {
  std::string run = RunDir("run1", {Pass(1, 1.0, true), Pass(2, 2.0, false)});
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { Finalize({run}, out_.path()); }), "power"));
  EXPECT_FALSE(PathExists(TablePath()));
}

TEST_F(FinalizeTest, NoRowsWritesNoTable) {
  FinalizeResult res = Finalize({RunDir("run1", {Fail(1)})}, out_.path());
  EXPECT_EQ(res.tables.at("gemm_perf").status, "partial");
  EXPECT_EQ(res.tables.at("gemm_perf").rows_after, 0u);
  EXPECT_FALSE(PathExists(TablePath()));
}

TEST_F(FinalizeTest, ANarrowedRunIsMarkedInTheMeta) {
  PlanOptions limited = opt_;
  limited.limit = 1;
  Plan plan = BuildPlan(*registry_, limited, rt_);
  ASSERT_EQ(plan.cases.size(), 1u);
  std::int64_t m = plan.cases[0].params.Int("m");
  FinalizeResult res = Finalize({RunDir("run1", {Pass(m, 1.0)}, Header(), plan, limited)}, out_.path());
  const TableOutcome& o = res.tables.at("gemm_perf");
  EXPECT_EQ(o.planned, 3u);
  EXPECT_EQ(o.selected, 1u);
  EXPECT_EQ(o.missing_selected, 0u);
  EXPECT_EQ(o.missing, 2u);
  YAML::Node tm = Meta()["tables"]["gemm_perf"];
  EXPECT_EQ(tm["status"].as<std::string>(), "partial");
  EXPECT_EQ(tm["selection"].as<std::string>(), "narrowed");
  EXPECT_EQ(tm["selected"].as<int>(), 1);
  EXPECT_TRUE(tm["note"].IsDefined());
}

TEST_F(FinalizeTest, ShardsOfOnePlanFinalizeTogether) {
  std::vector<std::string> dirs;
  for (int i = 0; i < 2; ++i) {
    PlanOptions opt = opt_;
    opt.shard_index = i;
    opt.shard_count = 2;
    Plan shard = BuildPlan(*registry_, opt, rt_);
    std::vector<JournalRecord> records;
    for (const auto& c : shard.cases) records.push_back(Pass(c.params.Int("m"), 1.0));
    dirs.push_back(RunDir("shard" + std::to_string(i), records, Header(i, 2), shard, opt));
  }
  FinalizeResult res = Finalize(dirs, out_.path());
  EXPECT_EQ(res.tables.at("gemm_perf").rows_after, 3u);
  EXPECT_EQ(res.tables.at("gemm_perf").status, "complete");
  EXPECT_EQ(Meta()["tables"]["gemm_perf"]["shards"].as<std::string>(), "2/2");

  std::string msg = ThrownMessage<UsageError>([&] { Finalize({dirs[0], dirs[0]}, out_.path()); });
  EXPECT_TRUE(HasText(msg, "two run dirs hold shard 0/2"));
}

TEST_F(FinalizeTest, RunDirsOfDifferentPlansAreRefused) {
  std::string a = RunDir("a", {Pass(1, 1.0)});
  JournalHeader other = Header(1, 2);
  other.plan_hash = std::string(64, 'f');
  std::string b = RunDir("b", {Pass(2, 1.0)}, other, plan_, opt_);
  std::string msg = ThrownMessage<UsageError>([&] { Finalize({a, b}, out_.path()); });
  EXPECT_TRUE(HasText(msg, "not shards of one plan"));
  EXPECT_TRUE(HasText(msg, "plan: journal has"));
  EXPECT_THROW(Finalize({}, out_.path()), UsageError);
}

TEST_F(FinalizeTest, PlanFileRoundTrip) {
  std::string path = runs_.File("plan.jsonl");
  PlanOptions limited = opt_;
  limited.limit = 2;
  Plan plan = BuildPlan(*registry_, limited, rt_);
  WritePlanFile(path, *registry_, plan, limited, plan.supported);
  PlanFile pf = ReadPlanFile(path);
  EXPECT_EQ(pf.backend, "test");
  EXPECT_EQ(pf.plan_hash, plan.plan_hash);
  EXPECT_TRUE(pf.partial_selection);
  ASSERT_EQ(pf.entries.size(), 3u);
  std::size_t selected = 0;
  for (const auto& e : pf.entries) {
    EXPECT_EQ(e.op, "tgemm");
    EXPECT_EQ(e.table, "gemm_perf");
    std::vector<std::string> keys;
    for (const auto& [k, _] : e.key.items()) keys.push_back(k);
    EXPECT_EQ(keys, (std::vector<std::string>{"op_name", "gemm_dtype", "m", "n", "k"}));
    EXPECT_EQ(e.key.Str("op_name"), "tgemm");
    selected += e.selected;
  }
  EXPECT_EQ(selected, 2u);

  WritePlanFile(path, *registry_, plan_, opt_, plan_.supported);
  EXPECT_FALSE(ReadPlanFile(path).partial_selection);
}

TEST_F(FinalizeTest, MalformedPlanFileIsDataErrorNamingPathAndLine) {
  std::string path = runs_.File("plan.jsonl");
  WritePlanFile(path, *registry_, plan_, opt_, plan_.supported);
  WriteFileAtomic(path, ReadFile(path) + "{\"op\": \"tgemm\"}\n");
  std::string msg = ThrownMessage<DataError>([&] { ReadPlanFile(path); });
  EXPECT_TRUE(HasText(msg, path + ":5: malformed plan line"));
  WriteFileAtomic(path, "");
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { ReadPlanFile(path); }), "empty plan file"));
}

TEST(RowIdentityTest, OpNameAndKeyColumnsInOrder) {
  Params row{{"latency", 1.0},
             {"k", std::int64_t{16}},
             {"op_name", std::string("gemm")},
             {"m", std::int64_t{1}},
             {"gemm_dtype", std::string("fp8")},
             {"n", std::int64_t{8}}};
  EXPECT_EQ(RowIdentity(*FindTableSpec("gemm_perf"), row), "gemm|fp8|1|8|16|");
  row.Set("latency", 2.0);
  EXPECT_EQ(RowIdentity(*FindTableSpec("gemm_perf"), row), "gemm|fp8|1|8|16|");
}

}  // namespace
}  // namespace servecast::collect
