#pragma once

// `servecast generate` (docs/commands.md): launch configurations for a starting
// deployment. From one searched point (or the weights-fit rule when the data
// cannot answer) it writes, per serving mode, the engine's launch command line
// (vLLM `vllm serve`, SGLang `python -m sglang.launch_server`, TRT-LLM
// `trtllm-serve` plus its extra LLM-API YAML) and a Dynamo-style Kubernetes
// manifest. Every file opens with a comment saying that servecast generated it
// as a starting point, with the predicted figures.

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/ops.h"
#include "search/search.h"

namespace servecast::report {

struct LaunchContext {
  model::Engine engine = model::Engine::kTrtllm;
  std::string model_id;  // what the engine loads (HF id or path)
  std::string system;    // for the header
  std::string origin;    // "search (trtllm/1.3.0rc20, silicon)" or "weights-fit rule"
  std::int64_t isl = 4000, osl = 1000;
  bool kv_fp8 = false;          // the KV cache is fp8
  int nextn = 0;                // MTP draft tokens per step (0: none); LaunchFiles takes the point's
  double memory_fraction = 0.9;  // the engine's KV budget fraction (engine profile)
  int total_gpus = 0;
  int gpus_per_node = 8;
  bool predicted = true;  // false: the figures are not predictions (weights-fit rule)
  std::string image;      // the Dynamo runtime image of k8s_deploy.yaml ("" = DefaultImage(engine))
  // --decode-system: the decode workers run on another system ("" = the same one).
  // Each worker pod of the manifest then selects its own system's GPU
  // (nodeSelector nvidia.com/gpu.product: gpu_product / decode_gpu_product, the
  // GPU feature discovery label, GpuProductLabel), the decode pods are sized by
  // decode_gpus_per_node, and no single-node script is written (the two sides are
  // never one node).
  std::string decode_system;
  int decode_gpus_per_node = 8;
  std::string gpu_product, decode_gpu_product;
};

// The value NVIDIA's GPU feature discovery gives the node label nvidia.com/gpu.product
// for a GPU of this device name (the NVML name, spaces as '-': "NVIDIA H100 80GB HBM3"
// -> "NVIDIA-H100-80GB-HBM3"); characters a label value cannot hold become '-'.
std::string GpuProductLabel(const std::string& device_name);

// The engine and Dynamo versions whose flags the generated files use (each flag
// is checked against those versions' parsers by the tests, tests/goldens/engine_flags/).
inline constexpr const char* kDynamoVersion = "1.3.0";
const char* EngineVersion(model::Engine e);  // "0.24.0" (vLLM), "0.5.16" (SGLang), "1.3.0rc23" (TRT-LLM)
// nvcr.io/nvidia/ai-dynamo/<engine>-runtime:<kDynamoVersion>
std::string DefaultImage(model::Engine e);

struct GeneratedFile {
  std::string path;  // relative to the save dir ("agg/launch.sh")
  std::string content;
};

// The files of one deployment: agg -> agg/launch.sh (+ agg/extra_llm_api_config.yaml
// for TRT-LLM) and agg/k8s_deploy.yaml; disagg -> disagg/prefill_launch.sh,
// disagg/decode_launch.sh (+ their YAMLs for TRT-LLM) and disagg/k8s_deploy.yaml;
// each mode also gets <mode>/bench.sh (BenchScript) and, when one replica fits a
// node (and both roles run on one system), <mode>/run_single_node.sh (the Dynamo frontend and every worker of one
// replica on one node). The manifest is complete as written: the image, a
// ConfigMap holding the TRT-LLM YAMLs mounted at /config, the Hugging Face token
// from the secret hf-token-secret, GPU requests and limits per worker.
//
// Step budgets (the engines' real limits): a TRT-LLM prefill worker runs without
// chunked prefill, so its max_num_tokens is at least max_seq_len (isl + osl: any
// prompt the engine accepts fits one pass) and its overlap scheduler is off; an
// agg worker whose budget is under max_seq_len chunks longer prompts; a decode
// worker's budget holds its whole batch (x (1 + nextn) with MTP); a vLLM decode
// worker's at least isl besides.
std::vector<GeneratedFile> LaunchFiles(const LaunchContext& c, const search::Point& p);

// The benchmark beside a deployment's launch files: `vllm bench serve` against an
// OpenAI-compatible endpoint ($BASE_URL, default http://localhost:8000) with the
// planned isl / osl, at the deployment's cluster concurrency (per replica x
// replicas), 10 x that many requests (at least 100), and the predicted TTFT,
// TPOT and requests/s to compare with in its header.
std::string BenchScript(const LaunchContext& c, const search::Point& p);

// The engine command line of one worker (no header), one flag per line joined by
// " \\\n  ". `prefill` / `decode` mark the disaggregated roles ("" = aggregated).
// `config_path` is the TRT-LLM extra LLM-API YAML the command names.
std::string EngineCommand(const LaunchContext& c, const model::ParallelConfig& par, std::int64_t max_batch,
                          std::int64_t max_tokens, const std::string& role, const std::string& config_path);

// The TRT-LLM extra LLM-API options YAML (no header) of one worker.
std::string TrtllmExtraConfig(const LaunchContext& c, const model::ParallelConfig& par, std::int64_t max_batch,
                              std::int64_t max_tokens, const std::string& role);

// The weights-fit rule: the smallest power-of-two tp with tp x GPU memory >
// 1.5 x weights, capped at `gpus_per_node` (and at `total_gpus`). 0 when even
// the cap does not fit.
int WeightsFitTp(double weight_bytes, double gpu_memory_bytes, int gpus_per_node, int total_gpus);

// The agg deployment the weights-fit rule gives when the perf data cannot answer:
// tp (MoE: expert-parallel over the same GPUs), batch 128, prefill budget = isl,
// replicas = total / tp. It carries no latency or throughput figures, and the
// launch files written from it say that no prediction was made.
search::Point WeightsFitPoint(const model::ModelConfig& m, int tp, int total_gpus, std::int64_t isl);

// "./servecast-Qwen3-32B-h200_sxm-8gpu" (the model's last path component, with
// anything but [A-Za-z0-9._-] replaced by '_').
std::string DefaultSaveDir(const std::string& model, const std::string& system, int total_gpus);

}  // namespace servecast::report
