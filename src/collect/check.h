#pragma once

#include <string>

#include "collect/journal.h"

namespace servecast::collect {

struct CheckOptions {
  std::string data_dir;     // a data root, a system folder, or one version folder
  std::string plan_run_dir; // --plan: list missing keys from this run's plan.jsonl
  std::string against;      // --against: another data dir or one CSV table
  std::string systems_dir;  // system specs for the physics gate
  double physics_tolerance = 0.10;  // a row may beat the SOL bound by at most this fraction (boost clocks exceed datasheet clocks by ~8%)
  double rsd_warn = 0.05;
  bool json = false;
};

// Judges perf tables by their content (COLLECTOR.md, quality gates). Prints a
// report (or one JSON document) and returns 0 when no hard gate failed, 1
// otherwise. Throws UsageError when the data dir holds no tables.
int Check(const CheckOptions& options);

}  // namespace servecast::collect
