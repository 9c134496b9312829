// Multi-process ops end to end with a real collective: the cpu backend's
// custom_allreduce (a float32 sum over POSIX shared memory) run by gangs of worker
// processes (--gpus 0,1), by ranks a launcher started (--launched), and with one
// rank crashing or hanging (servecast-test's allreduce_fault). Every run must leave
// no worker process and no /dev/shm segment behind.
#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <sstream>

#include "e2e_common.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;

const std::vector<std::int64_t> kSizes = {1024, 65536, 1048576};  // cases/base_ops/custom_allreduce.yaml, cpu sweep

// The group ids a collector process makes start with "servecast-<its pid>-".
std::string GroupPrefix(pid_t collector) {
  return "servecast-" + std::to_string(collector) + "-";
}

// /dev/shm entries of that collector's groups.
std::vector<std::string> LeftoverSegments(pid_t collector) {
  std::vector<std::string> out;
  const std::string prefix = GroupPrefix(collector);
  for (const auto& e : fs::directory_iterator("/dev/shm")) {
    std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) == 0) out.push_back(n);
  }
  return out;
}

// Live processes whose command line names one of that collector's groups (its
// gang workers, started with --group-id servecast-<pid>-...).
std::vector<std::string> LeftoverWorkers(pid_t collector) {
  std::vector<std::string> out;
  const std::string prefix = GroupPrefix(collector);
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string pid = e.path().filename().string();
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd;
    try {
      cmd = ReadText(e.path().string() + "/cmdline");
    } catch (...) {
      continue;  // gone meanwhile
    }
    if (cmd.find(prefix) != std::string::npos) out.push_back(pid);
  }
  return out;
}

struct Run {
  pid_t pid = -1;
  int exit_code = -1;
  std::string out, err;
};

// Runs argv (through /usr/bin/env with `env` settings) to completion; the pid is
// the collector's own (env execs it).
Run RunWithPid(const std::vector<std::string>& argv, const std::string& dir, const std::string& tag,
               const std::vector<std::string>& env = {}) {
  std::vector<std::string> a = {"/usr/bin/env"};
  a.insert(a.end(), env.begin(), env.end());
  a.insert(a.end(), argv.begin(), argv.end());
  Run r;
  r.pid = StartProcess(a, dir + "/" + tag + ".out", dir + "/" + tag + ".err");
  r.exit_code = WaitProcess(r.pid);
  r.out = ReadText(dir + "/" + tag + ".out");
  r.err = ReadText(dir + "/" + tag + ".err");
  return r;
}

std::string Describe(const Run& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out + "\n--- stderr\n" + r.err;
}

void ExpectNothingLeft(pid_t collector) {
  EXPECT_TRUE(LeftoverSegments(collector).empty()) << LeftoverSegments(collector).front();
  EXPECT_TRUE(LeftoverWorkers(collector).empty()) << "worker pid " << LeftoverWorkers(collector).front();
}

// The case records of a journal, in order.
std::vector<nlohmann::json> CaseRecords(const std::string& journal) {
  std::vector<nlohmann::json> out;
  std::istringstream in(ReadText(journal));
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    if (j.value("type", "") == "case") out.push_back(j);
  }
  return out;
}

