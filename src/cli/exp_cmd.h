#pragma once

// `servecast exp FILE`: several `default` searches from one YAML file (AIC's
// `cli exp`), each with the outputs `default` gives, then one table comparing
// their chosen deployments (docs/commands.md).

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace servecast::cli {

struct ExpArgs {
  std::string file;
  std::string save_dir;  // each experiment's reports under <save_dir>/<name>/
  bool json = false;
};

CLI::App* AddExpCommand(CLI::App& app, ExpArgs& args);
int RunExp(const ExpArgs& args, const std::function<std::string(const std::string&)>& find);

}  // namespace servecast::cli
