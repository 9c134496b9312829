#pragma once

// `servecast default`: search deployments of a model on N GPUs and pick the best;
// with --backend auto, one search per engine and the best of them; with
// --target-request-rate instead of --total-gpus, the fewest GPUs that serve it.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/plan_common.h"

namespace servecast::cli {

struct DefaultArgs {
  std::string model, system, engine = "trtllm", data;
  std::string decode_system;  // decode workers on another system (disagg only)
  std::vector<std::string> data_roots;
  std::string database_mode = "silicon", transfer_policy = "aggressive";
  int total_gpus = 0;  // 0: found from --target-request-rate
  double target_request_rate = 0;
  int max_gpus = 64;  // with --target-request-rate: the largest count tried
  SlaArgs sla;
  WorkloadArgs workload;  // --prefix, --moe-distribution, --calibration
  int top_n = 5;
  bool json = false;
  bool simulate = false;  // simulate the frontier and best points (search::SearchInputs::simulate)
  std::string save_dir;
  std::string systems_dir, models_dir, engines_dir;
};

CLI::App* AddDefaultCommand(CLI::App& app, DefaultArgs& args);
// What one run gives its caller (`servecast exp`): the --json document, built
// whether or not --json was given; with `quiet_json` it is not printed.
struct DefaultOutcome {
  bool quiet_json = false;
  nlohmann::ordered_json json;
};
int RunDefault(const DefaultArgs& args, const std::function<std::string(const std::string&)>& find,
               DefaultOutcome* out = nullptr);

}  // namespace servecast::cli
