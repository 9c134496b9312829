#pragma once

// `servecast generate`: launch configurations (vLLM, SGLang or TRT-LLM command
// lines, and a Dynamo-style Kubernetes manifest) for the best aggregated and
// disaggregated deployments of a model on N GPUs (docs/commands.md).

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "cli/plan_common.h"

namespace servecast::cli {

struct GenerateArgs {
  PlanArgs plan;
  SlaArgs sla;
  WorkloadArgs workload;  // --prefix, --moe-distribution, --calibration
  int total_gpus = 0;
  std::string save_dir;  // "" = ./servecast-<model>-<system>-<N>gpu
  std::string image;     // "" = the engine's Dynamo runtime image (report::DefaultImage)
};

CLI::App* AddGenerateCommand(CLI::App& app, GenerateArgs& args);
int RunGenerate(const GenerateArgs& args, const std::function<std::string(const std::string&)>& find);

}  // namespace servecast::cli
