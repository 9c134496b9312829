#pragma once

// `servecast default`: search deployments of a model on N GPUs and pick the best.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cli/plan_common.h"

namespace servecast::cli {

struct DefaultArgs {
  std::string model, system, engine = "trtllm", data;
  std::vector<std::string> data_roots;
  std::string database_mode = "silicon", transfer_policy = "aggressive";
  int total_gpus = 0;
  SlaArgs sla;
  std::int64_t prefix = 0;
  int top_n = 5;
  std::string moe_distribution;
  bool json = false;
  std::string save_dir;
  std::string systems_dir, models_dir, engines_dir;
  std::string calibration;  // engine-profile calibration: "" (servecast's) or "aic"
};

CLI::App* AddDefaultCommand(CLI::App& app, DefaultArgs& args);
int RunDefault(const DefaultArgs& args, const std::function<std::string(const std::string&)>& find);

}  // namespace servecast::cli
