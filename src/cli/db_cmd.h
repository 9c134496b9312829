#pragma once

// `servecast db`: inspect and convert perf-data trees and tables; one
// subcommand each (db_inspect, db_convert, db_query).

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "cli/db_convert.h"
#include "cli/db_inspect.h"
#include "cli/db_query.h"

namespace servecast::cli {

struct DbArgs {
  DbInspectArgs inspect;
  DbConvertArgs convert;
  DbQueryArgs query;
  // Set by AddDbCommand: the subcommands, to tell which one was given.
  const CLI::App* inspect_cmd = nullptr;
  const CLI::App* convert_cmd = nullptr;
  const CLI::App* query_cmd = nullptr;
};

CLI::App* AddDbCommand(CLI::App& app, DbArgs& args);

// Runs the subcommand given; `find` resolves the default systems/ folder.
int RunDb(const DbArgs& args, const std::function<std::string(const std::string&)>& find);

}  // namespace servecast::cli
