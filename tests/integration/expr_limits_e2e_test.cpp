// The expression language's limits on the real binary (issue 28, item 3): a
// --rerun-where or plan `where:` nested 10,000 deep (a segfault before) exits 2
// naming the limit, and integer overflow and division by zero in a plan's
// `where:` exit 2 naming the file and the problem instead of wrapping or
// comparing against inf.
#include <chrono>
#include <filesystem>
#include <string>

#include "e2e_common.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;

std::string Repeat(const std::string& piece, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += piece;
  return out;
}

TEST(ExprLimitsE2E, ADeepRerunWhereExits2NamingTheLimit) {
  std::string dir = MakeTempDir("sc_exprdeep_");
  // 10,000 parentheses (the segfault), 10,000 negations, a chain of 20,000 additions
  // (an argument stays under the kernel's 128 KiB per argument).
  for (const std::string& where : {Repeat("(", 10000) + "m > 1" + Repeat(")", 10000), Repeat("!", 10000) + "m",
                                   "m" + Repeat(" + 1", 20000)}) {
    auto r = RunProcess(CollectArgs(kBin, {"--ops", "gemm", "--resume", "--run-dir", dir + "/run", "--out",
                                           dir + "/data", "--rerun-where", where}),
                        120);
    EXPECT_EQ(r.exit_code, 2) << Describe(r).substr(0, 2000);
    EXPECT_NE(r.err.find("servecast: --rerun-where: expression '"), std::string::npos) << r.err.substr(0, 2000);
    EXPECT_NE(r.err.find("nested deeper than 256 levels at column "), std::string::npos) << r.err.substr(0, 2000);
    EXPECT_LT(r.err.size(), 1000u) << "the message should not repeat the whole expression";
  }
  EXPECT_FALSE(fs::exists(dir + "/run"));  // refused before any run dir is made
  fs::remove_all(dir);
}

// A cases tree whose rmsnorm sweep has one `where:` line.
std::string CasesWithWhere(const std::string& dir, const std::string& where) {
  std::string cases = dir + "/cases";
  WriteText(cases + "/base_ops/rmsnorm.yaml",
            "op: rmsnorm\nsweeps:\n  - backends: [cpu]\n    axes:\n      dtype: [float32]\n"
            "      num_tokens: [1, 16]\n      hidden_size: [1024]\n    where:\n      - \"" +
                where + "\"\n");
  return cases;
}

TEST(ExprLimitsE2E, APlanWhereThatNestsOverflowsOrDividesByZeroExits2NamingTheFile) {
  struct Bad {
    std::string where;
    std::string what;
  };
  const Bad bad[] = {
      {Repeat("(", 10000) + "num_tokens > 1" + Repeat(")", 10000), "nested deeper than 256 levels"},
      {"num_tokens * 9223372036854775807 > 0", "integer overflow in 16 * 9223372036854775807"},
      {"-num_tokens - 9223372036854775807 < 0", "integer overflow in -16 - 9223372036854775807"},
      {"num_tokens < 99999999999999999999", "integer literal '99999999999999999999' does not fit in int64"},
      {"hidden_size / (num_tokens - 1) > 0", "division by zero (1024 / 0)"},
  };
  for (const auto& b : bad) {
    std::string dir = MakeTempDir("sc_exprwhere_");
    std::string cases = CasesWithWhere(dir, b.where);
    auto r = RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--plan-only"}, cases), 120);
    EXPECT_EQ(r.exit_code, 2) << b.what << "\n" << Describe(r).substr(0, 2000);
    EXPECT_NE(r.err.find(cases + "/base_ops/rmsnorm.yaml"), std::string::npos) << r.err.substr(0, 2000);
    EXPECT_NE(r.err.find(b.what), std::string::npos) << b.what << "\n" << r.err.substr(0, 2000);
    fs::remove_all(dir);
  }
  // The same sweep with a sound `where:` plans.
  std::string dir = MakeTempDir("sc_exprwhere_");
  auto r =
      RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--plan-only"}, CasesWithWhere(dir, "num_tokens > 1")), 120);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.out.find("total cases to run: 1"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

// A sweep whose axes cross to 10^8 cases (the plan builder enumerated them for
// minutes before) is refused in closed form: exit 2 at once, naming the file, the
// sweep's line, its axis sizes and the plan's limit of 1,000,000 cases.
TEST(ExprLimitsE2E, APlanThatCrossesTo1e8CasesExits2NamingTheLimit) {
  std::string dir = MakeTempDir("sc_plancount_");
  const std::string cases = dir + "/cases";
  std::string tokens, hidden;
  for (int i = 1; i <= 10000; ++i) {
    tokens += (i > 1 ? ", " : "") + std::to_string(i);
    hidden += (i > 1 ? ", " : "") + std::to_string(64 * i);
  }
  WriteText(cases + "/base_ops/rmsnorm.yaml", "op: rmsnorm\nsweeps:\n  - backends: [cpu]\n    axes:\n"
                                             "      dtype: [float32]\n      num_tokens: [" + tokens +
                                                 "]\n      hidden_size: [" + hidden + "]\n");
  const auto start = std::chrono::steady_clock::now();
  auto r = RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--plan-only"}, cases), 60);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 2) << Describe(r).substr(0, 2000);
  EXPECT_NE(r.err.find(cases + "/base_ops/rmsnorm.yaml:3"), std::string::npos) << r.err.substr(0, 2000);
  EXPECT_NE(r.err.find("this sweep crosses to 100000000 cases (dtype 1 x num_tokens 10000 x hidden_size 10000), "
                       "taking the plan past its limit of 1000000 cases"),
            std::string::npos)
      << r.err.substr(0, 2000);
  EXPECT_LT(seconds, 20) << "refused before the grid is built";
  // The limit is on the whole plan: a sweep of 1,000 cases, then one of exactly
  // 1,000,000 (alone at the limit) is refused at the second sweep's line.
  std::string thousand, ten, hundred;
  for (int i = 1; i <= 1000; ++i) thousand += (i > 1 ? ", " : "") + std::to_string(i);
  for (int i = 1; i <= 10; ++i) ten += (i > 1 ? ", " : "") + std::to_string(i);
  for (int i = 1; i <= 100; ++i) hundred += (i > 1 ? ", " : "") + std::to_string(64 * i);
  WriteText(cases + "/base_ops/rmsnorm.yaml",
            "op: rmsnorm\nsweeps:\n  - backends: [cpu]\n    axes:\n      dtype: [float32]\n      num_tokens: [" +
                ten + "]\n      hidden_size: [" + hundred +
                "]\n  - backends: [cpu]\n    axes:\n      dtype: [float32]\n      num_tokens: [" + thousand +
                "]\n      hidden_size: [" + thousand + "]\n");
  r = RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--plan-only"}, cases), 60);
  EXPECT_EQ(r.exit_code, 2) << Describe(r).substr(0, 2000);
  EXPECT_NE(r.err.find(cases + "/base_ops/rmsnorm.yaml:8"), std::string::npos) << r.err.substr(0, 2000);
  EXPECT_NE(r.err.find("this sweep crosses to 1000000 cases (dtype 1 x num_tokens 1000 x hidden_size 1000), taking "
                       "the plan past its limit of 1000000 cases"),
            std::string::npos)
      << r.err.substr(0, 2000);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servecast::testing