// The custom_allreduce_perf table: one row per size, with the keys and columns the op promises.
void ExpectAllReduceTable(const std::string& csv, const std::string& op_name) {
  Table t = Table::ReadCsv(csv);
  ASSERT_EQ(t.num_rows(), kSizes.size());
  std::vector<std::int64_t> sizes;
  for (std::size_t i = 0; i < t.num_rows(); ++i) {
    EXPECT_EQ(t.GetString(i, t.ColumnIndex("op_name")), op_name);
    EXPECT_EQ(t.GetString(i, t.ColumnIndex("kernel_source")), "servecast_shm_allreduce");
    EXPECT_EQ(t.GetString(i, t.ColumnIndex("allreduce_dtype")), "float32");
    EXPECT_EQ(t.GetDouble(i, t.ColumnIndex("num_gpus")), 2);
    EXPECT_EQ(t.GetString(i, t.ColumnIndex("implementation")), "shm");
    double latency = t.GetDouble(i, t.ColumnIndex("latency"));
    double algbw = t.GetDouble(i, t.ColumnIndex("algbw_gbps"));
    double n = t.GetDouble(i, t.ColumnIndex("message_size"));
    EXPECT_GT(latency, 0);
    // algbw is the message's bytes over the median latency; busbw = algbw * 2(n-1)/n = algbw for 2 ranks.
    EXPECT_NEAR(algbw, 4 * n / (latency * 1e-3) / 1e9, 1e-6 * algbw);
    EXPECT_NEAR(t.GetDouble(i, t.ColumnIndex("busbw_gbps")), algbw, 1e-9 * algbw);
    EXPECT_GE(t.GetDouble(i, t.ColumnIndex("samples")), 1);
    sizes.push_back(static_cast<std::int64_t>(n));
  }
  std::sort(sizes.begin(), sizes.end());
  EXPECT_EQ(sizes, kSizes);
}

std::vector<std::string> AllReduceArgs(const std::string& bin, std::vector<std::string> extra,
                                       const std::string& cases = kCases) {
  std::vector<std::string> common = {"--ops", "custom_allreduce", "--timing-budget-s", "0.05", "--timeout-s", "20"};
  common.insert(common.end(), extra.begin(), extra.end());
  return CollectArgs(bin, common, cases);
}

TEST(GangE2E, TwoWorkerAllReduceWritesCheckedRows) {
  std::string dir = MakeTempDir("sc_gang_");
  auto r = RunWithPid(AllReduceArgs(kBin, {"--gpus", "0,1", "--out", dir + "/data", "--run-dir", dir + "/run"}), dir,
                      "collect");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  auto tables = FindTables(dir + "/data");
  ASSERT_EQ(tables.size(), 1u) << Describe(r);
  EXPECT_EQ(fs::path(tables[0]).filename(), "custom_allreduce_perf.csv");
  EXPECT_EQ(fs::path(tables[0]).parent_path().parent_path().parent_path().filename(), "comm");
  ExpectAllReduceTable(tables[0], "custom_allreduce");
  auto records = CaseRecords(dir + "/run/journal.jsonl");
  ASSERT_EQ(records.size(), kSizes.size());
  for (const auto& rec : records) EXPECT_EQ(rec["status"], "passed") << rec.dump();
  auto c = RunProcess({kBin, "check", dir + "/data", "--systems", kSystems}, 60);
  EXPECT_EQ(c.exit_code, 0) << testing::Describe(c);
  EXPECT_NE(c.out.find("custom_allreduce_perf.csv"), std::string::npos) << c.out;
  ExpectNothingLeft(r.pid);
  fs::remove_all(dir);
}

