#include "core/progress.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace servecast {
namespace {

TEST(FormatDurationTest, SecondsMinutesHours) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(12), "12s");
  EXPECT_EQ(FormatDuration(59.4), "59s");
  EXPECT_EQ(FormatDuration(59.6), "1m00s");  // rounds to the nearest second
  EXPECT_EQ(FormatDuration(185), "3m05s");
  EXPECT_EQ(FormatDuration(3599), "59m59s");
  EXPECT_EQ(FormatDuration(3600), "1h00m");
  EXPECT_EQ(FormatDuration(3720), "1h02m");
  EXPECT_EQ(FormatDuration(36000 + 59 * 60 + 59), "10h59m");
}

TEST(FormatDurationTest, UnknownForNegativeOrNonFinite) {
  EXPECT_EQ(FormatDuration(-1), "?");
  EXPECT_EQ(FormatDuration(NAN), "?");
  EXPECT_EQ(FormatDuration(INFINITY), "?");
}

// A progress bar writing to a plain file (not a terminal): no bar, plain lines.
class ProgressBarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = std::tmpfile();
    ASSERT_NE(file_, nullptr);
  }
  void TearDown() override {
    if (file_) std::fclose(file_);
  }
  std::string Contents() {
    std::fflush(file_);
    std::rewind(file_);
    std::string out;
    char buf[256];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), file_)) > 0) out.append(buf, n);
    return out;
  }
  std::FILE* file_ = nullptr;
};

TEST_F(ProgressBarTest, RenderShowsCountPercentRateElapsedEtaAndFailures) {
  ProgressBar bar("gemm", 20, file_, 1000);
  EXPECT_FALSE(bar.is_tty());
  EXPECT_EQ(bar.Render(5, 1, 10), "gemm 5/20 (25%) 0.5/s elapsed 10s ETA 30s failed 1");
}

TEST_F(ProgressBarTest, RenderWhenDoneHasZeroEta) {
  ProgressBar bar("ops", 4, file_, 1000);
  EXPECT_EQ(bar.Render(4, 0, 125), "ops 4/4 (100%) 0.0/s elapsed 2m05s ETA 0s failed 0");
}

TEST_F(ProgressBarTest, RenderBeforeAnyTimeHasPassedHasUnknownEta) {
  ProgressBar bar("x", 10, file_, 1000);
  EXPECT_EQ(bar.Render(0, 0, 0), "x 0/10 (0%) 0.0/s elapsed 0s ETA ? failed 0");
}

TEST_F(ProgressBarTest, RenderLongEtaInHours) {
  ProgressBar bar("big", 10000, file_, 1000);
  // 100 done in 100 s: 9900 s left = 2h45m.
  EXPECT_EQ(bar.Render(100, 3, 100), "big 100/10000 (1%) 1.0/s elapsed 1m40s ETA 2h45m failed 3");
}

TEST_F(ProgressBarTest, FinishPrintsTheFinalStateOnce) {
  {
    ProgressBar bar("run", 10, file_, 1000);
    bar.Update(3, 1);  // within the print interval: nothing printed
    EXPECT_EQ(Contents(), "");
    bar.Finish();
    bar.Finish();
  }  // the destructor does not print again
  std::string out = Contents();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_EQ(out.rfind("run 3/10 (30%)", 0), 0u) << out;
  EXPECT_NE(out.find("failed 1\n"), std::string::npos) << out;
}

TEST_F(ProgressBarTest, DestructorPrintsWhenFinishWasNotCalled) {
  { ProgressBar bar("d", 2, file_, 1000); }
  std::string out = Contents();
  EXPECT_EQ(out.rfind("d 0/2 (0%)", 0), 0u) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

TEST_F(ProgressBarTest, UpdatePrintsPlainLinesAfterTheInterval) {
  ProgressBar bar("p", 5, file_, 0);  // interval 0: every update prints
  bar.Update(1, 0);
  bar.Update(2, 1);
  std::string out = Contents();
  EXPECT_NE(out.find("p 1/5 (20%)"), std::string::npos) << out;
  EXPECT_NE(out.find("p 2/5 (40%)"), std::string::npos) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos) << "no terminal control in a log";
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2) << out;
}

}  // namespace
}  // namespace servecast
