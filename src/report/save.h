#pragma once

// `servecast default --save-dir D` (docs/search.md, "Reports"): one folder per
// search under D with summary.json, the HTML report and per-mode CSV tables.

#include <string>
#include <string_view>

#include "report/terminal.h"
#include "search/search.h"

namespace servecast::report {

// `s` with every character outside [A-Za-z0-9._-] replaced by '_' ("Qwen/Qwen3-32B"
// -> "Qwen_Qwen3-32B"); never empty, never "." or "..".
std::string SanitizeName(std::string_view s);

// <model>_<system>_<engine>_isl<I>_osl<O>_ttft<T>_tpot<P> (with a request-latency
// limit: ..._ttft<T>_reqlat<R>), sanitized. A model given as a folder contributes
// the folder's name, not its whole path.
std::string ReportFolderName(const ReportContext& c);

// Creates a new folder D/<ReportFolderName> (adding -2, -3, ... when the name is
// taken) and writes, each file atomically:
//   summary.json                 the --json document
//   report.html                  HtmlReport
//   <mode>/pareto.csv            every feasible point
//   <mode>/frontier.csv          the Pareto frontier, by tokens/s/user
//   <mode>/best_config_topn.csv  the top-N, best first
// Returns the folder's path. Throws SystemError when a file cannot be written.
std::string SaveReport(const search::SearchResult& r, const ReportContext& c, const std::string& save_dir);

}  // namespace servecast::report
