#pragma once

// `servecast support`: whether the perf data answers a model on a system, per
// serving engine: PASS, PARTIAL (HYBRID fallbacks named) or FAIL with the reason
// (docs/commands.md).

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "cli/plan_common.h"

namespace servecast::cli {

struct SupportArgs {
  PlanArgs plan;  // plan.engine "" = every engine
  int total_gpus = 0;  // 0 = the system's GPUs per node
  std::int64_t isl = 1024, osl = 256;
};

CLI::App* AddSupportCommand(CLI::App& app, SupportArgs& args);
int RunSupport(const SupportArgs& args, const std::function<std::string(const std::string&)>& find);

}  // namespace servecast::cli
