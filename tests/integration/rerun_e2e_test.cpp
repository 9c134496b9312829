// `collect --resume --rerun-where EXPR` on the real binary: exactly the matching
// finished cases get a second journal record, the tables take the new rows, the
// provenance names the rerun, a re-run that now fails is a failure,
// `--rerun-before TIME` skips the cases recorded at or after TIME (continuing an
// interrupted rerun), the line an interrupted rerun prints continues it when run
// as printed, an interrupted rerun counts the cases it left pending
// (`rerun_pending`) in the summary and the table's meta until it is finished,
// every shard accepts an expression that only some shards' cases can match, kept
// rows whose case now fails are named in the table's meta, and the
// flags' usage errors exit 2.
#include <signal.h>
#include <sys/wait.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "e2e_common.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;

// Three float32 GEMMs (gemm_perf) and three RMSNorms (elementwise_perf).
std::string SmallCases(const std::string& dir) {
  std::string cases = dir + "/cases";
  WriteText(cases + "/base_ops/gemm.yaml",
            "op: gemm\nsweeps:\n  - backends: [cpu]\n    axes:\n      gemm_dtype: [float32]\n      m: [1, 4, 16]\n"
            "    profiles:\n      - {n: 64, k: 64}\n");
  WriteText(cases + "/base_ops/rmsnorm.yaml",
            "op: rmsnorm\nsweeps:\n  - backends: [cpu]\n    axes:\n      dtype: [float32]\n"
            "      num_tokens: [1, 16, 128]\n      hidden_size: [1024]\n");
  return cases;
}

// The flags of a first run over SmallCases (and of its resumes, with more flags added).
std::vector<std::string> SmallRunArgs(const std::string& dir) {
  return {"--ops", "gemm", "rmsnorm", "--timing-budget-s", "0.02", "--out", dir + "/data", "--run-dir", dir + "/run"};
}

// Every line after the header: the case records and the session lines of resumes.
std::vector<nlohmann::json> JournalLines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::string text = ReadText(path);
  std::size_t pos = text.find('\n') + 1;  // after the header
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    out.push_back(nlohmann::json::parse(text.substr(pos, nl - pos)));
    pos = nl + 1;
  }
  return out;
}

// The case records, in file order.
std::vector<nlohmann::json> JournalRecords(const std::string& path) {
  std::vector<nlohmann::json> out;
  for (auto& j : JournalLines(path))
    if (j["type"] == "case") out.push_back(std::move(j));
  return out;
}

// Rewrites every case record of the journal with `edit` (the header and the
// session lines are kept).
template <typename Edit>
void EditRecords(const std::string& path, Edit edit) {
  std::string text = ReadText(path);
  std::string out = text.substr(0, text.find('\n') + 1);
  for (auto r : JournalLines(path)) {
    if (r["type"] == "case") edit(r);
    out += r.dump() + "\n";
  }
  WriteText(path, out);
}

std::map<std::string, int> RecordsPerCase(const std::vector<nlohmann::json>& records) {
  std::map<std::string, int> n;
  for (const auto& r : records) n[r["id"].get<std::string>()]++;
  return n;
}

// The table under `data` whose file name is `name`.
std::string TableNamed(const std::string& data, const std::string& name) {
  for (const auto& t : FindTables(data))
    if (fs::path(t).filename() == name) return t;
  ADD_FAILURE() << "no " << name << " under " << data;
  return "";
}

double LatencyWhere(const Table& t, const std::string& column, std::int64_t value) {
  for (std::size_t r = 0; r < t.num_rows(); ++r)
    if (t.GetInt(r, t.ColumnIndex(column)) == value) return t.GetDouble(r, t.ColumnIndex("latency"));
  ADD_FAILURE() << "no row with " << column << "=" << value;
  return -1;
}

// A temporary folder with SmallCases and one finished run over them (flags `common`).
struct SmallRun {
  std::string dir, cases, journal;
  std::vector<std::string> common;
  bool ok = false;
};
SmallRun StartSmallRun(const std::string& prefix) {
  SmallRun r;
  r.dir = MakeTempDir(prefix);
  r.cases = SmallCases(r.dir);
  r.common = SmallRunArgs(r.dir);
  r.journal = r.dir + "/run/journal.jsonl";
  auto first = RunProcess(CollectArgs(kBin, r.common, r.cases));
  r.ok = first.exit_code == 0;
  if (!r.ok) ADD_FAILURE() << Describe(first);
  return r;
}

const std::string kGemm4 = "gemm:gemm_dtype=float32,m=4,n=64,k=64";
const std::string kGemm16 = "gemm:gemm_dtype=float32,m=16,n=64,k=64";
const std::string kExpr = "gemm_dtype == \"float32\" && m >= 4";