TEST(GangE2E, OneGpuDropsTheCasesAtPlanTime) {
  std::string dir = MakeTempDir("sc_gang1_");
  auto p = RunProcess(AllReduceArgs(kBin, {"--gpus", "0", "--plan-only", "--list"}), 30);
  ASSERT_EQ(p.exit_code, 0) << testing::Describe(p);
  EXPECT_NE(p.out.find("total cases to run: 0"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("dropped 3: custom_allreduce [requirements] needs 2 GPUs; this run has 1 (--gpus)"),
            std::string::npos)
      << p.out;
  // Run for real: nothing starts, nothing hangs; the cases are not_supported with
  // the reason, which is a declared skip (exit 0), not an op that failed to produce rows.
  auto r = RunWithPid(AllReduceArgs(kBin, {"--gpus", "0", "--out", dir + "/data", "--run-dir", dir + "/run"}), dir,
                      "collect");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(FindTables(dir + "/data").empty());
  EXPECT_TRUE(CaseRecords(dir + "/run/journal.jsonl").empty());
  auto summary = ReadJson(dir + "/run/collection_summary_cpu.json");
  const auto& op = summary["ops"]["custom_allreduce"];
  EXPECT_EQ(op["cases"]["not_supported"], 3) << op.dump(2);
  EXPECT_EQ(op["skipped_by_reason"]["not_supported: needs 2 GPUs; this run has 1 (--gpus)"], 3) << op.dump(2);
  EXPECT_FALSE(op["zero_rows"].get<bool>());
  ExpectNothingLeft(r.pid);
  fs::remove_all(dir);
}

// Two ranks as a launcher would start them (SERVECAST_RANK/WORLD/LOCAL_RANK/LAUNCH_ID).
std::pair<Run, Run> Launch(const std::string& dir, const std::string& tag, bool resume) {
  const std::string launch_id = tag + "-" + std::to_string(::getpid()) + "-" +
                                std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  std::vector<std::string> extra = {"--launched", "--run-dir", dir + "/run", "--out", dir + "/data"};
  if (resume) extra.push_back("--resume");
  auto argv = AllReduceArgs(kBin, extra);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> a = {"/usr/bin/env", "SERVECAST_RANK=" + std::to_string(rank), "SERVECAST_WORLD=2",
                                  "SERVECAST_LOCAL_RANK=" + std::to_string(rank), "SERVECAST_LAUNCH_ID=" + launch_id};
    a.insert(a.end(), argv.begin(), argv.end());
    std::string base = dir + "/" + tag + std::to_string(rank);
    pids.push_back(StartProcess(a, base + ".out", base + ".err"));
  }
  Run runs[2];
  for (int rank = 0; rank < 2; ++rank) {
    std::string base = dir + "/" + tag + std::to_string(rank);
    runs[rank].pid = pids[static_cast<std::size_t>(rank)];
    runs[rank].exit_code = WaitProcess(pids[static_cast<std::size_t>(rank)]);
    runs[rank].out = ReadText(base + ".out");
    runs[rank].err = ReadText(base + ".err");
  }
  return {runs[0], runs[1]};
}

TEST(GangE2E, LaunchedRanksCollectOnceAndResumeDuplicatesNothing) {
  std::string dir = MakeTempDir("sc_launch_");
  auto [r0, r1] = Launch(dir, "first", false);
  ASSERT_EQ(r0.exit_code, 0) << Describe(r0);
  ASSERT_EQ(r1.exit_code, 0) << Describe(r1);
  auto tables = FindTables(dir + "/data");
  ASSERT_EQ(tables.size(), 1u);
  ExpectAllReduceTable(tables[0], "custom_allreduce");
  auto records = CaseRecords(dir + "/run/journal.jsonl");
  std::map<std::string, int> seen;
  for (const auto& rec : records) {
    ++seen[rec["id"].get<std::string>()];
    EXPECT_EQ(rec["status"], "passed") << rec.dump();
  }
  ASSERT_EQ(seen.size(), kSizes.size());
  for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << id;
  EXPECT_TRUE(fs::exists(dir + "/run/collector.rank1.log"));
  ExpectNothingLeft(r0.pid);

  // The same launch again with --resume (a new launch id): nothing runs, nothing doubles.
  auto [s0, s1] = Launch(dir, "again", true);
  ASSERT_EQ(s0.exit_code, 0) << Describe(s0);
  ASSERT_EQ(s1.exit_code, 0) << Describe(s1);
  EXPECT_NE(s0.err.find("rank 0 of 2 (servecast, local rank 0, device 0): 0 cases"), std::string::npos) << s0.err;
  EXPECT_NE(s1.err.find("rank 1 of 2 (servecast, local rank 1, device 1): 0 cases"), std::string::npos) << s1.err;
  EXPECT_EQ(CaseRecords(dir + "/run/journal.jsonl").size(), records.size());
  tables = FindTables(dir + "/data");
  ASSERT_EQ(tables.size(), 1u);
  ExpectAllReduceTable(tables[0], "custom_allreduce");
  auto c = RunProcess({kBin, "check", dir + "/data", "--systems", kSystems}, 60);
  EXPECT_EQ(c.exit_code, 0) << testing::Describe(c);
  ExpectNothingLeft(s0.pid);
  fs::remove_all(dir);
}

