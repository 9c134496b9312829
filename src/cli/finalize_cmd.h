#pragma once

// `servecast finalize`: merge the journals of run dirs into perf tables.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace servecast::cli {

struct FinalizeArgs {
  std::vector<std::string> run_dirs;  // the shards of one plan
  std::string out = "systems/data";
  std::string format = "auto";
};

CLI::App* AddFinalizeCommand(CLI::App& app, FinalizeArgs& args);

// Prints one line per table; 0 when every table is complete, 1 otherwise.
int RunFinalize(const FinalizeArgs& args);

}  // namespace servecast::cli
