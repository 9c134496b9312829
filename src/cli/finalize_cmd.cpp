#include "cli/finalize_cmd.h"

#include <cstdio>

#include "collect/finalize.h"

namespace servecast::cli {

CLI::App* AddFinalizeCommand(CLI::App& app, FinalizeArgs& a) {
  auto* c =
      app.add_subcommand("finalize", "merge the journals of run dirs (e.g. the shards of one plan) into perf tables");
  c->add_option("--run-dir", a.run_dirs, "run dir; repeat for each shard")->required();
  c->add_option("--out", a.out, "data root")->capture_default_str();
  c->add_option("--format", a.format, "table format: auto (each table's existing format, else csv), csv or parquet")
      ->capture_default_str();
  return c;
}

int RunFinalize(const FinalizeArgs& a) {
  auto res = collect::Finalize(a.run_dirs, a.out, a.format);
  for (const auto& [t, o] : res.tables)
    std::printf("%s: %zu rows -> %s [%s, %zu of %zu planned keys missing]\n", t.c_str(), o.rows_after, o.path.c_str(),
                o.status.c_str(), o.missing, o.planned);
  bool complete = true;
  for (const auto& [_, o] : res.tables) complete = complete && o.status == "complete";
  return complete ? 0 : 1;
}

}  // namespace servecast::cli
