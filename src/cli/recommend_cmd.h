#pragma once

// `servecast recommend`: the fewest GPUs whose best deployment meets the latency
// limits and a target request rate or concurrency (docs/commands.md).

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>

#include "cli/plan_common.h"

namespace servecast::cli {

struct RecommendArgs {
  PlanArgs plan;
  SlaArgs sla;
  WorkloadArgs workload;  // --prefix, --moe-distribution, --calibration
  double target_request_rate = 0;
  std::int64_t target_concurrency = 0;
  int max_gpus = 512;
  bool every_gpu_count = false;  // try 1, 2, 3, ... instead of the ladder
};

CLI::App* AddRecommendCommand(CLI::App& app, RecommendArgs& args);
int RunRecommend(const RecommendArgs& args, const std::function<std::string(const std::string&)>& find);

}  // namespace servecast::cli