TEST(RerunE2E, ReRunsExactlyTheMatchingFinishedCasesAndTheTablesTakeTheirNewRows) {
  const SmallRun run = StartSmallRun("sc_rerun_");
  ASSERT_TRUE(run.ok);
  const std::string &dir = run.dir, &cases = run.cases, &journal = run.journal;
  const std::vector<std::string>& common = run.common;

  // Mark every first-run row (latency 1000 ms) so that the tables show which
  // record each row came from.
  EditRecords(journal, [](nlohmann::json& r) {
    for (auto& row : r["rows"]) row["latency"] = 1000.0;
  });
  ASSERT_EQ(JournalRecords(journal).size(), 6u);

  auto args = common;
  args.insert(args.end(), {"--resume", "--rerun-where", kExpr});
  auto rerun = RunProcess(CollectArgs(kBin, args, cases));
  ASSERT_EQ(rerun.exit_code, 0) << Describe(rerun);
  EXPECT_NE(rerun.err.find("resume: 4 cases already done, 0 failed ones kept (use --retry-failed to re-run them), 2 "
                           "done ones re-run because --rerun-where '" +
                           kExpr + "' holds for them, 2 to run"),
            std::string::npos)
      << rerun.err;
  EXPECT_NE(rerun.out.find("2 cases re-run for --rerun-where"), std::string::npos) << rerun.out;

  // Exactly the two matching GEMMs got a second record; the RMSNorms lack
  // gemm_dtype and m, so they do not match (and are no error).
  auto records = JournalRecords(journal);
  ASSERT_EQ(records.size(), 8u);
  auto per_case = RecordsPerCase(records);
  ASSERT_EQ(per_case.size(), 6u);
  for (const auto& [id, n] : per_case) EXPECT_EQ(n, id == kGemm4 || id == kGemm16 ? 2 : 1) << id;
  std::map<std::string, double> new_latency;
  for (std::size_t i = 6; i < records.size(); ++i) {
    EXPECT_EQ(records[i]["status"], "passed");
    new_latency[records[i]["id"]] = records[i]["rows"][0]["latency"].get<double>();
  }

  // The GEMM table holds the new rows for m=4 and m=16, the first run's for m=1.
  Table gemm = Table::ReadCsv(TableNamed(dir + "/data", "gemm_perf.csv"));
  ASSERT_EQ(gemm.num_rows(), 3u);
  EXPECT_EQ(LatencyWhere(gemm, "m", 1), 1000.0);
  for (auto [m, id] : {std::pair<std::int64_t, std::string>{4, kGemm4}, {16, kGemm16}}) {
    double lat = LatencyWhere(gemm, "m", m);
    EXPECT_LT(lat, 1.0) << m;  // a real measurement, not the marked old row
    EXPECT_NEAR(lat, new_latency.at(id), 1e-9 * new_latency.at(id)) << m;
  }
  Table norm = Table::ReadCsv(TableNamed(dir + "/data", "elementwise_perf.csv"));
  ASSERT_EQ(norm.num_rows(), 3u);
  for (std::size_t r = 0; r < norm.num_rows(); ++r) EXPECT_EQ(norm.GetDouble(r, norm.ColumnIndex("latency")), 1000.0);

  // Provenance: the GEMM table names the rerun; the plan did not change, so it is
  // still complete and full. The RMSNorm table was not re-measured.
  std::string gemm_dir = fs::path(TableNamed(dir + "/data", "gemm_perf.csv")).parent_path();
  std::string norm_dir = fs::path(TableNamed(dir + "/data", "elementwise_perf.csv")).parent_path();
  YAML::Node tm = YAML::LoadFile(gemm_dir + "/collection_meta.yaml")["tables"]["gemm_perf"];
  EXPECT_EQ(tm["rerun_where"].as<std::string>(), kExpr);
  EXPECT_EQ(tm["rerun_cases"].as<int>(), 2);
  EXPECT_FALSE(tm["rerun_pending"].IsDefined());  // the rerun finished
  EXPECT_EQ(tm["status"].as<std::string>(), "complete");
  EXPECT_EQ(tm["selection"].as<std::string>(), "full");
  EXPECT_EQ(tm["planned"].as<int>(), 3);
  EXPECT_EQ(tm["missing"].as<int>(), 0);
  EXPECT_EQ(tm["cases"]["passed"].as<int>(), 3);
  YAML::Node nm = YAML::LoadFile(norm_dir + "/collection_meta.yaml")["tables"]["elementwise_perf"];
  EXPECT_FALSE(nm["rerun_where"].IsDefined());
  EXPECT_EQ(nm["status"].as<std::string>(), "complete");

  auto summary = ReadJson(dir + "/run/collection_summary_cpu.json");
  EXPECT_EQ(summary["summary"]["rerun_where"], kExpr);
  EXPECT_EQ(summary["summary"]["rerun_cases"], 2);
  EXPECT_EQ(summary["summary"]["rerun_pending"], 0);
  EXPECT_EQ(summary["summary"]["failures"], 0);
  EXPECT_EQ(summary["ops"]["gemm"]["cases"]["passed"], 3);
  EXPECT_TRUE(summary["ops"]["gemm"]["errors_by_class"].empty());  // no "transient" for passed -> passed
  EXPECT_FALSE(fs::exists(dir + "/run/errors_cpu.gemm.json"));

  // A plain resume afterwards runs nothing and rewrites the provenance without the rerun.
  auto plain = common;
  plain.push_back("--resume");
  auto again = RunProcess(CollectArgs(kBin, plain, cases));
  ASSERT_EQ(again.exit_code, 0) << Describe(again);
  EXPECT_EQ(JournalRecords(journal).size(), 8u);
  EXPECT_FALSE(YAML::LoadFile(gemm_dir + "/collection_meta.yaml")["tables"]["gemm_perf"]["rerun_where"].IsDefined());
  fs::remove_all(dir);
}

