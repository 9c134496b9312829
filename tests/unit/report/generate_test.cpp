#include "report/generate.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "model/family.h"

namespace servecast::report {
namespace {

bool Has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

std::map<std::string, std::string> ByPath(const std::vector<GeneratedFile>& files) {
  std::map<std::string, std::string> out;
  for (const auto& f : files) out[f.path] = f.content;
  return out;
}

search::Point AggPoint() {
  search::Point p;
  p.mode = search::Mode::kAgg;
  p.par.tp = 2;
  p.batch = 48;
  p.ctx_tokens = 8000;
  p.gpus_per_replica = 2;
  p.replicas = 4;
  p.ttft_ms = 812.25;
  p.tpot_ms = 24.5;
  p.tokens_per_s_user = 40.8;
  p.tokens_per_s_gpu = 900;
  p.tokens_per_s_gpu_cluster = 900;
  p.seq_per_s = 1.75;
  p.concurrency = 48;
  p.memory_gib = 70.2;
  return p;
}

// Disagg: prefill tp1 x 2 workers at batch 1; decode tp1 dp4 ep4 x 1 worker at batch 64.
search::Point DisaggMoePoint() {
  search::Point p;
  p.mode = search::Mode::kDisagg;
  p.par.tp = 1;
  p.decode_par.tp = 1;
  p.decode_par.dp = 4;
  p.decode_par.moe_ep = 4;
  p.prefill_batch = 1;
  p.prefill_workers = 2;
  p.decode_workers = 1;
  p.batch = 64;
  p.gpus_per_replica = 6;
  p.replicas = 1;
  p.ttft_ms = 150;
  p.tpot_ms = 15;
  return p;
}

LaunchContext Ctx(model::Engine e) {
  LaunchContext c;
  c.engine = e;
  c.model_id = "Qwen/Qwen3-32B";
  c.system = "h200_sxm";
  c.origin = "search (data trtllm/1.3.0rc20, silicon)";
  c.isl = 4000;
  c.osl = 1000;
  c.memory_fraction = 0.9;
  c.total_gpus = 8;
  return c;
}

TEST(GenerateFiles, VllmAggCommandAndHeader) {
  LaunchContext c = Ctx(model::Engine::kVllm);
  c.kv_fp8 = true;
  const auto files = ByPath(LaunchFiles(c, AggPoint()));
  ASSERT_EQ(files.size(), 4u);  // launch.sh, k8s_deploy.yaml, run_single_node.sh, bench.sh
  const std::string& sh = files.at("agg/launch.sh");
  EXPECT_EQ(sh.rfind("#!/usr/bin/env bash\n", 0), 0u);
  EXPECT_TRUE(Has(sh, "STARTING POINT"));
  EXPECT_TRUE(Has(sh, "TTFT 812.2 ms, TPOT 24.50 ms"));  // the predicted figures
  EXPECT_TRUE(Has(sh, "Cluster: 4 replica(s) x 2 GPU(s) = 7.000 requests/s"));
  EXPECT_TRUE(Has(sh, "vllm serve Qwen/Qwen3-32B"));
  EXPECT_TRUE(Has(sh, "--tensor-parallel-size 2 \\\n"));
  EXPECT_TRUE(Has(sh, "--max-num-seqs 48"));
  EXPECT_TRUE(Has(sh, "--max-num-batched-tokens 8048"));  // prefill budget + decode rows of the mixed step
  EXPECT_TRUE(Has(sh, "--gpu-memory-utilization 0.90"));
  EXPECT_TRUE(Has(sh, "--kv-cache-dtype fp8"));
  EXPECT_TRUE(Has(sh, "--max-model-len 5000"));
  EXPECT_FALSE(Has(sh, "--pipeline-parallel-size"));
  EXPECT_FALSE(Has(sh, "--enable-expert-parallel"));
  const std::string& k8s = files.at("agg/k8s_deploy.yaml");
  EXPECT_TRUE(Has(k8s, "kind: DynamoGraphDeployment"));
  EXPECT_TRUE(Has(k8s, "STARTING POINT"));
  EXPECT_TRUE(Has(k8s, "name: qwen3-32b-agg"));
  EXPECT_TRUE(
      Has(k8s, "    Worker:\n      componentType: worker\n      replicas: 4\n      envFromSecret: hf-token-secret\n"));
  EXPECT_TRUE(Has(k8s, "image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0\n"));
  EXPECT_FALSE(Has(k8s, "${"));               // no placeholder
  EXPECT_FALSE(Has(k8s, "kind: ConfigMap"));  // vLLM takes every setting as a flag
  EXPECT_TRUE(Has(k8s, "gpu: \"2\""));
  EXPECT_TRUE(Has(k8s, "\"-m\", \"dynamo.vllm\""));
  EXPECT_TRUE(Has(k8s, "- \"--tensor-parallel-size\"\n            - \"2\""));
}

TEST(GenerateFiles, BenchScriptRunsThePlannedLoad) {
  const auto files = ByPath(LaunchFiles(Ctx(model::Engine::kVllm), AggPoint()));
  const std::string& b = files.at("agg/bench.sh");
  EXPECT_EQ(b.rfind("#!/usr/bin/env bash\n", 0), 0u);
  EXPECT_TRUE(Has(b, "vllm bench serve \\\n  --backend openai \\\n"));
  EXPECT_TRUE(Has(b, "--model Qwen/Qwen3-32B \\"));
  EXPECT_TRUE(Has(b, "--random-input-len 4000 \\"));
  EXPECT_TRUE(Has(b, "--random-output-len 1000 \\"));
  // 48 per replica x 4 replicas; 10 x that many requests.
  EXPECT_TRUE(Has(b, "48 per replica x 4 replica(s) = 192"));
  EXPECT_TRUE(Has(b, "--max-concurrency 192 \\"));
  EXPECT_TRUE(Has(b, "--num-prompts 1920 \\"));
  // The prediction to compare with: TTFT, TPOT, cluster requests/s (1.75 x 4).
  EXPECT_TRUE(Has(b, "TTFT 812.2 ms, TPOT 24.50 ms,\n# 7.000 requests/s."));
  EXPECT_TRUE(Has(b, "BASE_URL=${BASE_URL:-http://localhost:8000}"));
}

TEST(GenerateFiles, SglangDisaggWithAttentionDp) {
  const auto files = ByPath(LaunchFiles(Ctx(model::Engine::kSglang), DisaggMoePoint()));
  ASSERT_EQ(files.size(), 5u);  // + run_single_node.sh (6 GPUs fit a node)
  const std::string& dec = files.at("disagg/decode_launch.sh");
  EXPECT_TRUE(Has(dec, "sglang serve \\\n  --model-path Qwen/Qwen3-32B"));
  EXPECT_TRUE(Has(dec, "--model-path Qwen/Qwen3-32B"));
  EXPECT_TRUE(Has(dec, "--tp-size 4"));  // every GPU of the worker
  EXPECT_TRUE(Has(dec, "--dp-size 4"));
  EXPECT_TRUE(Has(dec, "--disaggregation-transfer-backend nixl"));
  EXPECT_TRUE(Has(dec, "--enable-dp-attention"));
  EXPECT_TRUE(Has(dec, "--ep-size 4"));
  EXPECT_TRUE(Has(dec, "--max-running-requests 256"));  // 64 per attention-DP rank
  EXPECT_TRUE(Has(dec, "--mem-fraction-static 0.90"));
  EXPECT_TRUE(Has(dec, "--disaggregation-mode decode"));
  EXPECT_FALSE(Has(dec, "--kv-cache-dtype"));
  const std::string& pre = files.at("disagg/prefill_launch.sh");
  EXPECT_TRUE(Has(pre, "--tp-size 1"));
  EXPECT_TRUE(Has(pre, "--disaggregation-transfer-backend nixl"));
  EXPECT_TRUE(Has(pre, "--disaggregation-mode prefill"));
  EXPECT_TRUE(Has(pre, "--chunked-prefill-size 4000"));
  const std::string& k8s = files.at("disagg/k8s_deploy.yaml");
  EXPECT_TRUE(Has(
      k8s, "    PrefillWorker:\n      componentType: worker\n      subComponentType: prefill\n      replicas: 2\n"));
  EXPECT_TRUE(
      Has(k8s, "    DecodeWorker:\n      componentType: worker\n      subComponentType: decode\n      replicas: 1\n"));
  EXPECT_TRUE(Has(k8s, "gpu: \"4\""));
}

TEST(GenerateFiles, TrtllmCommandAndExtraConfig) {
  LaunchContext c = Ctx(model::Engine::kTrtllm);
  c.kv_fp8 = true;
  const auto files = ByPath(LaunchFiles(c, DisaggMoePoint()));
  ASSERT_EQ(files.size(), 7u);  // 2 scripts, 2 YAMLs, manifest, single-node script, bench
  const std::string& dec = files.at("disagg/decode_launch.sh");
  EXPECT_TRUE(Has(dec, "trtllm-serve Qwen/Qwen3-32B"));
  EXPECT_TRUE(Has(dec, "--tp_size 4"));
  EXPECT_TRUE(Has(dec, "--pp_size 1"));
  EXPECT_TRUE(Has(dec, "--ep_size 4"));
  EXPECT_TRUE(Has(dec, "--max_batch_size 64"));
  EXPECT_TRUE(Has(dec, "--extra_llm_api_options decode_extra_llm_api_config.yaml"));
  const std::string& yaml = files.at("disagg/decode_extra_llm_api_config.yaml");
  EXPECT_TRUE(Has(yaml, "STARTING POINT"));
  EXPECT_TRUE(Has(yaml, "kv_cache_config:\n  free_gpu_memory_fraction: 0.90\n  dtype: fp8\n"));
  EXPECT_TRUE(Has(yaml, "enable_attention_dp: true"));
  EXPECT_TRUE(Has(yaml, "cache_transceiver_config:"));
  EXPECT_TRUE(Has(yaml, "moe_expert_parallel_size: 4"));
  const std::string& pyaml = files.at("disagg/prefill_extra_llm_api_config.yaml");
  EXPECT_TRUE(Has(pyaml, "enable_attention_dp: false"));
  // No chunked prefill on a prefill worker: its budget covers max_seq_len, so no accepted prompt is rejected.
  EXPECT_TRUE(Has(pyaml, "max_num_tokens: 5000"));
  EXPECT_TRUE(Has(pyaml, "enable_chunked_prefill: false"));
  EXPECT_TRUE(Has(pyaml, "disable_overlap_scheduler: true"));
  EXPECT_TRUE(Has(yaml, "disable_overlap_scheduler: false"));
  EXPECT_TRUE(Has(yaml, "max_num_tokens: 64"));  // the decode batch
  const std::string& k8s = files.at("disagg/k8s_deploy.yaml");
  EXPECT_TRUE(Has(k8s, "\"--disaggregation-mode\"\n            - \"prefill\""));
  // The YAMLs travel in a ConfigMap mounted at /config, where the workers' args name them.
  EXPECT_TRUE(Has(k8s, "kind: ConfigMap\nmetadata:\n  name: qwen3-32b-disagg-engine-config\n"));
  EXPECT_TRUE(Has(k8s, "  prefill_extra_llm_api_config.yaml: |\n"));
  EXPECT_TRUE(Has(k8s, "  decode_extra_llm_api_config.yaml: |\n"));
  EXPECT_TRUE(Has(k8s, "- \"--extra-engine-args\"\n            - \"/config/prefill_extra_llm_api_config.yaml\""));
  EXPECT_TRUE(Has(k8s, "mountPath: /config"));
  EXPECT_TRUE(Has(k8s, "- \"--model\"\n            - \"Qwen/Qwen3-32B\""));
}

// vLLM disaggregated: Dynamo's role flag (--disaggregation-mode; --is-prefill-worker
// is gone), NIXL on both roles, and a decode step budget that holds the batch and a prompt.
TEST(GenerateFiles, VllmDisaggRolesAndBudgets) {
  const auto files = ByPath(LaunchFiles(Ctx(model::Engine::kVllm), DisaggMoePoint()));
  const std::string& k8s = files.at("disagg/k8s_deploy.yaml");
  EXPECT_FALSE(Has(k8s, "is-prefill-worker"));
  EXPECT_TRUE(Has(k8s, "- \"--disaggregation-mode\"\n            - \"prefill\""));
  EXPECT_TRUE(Has(k8s, "- \"--disaggregation-mode\"\n            - \"decode\""));
  EXPECT_TRUE(Has(k8s, "- \"--kv-transfer-config\"\n            - \"{\\\"kv_connector\\\":\\\"NixlConnector\\\""));
  const std::string& dec = files.at("disagg/decode_launch.sh");
  EXPECT_TRUE(Has(dec, "--max-num-batched-tokens 4000"));  // max(64 batch, isl 4000)
  EXPECT_TRUE(Has(dec, "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"));
}

// One replica on one node: the frontend, each worker on its own GPUs, ports apart.
TEST(GenerateFiles, SingleNodeScript) {
  const auto files = ByPath(LaunchFiles(Ctx(model::Engine::kVllm), DisaggMoePoint()));
  const std::string& s = files.at("disagg/run_single_node.sh");
  EXPECT_TRUE(Has(s, "python3 -m dynamo.frontend --http-port \"$PORT\" &\n"));
  EXPECT_TRUE(Has(s, "CUDA_VISIBLE_DEVICES=0 python3 -m dynamo.vllm"));
  EXPECT_TRUE(Has(s, "CUDA_VISIBLE_DEVICES=1 python3 -m dynamo.vllm"));
  EXPECT_TRUE(Has(s, "CUDA_VISIBLE_DEVICES=2,3,4,5 python3 -m dynamo.vllm"));
  EXPECT_TRUE(Has(s, "VLLM_NIXL_SIDE_CHANNEL_PORT=5601"));
  EXPECT_TRUE(Has(s, "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"));
  // Agg tp2 x 4 replicas: all four on one 8-GPU node.
  const auto agg = ByPath(LaunchFiles(Ctx(model::Engine::kTrtllm), AggPoint()));
  const std::string& a = agg.at("agg/run_single_node.sh");
  EXPECT_TRUE(Has(a, "4 replica(s) (GPUs 0..7)"));
  EXPECT_TRUE(Has(a,
                  "CUDA_VISIBLE_DEVICES=6,7 python3 -m dynamo.trtllm --model Qwen/Qwen3-32B --extra-engine-args "
                  "extra_llm_api_config.yaml &"));
}

// A point with MTP (search::Point::nextn) gets each engine's speculative-decoding
// flags; a point without gets none (the search may have dropped MTP).
TEST(GenerateFiles, MtpFlagsPerEngine) {
  search::Point p = DisaggMoePoint();
  p.nextn = 2;
  const auto trt = ByPath(LaunchFiles(Ctx(model::Engine::kTrtllm), p));
  EXPECT_TRUE(Has(trt.at("disagg/decode_extra_llm_api_config.yaml"),
                  "speculative_config:\n  decoding_type: MTP\n  num_nextn_predict_layers: 2\n"));
  const auto sgl = ByPath(LaunchFiles(Ctx(model::Engine::kSglang), p));
  const std::string& dec = sgl.at("disagg/decode_launch.sh");
  EXPECT_TRUE(Has(dec, "--speculative-algorithm EAGLE"));
  EXPECT_TRUE(Has(dec, "--speculative-num-steps 2"));
  EXPECT_TRUE(Has(dec, "--speculative-num-draft-tokens 3"));
  const auto vll = ByPath(LaunchFiles(Ctx(model::Engine::kVllm), p));
  EXPECT_TRUE(Has(vll.at("disagg/decode_launch.sh"),
                  "--speculative-config '{\"method\":\"deepseek_mtp\",\"num_speculative_tokens\":2}'"));
  p.nextn = 0;
  const auto none = ByPath(LaunchFiles(Ctx(model::Engine::kSglang), p));
  EXPECT_FALSE(Has(none.at("disagg/decode_launch.sh"), "--speculative"));
}

TEST(GenerateFiles, GpuProductLabelAsGpuFeatureDiscoveryWritesIt) {
  EXPECT_EQ(GpuProductLabel("NVIDIA H100 80GB HBM3"), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(GpuProductLabel("NVIDIA H200"), "NVIDIA-H200");
  EXPECT_EQ(GpuProductLabel("NVIDIA A100-SXM4-80GB"), "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(GpuProductLabel("Intel(R) Graphics [0xe211]"), "Intel-R--Graphics--0xe211");  // ends alphanumeric
  EXPECT_EQ(GpuProductLabel(std::string(80, 'x')).size(), 63u);
}

TEST(GenerateRule, WeightsFitTp) {
  const double gb = 1e9;
  EXPECT_EQ(WeightsFitTp(16 * gb, 141 * gb, 8, 8), 1);    // 24 GB < 141 GB
  EXPECT_EQ(WeightsFitTp(100 * gb, 141 * gb, 8, 8), 2);   // 150 GB > 141, < 282
  EXPECT_EQ(WeightsFitTp(470 * gb, 141 * gb, 8, 8), 8);   // 705 GB -> 8 x 141 = 1128
  EXPECT_EQ(WeightsFitTp(810 * gb, 141 * gb, 8, 8), 0);   // 1215 GB > one node
  EXPECT_EQ(WeightsFitTp(470 * gb, 141 * gb, 8, 4), 0);   // capped by the GPUs given
}

TEST(GenerateRule, RuleDeploymentCarriesNoPrediction) {
  model::ModelConfig m;
  m.family = &model::FindFamily("moe");
  const search::Point p = WeightsFitPoint(m, 4, 16, 2000);
  EXPECT_EQ(p.par.tp, 4);
  EXPECT_EQ(p.par.moe_ep, 4);
  EXPECT_EQ(p.replicas, 4);
  EXPECT_EQ(p.batch, 128);
  LaunchContext c = Ctx(model::Engine::kVllm);
  c.predicted = false;
  const auto files = ByPath(LaunchFiles(c, p));
  EXPECT_TRUE(Has(files.at("agg/launch.sh"), "No performance prediction"));
  EXPECT_FALSE(Has(files.at("agg/launch.sh"), "Predicted per replica"));
  EXPECT_TRUE(Has(files.at("agg/launch.sh"), "--enable-expert-parallel"));
}

TEST(GenerateRule, DefaultSaveDir) {
  EXPECT_EQ(DefaultSaveDir("Qwen/Qwen3-32B", "h200_sxm", 8), "./servecast-Qwen3-32B-h200_sxm-8gpu");
  EXPECT_EQ(DefaultSaveDir("/models/my model/", "b200_sxm", 16), "./servecast-my_model-b200_sxm-16gpu");
}

}  // namespace
}  // namespace servecast::report
