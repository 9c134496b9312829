// The real binary end to end: a CPU smoke collection of the moe op gives a
// moe_perf table that `servecast check` accepts.
#include <filesystem>
#include <map>

#include "e2e_common.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;

TEST(MoeE2E, SmokeCollectThenCheckPasses) {
  std::string dir = MakeTempDir("sc_moe_");
  auto r =
      RunProcess(CollectArgs(kBin, {"--ops", "moe", "--smoke", "--out", dir + "/data", "--run-dir", dir + "/run"}));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  auto tables = FindTables(dir + "/data");
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_EQ(fs::path(tables[0]).filename(), "moe_perf.csv");
  Table t = Table::ReadCsv(tables[0]);
  EXPECT_EQ(t.num_rows(), 4u);  // --smoke: 4 cases per op
  for (const char* col : {"moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
                          "moe_ep_size", "distribution"})
    EXPECT_NO_THROW(t.ColumnIndex(col)) << col;
  for (std::size_t i = 0; i < t.num_rows(); ++i) {
    EXPECT_GT(t.GetDouble(i, t.ColumnIndex("latency")), 0);
    EXPECT_EQ(ToString(t.Get(i, t.ColumnIndex("kernel_source"))), "servecast_cpu_moe");
  }
  auto summary = ReadJson(dir + "/run/collection_summary_cpu.json");
  EXPECT_EQ(summary["ops"]["moe"]["cases"]["passed"], 4);
  auto c = RunProcess({kBin, "check", dir + "/data", "--systems", kSystems});
  EXPECT_EQ(c.exit_code, 0) << Describe(c);
  EXPECT_NE(c.out.find("moe_perf.csv"), std::string::npos) << c.out;
  fs::remove_all(dir);
}

// TRT-LLM's MoE dispatch is one rule on every SM (issue 28 item 10: AIC keys it on
// sm == 100, so B300/GB300 at sm 103 took Hopper's order): attention dp gathers
// and scatters over NCCL, tensor parallel attention all-reduces, on sm 90, 100
// and 103 alike. The rule's premise is asserted too: TRT-LLM refuses attention
// dp with tp > 1, the only case where the two orders would differ.
TEST(MoeE2E, TrtllmDispatchIsOneRuleOnEverySm) {
  std::map<std::string, std::string> first;  // per parallel config: the dispatch ops on h200_sxm
  for (const std::string system : {"h200_sxm", "b200_sxm", "b300_sxm", "gb300"}) {
    SCOPED_TRACE(system);
    for (const auto& [par, collective] :
         {std::pair<std::vector<std::string>, std::string>{{"--tp", "1", "--dp", "8"}, "all_gather"},
          {{"--tp", "8"}, "all_reduce"}}) {
      std::vector<std::string> argv = {kBin,    "estimate", "--model", "Qwen/Qwen3-30B-A3B", "--system", system,
                                       "--database-mode", "sol", "--json", "--detail", "all"};
      argv.insert(argv.end(), par.begin(), par.end());
      const ProcessResult r = RunProcess(argv);
      ASSERT_EQ(r.exit_code, 0) << Describe(r);
      const nlohmann::json j = nlohmann::json::parse(r.out);
      bool found = false;
      std::string dispatch;  // kind and detail (collective, elements, GPUs) of every dispatch op
      for (const char* phase : {"context", "generation"})
        for (const auto& op : j[phase]["ops"]) {
          const std::string name = op["name"];
          if (name.find("dispatch") == std::string::npos) continue;
          dispatch += name + " " + op["kind"].get<std::string>() + " " + op["detail"].get<std::string>() + "\n";
          if (name == "generation_moe_pre_dispatch") {
            found = true;
            EXPECT_NE(op["detail"].get<std::string>().find(collective), std::string::npos) << op.dump();
          }
        }
      EXPECT_TRUE(found) << r.out.substr(0, 2000);
      // The same ops with the same volumes on every SM.
      const std::string key = par[1];
      if (!first.count(key)) first[key] = dispatch;
      EXPECT_EQ(dispatch, first[key]);
    }
    const ProcessResult both = RunProcess({kBin, "estimate", "--model", "Qwen/Qwen3-30B-A3B", "--system", system,
                                           "--database-mode", "sol", "--tp", "2", "--dp", "4"});
    EXPECT_EQ(both.exit_code, 2) << Describe(both);
    EXPECT_NE(both.err.find("trtllm: attention dp > 1 needs tp 1"), std::string::npos) << both.err;
  }
}

}  // namespace
}  // namespace servecast::testing