TEST(RerunE2E, APassedCaseThatNowFailsIsAFailureAndFailedOnesStillNeedRetryFailed) {
  std::string dir = MakeTempDir("sc_rerun_fail_");
  std::string cases = dir + "/cases";
  WriteText(cases + "/base_ops/fault.yaml",
            "op: fault\nsweeps:\n  - backends: [cpu]\n    axes:\n      mode: [ok, fail_on_env]\n      i: [0, 1]\n");
  std::vector<std::string> common = {"--ops",     "fault",      "--out",    dir + "/data",
                                     "--run-dir", dir + "/run", "--system", "cpu_host"};
  std::string journal = dir + "/run/journal.jsonl";
  auto first = RunProcess(CollectArgs(kTestBin, common, cases));
  ASSERT_EQ(first.exit_code, 0) << Describe(first);

  // The "kernel" broke: re-measuring one of its cases now fails.
  auto broken = common;
  broken.insert(broken.end(), {"--resume", "--rerun-where", "mode == 'fail_on_env' && i == 0"});
  auto argv = CollectArgs(kTestBin, broken, cases);
  argv.insert(argv.begin(), {"/usr/bin/env", "SERVECAST_TEST_FAIL_NOW=1"});
  auto r = RunProcess(argv);
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_NE(r.err.find("1 row(s) kept from the existing table"), std::string::npos) << r.err;
  EXPECT_EQ(JournalRecords(journal).size(), 5u);
  auto summary = ReadJson(dir + "/run/collection_summary_cpu.json");
  EXPECT_EQ(summary["ops"]["fault"]["cases"]["passed"], 3);
  EXPECT_EQ(summary["ops"]["fault"]["cases"]["failed"], 1);
  EXPECT_EQ(summary["summary"]["failures"], 1);
  EXPECT_EQ(summary["summary"]["rerun_cases"], 1);
  auto ledger = ReadJson(dir + "/run/errors_cpu.fault.json");
  ASSERT_EQ(ledger.size(), 1u) << ledger.dump(2);
  EXPECT_EQ(ledger[0]["case_id"], "fault:mode=fail_on_env,i=0");
  EXPECT_EQ(ledger[0]["status"], "failed");
  EXPECT_EQ(ledger[0]["classification"], "framework_bug");
  std::string fault_dir = fs::path(TableNamed(dir + "/data", "fault_perf.csv")).parent_path();
  auto fault_meta = [&] { return YAML::LoadFile(fault_dir + "/collection_meta.yaml")["tables"]["fault_perf"]; };
  YAML::Node tm = fault_meta();
  EXPECT_EQ(tm["cases"]["failed"].as<int>(), 1);
  EXPECT_EQ(tm["rerun_cases"].as<int>(), 1);
  // The table keeps the case's earlier row; its meta says so (not only the log).
  const std::string stale_example = "fault:mode=fail_on_env,i=0: failed";
  EXPECT_EQ(tm["rows"].as<int>(), 4);
  EXPECT_EQ(tm["stale_rows"].as<int>(), 1);
  EXPECT_EQ(tm["stale_example"].as<std::string>(), stale_example);

  // A plain resume runs nothing (the failed case needs --retry-failed) and the
  // table still holds that row: the meta still names it.
  auto plain = common;
  plain.push_back("--resume");
  auto p = RunProcess(CollectArgs(kTestBin, plain, cases));
  EXPECT_EQ(p.exit_code, 1) << Describe(p);
  EXPECT_EQ(JournalRecords(journal).size(), 5u);
  tm = fault_meta();
  EXPECT_FALSE(tm["rerun_where"].IsDefined());
  EXPECT_EQ(tm["stale_rows"].as<int>(), 1);
  EXPECT_EQ(tm["stale_example"].as<std::string>(), stale_example);

  // A --rerun-where that matches the failed case does not re-run it without
  // --retry-failed; the passed one it matches is re-run.
  auto again = common;
  again.insert(again.end(), {"--resume", "--rerun-where", "i == 0"});
  auto a = RunProcess(CollectArgs(kTestBin, again, cases));
  EXPECT_EQ(a.exit_code, 1) << Describe(a);
  EXPECT_NE(a.err.find("1 failed ones kept (use --retry-failed to re-run them), 1 done ones re-run"), std::string::npos)
      << a.err;
  auto per_case = RecordsPerCase(JournalRecords(journal));
  EXPECT_EQ(per_case["fault:mode=ok,i=0"], 2);
  EXPECT_EQ(per_case["fault:mode=fail_on_env,i=0"], 2);
  EXPECT_EQ(per_case["fault:mode=ok,i=1"], 1);
  EXPECT_EQ(fault_meta()["stale_rows"].as<int>(), 1);

  // Fixed, --retry-failed passes it: the failure is ledgered as transient, and the
  // table's meta no longer names a stale row.
  auto retry = common;
  retry.insert(retry.end(), {"--resume", "--retry-failed"});
  auto f = RunProcess(CollectArgs(kTestBin, retry, cases));
  EXPECT_EQ(f.exit_code, 0) << Describe(f);
  ledger = ReadJson(dir + "/run/errors_cpu.fault.json");
  ASSERT_EQ(ledger.size(), 1u) << ledger.dump(2);
  EXPECT_EQ(ledger[0]["classification"], "transient");
  tm = fault_meta();
  EXPECT_FALSE(tm["stale_rows"].IsDefined());
  EXPECT_FALSE(tm["stale_example"].IsDefined());
  fs::remove_all(dir);
}

