// Crash isolation, timeouts and the failure ledger, with test-only fault ops that
// segfault, hang, abort, throw and exhaust memory inside real worker processes.
#include <filesystem>
#include <map>

#include "e2e_common.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;

std::string FaultCases(const std::string& dir) {
  std::string cases = dir + "/cases";
  WriteText(cases + "/base_ops/fault.yaml",
            "op: fault\n"
            "sweeps:\n"
            "  - backends: [cpu]\n"
            "    axes:\n"
            "      mode: [ok, segv, hang, abort, throw, oom, incorrect]\n"
            "      i: [0, 1]\n");
  return cases;
}

TEST(FaultsE2E, EveryFaultIsIsolatedClassifiedAndLedgered) {
  std::string dir = MakeTempDir("sc_faults_");
  std::string cases = FaultCases(dir);
  // 5 s per case: long enough that the oom cases (touching ~1 GB until the 1 GB
  // address-space limit refuses more) finish on a loaded two-core CI machine, where 2 s
  // once let one of them time out; the hang cases wait it out.
  auto r = RunProcess(CollectArgs(kTestBin,
                                  {"--ops", "fault", "--timeout-s", "5", "--worker-memory-gb", "1", "--out",
                                   dir + "/data", "--run-dir", dir + "/run", "--system", "cpu_host"},
                                  cases),
                      300);
  // The run completes, keeps the good rows and exits 1 because cases failed.
  ASSERT_EQ(r.exit_code, 1) << Describe(r);
  auto tables = FindTables(dir + "/data");
  ASSERT_EQ(tables.size(), 1u) << Describe(r);
  Table t = Table::ReadCsv(tables[0]);
  EXPECT_EQ(t.num_rows(), 2u);
  for (std::size_t i = 0; i < t.num_rows(); ++i) EXPECT_EQ(t.GetString(i, t.ColumnIndex("mode")), "ok");

  auto ledger = ReadJson(dir + "/run/errors_cpu.fault.json");
  ASSERT_EQ(ledger.size(), 12u) << ledger.dump(2);
  std::map<std::string, std::pair<std::string, std::string>> by_mode;  // mode -> (status, class)
  for (const auto& e : ledger) {
    std::string mode = e["params"]["mode"];
    auto seen = std::make_pair(e["status"].get<std::string>(), e["classification"].get<std::string>());
    if (by_mode.count(mode)) {
      EXPECT_EQ(by_mode[mode], seen) << mode;  // both cases of a mode alike
    }
    by_mode[mode] = seen;
    EXPECT_FALSE(e["message"].get<std::string>().empty());
  }
  EXPECT_EQ(by_mode["segv"], std::make_pair(std::string("crashed"), std::string("collector_bug")));
  EXPECT_EQ(by_mode["abort"], std::make_pair(std::string("crashed"), std::string("collector_bug")));
  EXPECT_EQ(by_mode["hang"], std::make_pair(std::string("timeout"), std::string("timeout")));
  EXPECT_EQ(by_mode["throw"], std::make_pair(std::string("failed"), std::string("collector_bug")));
  EXPECT_EQ(by_mode["oom"], std::make_pair(std::string("failed"), std::string("resource")));
  EXPECT_EQ(by_mode["incorrect"], std::make_pair(std::string("incorrect"), std::string("collector_bug")));

  auto summary = ReadJson(dir + "/run/collection_summary_cpu.json");
  const auto& op = summary["ops"]["fault"];
  EXPECT_EQ(op["cases"]["passed"], 2);
  EXPECT_EQ(op["cases"]["crashed"], 4);
  EXPECT_EQ(op["cases"]["timeout"], 2);
  EXPECT_EQ(summary["summary"]["failures"], 12);
  EXPECT_EQ(summary["errors"].size(), 12u);
  // Four crashes of one class: below the systemic threshold of five.
  for (const auto& s : summary["summary"]["systemic"]) EXPECT_GE(s["count"].get<int>(), 5);

  // Resume without --retry-failed keeps the failures and runs nothing new.
  auto again = RunProcess(CollectArgs(kTestBin, {"--ops", "fault", "--resume", "--out", dir + "/data", "--run-dir",
                                                 dir + "/run", "--system", "cpu_host"},
                                      cases));
  EXPECT_EQ(again.exit_code, 1) << Describe(again);
  EXPECT_EQ(ReadJson(dir + "/run/errors_cpu.fault.json").size(), 12u);
  fs::remove_all(dir);
}

TEST(FaultsE2E, SystemicGroupsAreFlagged) {
  std::string dir = MakeTempDir("sc_systemic_");
  std::string cases = dir + "/cases";
  WriteText(cases + "/base_ops/fault.yaml",
            "op: fault\nsweeps:\n  - backends: [cpu]\n    axes:\n      mode: [throw]\n      i: [0, 1, 2, 3, 4, 5]\n");
  auto r = RunProcess(CollectArgs(kTestBin, {"--ops", "fault", "--out", dir + "/data", "--run-dir", dir + "/run",
                                             "--system", "cpu_host"},
                                  cases));
  ASSERT_EQ(r.exit_code, 1) << Describe(r);
  auto summary = ReadJson(dir + "/run/collection_summary_cpu.json");
  ASSERT_EQ(summary["summary"]["systemic"].size(), 1u);
  EXPECT_EQ(summary["summary"]["systemic"][0]["class"], "collector_bug");
  EXPECT_EQ(summary["summary"]["systemic"][0]["count"], 6);
  // An op that was planned and produced zero rows is a failure in its own right.
  EXPECT_TRUE(summary["ops"]["fault"]["zero_rows"].get<bool>());
  fs::remove_all(dir);
}

TEST(FaultsE2E, WorkersThatCannotStartAreNotChargedToCases) {
  // The test backend "broken" throws in every worker's device set-up.
  std::string dir = MakeTempDir("sc_nostart_");
  std::string cases = dir + "/cases";
  WriteText(cases + "/base_ops/trivial.yaml",
            "op: trivial\nsweeps:\n  - backends: [broken]\n    axes:\n      i: [0, 1, 2]\n");
  auto r = RunProcess({kTestBin, "collect", "--backend", "broken", "--cases", cases, "--systems", kSystems, "--out",
                       dir + "/data", "--run-dir", dir + "/run"});
  EXPECT_EQ(r.exit_code, 3) << Describe(r);
  EXPECT_NE(r.err.find("no worker could start"), std::string::npos) << r.err;
  // Nothing was recorded against a case: the journal holds only its header.
  std::string journal = ReadText(dir + "/run/journal.jsonl");
  EXPECT_EQ(std::count(journal.begin(), journal.end(), '\n'), 1) << journal;
  std::string log = ReadText(dir + "/run/collector.log");
  EXPECT_NE(log.find("failed to start"), std::string::npos) << log;
  EXPECT_NE(log.find("cannot be initialized"), std::string::npos) << log;  // the worker's own stderr
  EXPECT_NE(log.find("retired after 3 failed starts"), std::string::npos) << log;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servecast::testing
