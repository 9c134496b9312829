#pragma once

// Terminal and JSON reports of a deployment search (docs/search.md, "Output").

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "search/recommend.h"
#include "search/search.h"

namespace servecast::report {

struct ReportContext {
  const model::ModelConfig* model = nullptr;
  std::string system, device, engine, data, database_mode;
  search::SearchInputs inputs;
  double load_seconds = 0;  // opening the model, specs and tables
  // Op costs of the chosen point that did not come from measured or interpolated
  // rows (search::DataNotes); shown under the chosen deployment.
  std::vector<std::string> data_notes;
  // Files written beside the report (`generate`: launch files, benchmarks),
  // relative to its folder; the HTML report links them.
  std::vector<std::string> launch_files;
};

// The summary box, an ASCII Pareto chart per mode with the chosen point, and a
// top-N table per mode.
std::string TerminalReport(const search::SearchResult& r, const ReportContext& c);

// An ASCII scatter of the frontiers (tokens/s/user across, tokens/s/GPU up).
std::string AsciiPareto(const search::SearchResult& r, int width = 64, int height = 18);

// One JSON document: inputs, the chosen deployment, per mode the best rows, the
// frontier and the skip counts.
nlohmann::ordered_json JsonReport(const search::SearchResult& r, const ReportContext& c);
nlohmann::ordered_json PointJson(const search::Point& p);

// The GPU counts a target search tried (`recommend`, `default --target-request-rate`):
// one row per count (meets the limits, the best requests/s and concurrency among
// the points meeting them, meets the target, why not), and the same as JSON.
std::string RecommendStepsTable(const search::RecommendResult& r);
nlohmann::ordered_json RecommendStepsJson(const search::RecommendResult& r);

// Skip reasons for the terminal: reasons that differ only in the key of the
// missing row ("missing data (decode): moe {moe_dtype=..., tp=16, ...} has no
// silicon-mode estimate: ...") make one group per class and table, with the sum
// of their counts, the number of keys and the first key as an example. Other
// reasons pass unchanged. In the input's order (reasons sort by class and table).
struct SkipGroup {
  std::string reason;  // the reason, or the group's class and table ("missing data (decode): moe")
  std::size_t count = 0;
  std::size_t keys = 1;  // distinct reasons folded in
  std::string example;   // keys > 1: the first reason of the group, in full
};
std::vector<SkipGroup> GroupSkips(const std::map<std::string, std::size_t>& skipped);

}  // namespace servecast::report