// The first run's records are stamped at kOld, a second before kBefore; every
// record a later invocation writes is stamped now, long after kBefore.
const std::string kOld = "2000-01-01T00:00:00Z";
const std::string kBefore = "2000-01-01T00:00:01Z";

TEST(RerunE2E, RerunBeforeReRunsTheCasesRecordedBeforeItAndRepeatingItReRunsNothing) {
  const SmallRun run = StartSmallRun("sc_rerun_before_");
  ASSERT_TRUE(run.ok);
  const std::string &dir = run.dir, &cases = run.cases, &journal = run.journal;
  const std::vector<std::string>& common = run.common;
  EditRecords(journal, [](nlohmann::json& r) { r["at"] = kOld; });

  // The first call of a rerun, TIME after the records: both matching cases re-run.
  auto args = common;
  args.insert(args.end(), {"--resume", "--rerun-where", kExpr, "--rerun-before", kBefore});
  auto rerun = RunProcess(CollectArgs(kBin, args, cases));
  ASSERT_EQ(rerun.exit_code, 0) << Describe(rerun);
  EXPECT_NE(rerun.err.find("resume: 4 cases already done, 0 failed ones kept (use --retry-failed to re-run them), 2 "
                           "done ones re-run because --rerun-where '" +
                           kExpr + "' holds for them and their newest record is before " + kBefore +
                           " (0 matching ones skipped: already recorded at or after " + kBefore + "), 2 to run"),
            std::string::npos)
      << rerun.err;
  auto per_case = RecordsPerCase(JournalRecords(journal));
  for (const auto& [id, n] : per_case) EXPECT_EQ(n, id == kGemm4 || id == kGemm16 ? 2 : 1) << id;
  std::string gemm_dir = fs::path(TableNamed(dir + "/data", "gemm_perf.csv")).parent_path();
  YAML::Node tm = YAML::LoadFile(gemm_dir + "/collection_meta.yaml")["tables"]["gemm_perf"];
  EXPECT_EQ(tm["rerun_where"].as<std::string>(), kExpr);
  EXPECT_EQ(tm["rerun_before"].as<std::string>(), kBefore);
  EXPECT_EQ(tm["rerun_cases"].as<int>(), 2);
  auto summary = ReadJson(dir + "/run/collection_summary_cpu.json");
  EXPECT_EQ(summary["summary"]["rerun_before"], kBefore);
  EXPECT_EQ(summary["summary"]["rerun_cases"], 2);

  // The same call again (as after an interruption): the re-run cases' newest
  // records are newer than TIME, so nothing runs, and the log says why.
  auto again = RunProcess(CollectArgs(kBin, args, cases));
  ASSERT_EQ(again.exit_code, 0) << Describe(again);
  EXPECT_NE(again.err.find("resume: 6 cases already done, 0 failed ones kept (use --retry-failed to re-run them), 0 "
                           "done ones re-run because --rerun-where '" +
                           kExpr + "' holds for them and their newest record is before " + kBefore +
                           " (2 matching ones skipped: already recorded at or after " + kBefore + "), 0 to run"),
            std::string::npos)
      << again.err;
  EXPECT_EQ(JournalRecords(journal).size(), 8u);
  summary = ReadJson(dir + "/run/collection_summary_cpu.json");
  EXPECT_EQ(summary["summary"]["rerun_before"], kBefore);
  EXPECT_EQ(summary["summary"]["rerun_cases"], 0);
  EXPECT_EQ(summary["summary"]["rerun_pending"], 0);
  fs::remove_all(dir);
}

