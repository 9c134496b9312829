#pragma once

// `servecast db inspect`: what a perf-data tree holds, or the key coverage of
// one system's tables (--slices).

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace servecast::cli {

struct DbInspectArgs {
  std::vector<std::string> roots;
  bool json = false;
  std::string slices_system, slices_backend, slices_version;  // --slices SYSTEM --backend --version
  std::string systems_dir;
};

CLI::App* AddDbInspectCommand(CLI::App& db, DbInspectArgs& args);

// `find` resolves the default systems/ folder (for --slices).
int RunDbInspect(const DbInspectArgs& args, const std::function<std::string(const std::string&)>& find);

}  // namespace servecast::cli
