#pragma once

// `servecast check`: judge perf tables by their content (quality gates); with
// --coverage, the coverage gate of a system folder (search/coverage.h).

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "collect/check.h"

namespace servecast::cli {

struct CheckArgs {
  collect::CheckOptions check;
  bool coverage = false;   // --coverage: every bundled model x engine against the system folder's data
  std::string gaps;        // --gaps FILE (default: <data_dir>/COVERAGE_GAPS.yaml)
  std::string models_dir;  // --models
  std::string data;        // --data BACKEND[/VERSION]
};

CLI::App* AddCheckCommand(CLI::App& app, CheckArgs& args);

// `find` resolves the default systems/ and models/ folders.
int RunCheck(const CheckArgs& args, const std::function<std::string(const std::string&)>& find);

}  // namespace servecast::cli