TEST(RerunE2E, RerunBeforeSkipsRecordsAtTimeOrWithAnUnreadableTimeAndWarnsOnce) {
  // An interrupted rerun left m=4 re-measured exactly at TIME; m=16's record has a
  // time that does not parse; m=1 is older. Only m=1 runs.
  const SmallRun run = StartSmallRun("sc_rerun_before_edge_");
  ASSERT_TRUE(run.ok);
  const std::string &dir = run.dir, &cases = run.cases, &journal = run.journal;
  const std::vector<std::string>& common = run.common;
  EditRecords(journal, [](nlohmann::json& r) {
    r["at"] = r["id"] == kGemm4 ? kBefore : r["id"] == kGemm16 ? "2000-01-01 00:00:00" : kOld;
  });

  const std::string all_gemms = "gemm_dtype == \"float32\"";
  auto args = common;
  args.insert(args.end(), {"--resume", "--rerun-where", all_gemms, "--rerun-before", kBefore});
  auto r = RunProcess(CollectArgs(kBin, args, cases));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.err.find("5 cases already done, 0 failed ones kept (use --retry-failed to re-run them), 1 done ones "
                       "re-run because --rerun-where '" +
                       all_gemms + "' holds for them and their newest record is before " + kBefore +
                       " (1 matching ones skipped: already recorded at or after " + kBefore +
                       "; 1 more with an unreadable record time), 1 to run"),
            std::string::npos)
      << r.err;
  const std::string warning = "1 case(s) that --rerun-where matches are not re-run";
  std::size_t at = r.err.find(warning);
  ASSERT_NE(at, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(warning, at + 1), std::string::npos) << r.err;  // once
  EXPECT_NE(r.err.find("(e.g. " + kGemm16 + " has at '2000-01-01 00:00:00')"), std::string::npos) << r.err;
  auto per_case = RecordsPerCase(JournalRecords(journal));
  EXPECT_EQ(per_case["gemm:gemm_dtype=float32,m=1,n=64,k=64"], 2);
  EXPECT_EQ(per_case[kGemm4], 1);
  EXPECT_EQ(per_case[kGemm16], 1);
  fs::remove_all(dir);
}

TEST(RerunE2E, UsageErrorsExitTwoAndLeaveTheJournalAlone) {
  const SmallRun run = StartSmallRun("sc_rerun_usage_");
  ASSERT_TRUE(run.ok);
  const std::string &dir = run.dir, &cases = run.cases;
  const std::vector<std::string>& common = run.common;
  std::string journal = ReadText(run.journal);
  auto with = [&](std::vector<std::string> extra) {
    auto a = common;
    a.insert(a.end(), extra.begin(), extra.end());
    return RunProcess(CollectArgs(kBin, a, cases));
  };

  auto no_resume = with({"--rerun-where", "m > 1"});
  EXPECT_EQ(no_resume.exit_code, 2) << Describe(no_resume);
  EXPECT_NE(no_resume.err.find("--rerun-where needs --resume"), std::string::npos) << no_resume.err;

  auto syntax = with({"--resume", "--rerun-where", "m > > 1"});
  EXPECT_EQ(syntax.exit_code, 2) << Describe(syntax);
  EXPECT_NE(syntax.err.find("--rerun-where: expression 'm > > 1': unexpected '>' at column 5"), std::string::npos)
      << syntax.err;

  auto typo = with({"--resume", "--rerun-where", "gemm_dtype == \"float32\" && mm > 1"});
  EXPECT_EQ(typo.exit_code, 2) << Describe(typo);
  EXPECT_NE(typo.err.find("no case of this run has all of the parameters gemm_dtype, mm"), std::string::npos)
      << typo.err;
  EXPECT_NE(typo.err.find("gemm (gemm_dtype, k, m, n); rmsnorm (dtype, hidden_size, num_tokens)"), std::string::npos)
      << typo.err;

  auto type = with({"--resume", "--rerun-where", "gemm_dtype > 1"});
  EXPECT_EQ(type.exit_code, 2) << Describe(type);
  EXPECT_NE(type.err.find("cannot order 'float32' against '1'"), std::string::npos) << type.err;

  auto twice = with({"--resume", "--rerun-where", "m > 1", "--rerun-where", "m > 2"});
  EXPECT_EQ(twice.exit_code, 2) << Describe(twice);

  auto plan_only = with({"--plan-only", "--resume", "--rerun-where", "m > 1"});
  EXPECT_EQ(plan_only.exit_code, 2) << Describe(plan_only);
  EXPECT_NE(plan_only.err.find("--rerun-where does not combine with --plan-only"), std::string::npos) << plan_only.err;

  auto before_alone = with({"--resume", "--rerun-before", "2026-11-30T09:38:40Z"});
  EXPECT_EQ(before_alone.exit_code, 2) << Describe(before_alone);
  EXPECT_NE(before_alone.err.find("--rerun-before needs --rerun-where"), std::string::npos) << before_alone.err;

  for (std::string bad : {"2026-11-30 09:38:40", "2026-11-30T09:38:40+00:00", "2026-02-30T00:00:00Z", "yesterday"}) {
    auto r = with({"--resume", "--rerun-where", "m > 1", "--rerun-before", bad});
    EXPECT_EQ(r.exit_code, 2) << Describe(r);
    EXPECT_NE(r.err.find("--rerun-before '" + bad + "': expected a UTC time YYYY-MM-DDTHH:MM:SSZ"), std::string::npos)
        << r.err;
  }

  EXPECT_EQ(ReadText(dir + "/run/journal.jsonl"), journal);
  fs::remove_all(dir);
}

