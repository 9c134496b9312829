// `servecast validate` end to end: the real binary predicts the rows of a small
// measured file (tests/goldens/validate/tiny_dev.csv) on the golden fixture
// tables, and its predictions equal `servecast estimate --mode agg` for the same
// deployments; an unknown model is listed as not predicted with its reason; a
// malformed file exits 2 naming file:line and the column; a file with no
// predictable row exits 1.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "process.h"

namespace servecast::testing {
namespace {

using Json = nlohmann::json;

const std::string kValBin = SERVECAST_BIN;
const std::string kValSource = SERVECAST_SOURCE_DIR;
const std::string kFixture = "tests/goldens/validate/tiny_dev.csv";

std::vector<std::string> ValidateArgv(const std::string& csv, bool json) {
  std::vector<std::string> a = {
      kValBin,      "validate",       "--silicon",  csv,         "--systems",   "tests/goldens/systems",
      "--models",   "models",         "--engines",  "engines",   "--data-root", "tests/goldens/data",
      "--data-map", "trtllm=dense/1", "--data-map", "vllm=moe/1"};
  if (json) a.push_back("--json");
  return a;
}

std::string Describe(const ProcessResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out + "\n--- stderr\n" + r.err;
}

// `servecast estimate --mode agg --json` for one deployment of the fixture.
Json EstimateAgg(const std::string& model, const std::string& engine, const std::string& data,
                 std::vector<std::string> extra) {
  std::vector<std::string> a = {kValBin,       "estimate",
                                "--mode",      "agg",
                                "--model",     model,
                                "--system",    "tiny_gpu",
                                "--systems",   "tests/goldens/systems",
                                "--models",    "models",
                                "--engines",   "engines",
                                "--backend",   engine,
                                "--data-root", "tests/goldens/data",
                                "--data",      data,
                                "--isl",       "64",
                                "--osl",       "8",
                                "--json"};
  a.insert(a.end(), extra.begin(), extra.end());
  const ProcessResult r = RunProcess(a, 120, kValSource);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  return Json::parse(r.out);
}

TEST(ValidateE2e, PredictsRowsAsEstimateDoesAndListsMisses) {
  const ProcessResult r = RunProcess(ValidateArgv(kFixture, true), 120, kValSource);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json doc = Json::parse(r.out);
  ASSERT_EQ(doc["rows"].size(), 4u);
  EXPECT_EQ(doc["predicted"], 3);
  EXPECT_EQ(doc["failed"], 1);

  struct Expect {
    std::size_t row;
    std::string model, engine, data;
    std::vector<std::string> args;
    double ttft_ms, tpot_ms;  // measured, from the fixture
  };
  const std::vector<Expect> expects = {
      {0, "tests/goldens/models/tiny-dense", "trtllm", "dense/1", {"--batch", "4", "--tp", "1"}, 0.5, 0.1},
      {1, "tests/goldens/models/tiny-dense", "trtllm", "dense/1", {"--batch", "2", "--tp", "2"}, 0.4, 0.08},
      // concurrency 4 over 2 attention-DP ranks: 2 requests per rank
      {2,
       "tests/goldens/models/tiny-moe",
       "vllm",
       "moe/1",
       {"--batch", "2", "--tp", "1", "--dp", "2", "--moe-tp", "1", "--moe-ep", "2"},
       0.6,
       0.12},
  };
  for (const Expect& e : expects) {
    const Json& row = doc["rows"][e.row];
    SCOPED_TRACE(row.dump());
    ASSERT_TRUE(row["predicted"].get<bool>());
    EXPECT_EQ(row["source"], e.data);
    const Json est = EstimateAgg(e.model, e.engine, e.data, e.args);
    const double ttft = row["prediction"]["ttft_ms"], tpot = row["prediction"]["tpot_ms"];
    EXPECT_GT(ttft, 0);
    EXPECT_GT(tpot, 0);
    EXPECT_NEAR(ttft, est["ttft_ms"].get<double>(), 1e-12 * ttft);
    EXPECT_NEAR(tpot, est["tpot_ms"].get<double>(), 1e-12 * tpot);
    EXPECT_NEAR(row["error_pct"]["ttft"].get<double>(), (ttft - e.ttft_ms) / e.ttft_ms * 100, 1e-9);
    EXPECT_NEAR(row["error_pct"]["tpot"].get<double>(), (tpot - e.tpot_ms) / e.tpot_ms * 100, 1e-9);
  }

  // The unknown model: not predicted, with the reason, in rows and in failures.
  const Json& miss = doc["rows"][3];
  EXPECT_FALSE(miss["predicted"].get<bool>());
  EXPECT_EQ(miss["failure"]["kind"], "unsupported model");
  EXPECT_NE(miss["failure"]["reason"].get<std::string>().find("acme/NoSuchModel-7B"), std::string::npos);
  ASSERT_EQ(doc["failures"].size(), 1u);
  EXPECT_EQ(doc["failures"][0]["line"], 5);

  // Partitions: (tiny-dense, trtllm, agg) holds two rows; its median |error|
  // is the mean of the two (two values), its p90 interpolates 90% of the way.
  ASSERT_EQ(doc["partitions"].size(), 3u);
  const Json& dense = doc["partitions"][0];
  EXPECT_EQ(dense["engine"], "trtllm");
  EXPECT_EQ(dense["rows"], 2);
  const double a = std::fabs(doc["rows"][0]["error_pct"]["ttft"].get<double>());
  const double b = std::fabs(doc["rows"][1]["error_pct"]["ttft"].get<double>());
  EXPECT_NEAR(dense["ttft_abs_error_pct"]["median"].get<double>(), (a + b) / 2, 1e-9);
  EXPECT_NEAR(dense["ttft_abs_error_pct"]["p90"].get<double>(), std::min(a, b) + 0.9 * std::fabs(a - b), 1e-9);
  EXPECT_EQ(doc["partitions"][2]["predicted"], 0);
  EXPECT_EQ(doc["overall"]["rows"], 4);

  // The terminal report lists the miss and its reason.
  const ProcessResult t = RunProcess(ValidateArgv(kFixture, false), 120, kValSource);
  ASSERT_EQ(t.exit_code, 0) << Describe(t);
  EXPECT_NE(t.out.find("not predicted: 1 of 4 rows"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("unsupported model"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("dense/1"), std::string::npos) << t.out;
}

TEST(ValidateE2e, MalformedRowExitsTwoWithFileLineAndColumn) {
  const std::string dir = MakeTempDir("validate-bad");
  std::string text = ReadText(kValSource + "/" + kFixture);
  // Line 3 (the second data row): isl "sixty-four".
  const auto at = text.find("tiny_dense_tp2_c2,trtllm,1,tests/goldens/models/tiny-dense,tiny_gpu,bf16,agg,64,");
  ASSERT_NE(at, std::string::npos);
  text.replace(text.find(",64,", at), 4, ",sixty-four,");
  const std::string bad = dir + "/bad.csv";
  WriteText(bad, text);
  const ProcessResult r = RunProcess(ValidateArgv(bad, false), 120, kValSource);
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_NE(r.err.find(bad + ":3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("isl"), std::string::npos) << r.err;

  // A row with a field too few.
  WriteText(bad,
            "backend,model_path,system,mode,isl,osl,batch_size,tp_size,silicon_ttft_ms,silicon_tpot_ms\n"
            "trtllm,tests/goldens/models/tiny-dense,tiny_gpu,agg,64,8,4,1,0.5\n");
  const ProcessResult f = RunProcess(ValidateArgv(bad, false), 120, kValSource);
  EXPECT_EQ(f.exit_code, 2) << Describe(f);
  EXPECT_NE(f.err.find(bad + ":2"), std::string::npos) << f.err;

  // Counts past the command line's ranges (tokens 2^24, requests 2^20, GPUs 4096):
  // an osl of 1e30 was cast to INT64_MIN and shown as "64/-9223372036854775808".
  const std::string head = "backend,model_path,system,mode,isl,osl,batch_size,tp_size,silicon_ttft_ms,silicon_tpot_ms\n";
  for (const auto& [row, says] :
       {std::pair<std::string, std::string>{"64,1e30,4,1", "key 'osl': '1e30' is out of range; expected an integer in [0, "
                                                           "16777216] or empty"},
        {"64,8,2000000,1", "key 'batch_size': '2000000' is out of range; expected an integer in [0, 1048576]"},
        {"64,8,4,100000", "key 'tp_size': '100000' is out of range; expected an integer in [0, 4096]"}}) {
    WriteText(bad, head + "trtllm,tests/goldens/models/tiny-dense,tiny_gpu,agg," + row + ",0.5,0.1\n");
    const ProcessResult o = RunProcess(ValidateArgv(bad, false), 120, kValSource);
    EXPECT_EQ(o.exit_code, 2) << Describe(o);
    EXPECT_NE(o.err.find(bad + ":2"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find(says), std::string::npos) << o.err;
  }
}

TEST(ValidateE2e, NoPredictableRowExitsOne) {
  const std::string dir = MakeTempDir("validate-none");
  const std::string csv = dir + "/none.csv";
  WriteText(csv,
            "backend,model_path,system,mode,isl,osl,batch_size,tp_size,silicon_ttft_ms,silicon_tpot_ms\n"
            "trtllm,acme/NoSuchModel-7B,tiny_gpu,agg,64,8,4,1,0.5,0.1\n"
            "trtllm,tests/goldens/models/tiny-dense,tiny_gpu,static,64,8,4,1,0.5,0.1\n");
  const ProcessResult r = RunProcess(ValidateArgv(csv, true), 120, kValSource);
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  const Json doc = Json::parse(r.out);
  ASSERT_EQ(doc["failures"].size(), 2u);
  EXPECT_EQ(doc["failures"][0]["kind"], "unsupported model");
  EXPECT_EQ(doc["failures"][1]["kind"], "bad row");
}

// Impossible measurements (TTFT <= 0, TPOT <= 0) and tp 0 are refused per row with
// the reason, the good row is still predicted, and the exit status is 1 so that a
// script sees the file is wrong (a negative TTFT was predicted before, exit 0).
TEST(ValidateE2e, ImpossibleMeasurementsAreBadRowsAndExitOne) {
  const std::string dir = MakeTempDir("validate-impossible");
  const std::string csv = dir + "/impossible.csv";
  const std::string head = "backend,model_path,system,mode,isl,osl,batch_size,tp_size,silicon_ttft_ms,silicon_tpot_ms\n";
  const std::string good = "trtllm,tests/goldens/models/tiny-dense,tiny_gpu,agg,64,8,4,1,0.5,0.1\n";
  WriteText(csv, head + good +
                     "trtllm,tests/goldens/models/tiny-dense,tiny_gpu,agg,64,8,4,1,-0.5,0.1\n"
                     "trtllm,tests/goldens/models/tiny-dense,tiny_gpu,agg,64,8,4,1,0.5,0\n"
                     "trtllm,tests/goldens/models/tiny-dense,tiny_gpu,agg,64,8,4,0,0.5,0.1\n");
  const ProcessResult r = RunProcess(ValidateArgv(csv, true), 120, kValSource);
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  const Json doc = Json::parse(r.out);
  EXPECT_EQ(doc["predicted"], 1);
  ASSERT_EQ(doc["failures"].size(), 3u) << r.out;
  for (const auto& f : doc["failures"]) EXPECT_EQ(f["kind"], "bad row") << f.dump();
  EXPECT_NE(doc["failures"][0]["reason"].get<std::string>().find("-0.5 ms is impossible"), std::string::npos)
      << doc["failures"][0].dump();
  EXPECT_NE(doc["failures"][1]["reason"].get<std::string>().find("0 ms is impossible"), std::string::npos)
      << doc["failures"][1].dump();
  EXPECT_NE(doc["failures"][2]["reason"].get<std::string>().find("tp_size must be >= 1"), std::string::npos)
      << doc["failures"][2].dump();
  const ProcessResult t = RunProcess(ValidateArgv(csv, false), 120, kValSource);
  EXPECT_EQ(t.exit_code, 1) << Describe(t);
  EXPECT_NE(t.err.find("3 row(s) of " + csv + " are impossible measurements"), std::string::npos) << t.err;
  // The good row alone exits 0.
  WriteText(csv, head + good);
  EXPECT_EQ(RunProcess(ValidateArgv(csv, true), 120, kValSource).exit_code, 0);
}

// SGLang's default profile (engines/sglang.yaml): prefill budget 8192 tokens in
// whole prompts and the prefill_queue TTFT rule with share 0.1. validate and
// estimate without --ctx-tokens use the same budget. At isl 64, concurrency 4:
// C = min(floor(8192 / 64), 4) x 64 = 256 tokens; one prompt's prefill is one
// mixed step (isl <= C), and the 3 other requests, 0.1 of them ahead, each cost
// 64 / 256 of a step: TTFT = mixed x (1 + 0.1 x 3 x 64 / 256) = 1.075 x mixed
// (SGLang has no dispatch time and mix_efficiency 1).
TEST(ValidateE2e, SglangRowUsesTheEngineBudgetAndPrefillQueue) {
  const std::string dir = MakeTempDir("validate-sglang");
  const std::string csv = dir + "/sglang.csv";
  WriteText(csv,
            "backend,model_path,system,mode,isl,osl,batch_size,tp_size,silicon_ttft_ms,silicon_tpot_ms\n"
            "sglang,tests/goldens/models/tiny-dense,tiny_gpu,agg,64,8,4,1,0.5,0.1\n");
  std::vector<std::string> argv = ValidateArgv(csv, true);
  argv.insert(argv.end(), {"--data-map", "sglang=dense/1"});
  const ProcessResult r = RunProcess(argv, 120, kValSource);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json row = Json::parse(r.out)["rows"][0];
  ASSERT_TRUE(row["predicted"].get<bool>()) << row.dump();

  const Json est = EstimateAgg("tests/goldens/models/tiny-dense", "sglang", "dense/1", {"--batch", "4", "--tp", "1"});
  EXPECT_EQ(est["workload"]["ctx_tokens"], 256);
  const double mixed = est["steps"]["mixed_step_ms"];
  EXPECT_NEAR(est["ttft_ms"].get<double>(), 1.075 * mixed, 1e-12 * mixed);
  EXPECT_NEAR(row["prediction"]["ttft_ms"].get<double>(), est["ttft_ms"].get<double>(), 1e-12 * mixed);
  EXPECT_NEAR(row["prediction"]["tpot_ms"].get<double>(), est["tpot_ms"].get<double>(),
              1e-12 * est["tpot_ms"].get<double>());

  // An explicit budget wins over the profile's.
  const Json one = EstimateAgg("tests/goldens/models/tiny-dense", "sglang", "dense/1",
                               {"--batch", "4", "--tp", "1", "--ctx-tokens", "64"});
  EXPECT_EQ(one["workload"]["ctx_tokens"], 64);
}

// Issue 28: a disagg row's decode sum evaluates at most 4096 steps. At stride 32 an
// osl of 2^24 (the largest a row may give) took 524,288 passes of the op list (16 s
// on the one-layer fixture model, minutes on a real one); the stride now widens to
// ceil((osl - 1) / 4096) = 4096, said in the row's notes. A row within 4096 steps at
// stride 32 is unchanged and has no such note.
TEST(ValidateE2e, DisaggDecodeOfAHugeOslIsBounded) {
  const std::string dir = MakeTempDir("validate-long-decode");
  const std::string csv = dir + "/long.csv";
  const std::string row = ",trtllm,1,tests/goldens/models/tiny-dense,tiny_gpu,bf16,disagg,64,";
  WriteText(csv,
            "id,backend,backend_version,model_path,system,precision,mode,isl,osl,gemm_quant_mode,moe_quant_mode,"
            "batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,prefill_batch_size,"
            "prefill_num_workers,prefill_tp_size,decode_batch_size,decode_num_workers,decode_tp_size,"
            "silicon_ttft_ms,silicon_tpot_ms\n"
            "long" +
                row +
                "16777216,,,,,,,,,1,1,1,4,1,1,0.5,0.1\n"
                "short" +
                row + "1000,,,,,,,,,1,1,1,4,1,1,0.5,0.1\n");
  const ProcessResult r = RunProcess(ValidateArgv(csv, true), 120, kValSource);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json j = Json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 2u);
  const Json& lng = j["rows"][0];
  ASSERT_TRUE(lng["predicted"].get<bool>()) << lng.dump(2);
  EXPECT_GT(lng["prediction"]["tpot_ms"].get<double>(), 0);
  ASSERT_EQ(lng["notes"].size(), 1u) << lng.dump(2);
  EXPECT_EQ(lng["notes"][0],
            "decode summed at stride 4096 (at most 4096 evaluated decode steps; stride 32 up to osl 131073)");
  const Json& sht = j["rows"][1];
  ASSERT_TRUE(sht["predicted"].get<bool>()) << sht.dump(2);
  EXPECT_TRUE(sht["notes"].empty()) << sht.dump(2);
}

}  // namespace
}  // namespace servecast::testing
