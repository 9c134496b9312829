#pragma once

// CSV tables of a deployment search, written by `servecast default --save-dir`
// (docs/search.md, "Reports"): one row per point with every column of the point.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "search/search.h"

namespace servecast::report {

// The columns of a mode's CSV tables (agg: one worker's parallel split, batch,
// prefill budget; disagg: the prefill and decode workers).
std::vector<std::string> PointCsvHeader(search::Mode mode);

// `rows` (indices into m.points, in order) as CSV with a header line. `ranked`
// adds a leading 1-based `rank` column (best_config_topn.csv). Every row carries
// `on_frontier` (whether the point is on the mode's Pareto frontier).
std::string PointsCsv(const search::ModeResult& m, const std::vector<std::size_t>& rows, bool ranked = false);

// Every feasible point of the mode (pareto.csv), in search order.
std::string AllPointsCsv(const search::ModeResult& m);

// One CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
std::string CsvField(std::string_view s);

}  // namespace servecast::report