TEST(RerunE2E, ARerunBeforeInTheFutureWarnsAndRepeatingItReRunsAgain) {
  const SmallRun run = StartSmallRun("sc_rerun_future_");
  ASSERT_TRUE(run.ok);
  const std::string future = "2999-01-01T00:00:00Z";
  auto args = run.common;
  args.insert(args.end(), {"--resume", "--rerun-where", kExpr, "--rerun-before", future});
  for (std::size_t records : {8u, 10u}) {
    auto r = RunProcess(CollectArgs(kBin, args, run.cases));
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
    EXPECT_NE(r.err.find("--rerun-before " + future + " is in the future"), std::string::npos) << r.err;
    // Every record is before that TIME, the ones this rerun writes too.
    EXPECT_EQ(JournalRecords(run.journal).size(), records);
  }
  fs::remove_all(run.dir);
}

TEST(RerunE2E, EveryShardAcceptsAnExpressionThatOnlySomeShardsCasesCanMatch) {
  // SmallCases in four shards: the six cases, sorted by id, go round-robin, so one
  // shard holds no GEMM and another no RMSNorm. Each expression names parameters
  // of one op only; the typo guard looks at the whole plan, so no shard refuses it.
  const std::string dir = MakeTempDir("sc_rerun_shard_");
  const std::string cases = SmallCases(dir);
  const std::map<std::string, std::string> expressions = {{"gemm:", "gemm_dtype == 'float32' && m >= 4"},
                                                          {"rmsnorm:", "num_tokens >= 16"}};
  std::map<std::string, int> shards_without;  // op id prefix -> shards whose cases lack that op
  std::map<std::string, std::size_t> reruns;  // op id prefix -> cases re-run over all shards
  for (int i = 0; i < 4; ++i) {
    const std::string shard = std::to_string(i) + "/4", sdir = dir + "/shard" + std::to_string(i);
    const std::string journal = sdir + "/run/journal.jsonl";
    auto plan =
        RunProcess(CollectArgs(kBin, {"--ops", "gemm", "rmsnorm", "--shard", shard, "--plan-only", "--list"}, cases));
    ASSERT_EQ(plan.exit_code, 0) << Describe(plan);
    std::vector<std::string> common = {"--ops", "gemm",  "rmsnorm",      "--timing-budget-s", "0.02",       "--shard",
                                       shard,   "--out", sdir + "/data", "--run-dir",         sdir + "/run"};
    auto first = RunProcess(CollectArgs(kBin, common, cases));
    ASSERT_EQ(first.exit_code, 0) << Describe(first);
    for (const auto& [op, expr] : expressions) {
      const bool has_op = plan.out.find("\n" + op) != std::string::npos;
      if (!has_op) ++shards_without[op];
      const std::size_t before = JournalRecords(journal).size();
      auto args = common;
      args.insert(args.end(), {"--resume", "--rerun-where", expr});
      auto r = RunProcess(CollectArgs(kBin, args, cases));
      EXPECT_EQ(r.exit_code, 0) << shard << " " << expr << "\n" << Describe(r);
      const std::size_t added = JournalRecords(journal).size() - before;
      if (!has_op) {
        EXPECT_EQ(added, 0u) << shard << " " << expr;
      }
      reruns[op] += added;
    }
    if (plan.out.find("\ngemm:") == std::string::npos) {
      // A typo is still refused on a shard without GEMMs, naming the run's ops.
      auto args = common;
      args.insert(args.end(), {"--resume", "--rerun-where", "gemm_dtype == 'float32' && mm > 1"});
      auto typo = RunProcess(CollectArgs(kBin, args, cases));
      EXPECT_EQ(typo.exit_code, 2) << Describe(typo);
      EXPECT_NE(typo.err.find("no case of this run has all of the parameters gemm_dtype, mm"), std::string::npos)
          << typo.err;
      EXPECT_NE(typo.err.find("gemm (gemm_dtype, k, m, n); rmsnorm (dtype, hidden_size, num_tokens)"),
                std::string::npos)
          << typo.err;
    }
  }
  EXPECT_EQ(shards_without["gemm:"], 1);
  EXPECT_EQ(shards_without["rmsnorm:"], 1);
  EXPECT_EQ(reruns["gemm:"], 2u);     // m=4 and m=16, on the shards that hold them
  EXPECT_EQ(reruns["rmsnorm:"], 2u);  // num_tokens=16 and 128
  fs::remove_all(dir);
}

