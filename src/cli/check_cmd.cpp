#include "cli/check_cmd.h"

namespace servecast::cli {

CLI::App* AddCheckCommand(CLI::App& app, collect::CheckOptions& a) {
  auto* c = app.add_subcommand("check", "judge perf tables by their content (quality gates)");
  c->add_option("data_dir", a.data_dir, "data folder: a data root, a system folder or one version folder")->required();
  c->add_option("--plan", a.plan_run_dir, "run dir whose plan.jsonl lists the planned cases (names missing keys)");
  c->add_option("--against", a.against, "another data dir or CSV table: ratio distribution on shared keys");
  c->add_flag("--json", a.json, "print one JSON document");
  c->add_option("--physics-tolerance", a.physics_tolerance, "fraction by which a row may beat its speed-of-light bound")
      ->capture_default_str();
  c->add_option("--systems", a.systems_dir, "system spec folder (default: systems/ of the installation)");
  return c;
}

int RunCheck(const collect::CheckOptions& args, const std::function<std::string(const std::string&)>& find) {
  collect::CheckOptions ch = args;
  if (ch.systems_dir.empty()) ch.systems_dir = find("systems");
  return collect::Check(ch);
}

}  // namespace servecast::cli
