// Every numeric or named value on the command line is range-checked (issue 28
// item 4): NaN, infinities, negatives where only >= 0 makes sense, sizes that
// saturated to INT64_MAX or ran for minutes, duplicate devices and unknown
// expert loads exit 2 with a message that names the flag and the valid range
// in words (never CLI11's 1.79769e+308 bound).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "process.h"

namespace servecast::testing {
namespace {

const std::string kBinary = SERVECAST_BIN;
const std::string kSrc = SERVECAST_SOURCE_DIR;

struct BadValue {
  std::vector<std::string> args;  // after the binary
  std::string flag;               // the flag the message must name
  std::string says;               // and what it must say
};

std::vector<std::string> Estimate(std::vector<std::string> extra) {
  std::vector<std::string> a = {"estimate", "--model", "tests/goldens/models/tiny-dense", "--system", "tiny_gpu",
                                "--systems", "tests/goldens/systems", "--data-root", "tests/goldens/data",
                                "--data", "dense/1"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::vector<std::string> Default(std::vector<std::string> extra) {
  std::vector<std::string> a = {"default", "--model", "tests/goldens/models/tiny-dense", "--system", "tiny_gpu",
                                "--systems", "tests/goldens/systems", "--data-root", "tests/goldens/data",
                                "--data", "dense/1", "--total-gpus", "2"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::vector<std::string> Collect(std::vector<std::string> extra) {
  std::vector<std::string> a = {"collect", "--backend", "cpu", "--ops", "rmsnorm", "--plan-only"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(CliValuesE2E, BadValuesExit2NamingTheFlagAndTheRange) {
  const std::vector<BadValue> cases = {
      {Estimate({"--isl", "9223372036854775807"}), "--isl", "expected an integer in [1, 16777216]"},
      {Estimate({"--osl", "1000000000"}), "--osl", "out of range"},
      {Estimate({"--tp", "0"}), "--tp", "expected an integer in [1, 4096]"},
      // Expert parallelism on a dense model was accepted and ignored (--dp is refused).
      {Estimate({"--tp", "2", "--moe-ep", "2"}), "--moe-ep", "has no experts"},
      {Estimate({"--mode", "disagg", "--decode-moe-tp", "2"}), "--decode-moe-tp", "has no experts"},
      {Estimate({"--batch", "-4"}), "--batch", "out of range"},
      {Estimate({"--ctx-tokens", "-1"}), "--ctx-tokens", "out of range"},
      {Estimate({"--mtp-accepted", "nan"}), "--mtp-accepted", "not a finite number"},
      {Estimate({"--moe-distribution", "power_law_x"}), "--moe-distribution", "unknown expert load"},
      {Default({"--ttft", "nan"}), "--ttft", "not a finite number"},
      {Default({"--tpot", "inf"}), "--tpot", "not a finite number"},
      {Default({"--request-latency", "-5"}), "--request-latency", "out of range"},
      {Default({"--moe-distribution", "zipf"}), "--moe-distribution", "unknown expert load"},
      {Default({"--top-n", "0"}), "--top-n", "out of range"},
      {{"recommend", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--target-concurrency", "8", "--max-gpus",
        "100000"},
       "--max-gpus",
       "expected an integer in [1, 4096]"},
      {{"recommend", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--target-request-rate", "nan"},
       "--target-request-rate",
       "not a finite number"},
      {Collect({"--timeout-s", "0"}), "--timeout-s", "out of range"},
      {Collect({"--timing-budget-s", "nan"}), "--timing-budget-s", "not a finite number"},
      {Collect({"--worker-memory-gb", "-1"}), "--worker-memory-gb", "out of range"},
      {Collect({"--gpus", "0,0"}), "--gpus", "listed twice"},
      // Sizes inside the flag's range that ran for minutes (issue 28 item 3): the
      // decode sum of static and disagg estimates is bounded in evaluated steps,
      // the searching commands' --osl in tokens.
      {Estimate({"--osl", "16777216"}), "--osl 16777216 at --stride 32",
       "evaluates 524288 decode steps; at most 65536 are evaluated (--stride 256 or more, or --osl 2097153 or less)"},
      {Estimate({"--osl", "2097154", "--mode", "disagg"}), "--osl 2097154 at --stride 32",
       "evaluates 65537 decode steps; at most 65536"},
      {Estimate({"--osl", "70000", "--stride", "1"}), "--osl 70000 at --stride 1", "evaluates 69999 decode steps"},
      {Default({"--osl", "16777216"}), "--osl", "expected an integer in [2, 131072]"},
      {Default({"--osl", "131073"}), "--osl", "expected an integer in [2, 131072]"},
      {{"generate", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--total-gpus", "8", "--osl", "1000000"},
       "--osl",
       "expected an integer in [2, 131072]"},
      {{"recommend", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--target-concurrency", "8", "--osl",
        "16777216"},
       "--osl",
       "expected an integer in [2, 131072]"},
      {{"support", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--osl", "16777216"},
       "--osl",
       "expected an integer in [2, 131072]"},
      // Numbers that had no range check (UncheckedNumericOptions now refuses to
      // run while one is left): CLI11's 1.79e308 bound, a saturated or wrapped
      // value taken silently, NaN, an internal error on a negative GEMM size.
      {Collect({"--limit", "-1"}), "--limit", "-1 is out of range; expected an integer in [0, 1000000]"},
      {Collect({"--limit", "99999999999999999999"}), "--limit", "is not an integer"},
      {Collect({"--seed", "-1"}), "--seed", "-1 is out of range"},
      {{"check", "tests/goldens/data", "--physics-tolerance", "nan"}, "--physics-tolerance", "not a finite number"},
      {{"check", "tests/goldens/data", "--physics-tolerance", "-1"}, "--physics-tolerance", "out of range"},
      {{"db", "query", "--systems-path", "tests/goldens/data", "--system", "tiny_gpu", "--backend", "dense", "--op",
        "gemm", "--m", "-5", "--n", "4", "--k", "4", "--systems", "tests/goldens/systems"},
       "--m",
       "-5 is out of range; expected an integer in [1, 16777216]"},
      {{"db", "query", "--systems-path", "tests/goldens/data", "--system", "tiny_gpu", "--backend", "dense", "--op",
        "nccl", "--size", "nan", "--systems", "tests/goldens/systems"},
       "--size",
       "not a finite number"},
      // Empty values that fell back to a default (or exit 3 on "cannot create ''").
      {Collect({"--gpus", ""}), "--gpus", "empty; expected device indices"},
      {Collect({"--out", ""}), "--out", "empty; expected a path"},
      {Collect({"--cases", ""}), "--cases", "empty; expected a path"},
      {Default({"--save-dir", ""}), "--save-dir", "empty; expected a path"},
      {{"db", "convert", "", "x.csv"}, "in", "empty; expected a path"},
      // A data root or comparison that is not there (exit 0 with a "skipped"
      // note, or no comparison at all, before).
      {{"db", "inspect", "/nonexistent-servecast-root"}, "db inspect: data root /nonexistent-servecast-root",
       "no such folder"},
      {{"db", "query", "--systems-path", "/nonexistent-servecast-root", "--system", "tiny_gpu", "--backend", "dense",
        "--op", "gemm", "--m", "5", "--n", "4", "--k", "4", "--systems", "tests/goldens/systems"},
       "--systems-path /nonexistent-servecast-root",
       "no such folder"},
      {{"check", "systems/data/h200_sxm/mla_bmm", "--against", "/nonexistent-servecast-table"},
       "check --against /nonexistent-servecast-table",
       "no such file or folder"},
  };
  for (const BadValue& c : cases) {
    std::vector<std::string> argv = {kBinary};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    std::string line;
    for (const auto& a : c.args) line += a + " ";
    SCOPED_TRACE(line);
    const ProcessResult r = RunProcess(argv, 60, kSrc);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(c.flag), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("e+308"), std::string::npos) << r.err;
  }
}

// The largest accepted values still answer (no saturation, no minutes-long run):
// each run below is bounded by the limits above and must finish well inside its
// timeout (a 16777216-token decode at stride 32 took ~60 s per estimate and
// hours in `default` before).
TEST(CliValuesE2E, TheLimitsThemselvesAreAccepted) {
  const std::vector<std::vector<std::string>> runs = {
      {"--database-mode", "sol", "--isl", "16777216", "--osl", "16777216", "--stride", "16777216"},
      {"--osl", "2097153"},                      // 65536 steps at stride 32, on the tables
      {"--osl", "16777216", "--stride", "256"},  // the stride the message names
      {"--osl", "16777216", "--mode", "agg"},    // agg's decode is not a sum over steps
  };
  for (const auto& extra : runs) {
    std::string line;
    for (const auto& a : extra) line += a + " ";
    SCOPED_TRACE(line);
    std::vector<std::string> argv = {kBinary};
    for (const auto& a : Estimate(extra)) argv.push_back(a);
    const ProcessResult r = RunProcess(argv, 60, kSrc);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("TTFT"), std::string::npos) << r.out;
  }
  std::vector<std::string> argv = {kBinary};
  for (const auto& a : Default({"--osl", "131072"})) argv.push_back(a);
  const ProcessResult r = RunProcess(argv, 120, kSrc);
  EXPECT_NE(r.exit_code, 2) << r.err;  // answered (0) or no config met the SLA (1), never refused or timed out
  EXPECT_LT(r.exit_code, 2) << r.err;
}

}  // namespace
}  // namespace servecast::testing
