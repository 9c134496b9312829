// FP4 asked of a GPU without fp4 math (issue 24 item 3), with the real binary:
// `estimate --gemm-quant nvfp4 --moe-quant nvfp4` for gpt-oss on H200 answers with
// what the engines run there (bf16 GEMMs, w4a16_mxfp4 experts), says so in a note,
// and prints what the checkpoint's own quantization prints; `validate` answers the
// gpt-oss rows of h200_dev2.csv labelled nvfp4 instead of missing them.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "e2e_common.h"
#include "shared_data.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::vector<std::string> EstimateArgs(std::vector<std::string> extra) {
  std::vector<std::string> a = {kBin,       "estimate", "--model",   "openai/gpt-oss-120b",
                                "--system", "h200_sxm", "--backend", "vllm",
                                "--mode",   "agg",      "--tp",      "4",
                                "--batch",  "8",        "--isl",     "1024",
                                "--osl",    "128",      "--json"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

bool HasNote(const Json& notes, const std::string& start) {
  for (const auto& n : notes)
    if (n.get<std::string>().rfind(start, 0) == 0) return true;
  return false;
}

TEST(Fp4OnHopperE2E, EstimateAnswersWithBf16GemmsAndMxfp4ExpertsAndANote) {
  const ProcessResult r = RunProcess(EstimateArgs({"--gemm-quant", "nvfp4", "--moe-quant", "nvfp4"}), 120, kSource);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["quant"]["gemm"], "bfloat16") << r.out;
  EXPECT_EQ(j["quant"]["moe"], "w4a16_mxfp4") << r.out;
  EXPECT_TRUE(HasNote(j["notes"], "gemm nvfp4: user override (--gemm-quant")) << j["notes"].dump(1);
  EXPECT_TRUE(HasNote(j["notes"], "gemm nvfp4 -> bfloat16: sm 90 has no FP4 tensor cores")) << j["notes"].dump(1);
  EXPECT_TRUE(HasNote(j["notes"], "moe nvfp4 -> w4a16_mxfp4: sm 90 has no FP4 tensor cores")) << j["notes"].dump(1);

  // What the engines run on Hopper is what gpt-oss's checkpoint is: the same answer.
  const ProcessResult plain = RunProcess(EstimateArgs({}), 120, kSource);
  ASSERT_EQ(plain.exit_code, 0) << Describe(plain);
  const Json p = Json::parse(plain.out);
  EXPECT_FALSE(HasNote(p["notes"], "gemm nvfp4 -> bfloat16")) << p["notes"].dump(1);
  Json a = j, b = p;
  a.erase("notes");
  b.erase("notes");
  EXPECT_EQ(a, b) << "fp4 on H200:\n" << a.dump(1) << "\ncheckpoint quantization:\n" << b.dump(1);

  // The text output prints the notes too.
  std::vector<std::string> text = EstimateArgs({"--gemm-quant", "nvfp4", "--moe-quant", "nvfp4"});
  text.erase(std::find(text.begin(), text.end(), "--json"));
  const ProcessResult t = RunProcess(text, 120, kSource);
  ASSERT_EQ(t.exit_code, 0) << Describe(t);
  EXPECT_NE(t.out.find("quant     gemm bfloat16, moe w4a16_mxfp4"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("note      moe nvfp4 -> w4a16_mxfp4: sm 90 has no FP4 tensor cores"), std::string::npos)
      << t.out;
}

TEST(Fp4OnHopperE2E, ValidateAnswersTheNvfp4GptOssRowsOfH200Dev2) {
  const std::string dev = kSource + "/../shared/reference/silicon/h200_dev2.csv";
  SERVECAST_NEED_SHARED(fs::exists(dev), "no " + dev);
  std::ifstream in(dev);
  std::string header, line;
  ASSERT_TRUE(std::getline(in, header));
  std::ostringstream rows;
  rows << header << "\n";
  int n = 0;
  while (std::getline(in, line))
    if (line.find("openai/gpt-oss-120b") != std::string::npos && line.find(",nvfp4,nvfp4,") != std::string::npos) {
      rows << line << "\n";
      ++n;
    }
  ASSERT_GT(n, 10) << "h200_dev2.csv has no nvfp4 gpt-oss-120b rows";
  const std::string dir = MakeTempDir("sc_fp4_");
  std::ofstream(dir + "/rows.csv") << rows.str();

  const ProcessResult r =
      RunProcess({kBin, "validate", "--silicon", dir + "/rows.csv", "--data", "cuda", "--json"}, 300, kSource);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json j = Json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), static_cast<std::size_t>(n));
  for (const auto& row : j["rows"]) {
    EXPECT_TRUE(row["predicted"].get<bool>()) << row.dump();
    EXPECT_TRUE(HasNote(row["notes"], "gemm nvfp4 -> bfloat16: sm 90")) << row.dump();
    EXPECT_TRUE(HasNote(row["notes"], "moe nvfp4 -> w4a16_mxfp4: sm 90")) << row.dump();
    EXPECT_GT(row["prediction"]["ttft_ms"].get<double>(), 0) << row.dump();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servecast::testing