TEST(GangE2E, ARankThatCrashesOrHangsCostsOnlyItsCase) {
  std::string dir = MakeTempDir("sc_gangfault_");
  std::string cases = dir + "/cases";
  // Rank 1 segfaults on size 2048 and hangs on size 8192; every other case must pass
  // on a fresh gang.
  WriteText(cases + "/base_ops/allreduce_fault.yaml",
            "op: allreduce_fault\n"
            "sweeps:\n"
            "  - backends: [cpu]\n"
            "    axes:\n"
            "      allreduce_dtype: [float32]\n"
            "      num_gpus: [2]\n"
            "      message_size: [1024, 2048, 4096]\n"
            "      fault: [segv]\n"
            "      fault_size: [2048]\n"
            "      fault_rank: [1]\n"
            "  - backends: [cpu]\n"
            "    axes:\n"
            "      allreduce_dtype: [float32]\n"
            "      num_gpus: [2]\n"
            "      message_size: [8192, 16384]\n"
            "      fault: [hang]\n"
            "      fault_size: [8192]\n"
            "      fault_rank: [1]\n");
  auto r = RunWithPid(CollectArgs(kTestBin,
                                  {"--ops", "allreduce_fault", "--gpus", "0,1", "--timeout-s", "2", "--timing-budget-s",
                                   "0.05", "--system", "cpu_host", "--out", dir + "/data", "--run-dir", dir + "/run"},
                                  cases),
                      dir, "collect");
  ASSERT_EQ(r.exit_code, 1) << Describe(r);  // cases failed; the rest is finalized
  auto records = CaseRecords(dir + "/run/journal.jsonl");
  ASSERT_EQ(records.size(), 5u) << Describe(r);
  std::map<std::int64_t, nlohmann::json> by_size;
  std::size_t crash_at = 0, hang_at = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    auto size = records[i]["params"]["message_size"].get<std::int64_t>();
    by_size[size] = records[i];
    if (size == 2048) crash_at = i;
    if (size == 8192) hang_at = i;
  }
  EXPECT_EQ(by_size[2048]["status"], "crashed") << by_size[2048].dump();
  EXPECT_NE(by_size[2048]["message"].get<std::string>().find("rank 1"), std::string::npos) << by_size[2048].dump();
  EXPECT_NE(by_size[2048]["message"].get<std::string>().find("Segmentation fault"), std::string::npos)
      << by_size[2048].dump();
  EXPECT_EQ(by_size[8192]["status"], "timeout") << by_size[8192].dump();
  EXPECT_NE(by_size[8192]["message"].get<std::string>().find("ranks without a result: 0, 1"), std::string::npos)
      << by_size[8192].dump();
  for (std::int64_t ok : {1024, 4096, 16384}) EXPECT_EQ(by_size[ok]["status"], "passed") << by_size[ok].dump();
  // A case after each fault ran on a restarted gang and passed.
  ASSERT_LT(crash_at + 1, records.size());
  ASSERT_LT(hang_at + 1, records.size());
  EXPECT_EQ(records[crash_at + 1]["status"], "passed") << records[crash_at + 1].dump();
  EXPECT_EQ(records[hang_at + 1]["status"], "passed") << records[hang_at + 1].dump();

  auto tables = FindTables(dir + "/data");
  ASSERT_EQ(tables.size(), 1u);
  Table t = Table::ReadCsv(tables[0]);
  std::vector<std::int64_t> sizes;
  for (std::size_t i = 0; i < t.num_rows(); ++i)
    sizes.push_back(static_cast<std::int64_t>(t.GetDouble(i, t.ColumnIndex("message_size"))));
  std::sort(sizes.begin(), sizes.end());
  EXPECT_EQ(sizes, (std::vector<std::int64_t>{1024, 4096, 16384}));
  // The killed gangs' segments (rank 0 had created them and waited in vain) are gone too.
  ExpectNothingLeft(r.pid);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servecast::testing
