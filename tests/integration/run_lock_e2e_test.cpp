// One collector per run dir (issue 28, item 1), on the real binary: while a
// collection runs, a second `collect --resume` (or `collect`) on its run dir exits
// 3 "run dir <path> in use by pid N" and measures nothing, so that after both (and
// a final resume) every planned case has exactly one passed journal record; and
// the lock file a collector killed with kill -9 leaves behind blocks no resume.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "collect/journal.h"
#include "e2e_common.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;

// 64 float32 RMSNorms on one worker with a 0.3 s timing budget each: a
// collection of about 4 s.
constexpr std::size_t kPlanned = 64;

std::vector<std::string> LockArgs(const std::string& dir, std::vector<std::string> extra) {
  std::string cases = dir + "/cases";
  if (!fs::exists(cases))
    WriteText(cases + "/base_ops/rmsnorm.yaml",
              "op: rmsnorm\nsweeps:\n  - backends: [cpu]\n    axes:\n      dtype: [float32]\n"
              "      num_tokens: [1, 2, 4, 8, 16, 32, 64, 128]\n"
              "      hidden_size: [256, 512, 1024, 1536, 2048, 3072, 4096, 8192]\n");
  std::vector<std::string> common = {"--ops",     "rmsnorm",   "--gpus",   "0",     "--timing-budget-s",
                                     "0.3",       "--system",  "cpu_host", "--out", dir + "/data",
                                     "--run-dir", dir + "/run"};
  common.insert(common.end(), extra.begin(), extra.end());
  return CollectArgs(kBin, common, cases);
}

// The case ids `collect --plan-only --list` prints for the run.
std::set<std::string> PlannedIds(const std::string& dir) {
  auto r = RunProcess(LockArgs(dir, {"--plan-only", "--list"}), 120);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  std::set<std::string> ids;
  std::istringstream in(r.out);
  bool listing = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("total cases to run: ", 0) == 0) {
      EXPECT_EQ(line, "total cases to run: " + std::to_string(kPlanned));
      listing = true;
    } else if (listing && !line.empty() && line.rfind("  dropped", 0) != 0) {
      ids.insert(line);
    }
  }
  EXPECT_EQ(ids.size(), kPlanned) << r.out;
  return ids;
}

// Waits until the collection in `run_dir` has recorded a case (it is measuring);
// false after 60 s.
bool WaitForRecord(const std::string& run_dir) {
  for (int i = 0; i < 1200; ++i) {
    if (fs::exists(run_dir + "/journal.jsonl") && !collect::ReadJournal(run_dir + "/journal.jsonl").records.empty())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

bool StillRunning(pid_t pid) {
  int status = 0;
  return ::waitpid(pid, &status, WNOHANG) == 0;
}

// Every planned case has exactly one journal record, and it passed.
void ExpectEachCaseOncePassed(const std::string& journal_path, const std::set<std::string>& planned) {
  auto journal = collect::ReadJournal(journal_path);
  std::map<std::string, int> seen;
  for (const auto& rec : journal.records) {
    ++seen[rec.id];
    EXPECT_EQ(rec.status, collect::Disposition::kPassed) << rec.id << ": " << rec.message;
  }
  for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << "recorded " << n << " times: " << id;
  std::set<std::string> ids;
  for (const auto& [id, _] : seen) ids.insert(id);
  EXPECT_EQ(ids, planned);
}

TEST(RunLockE2E, ASecondCollectorOnARunInUseExits3AndEveryCaseRunsOnce) {
  std::string dir = MakeTempDir("sc_lock_");
  const std::string run_dir = dir + "/run";
  std::set<std::string> planned = PlannedIds(dir);

  pid_t first = StartProcess(LockArgs(dir, {}), dir + "/first.out", dir + "/first.err");
  ASSERT_TRUE(WaitForRecord(run_dir)) << ReadText(dir + "/first.err");
  const std::string in_use = "run dir " + run_dir + " in use by pid " + std::to_string(first);

  // Two --resume and a plain collect while the first runs: each refused before
  // it reads the journal or measures anything.
  for (const auto& extra : std::vector<std::vector<std::string>>{{"--resume"}, {}, {"--resume", "--retry-failed"}}) {
    auto second = RunProcess(LockArgs(dir, extra), 120);
    EXPECT_EQ(second.exit_code, 3) << Describe(second);
    EXPECT_NE(second.err.find("servecast: cannot start: " + in_use + ";"), std::string::npos) << Describe(second);
    EXPECT_EQ(second.out, "") << Describe(second);  // no summary, no finalized table
  }
  ASSERT_TRUE(StillRunning(first)) << "the first collection ended before the second one tried; make it longer";
  EXPECT_EQ(WaitProcess(first), 0) << ReadText(dir + "/first.err");
  // Only the first collector wrote the log: no second "resume:" line in it.
  EXPECT_EQ(ReadText(run_dir + "/collector.log").find("resume:"), std::string::npos);

  // A final resume finds the lock free and nothing left to run.
  auto last = RunProcess(LockArgs(dir, {"--resume"}), 120);
  ASSERT_EQ(last.exit_code, 0) << Describe(last);
  EXPECT_NE(last.err.find("resume: " + std::to_string(kPlanned) + " cases already done, 0 failed ones kept"),
            std::string::npos)
      << Describe(last);
  EXPECT_NE(last.err.find(", 0 to run"), std::string::npos) << Describe(last);
  ExpectEachCaseOncePassed(run_dir + "/journal.jsonl", planned);
  auto tables = FindTables(dir + "/data");
  ASSERT_EQ(tables.size(), 1u);
  auto keys = RowKeys(tables[0]);
  EXPECT_EQ(keys.size(), kPlanned);
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), keys.size()) << "duplicate rows";
  fs::remove_all(dir);
}

TEST(RunLockE2E, TheLockFileOfACollectorKilledWithSigkillDoesNotBlockAResume) {
  std::string dir = MakeTempDir("sc_lockkill_");
  const std::string run_dir = dir + "/run";
  std::set<std::string> planned = PlannedIds(dir);

  pid_t first = StartProcess(LockArgs(dir, {}), dir + "/first.out", dir + "/first.err");
  // Kill it once it has recorded a case, mid-run.
  ASSERT_TRUE(WaitForRecord(run_dir)) << ReadText(dir + "/first.err");
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  ASSERT_EQ(WaitProcess(first), -SIGKILL) << "it finished before the kill; make it longer";
  std::size_t before = collect::ReadJournal(run_dir + "/journal.jsonl").records.size();
  ASSERT_LT(before, planned.size()) << "it finished before the kill; make it longer";
  // The stale lock file is still there and still names the dead collector.
  ASSERT_EQ(ReadText(run_dir + "/.lock").rfind(std::to_string(first) + " ", 0), 0u) << ReadText(run_dir + "/.lock");

  auto resumed = RunProcess(LockArgs(dir, {"--resume"}), 300);
  ASSERT_EQ(resumed.exit_code, 0) << Describe(resumed);
  EXPECT_EQ(resumed.err.find("in use by pid"), std::string::npos) << Describe(resumed);
  EXPECT_NE(resumed.err.find(", " + std::to_string(planned.size() - before) + " to run"), std::string::npos)
      << Describe(resumed);
  ExpectEachCaseOncePassed(run_dir + "/journal.jsonl", planned);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servecast::testing
