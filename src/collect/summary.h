#pragma once

#include <map>
#include <string>
#include <vector>

#include "collect/journal.h"
#include "collect/plan.h"

namespace servecast::collect {

// Per-op outcome of a run, built from the plan and the journal.
struct OpSummary {
  StageCounts stages;
  std::map<std::string, std::size_t> by_status;        // passed, failed, timeout, ...
  std::map<std::string, std::size_t> skipped_by_reason;  // plan-time drops and capacity skips
  std::map<std::string, std::size_t> errors_by_class;
  std::size_t rows = 0;
  std::size_t not_run = 0;  // planned but not in the journal (interrupted run)
  std::vector<const JournalRecord*> errors;    // failed cases (latest record)
  std::vector<const JournalRecord*> transient;  // failed earlier, passed on retry
  bool zero_rows = false;                       // planned and produced no rows: a failure
};

struct RunSummary {
  std::map<std::string, OpSummary> ops;
  std::size_t failures = 0;
  bool ok() const;
};

// `records` are all journal records in file order (older attempts first).
RunSummary Summarize(const Plan& plan, const std::vector<JournalRecord>& records);

// Writes collection_summary_<backend>.json and errors_<backend>.<op>.json (only
// for ops with errors; stale ones from earlier attempts are removed).
void WriteSummaryFiles(const std::string& run_dir, const JournalHeader& header, const Plan& plan,
                       const RunSummary& summary, const Json& extra);

// A short human report for the terminal.
std::string FormatSummary(const Plan& plan, const RunSummary& summary);

// Groups of five or more failures of one op and class are systemic.
inline constexpr std::size_t kSystemicThreshold = 5;

}  // namespace servecast::collect
