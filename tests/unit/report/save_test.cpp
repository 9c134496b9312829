#include "report/save.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "fixture.h"

namespace servecast::report {
namespace {

namespace fs = std::filesystem;

class SaveReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("servecast_save_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST(SanitizeName, ReplacesUnsafeCharacters) {
  EXPECT_EQ(SanitizeName("Qwen/Qwen3-32B"), "Qwen_Qwen3-32B");
  EXPECT_EQ(SanitizeName("a b<c>&d.e_f"), "a_b_c__d.e_f");
  EXPECT_EQ(SanitizeName(""), "_");
  EXPECT_EQ(SanitizeName(".."), "_..");
}

TEST(ReportFolderName, Layout) {
  const auto m = testing::MakeModel();
  auto c = testing::MakeContext(m);
  EXPECT_EQ(ReportFolderName(c), "acme__Tiny_____Co__tiny_gpu_trtllm_isl4000_osl1000_ttft2000_tpot25");
  c.inputs.tpot_ms = 12.5;
  EXPECT_TRUE(ReportFolderName(c).ends_with("_ttft2000_tpot12.5")) << ReportFolderName(c);
  c.inputs.request_latency_ms = 30000;
  EXPECT_NE(ReportFolderName(c).find("_ttft2000_reqlat30000"), std::string::npos);
}

TEST_F(SaveReportTest, WritesEveryFileAndNeverOverwrites) {
  const auto r = testing::MakeResult();
  const auto m = testing::MakeModel();
  const auto c = testing::MakeContext(m);
  const std::string first = SaveReport(r, c, dir_.string());
  EXPECT_EQ(fs::path(first).filename().string(), ReportFolderName(c));
  for (const char* f : {"summary.json", "report.html", "agg/pareto.csv", "agg/frontier.csv", "agg/best_config_topn.csv",
                        "disagg/pareto.csv", "disagg/frontier.csv", "disagg/best_config_topn.csv"})
    EXPECT_TRUE(fs::is_regular_file(fs::path(first) / f)) << f;
  // summary.json is the --json document.
  EXPECT_EQ(nlohmann::ordered_json::parse(ReadFile(first + "/summary.json")), JsonReport(r, c));
  // No temp files are left behind.
  for (const auto& e : fs::recursive_directory_iterator(first))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();

  const std::string second = SaveReport(r, c, dir_.string());
  const std::string third = SaveReport(r, c, dir_.string());
  EXPECT_EQ(second, first + "-2");
  EXPECT_EQ(third, first + "-3");
  EXPECT_TRUE(fs::is_regular_file(fs::path(third) / "report.html"));
}

}  // namespace
}  // namespace servecast::report
