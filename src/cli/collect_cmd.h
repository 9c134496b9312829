#pragma once

// `servecast collect`: benchmark ops over their case plan and write perf tables.

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "collect/collector.h"
#include "collect/registry.h"

namespace servecast::cli {

struct CollectArgs {
  collect::CollectOptions options;  // the options bound as they are; the rest below are parsed into it
  std::string gpus, shard, rerun_where, rerun_before;
  bool smoke = false;
  std::vector<std::string> filters;  // --case-filter K=V
  // Set by AddCollectCommand: an option given with an empty value still counts as given.
  const CLI::Option* rerun_where_option = nullptr;
  const CLI::Option* rerun_before_option = nullptr;
};

CLI::App* AddCollectCommand(CLI::App& app, CollectArgs& args);

// Runs the collection with `worker_exe` as the binary its workers start; `find`
// resolves the default cases/ and systems/ folders.
int RunCollect(const CollectArgs& args, const collect::Registry& registry, const std::string& worker_exe,
               const std::function<std::string(const std::string&)>& find);

}  // namespace servecast::cli