// `text` as one single-quoted word of /bin/sh.
std::string ShQuote(const std::string& text) {
  std::string q = "'";
  for (char ch : text) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// Complete lines of a file that another process is appending to.
std::size_t CompleteLines(const std::string& path) {
  const std::string text = ReadText(path);
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

// Polls `ready` until it holds (true) or `timeout_s` passes (false).
template <typename Ready>
bool WaitFor(Ready ready, double timeout_s = 120) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// Interrupts a started collector as a time box would (SIGTERM: it stops, kills its
// workers, finalizes) and returns its exit code; SIGKILL if it outlives `timeout_s`.
int Interrupt(pid_t pid, double timeout_s = 120) {
  ::kill(pid, SIGTERM);
  int status = 0;
  if (!WaitFor([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, timeout_s)) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// What follows "continue with " on the line an interrupted collect prints.
std::string ContinueWith(const std::string& err) {
  const std::string lead = "interrupted: finished cases are saved; continue with ";
  std::size_t at = err.find(lead);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no continue line in\n" << err;
    return "";
  }
  at += lead.size();
  return err.substr(at, err.find('\n', at) - at);
}

TEST(RerunE2E, AnInterruptedRerunPrintsTheCommandThatContinuesIt) {
  // Six fault cases, run in this order on the one worker slot: ok 0-2, hang_on_env
  // 3, ok 4-5. With SERVECAST_TEST_HANG_NOW set, case 3 hangs: the test interrupts
  // the call while it runs, at a known point, with no timing involved.
  const std::string dir = MakeTempDir("sc_rerun_interrupt_");
  const std::string cases = dir + "/cases";
  WriteText(cases + "/base_ops/fault.yaml",
            "op: fault\nsweeps:\n"
            "  - backends: [cpu]\n    axes:\n      mode: [ok]\n      i: [0, 1, 2]\n"
            "  - backends: [cpu]\n    axes:\n      mode: [hang_on_env]\n      i: [3]\n"
            "  - backends: [cpu]\n    axes:\n      mode: [ok]\n      i: [4, 5]\n");
  // The flags every call repeats (the printed line adds --resume, --run-dir and the
  // rerun); a per-case limit far beyond the test's waits, so case 3 never times out.
  const std::vector<std::string> base = CollectArgs(
      kTestBin, {"--ops", "fault", "--out", dir + "/data", "--system", "cpu_host", "--timeout-s", "600"}, cases);
  const std::string run_dir = dir + "/run", journal = run_dir + "/journal.jsonl";
  auto first_args = base;
  first_args.insert(first_args.end(), {"--run-dir", run_dir});
  auto first = RunProcess(first_args);
  ASSERT_EQ(first.exit_code, 0) << Describe(first);
  EditRecords(journal, [](nlohmann::json& r) { r["at"] = kOld; });  // the newest old record: kOld

  const std::string expr = "(mode == 'ok' || mode == 'hang_on_env') && i >= 1";
  const std::set<std::string> matching = {"fault:mode=ok,i=1", "fault:mode=ok,i=2", "fault:mode=hang_on_env,i=3",
                                          "fault:mode=ok,i=4", "fault:mode=ok,i=5"};
  const std::vector<std::string> hang_now = {"/usr/bin/env", "SERVECAST_TEST_HANG_NOW=1"};

  // The rerun re-measures ok 1 and 2, then hangs on case 3: interrupt it there.
  auto rerun = hang_now;
  rerun.insert(rerun.end(), first_args.begin(), first_args.end());
  rerun.insert(rerun.end(), {"--resume", "--rerun-where", expr});
  pid_t pid = StartProcess(rerun, dir + "/out1.txt", dir + "/err1.txt");
  const bool reached = WaitFor([&] { return CompleteLines(journal) == 1 + 6 + 1 + 2; });  // header, 6 old, the session line, 2 new
  int code = Interrupt(pid);
  ASSERT_TRUE(reached) << ReadText(dir + "/err1.txt");
  ASSERT_EQ(code, 1) << ReadText(dir + "/err1.txt");

  // The line names the expression as one shell word and TIME as the second after
  // the newest record the call found (not the time it started).
  const std::string cont = ContinueWith(ReadText(dir + "/err1.txt"));
  EXPECT_EQ(cont, "--resume --run-dir " + run_dir +
                      " --rerun-where '(mode == '\\''ok'\\'' || mode == '\\''hang_on_env'\\'') && i >= 1'"
                      " --rerun-before " +
                      kBefore);
  auto per_case = RecordsPerCase(JournalRecords(journal));
  for (const auto& [id, n] : per_case)
    EXPECT_EQ(n, id == "fault:mode=ok,i=1" || id == "fault:mode=ok,i=2" ? 2 : 1) << id;

  // The provenance tells the interrupted rerun from a finished one: 2 of the 5
  // selected cases re-run, 3 pending, in the summary and in the table's meta.
  EXPECT_NE(ReadText(dir + "/err1.txt").find("interrupted: 3 of the 5 cases selected by --rerun-where not re-run yet"),
            std::string::npos)
      << ReadText(dir + "/err1.txt");
  const std::string summary_path = run_dir + "/collection_summary_cpu.json";
  auto summary = ReadJson(summary_path);
  EXPECT_EQ(summary["summary"]["interrupted"], true);
  EXPECT_EQ(summary["summary"]["rerun_cases"], 2);
  EXPECT_EQ(summary["summary"]["rerun_pending"], 3);
  const std::string fault_dir = fs::path(TableNamed(dir + "/data", "fault_perf.csv")).parent_path();
  auto fault_meta = [&] { return YAML::LoadFile(fault_dir + "/collection_meta.yaml")["tables"]["fault_perf"]; };
  YAML::Node tm = fault_meta();
  EXPECT_EQ(tm["rerun_where"].as<std::string>(), expr);
  EXPECT_FALSE(tm["rerun_before"].IsDefined());
  EXPECT_EQ(tm["rerun_cases"].as<int>(), 2);
  EXPECT_EQ(tm["rerun_pending"].as<int>(), 3);

  // Run as printed, through the shell (with the flags the line leaves to the user).
  std::string command;
  for (const auto& a : base) command += ShQuote(a) + " ";
  command += cont;

  // Interrupted again on case 3 (the first case it runs): the line repeats the
  // given TIME, and nothing was recorded.
  pid = StartProcess({"/bin/sh", "-c", "exec /usr/bin/env SERVECAST_TEST_HANG_NOW=1 " + command}, dir + "/out2.txt",
                     dir + "/err2.txt");
  const bool started =
      WaitFor([&] { return ReadText(run_dir + "/collector.log").find("running 3 cases") != std::string::npos; });
  code = Interrupt(pid);
  ASSERT_TRUE(started) << ReadText(dir + "/err2.txt");
  ASSERT_EQ(code, 1) << ReadText(dir + "/err2.txt");
  const std::string err2 = ReadText(dir + "/err2.txt");
  EXPECT_NE(err2.find("3 done ones re-run because --rerun-where '" + expr +
                      "' holds for them and their newest record is before " + kBefore +
                      " (2 matching ones skipped: already recorded at or after " + kBefore + "), 3 to run"),
            std::string::npos)
      << err2;
  EXPECT_EQ(ContinueWith(err2), cont);
  EXPECT_EQ(JournalRecords(journal).size(), 8u);
  // It re-ran none of its three cases: the table's entry still names the rerun
  // and says all three are pending.
  EXPECT_NE(err2.find("interrupted: 3 of the 3 cases selected by --rerun-where not re-run yet"), std::string::npos)
      << err2;
  summary = ReadJson(summary_path);
  EXPECT_EQ(summary["summary"]["rerun_cases"], 0);
  EXPECT_EQ(summary["summary"]["rerun_pending"], 3);
  tm = fault_meta();
  EXPECT_EQ(tm["rerun_where"].as<std::string>(), expr);
  EXPECT_EQ(tm["rerun_before"].as<std::string>(), kBefore);
  EXPECT_EQ(tm["rerun_cases"].as<int>(), 0);
  EXPECT_EQ(tm["rerun_pending"].as<int>(), 3);

  // Uninterrupted: it re-runs the three matching cases not yet re-run, and every
  // matching case ends with exactly one record newer than the first run's.
  auto done = RunProcess({"/bin/sh", "-c", command});
  ASSERT_EQ(done.exit_code, 0) << Describe(done);
  EXPECT_EQ(done.err.find("interrupted"), std::string::npos) << done.err;
  auto records = JournalRecords(journal);
  ASSERT_EQ(records.size(), 11u);
  std::map<std::string, int> newer;
  for (std::size_t i = 6; i < records.size(); ++i) {
    EXPECT_EQ(records[i]["status"], "passed") << records[i].dump();
    EXPECT_NE(records[i]["at"], kOld);
    newer[records[i]["id"].get<std::string>()]++;
  }
  for (const auto& id : matching) EXPECT_EQ(newer[id], 1) << id;
  EXPECT_EQ(newer.size(), matching.size());  // ok 0 does not match: never re-run
  // Finished: nothing pending in the summary, and the field is gone from the meta.
  EXPECT_EQ(done.err.find("not re-run yet"), std::string::npos) << done.err;
  summary = ReadJson(summary_path);
  EXPECT_EQ(summary["summary"]["interrupted"], false);
  EXPECT_EQ(summary["summary"]["rerun_cases"], 3);
  EXPECT_EQ(summary["summary"]["rerun_pending"], 0);
  tm = fault_meta();
  EXPECT_EQ(tm["rerun_cases"].as<int>(), 3);
  EXPECT_FALSE(tm["rerun_pending"].IsDefined());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servecast::testing
