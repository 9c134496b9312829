#include "cli/db_cmd.h"

namespace servecast::cli {

CLI::App* AddDbCommand(CLI::App& app, DbArgs& a) {
  auto* c = app.add_subcommand("db", "inspect and convert perf-data trees and tables");
  c->require_subcommand(1);
  a.inspect_cmd = AddDbInspectCommand(*c, a.inspect);
  a.convert_cmd = AddDbConvertCommand(*c, a.convert);
  a.query_cmd = AddDbQueryCommand(*c, a.query);
  return c;
}

int RunDb(const DbArgs& a, const std::function<std::string(const std::string&)>& find) {
  if (*a.inspect_cmd) return RunDbInspect(a.inspect, find);
  if (*a.query_cmd) return RunDbQuery(a.query, find);
  return RunDbConvert(a.convert);
}

}  // namespace servecast::cli
