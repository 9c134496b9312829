// `servecast estimate --mode agg --simulate` and `validate --simulate` end to end
// on the real binary: the --json fields, a deployment whose KV cache cannot hold
// its concurrency reported as such, validate's simulated rows equal to estimate's
// for the same deployments and workload, and bad input exiting 2 with a message.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "process.h"

namespace servecast::testing {
namespace {

using Json = nlohmann::json;

const std::string kSimBin = SERVECAST_BIN;
const std::string kSimSource = SERVECAST_SOURCE_DIR;

std::string Describe(const ProcessResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out + "\n--- stderr\n" + r.err;
}

std::vector<std::string> TinyAgg(const std::string& model, const std::string& engine, const std::string& data,
                                 std::vector<std::string> extra) {
  std::vector<std::string> a = {kSimBin,     "estimate", "--mode",      "agg",   "--model",   model,
                                "--system",  "tiny_gpu", "--systems",   "tests/goldens/systems", "--models",
                                "models",    "--engines", "engines",    "--backend", engine, "--data-root",
                                "tests/goldens/data",     "--data",      data,    "--isl",     "64",
                                "--osl",     "8"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(SimulateE2e, EstimateJsonCarriesTheSimulation) {
  const ProcessResult r = RunProcess(
      TinyAgg("tests/goldens/models/tiny-dense", "trtllm", "dense/1", {"--batch", "4", "--simulate", "--json"}), 120,
      kSimSource);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json doc = Json::parse(r.out);
  ASSERT_TRUE(doc.contains("simulation")) << r.out;
  const Json& s = doc["simulation"];
  EXPECT_EQ(s["workload"]["arrival"], "closed_loop");
  EXPECT_EQ(s["workload"]["concurrency"], 4);
  EXPECT_EQ(s["workload"]["warmup"], 8);  // 2 x c
  EXPECT_EQ(s["measured"], 40);           // 10 x c
  EXPECT_EQ(s["scheduler"]["admission"], "reserve_full");
  EXPECT_EQ(s["scheduler"]["max_num_tokens"], 8192);
  for (const char* k : {"ttft_ms", "tpot_ms", "request_latency_ms"}) {
    EXPECT_GT(s[k]["mean"].get<double>(), 0) << k;
    EXPECT_LE(s[k]["median"].get<double>(), s[k]["p90"].get<double>()) << k;
  }
  EXPECT_GT(s["kv_tokens"].get<double>(), 0);
  EXPECT_FALSE(s["kv_saturated"].get<bool>());
  EXPECT_TRUE(s["admitted_all"].get<bool>());
  EXPECT_EQ(s["max_running"], 4);
  EXPECT_EQ(s["preemptions"], 0);
  EXPECT_NEAR(s["tokens_per_s_user"].get<double>(), 1000.0 / s["tpot_ms"]["mean"].get<double>(), 1e-9);
  // The closed form stays next to it, unchanged.
  const ProcessResult c = RunProcess(
      TinyAgg("tests/goldens/models/tiny-dense", "trtllm", "dense/1", {"--batch", "4", "--json"}), 120, kSimSource);
  ASSERT_EQ(c.exit_code, 0) << Describe(c);
  EXPECT_DOUBLE_EQ(Json::parse(c.out)["ttft_ms"].get<double>(), doc["ttft_ms"].get<double>());
  EXPECT_FALSE(Json::parse(c.out).contains("simulation"));
  // --ctx-tokens sets the simulated engine's step budget: a 64-token prompt over a
  // 32-token budget, without chunked prefill (TRT-LLM), runs only in a step of its
  // own, so requests queue and TTFT grows.
  const ProcessResult small = RunProcess(
      TinyAgg("tests/goldens/models/tiny-dense", "trtllm", "dense/1",
              {"--batch", "4", "--simulate", "--json", "--ctx-tokens", "32"}),
      120, kSimSource);
  ASSERT_EQ(small.exit_code, 0) << Describe(small);
  const Json ss = Json::parse(small.out)["simulation"];
  EXPECT_EQ(ss["scheduler"]["max_num_tokens"], 32);
  EXPECT_GT(ss["ttft_ms"]["mean"].get<double>(), s["ttft_ms"]["mean"].get<double>());
}

TEST(SimulateE2e, PoissonArrivalsAndSeeds) {
  auto run = [](std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--batch", "4", "--simulate", "--json"});
    const ProcessResult r =
        RunProcess(TinyAgg("tests/goldens/models/tiny-dense", "trtllm", "dense/1", extra), 120, kSimSource);
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    return Json::parse(r.out)["simulation"];
  };
  const Json p = run({"--sim-rate", "100", "--sim-requests", "50", "--sim-warmup", "0"});
  EXPECT_EQ(p["workload"]["arrival"], "poisson");
  EXPECT_EQ(p["measured"], 50);
  // 100 requests/s against sub-millisecond requests: the engine is idle most of the
  // time, so the duration is about 50 / 100 s and nearly every request runs alone.
  EXPECT_GT(p["duration_ms"].get<double>(), 200.0);
  EXPECT_LT(p["mean_running"].get<double>(), 0.5);
  const Json a = run({"--sim-seed", "7"}), b = run({"--sim-seed", "7"}), c = run({"--sim-seed", "8"});
  EXPECT_EQ(a["ttft_ms"], b["ttft_ms"]);  // seeded: the same run
  EXPECT_NE(a["request_latency_ms"]["mean"], c["request_latency_ms"]["mean"]);
}

// Llama 8B on one H200 at 200 clients of 8000 + 1000 tokens: the KV cache holds
// about 100 of them. TRT-LLM's guaranteed-no-evict admission queues the rest;
// vLLM admits on demand and preempts. Both say so, with the simulated latencies.
TEST(SimulateE2e, ConcurrencyTheKvCacheCannotHoldIsReportedAsSuch) {
  for (const std::string engine : {"trtllm", "vllm"}) {
    const std::vector<std::string> argv = {kSimBin,  "estimate", "--model",  "meta-llama/Llama-3.1-8B-Instruct",
                                           "--system", "h200_sxm", "--database-mode", "sol", "--backend", engine,
                                           "--mode",   "agg",      "--batch",  "200", "--isl", "8000", "--osl", "1000",
                                           "--simulate"};
    std::vector<std::string> json = argv;
    json.push_back("--json");
    const ProcessResult r = RunProcess(json, 120, kSimSource);
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
    const Json s = Json::parse(r.out)["simulation"];
    SCOPED_TRACE(engine + ": " + s.dump());
    EXPECT_FALSE(s["admitted_all"].get<bool>());
    EXPECT_TRUE(s["kv_saturated"].get<bool>());
    EXPECT_LT(s["max_running"].get<int>(), 200);
    EXPECT_GT(s["kv_peak_fraction"].get<double>(), 0.95);
    if (engine == "vllm") {
      EXPECT_GT(s["preemptions"].get<int>(), 0);
    } else {
      EXPECT_EQ(s["preemptions"].get<int>(), 0);
    }
    // Queued requests wait for whole requests to finish: TTFT of seconds.
    EXPECT_GT(s["ttft_ms"]["median"].get<double>(), 1000.0);
    const ProcessResult t = RunProcess(argv, 120, kSimSource);
    ASSERT_EQ(t.exit_code, 0) << Describe(t);
    EXPECT_NE(t.out.find("CANNOT ADMIT"), std::string::npos) << t.out;
    EXPECT_NE(t.out.find("(SATURATED)"), std::string::npos) << t.out;
  }
}

TEST(SimulateE2e, BadInputExitsTwoWithAMessage) {
  struct Case {
    std::vector<std::string> extra;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--batch", "0", "--simulate"}, "--batch"},
      {{"--batch", "-3", "--simulate"}, "--batch"},
      {{"--simulate", "--sim-requests", "0"}, "--sim-requests"},
      {{"--simulate", "--sim-rate", "0"}, "--sim-rate"},
      {{"--simulate", "--sim-range-ratio", "1.5"}, "--sim-range-ratio"},
      {{"--sim-requests", "5"}, "need --simulate"},
      {{"--simulate", "--nextn", "1"}, "MTP"},
      {{"--simulate", "--prefix", "8"}, "--prefix"},
  };
  for (const Case& c : cases) {
    const ProcessResult r = RunProcess(TinyAgg("tests/goldens/models/tiny-dense", "trtllm", "dense/1", c.extra), 120,
                                       kSimSource);
    EXPECT_EQ(r.exit_code, 2) << Describe(r);
    EXPECT_NE(r.err.find(c.message), std::string::npos) << Describe(r);
  }
  std::vector<std::string> st = TinyAgg("tests/goldens/models/tiny-dense", "trtllm", "dense/1", {"--simulate"});
  st[3] = "static";
  const ProcessResult r = RunProcess(st, 120, kSimSource);
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_NE(r.err.find("--mode agg and disagg are simulated (got --mode static)"), std::string::npos) << Describe(r);
  // A calibration without a sim: section cannot be simulated.
  const ProcessResult aic = RunProcess(
      TinyAgg("tests/goldens/models/tiny-dense", "trtllm", "dense/1", {"--simulate", "--calibration", "aic"}), 120,
      kSimSource);
  EXPECT_NE(aic.exit_code, 0) << Describe(aic);
  EXPECT_NE(aic.err.find("no sim section"), std::string::npos) << Describe(aic);
}

// A workload past the simulation's step limit (2e8 engine steps) is the user's
// choice of sizes: exit 2 naming the limit and the flags that shrink it (it was
// "internal error", exit 1).
TEST(SimulateE2e, AWorkloadPastTheStepLimitExitsTwoNamingTheFlags) {
  std::vector<std::string> a = TinyAgg("tests/goldens/models/tiny-dense", "trtllm", "dense/1",
                                       {"--batch", "8", "--simulate", "--sim-requests", "100000"});
  const auto osl = std::find(a.begin(), a.end(), "--osl");
  ASSERT_NE(osl, a.end());
  *(osl + 1) = "100000";
  const ProcessResult r = RunProcess(a, 120, kSimSource);
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_NE(r.err.find("simulation: more than 200000000 engine steps (100016 requests, warm-up included, of up to "
                       "100000 output tokens, at most 8 running at once)"),
            std::string::npos)
      << Describe(r);
  EXPECT_NE(r.err.find("fewer requests (--sim-requests, --sim-warmup) or a shorter --osl"), std::string::npos)
      << Describe(r);
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << Describe(r);
}

std::vector<std::string> ValidateSim(std::vector<std::string> extra) {
  std::vector<std::string> a = {kSimBin,         "validate",     "--silicon",   "tests/goldens/validate/tiny_dev.csv",
                                "--systems",     "tests/goldens/systems",       "--models",    "models",
                                "--engines",     "engines",      "--data-root", "tests/goldens/data",
                                "--data-map",    "trtllm=dense/1", "--data-map", "vllm=moe/1", "--simulate"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(SimulateE2e, ValidateSimulatesAggRowsAsEstimateDoes) {
  const ProcessResult r = RunProcess(ValidateSim({"--json"}), 120, kSimSource);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json doc = Json::parse(r.out);
  ASSERT_TRUE(doc.contains("simulation"));
  EXPECT_EQ(doc["simulation"]["simulated"], 3);
  EXPECT_EQ(doc["simulation"]["statistic"], "mean");
  ASSERT_EQ(doc["simulation"]["partitions"].size(), 3u);
  // Row 3 (c 4 over 2 attention-DP ranks): each rank's simulation serves 2 clients.
  struct Expect {
    std::size_t row;
    std::string model, engine, data;
    std::vector<std::string> args;
  };
  const std::vector<Expect> expects = {
      {0, "tests/goldens/models/tiny-dense", "trtllm", "dense/1", {"--batch", "4", "--tp", "1"}},
      {2,
       "tests/goldens/models/tiny-moe",
       "vllm",
       "moe/1",
       {"--batch", "2", "--tp", "1", "--dp", "2", "--moe-tp", "1", "--moe-ep", "2"}},
  };
  for (const Expect& e : expects) {
    const Json& row = doc["rows"][e.row];
    SCOPED_TRACE(row.dump());
    ASSERT_TRUE(row.contains("simulation"));
    std::vector<std::string> args = e.args;
    args.insert(args.end(), {"--simulate", "--json"});
    const ProcessResult est = RunProcess(TinyAgg(e.model, e.engine, e.data, args), 120, kSimSource);
    ASSERT_EQ(est.exit_code, 0) << Describe(est);
    const Json s = Json::parse(est.out)["simulation"];
    const double ttft = row["simulation"]["ttft_ms"], tpot = row["simulation"]["tpot_ms"];
    EXPECT_DOUBLE_EQ(ttft, s["ttft_ms"]["mean"].get<double>());
    EXPECT_DOUBLE_EQ(tpot, s["tpot_ms"]["mean"].get<double>());
    const double measured = row["measured"]["ttft_ms"];
    EXPECT_NEAR(row["simulation"]["error_pct"]["ttft"].get<double>(), (ttft - measured) / measured * 100, 1e-9);
  }
  EXPECT_TRUE(doc["rows"][3]["simulation"].contains("failure"));  // the unknown model: not predicted at all

  const ProcessResult med = RunProcess(ValidateSim({"--json", "--sim-statistic", "median"}), 120, kSimSource);
  ASSERT_EQ(med.exit_code, 0) << Describe(med);
  EXPECT_EQ(Json::parse(med.out)["simulation"]["statistic"], "median");
  // Fixed lengths: every request of a row at its isl / osl.
  const ProcessResult fixed = RunProcess(ValidateSim({"--json", "--sim-range-ratio", "1"}), 120, kSimSource);
  ASSERT_EQ(fixed.exit_code, 0) << Describe(fixed);
  EXPECT_EQ(Json::parse(fixed.out)["simulation"]["range_ratio"], 1.0);
  const ProcessResult est1 = RunProcess(TinyAgg("tests/goldens/models/tiny-dense", "trtllm", "dense/1",
                                                {"--batch", "4", "--simulate", "--sim-range-ratio", "1", "--json"}),
                                        120, kSimSource);
  ASSERT_EQ(est1.exit_code, 0) << Describe(est1);
  EXPECT_DOUBLE_EQ(Json::parse(fixed.out)["rows"][0]["simulation"]["ttft_ms"].get<double>(),
                   Json::parse(est1.out)["simulation"]["ttft_ms"]["mean"].get<double>());
  EXPECT_EQ(RunProcess(ValidateSim({"--sim-range-ratio", "0"}), 120, kSimSource).exit_code, 2);
  const ProcessResult bad = RunProcess(ValidateSim({"--sim-statistic", "p99"}), 120, kSimSource);
  EXPECT_EQ(bad.exit_code, 2) << Describe(bad);
  EXPECT_NE(bad.err.find("--sim-statistic"), std::string::npos) << Describe(bad);

  const ProcessResult t = RunProcess(ValidateSim({}), 120, kSimSource);
  ASSERT_EQ(t.exit_code, 0) << Describe(t);
  EXPECT_NE(t.out.find("closed form -> simulated"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("simulated (mean per request"), std::string::npos) << t.out;
}

}  // namespace
// --mode disagg --simulate: prefill and decode instances of the real binary, and
// validate --simulate on a disagg row giving only the client concurrency prints
// the same simulated figures as estimate on the row's deployment.
TEST(SimulateE2e, DisaggEstimateAndValidateSimulateTheSameDeployment) {
  std::vector<std::string> a = TinyAgg("tests/goldens/models/tiny-dense", "trtllm", "dense/1",
                                       {"--prefill-workers", "1", "--decode-workers", "2", "--decode-batch", "4",
                                        "--simulate", "--json"});
  a[3] = "disagg";
  const ProcessResult r = RunProcess(a, 120, kSimSource);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const Json s = Json::parse(r.out)["simulation"];
  EXPECT_EQ(s["workload"]["concurrency"], 8);  // 4 per decode rank x 2 workers
  EXPECT_EQ(s["measured"], 80);
  EXPECT_EQ(s["prefill_scheduler"]["max_num_seqs"], 1);  // --prefill-batch (default 1)
  EXPECT_EQ(s["decode_scheduler"]["max_num_seqs"], 4);
  EXPECT_EQ(s["kv_transfer_link"], "intra_node");  // 2 + 1 GPUs on a node of 8
  // 64 tokens x the KV bytes per token per GPU at the tiny system's 100 GB/s.
  EXPECT_GT(s["kv_transfer_ms"].get<double>(), 0);
  EXPECT_LE(s["decode"]["max_running"].get<int>(), 4);
  EXPECT_GT(s["prefill"]["utilization"].get<double>(), 0);
  EXPECT_LE(s["prefill"]["utilization"].get<double>(), 1);
  for (const char* k : {"ttft_ms", "tpot_ms", "request_latency_ms"}) {
    EXPECT_GT(s[k]["mean"].get<double>(), 0) << k;
    EXPECT_LE(s[k]["median"].get<double>(), s[k]["p90"].get<double>()) << k;
  }
  // Every request pays at least the KV transfer before its first token.
  EXPECT_GE(s["ttft_ms"]["mean"].get<double>(), s["kv_transfer_ms"].get<double>());

  const ProcessResult v = RunProcess(
      {kSimBin, "validate", "--silicon", "tests/goldens/validate/tiny_disagg.csv", "--systems", "tests/goldens/systems",
       "--models", "models", "--engines", "engines", "--data-root", "tests/goldens/data", "--data-map",
       "trtllm=dense/1", "--simulate", "--json"},
      120, kSimSource);
  ASSERT_EQ(v.exit_code, 0) << Describe(v);
  const Json doc = Json::parse(v.out);
  EXPECT_EQ(doc["simulation"]["simulated"], 1);
  const Json& row = doc["rows"][0]["simulation"];
  ASSERT_TRUE(row.contains("ttft_ms")) << row.dump();
  EXPECT_DOUBLE_EQ(row["ttft_ms"].get<double>(), s["ttft_ms"]["mean"].get<double>());
  EXPECT_DOUBLE_EQ(row["tpot_ms"].get<double>(), s["tpot_ms"]["mean"].get<double>());
  EXPECT_DOUBLE_EQ(row["prefill_utilization"].get<double>(), s["prefill"]["utilization"].get<double>());
}

}  // namespace servecast::testing
