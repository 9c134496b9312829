#pragma once

// `servecast check`: judge perf tables by their content (quality gates).

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "collect/check.h"

namespace servecast::cli {

CLI::App* AddCheckCommand(CLI::App& app, collect::CheckOptions& args);

// `find` resolves the default systems/ folder (for the physics gate).
int RunCheck(const collect::CheckOptions& args, const std::function<std::string(const std::string&)>& find);

}  // namespace servecast::cli
