// Context parallelism for SGLang prefill (issue 29 item 2) with the real binary:
// `estimate --cp 2` splits the prefill (zigzag attention, ceil(x / 2) tokens per
// rank, a KV all-gather) and is faster than cp 1; `default --backend sglang`
// enumerates cp prefill workers; --cp on trtllm, with agg, and bad values refused.

#include <fstream>
#include <regex>
#include <set>

#include "e2e_common.h"

namespace servecast::testing {
namespace {

using Json = nlohmann::json;

std::vector<std::string> Estimate(std::vector<std::string> extra) {
  std::vector<std::string> a = {kBin,   "estimate", "--model", "Qwen/Qwen3-30B-A3B", "--system", "h200_sxm",
                                "--mode", "static", "--isl",   "8192",               "--osl",    "2",
                                "--batch", "1",     "--json"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

const Json& Op(const Json& phase, const std::string& name) {
  for (const Json& op : phase["ops"])
    if (op["name"] == name) return op;
  static const Json none;
  ADD_FAILURE() << "no op " << name;
  return none;
}

TEST(ContextParallelE2E, EstimateCp2SplitsThePrefill) {
  const ProcessResult one = RunProcess(Estimate({"--backend", "sglang", "--moe-ep", "2", "--dp", "2"}), 120, kSource);
  const ProcessResult two = RunProcess(Estimate({"--backend", "sglang", "--cp", "2"}), 120, kSource);
  ASSERT_EQ(one.exit_code, 0) << Describe(one);
  ASSERT_EQ(two.exit_code, 0) << Describe(two);
  const Json a = Json::parse(one.out), b = Json::parse(two.out);
  EXPECT_EQ(b["parallel"]["cp"], 2);
  EXPECT_EQ(b["parallel"]["moe_ep"], 2);  // derived: tp x dp x cp
  EXPECT_EQ(b["parallel"]["gpus"], 2);
  EXPECT_FALSE(a["parallel"].contains("cp"));
  // The same two GPUs: the CP worker's one request prefills faster than one dp rank's.
  EXPECT_LT(b["ttft_ms"].get<double>(), a["ttft_ms"].get<double>());
  const Json& ctx = b["context"];
  // Zigzag: c = 8192 / 4 = 2048 tokens after 0 and after 8192 - 2048 = 6144.
  const std::string how = Op(ctx, "context_attention")["detail"];
  EXPECT_NE(how.find("zigzag cp2"), std::string::npos) << how;
  EXPECT_NE(how.find("[2048 tokens after 0]"), std::string::npos) << how;
  EXPECT_NE(how.find("[2048 tokens after 6144]"), std::string::npos) << how;
  // The op's latency is the sum of its parts, per layer, x 48 layers: chunk 1 (no
  // prefix) + chunk 2 x its prefix share ((8192^2 - 6144^2) / 8192^2 = 0.4375) + the extras.
  std::smatch part;
  ASSERT_TRUE(std::regex_search(how, part,
                                std::regex(R"(table ([0-9.e+-]+) ms \(\w+\) \[2048 tokens after 0\] \+ ([0-9.e+-]+) ms )"
                                           R"(\(\w+\) x prefix share 0\.4375 \[2048 tokens after 6144\] \+ .* ([0-9.e+-]+) ms$)")))
      << how;
  const double per_layer = std::stod(part[1]) + std::stod(part[2]) * 0.4375 + std::stod(part[3]);
  EXPECT_NEAR(Op(ctx, "context_attention")["latency_ms"].get<double>(), 48 * per_layer, 48 * per_layer * 1e-5);
  // Token-major ops read ceil(8192 / 2) tokens; the KV all-gather moves every token's
  // K and V (4 KV heads x 128 x 2 = 1024 elements), the dispatch every hidden state.
  EXPECT_NE(Op(ctx, "context_add_norm_1")["detail"].get<std::string>().find("tokens=4096"), std::string::npos);
  EXPECT_NE(Op(ctx, "context_cp_kv_all_gather")["detail"].get<std::string>().find("all_gather of 8.38861e+06 "
                                                                                  "elements over 2 GPUs"),
            std::string::npos);
  EXPECT_NE(Op(ctx, "context_moe_pre_dispatch")["detail"].get<std::string>().find("all_gather of 1.67772e+07"),
            std::string::npos);
  // A cp-1 estimate has none of it.
  for (const Json& op : a["context"]["ops"]) EXPECT_NE(op["name"], "context_cp_kv_all_gather");
}

TEST(ContextParallelE2E, DefaultSglangEnumeratesCpPrefillWorkers) {
  // A long prompt under a tight TTFT: only split prefills meet it; cp 4 prefill
  // workers (4 GPUs, moe_ep 4) lead the disaggregated table and show their cp.
  auto run = [](const std::string& engine) {
    return RunProcess({kBin, "default", "--model", "Qwen/Qwen3-30B-A3B", "--system", "h200_sxm", "--backend", engine,
                       "--total-gpus", "8", "--isl", "16000", "--osl", "200", "--ttft", "400", "--json"},
                      300, kSource);
  };
  const ProcessResult r = run("sglang");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_NE(r.out.find("\"parallel\": \"p:tp1pp1dp1etp1ep4cp4 d:"), std::string::npos);
  EXPECT_NE(r.out.find("\"cp\": 4"), std::string::npos);
  const ProcessResult text = RunProcess({kBin, "default", "--model", "Qwen/Qwen3-30B-A3B", "--system", "h200_sxm",
                                         "--backend", "sglang", "--total-gpus", "8", "--isl", "16000", "--osl",
                                         "200", "--ttft", "400"},
                                        300, kSource);
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_NE(text.out.find("1 x tp1pp1dp1etp1ep4cp4"), std::string::npos) << text.out;
  // trtllm enumerates none.
  const ProcessResult t = run("trtllm");
  ASSERT_EQ(t.exit_code, 0) << Describe(t);
  EXPECT_EQ(t.out.find("\"cp\""), std::string::npos);
  EXPECT_EQ(t.out.find("cp4"), std::string::npos);
}

// generate: the disaggregated pick's prefill worker (cp 4) launches with SGLang's
// CP flags, each one of SGLang 0.5.16's flags (tests/goldens/engine_flags), and
// counts its four GPUs in --tp-size; the decode worker has none of them.
TEST(ContextParallelE2E, GenerateWritesSglangCpFlags) {
  const std::string dir = MakeTempDir("servecast_cp_generate") + "/out";
  const ProcessResult r = RunProcess({kBin, "generate", "--model", "Qwen/Qwen3-30B-A3B", "--system", "h200_sxm",
                                      "--backend", "sglang", "--total-gpus", "8", "--isl", "16000", "--osl", "200",
                                      "--ttft", "400", "--save-dir", dir, "--json"},
                                     300, kSource);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const std::string prefill = ReadText(dir + "/disagg/prefill_launch.sh");
  const std::string decode = ReadText(dir + "/disagg/decode_launch.sh");
  for (const char* flag : {"--tp-size 4 ", "--attn-cp-size 4 ", "--enable-prefill-cp ", "--cp-strategy zigzag ",
                           "--ep-size 4 "})
    EXPECT_NE(prefill.find(flag), std::string::npos) << flag << " missing in\n" << prefill;
  EXPECT_EQ(decode.find("cp"), std::string::npos) << decode;
  std::set<std::string> flags;
  std::ifstream in(kSource + "/tests/goldens/engine_flags/sglang-0.5.16.txt");
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') flags.insert(line);
  for (const char* flag : {"--attn-cp-size", "--enable-prefill-cp", "--cp-strategy", "--tp-size", "--ep-size"})
    EXPECT_TRUE(flags.count(flag)) << flag << " is not a flag of SGLang 0.5.16";
}

TEST(ContextParallelE2E, RefusalsAndBadValues) {
  const ProcessResult trt = RunProcess(Estimate({"--backend", "trtllm", "--cp", "2"}), 120, kSource);
  EXPECT_EQ(trt.exit_code, 2) << Describe(trt);
  EXPECT_NE(trt.err.find("modelled for sglang only"), std::string::npos) << trt.err;
  const ProcessResult agg = RunProcess({kBin, "estimate", "--model", "Qwen/Qwen3-30B-A3B", "--system", "h200_sxm",
                                        "--backend", "sglang", "--mode", "agg", "--cp", "2", "--osl", "64"},
                                       120, kSource);
  EXPECT_EQ(agg.exit_code, 2) << Describe(agg);
  EXPECT_NE(agg.err.find("--mode agg"), std::string::npos) << agg.err;
  const ProcessResult llama = RunProcess({kBin, "estimate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--system",
                                          "h200_sxm", "--backend", "sglang", "--cp", "2"},
                                         120, kSource);
  EXPECT_EQ(llama.exit_code, 2) << Describe(llama);
  EXPECT_NE(llama.err.find("SGLang runs no context-parallel prefill for LlamaForCausalLM"), std::string::npos)
      << llama.err;
  for (const char* bad : {"0", "-1", "x", "5000"}) {
    const ProcessResult r = RunProcess(Estimate({"--backend", "sglang", "--cp", bad}), 120, kSource);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << Describe(r);
    EXPECT_NE(r.err.find("--cp"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace servecast::testing
