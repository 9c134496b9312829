// kill -9 the collector at random moments of a multi-op run and resume each time:
// the final tables hold exactly the cases of an uninterrupted run, with no
// duplicates and no losses, and the journal records each case once.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "collect/journal.h"
#include "e2e_common.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;

TEST(KillResumeE2E, RandomKillsLoseAndDuplicateNothing) {
  std::string dir = MakeTempDir("sc_kill_");
  std::vector<std::string> common = {"--ops",  "rmsnorm", "silu_and_mul", "attention_generation", "gemm",
                                     "--limit", "15",     "--timing-budget-s", "0.15", "--gpus", "0,1"};
  auto reference = CollectArgs(kBin, common);
  reference.insert(reference.end(), {"--out", dir + "/ref", "--run-dir", dir + "/ref_run"});
  auto r = RunProcess(reference);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);

  auto args = CollectArgs(kBin, common);
  args.insert(args.end(), {"--out", dir + "/data", "--run-dir", dir + "/run"});
  auto resume_args = args;
  resume_args.push_back("--resume");
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<int> delay_ms(100, 450);
  int kills = 0, attempts = 0;
  int last = -1;
  while (attempts++ < 40) {
    bool first = !fs::exists(dir + "/run/journal.jsonl");
    pid_t pid = StartProcess(first ? args : resume_args, dir + "/out.txt", dir + "/err.txt");
    if (kills < 5) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
      ::kill(pid, SIGKILL);
      int code = WaitProcess(pid);
      if (code == -SIGKILL) {
        ++kills;
        continue;
      }
      last = code;  // it finished before the kill landed
      if (code == 0) break;
      continue;
    }
    last = WaitProcess(pid);
    break;
  }
  ASSERT_GE(kills, 5) << "the run finished before five kills; make it longer";
  ASSERT_EQ(last, 0) << ReadText(dir + "/err.txt");

  // Exactly the reference's rows, table by table.
  auto ref_tables = FindTables(dir + "/ref"), tables = FindTables(dir + "/data");
  ASSERT_EQ(ref_tables.size(), tables.size());
  ASSERT_EQ(tables.size(), 3u);  // gemm_perf, generation_attention_perf, elementwise_perf
  for (std::size_t i = 0; i < tables.size(); ++i) {
    EXPECT_EQ(fs::path(ref_tables[i]).filename(), fs::path(tables[i]).filename());
    auto a = RowKeys(ref_tables[i]), b = RowKeys(tables[i]);
    EXPECT_EQ(a, b) << tables[i];
    std::set<std::string> unique(b.begin(), b.end());
    EXPECT_EQ(unique.size(), b.size()) << "duplicate rows in " << tables[i];
  }
  // The journal holds each case exactly once: nothing re-ran after it was recorded.
  auto journal = collect::ReadJournal(dir + "/run/journal.jsonl");
  std::set<std::string> ids;
  for (const auto& rec : journal.records) EXPECT_TRUE(ids.insert(rec.id).second) << "recorded twice: " << rec.id;
  EXPECT_EQ(ids.size(), 60u);  // 4 ops x --limit 15
  auto c = RunProcess({kBin, "check", dir + "/data", "--systems", kSystems});
  EXPECT_EQ(c.exit_code, 0) << Describe(c);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servecast::testing
