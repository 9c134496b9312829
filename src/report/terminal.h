#pragma once

// Terminal and JSON reports of a deployment search (docs/search.md, "Output").

#include <string>

#include <nlohmann/json.hpp>

#include "model/model_config.h"
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

}  // namespace servecast::report
