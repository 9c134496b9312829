#pragma once

// `servecast validate`: predict each row of a measured serving file (AIC's
// silicon_sample.csv schema) and print the error per row and per partition.

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace servecast::cli {

struct ValidateArgs {
  std::string silicon;  // the measured CSV
  std::vector<std::string> data_roots;
  std::string data;                   // BACKEND[/VERSION] for every row
  std::vector<std::string> data_map;  // ENGINE=BACKEND[/VERSION]
  std::string database_mode = "silicon";
  std::string moe_distribution;
  bool json = false;
  bool simulate = false;                 // also simulate the agg rows
  std::string sim_statistic = "mean";    // mean or median per request, compared with the measured value
  double sim_range_ratio = 0.8;          // request lengths uniform in [ratio x L, L]
  std::string systems_dir, models_dir, engines_dir;
};

CLI::App* AddValidateCommand(CLI::App& app, ValidateArgs& args);

// Exit status: 0 when at least one row was predicted and no row is a "bad row"
// (misses are listed); 1 when none could be predicted or some row is impossible
// (a measured TTFT or TPOT <= 0, tp 0, isl 0, ...: listed with its reason). A
// malformed file (a cell that is not a number, a missing column) throws
// DataError (exit 2 at the caller).
int RunValidate(const ValidateArgs& args, const std::function<std::string(const std::string&)>& find);

}  // namespace servecast::cli
