// Perf rows the table declarations refuse never reach an answer: the real binary
// exits 2 naming the file, the line and the column (a negative latency gave a
// negative TTFT with exit 0 before).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/fs.h"
#include "e2e_common.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;

TEST(TableRowsE2E, ANegativeOrNanLatencyStopsTheEstimateWithFileLineAndColumn) {
  const std::string version = "13.0-cublaslt13.1-cudnn9.14-nccl2.28";
  for (const std::string bad : {"-0.5", "nan"}) {
    SCOPED_TRACE(bad);
    const std::string root = MakeTempDir("sc_rows_");
    fs::copy(kSource + "/systems/data/h200_sxm", root + "/h200_sxm", fs::copy_options::recursive);
    const std::string dir = root + "/h200_sxm/gemm/cuda/" + version;
    // The bundled GEMM table as CSV with its first row's latency replaced (a bf16
    // row: rows are sorted by dtype, and Llama-3.1-8B reads the bf16 slice).
    auto conv = RunProcess({kBin, "db", "convert", dir + "/gemm_perf.parquet", root + "/gemm_perf.csv"});
    ASSERT_EQ(conv.exit_code, 0) << Describe(conv);
    fs::remove(dir + "/gemm_perf.parquet");
    std::string text = ReadFile(root + "/gemm_perf.csv");
    const std::size_t row2 = text.find('\n') + 1, end2 = text.find('\n', row2);
    std::string line = text.substr(row2, end2 - row2);
    ASSERT_NE(line.find(",bfloat16,"), std::string::npos) << line;
    // latency is the column after k: header framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency
    std::size_t pos = line.find(",bfloat16,");
    for (int i = 0; i < 4; ++i) pos = line.find(',', pos + 1);
    const std::size_t stop = line.find(',', pos + 1);
    line = line.substr(0, pos + 1) + bad + line.substr(stop);
    text = text.substr(0, row2) + line + text.substr(end2);
    std::ofstream(dir + "/gemm_perf.csv") << text;
    fs::remove(root + "/gemm_perf.csv");
    const ProcessResult r = RunProcess({kBin, "estimate", "--model", "meta-llama/Meta-Llama-3.1-8B", "--system",
                                        "h200_sxm", "--mode", "agg", "--batch", "32", "--data-root", root,
                                        "--systems", kSystems});
    EXPECT_EQ(r.exit_code, 2) << Describe(r);
    EXPECT_NE(r.err.find(dir + "/gemm_perf.csv:2: column 'latency' is " + bad + " (table gemm_perf); expected a "
                         "finite latency > 0 (ms)"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.out.find("TTFT"), std::string::npos) << r.out;
    fs::remove_all(root);
  }
}

// A text cell in a numeric column is named where it is (the line of the first cell
// that is not a number), not as "a text column" at the first line.
TEST(TableRowsE2E, ATextLatencyIsNamedAtItsLine) {
  const std::string root = MakeTempDir("sc_rows_text_");
  fs::copy(kSource + "/tests/goldens/data", root, fs::copy_options::recursive);
  const std::string file = root + "/tiny_gpu/gemm/dense/1/gemm_perf.csv";
  std::string text = ReadFile(file);
  // Line 4: the third data row, its latency (the column after k) made text.
  std::size_t start = 0;
  for (int i = 0; i < 3; ++i) start = text.find('\n', start) + 1;
  const std::size_t end = text.find('\n', start);
  std::string line = text.substr(start, end - start);
  const std::string header = text.substr(0, text.find('\n'));
  int col = 0;
  for (std::size_t p = 0; p < header.find("latency"); ++p) col += header[p] == ',';
  std::size_t a = 0;
  for (int i = 0; i < col; ++i) a = line.find(',', a) + 1;
  const std::size_t next = line.find(',', a);
  line = line.substr(0, a) + "abc" + (next == std::string::npos ? "" : line.substr(next));
  std::ofstream(file) << text.substr(0, start) + line + text.substr(end);
  const ProcessResult r =
      RunProcess({kBin, "estimate", "--model", kSource + "/tests/goldens/models/tiny-dense", "--system", "tiny_gpu",
                  "--systems", kSource + "/tests/goldens/systems", "--data-root", root, "--data", "dense/1"});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_NE(r.err.find(file + ":4: column 'latency' is 'abc', not a number (table gemm_perf)"), std::string::npos)
      << r.err;
  fs::remove_all(root);
}

// A key of the wrong type or range is refused when the table loads, with file,
// line and column (a num_tokens of -1024 or 1024.7 was interpolated over before;
// 128.0 or 1e30 in an integer key gave "column 'm' is not an integer column",
// naming neither file nor line). `check` refuses the same rows
// (BadInputE2E.CheckRejectsBadTables).
TEST(TableRowsE2E, AKeyOutsideItsDeclarationStopsTheEstimateWithFileLineAndColumn) {
  struct Bad {
    std::string cell, says;
  };
  const Bad bad[] = {
      {"-1024", ":3: column 'm' is -1024 (table gemm_perf); expected an integer >= 1 (a key of gemm_perf)"},
      {"1024.7", ":3: column 'm' is 1024.7 (table gemm_perf); expected an integer >= 1 (a key of gemm_perf)"},
      {"nan", ":3: column 'm' is nan (table gemm_perf)"},
      {"128.0", ":3: key 'm': '128.0' is not an integer; expected an integer (the column's declared type)"},
      {"1e30", ":3: key 'm': '1e30' is not an integer; expected an integer (the column's declared type)"},
      {"9223372036854775808", ":3: key 'm': '9223372036854775808' is not an integer"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.cell);
    const std::string root = MakeTempDir("sc_rows_key_");
    fs::copy(kSource + "/tests/goldens/data", root, fs::copy_options::recursive);
    const std::string file = root + "/tiny_gpu/gemm/dense/1/gemm_perf.csv";
    std::string text = ReadFile(file);
    // Line 3, the second data row: its m (the column after gemm_dtype) replaced.
    const std::size_t start = text.find('\n', text.find('\n') + 1) + 1;
    const std::size_t a = text.find(',', start) + 1, e = text.find(',', a);
    ASSERT_EQ(text.substr(0, text.find('\n')), "gemm_dtype,m,n,k,latency");
    text = text.substr(0, a) + b.cell + text.substr(e);
    std::ofstream(file) << text;
    const ProcessResult r =
        RunProcess({kBin, "estimate", "--model", kSource + "/tests/goldens/models/tiny-dense", "--system", "tiny_gpu",
                    "--systems", kSource + "/tests/goldens/systems", "--data-root", root, "--data", "dense/1"});
    EXPECT_EQ(r.exit_code, 2) << Describe(r);
    EXPECT_NE(r.err.find(file + b.says), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("TTFT"), std::string::npos) << r.out;
    fs::remove_all(root);
  }
}

// A key repeated inside one table file is refused when the table loads, as
// `servecast check` refuses it: exit 2 naming the file, both lines and the key
// (the loader kept the first row silently before). A folder whose
// collection_meta.yaml another collector wrote (AIC's trees repeat thousands of
// keys) keeps the first row, as AIC does.
TEST(TableRowsE2E, ADuplicateKeyInOneFileStopsTheEstimateWithBothLines) {
  const std::string version = "13.0-cublaslt13.1-cudnn9.14-nccl2.28";
  const std::string root = MakeTempDir("sc_rows_dup_");
  fs::copy(kSource + "/systems/data/h200_sxm", root + "/h200_sxm", fs::copy_options::recursive);
  const std::string dir = root + "/h200_sxm/gemm/cuda/" + version;
  auto conv = RunProcess({kBin, "db", "convert", dir + "/gemm_perf.parquet", root + "/gemm_perf.csv"});
  ASSERT_EQ(conv.exit_code, 0) << Describe(conv);
  fs::remove(dir + "/gemm_perf.parquet");
  std::string text = ReadFile(root + "/gemm_perf.csv");
  // The first data row (a bf16 row) again as line 3, its key unchanged.
  const std::size_t row2 = text.find('\n') + 1, end2 = text.find('\n', row2);
  const std::string line = text.substr(row2, end2 - row2);
  ASSERT_NE(line.find(",bfloat16,"), std::string::npos) << line;
  std::ofstream(dir + "/gemm_perf.csv") << text.substr(0, end2 + 1) + line + "\n" + text.substr(end2 + 1);
  fs::remove(root + "/gemm_perf.csv");
  const std::vector<std::string> estimate = {kBin,     "estimate", "--model",     "meta-llama/Meta-Llama-3.1-8B",
                                             "--system", "h200_sxm", "--mode",      "agg",
                                             "--batch",  "32",       "--data-root", root,
                                             "--systems", kSystems};
  const ProcessResult r = RunProcess(estimate);
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  // The key of that row: gemm_dtype, m, n, k, the cells from ",bfloat16," on (the
  // kernel_source before them is quoted and holds commas).
  const std::string tail = line.substr(line.find(",bfloat16,") + 1);
  std::vector<std::string> cells;
  for (std::size_t a = 0, b; a <= tail.size() && cells.size() < 4; a = b + 1) {
    b = std::min(tail.find(',', a), tail.size());
    cells.push_back(tail.substr(a, b - a));
  }
  ASSERT_EQ(cells.size(), 4u);
  const std::string key = "gemm_dtype=" + cells[0] + ", m=" + cells[1] + ", n=" + cells[2] + ", k=" + cells[3];
  EXPECT_NE(r.err.find(dir + "/gemm_perf.csv:3: duplicate key " + key + " (table gemm_perf): lines 2 and 3 hold it"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("TTFT"), std::string::npos) << r.out;
  // The same file under another collector's meta: the first row wins, exit 0.
  std::ofstream(dir + "/collection_meta.yaml") << "schema_version: 1\nprovenance: collected\n";
  const ProcessResult foreign = RunProcess(estimate);
  EXPECT_EQ(foreign.exit_code, 0) << Describe(foreign);
  EXPECT_NE(foreign.out.find("TTFT"), std::string::npos) << foreign.out;
  fs::remove_all(root);
}

// `check` names the rows timed while throttled with their share of the table and
// their clocks (issue 28 item 10), counted here from the table's CSV form.
TEST(TableRowsE2E, CheckGivesTheThrottledShareOfATable) {
  const std::string dir = kSource + "/systems/data/h200_sxm/mla_bmm/cuda/13.0-cublaslt13.1-cudnn9.14-nccl2.28";
  const std::string tmp = MakeTempDir("sc_rows_thr_");
  auto conv = RunProcess({kBin, "db", "convert", dir + "/mla_bmm_perf.parquet", tmp + "/t.csv"});
  ASSERT_EQ(conv.exit_code, 0) << Describe(conv);
  const std::string text = ReadFile(tmp + "/t.csv");
  std::size_t rows = 0, throttled = 0;
  for (std::size_t a = text.find('\n') + 1, b; a < text.size(); a = b + 1) {
    b = text.find('\n', a);
    if (b == std::string::npos) b = text.size();
    ++rows;
    throttled += text.compare(b - 2, 2, ",1") == 0;  // throttled is the last column
  }
  ASSERT_GT(throttled, 0u);
  const ProcessResult r = RunProcess({kBin, "check", dir});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  char share[32];
  std::snprintf(share, sizeof share, "%g", std::round(1000.0 * throttled / rows) / 10);
  EXPECT_NE(r.out.find(std::to_string(throttled) + " rows (" + share + "% of " + std::to_string(rows) +
                       ") measured while throttled (SM clock after timing: median "),
            std::string::npos)
      << r.out;
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace servecast::testing
