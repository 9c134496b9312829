#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "collect/case.h"
#include "collect/expr.h"
#include "collect/registry.h"

namespace servecast::collect {

// One entry of cases/skips.yaml: the one place that says a case must not run.
struct SkipRule {
  std::string op;
  std::string backend;  // empty: every backend
  std::optional<Expr> when;
  int min_sm = 0, max_sm = 0;  // 0: unbounded
  std::string reason;
  std::string source;
  std::string where;  // file:line of the entry
};

// A case left out of the final plan, with why.
struct DroppedCase {
  Case c;
  std::string stage;   // "skips", "maturity", "requirements"
  std::string reason;  // skip reason, maturity marker, or requirement evidence
};

// Counts per op at each stage of plan construction (what --plan-only prints).
struct StageCounts {
  std::int64_t raw = 0;
  std::int64_t selected = 0;     // after --model / --case-filter
  std::int64_t after_skips = 0;
  std::int64_t after_maturity = 0;
  std::int64_t supported = 0;    // after runtime requirements
  std::int64_t after_shard = 0;
  std::int64_t final = 0;        // after shuffle + limit
};

// The most cases a plan may cross to: the raw grid of every wanted sweep (axes
// crossed with profiles and model shapes), counted before `where:`, skips and
// --limit. AIC's largest grid (GEMM on SM100) is 133,264 tasks; a plan past the
// limit is a ConfigError at the sweep that crosses it.
inline constexpr std::int64_t kMaxPlanCases = 1'000'000;

struct PlanOptions {
  std::string cases_dir;  // root holding base_ops/, models/, skips.yaml
  std::string backend;
  std::vector<std::string> ops;     // empty: every op the backend registers
  std::vector<std::string> models;  // --model: keep cases these models need
  std::vector<std::pair<std::string, std::string>> case_filters;  // --case-filter K=V
  bool include_unverified = false;
  bool shuffle = false;
  std::uint64_t seed = 42;
  std::int64_t limit = -1;  // per op; -1: none
  int shard_index = 0, shard_count = 1;
};

struct Plan {
  std::string backend;
  std::vector<std::string> ops;  // in order
  std::vector<Case> cases;       // the final list, in run order
  std::vector<Case> supported;   // every supported case of every shard, before --limit
  std::vector<DroppedCase> dropped;
  std::map<std::string, StageCounts> counts;  // per op
  // sha256 over the sorted IDs of the supported plan (before shard and limit):
  // binds a journal to what was planned.
  std::string plan_hash;
  std::int64_t supported_total = 0;  // cases in the supported plan across shards
};

// Reads cases/skips.yaml (absent file: no rules).
std::vector<SkipRule> LoadSkips(const std::string& path);

// Builds the plan for a backend. `rt` is the detected runtime (for requirement
// and SM checks); throws ConfigError for malformed case files (file, line,
// expectation), UsageError for an unknown op or model, and ConfigError naming
// both owners when two different cases map to one table key.
Plan BuildPlan(const Registry& registry, const PlanOptions& options, const RuntimeInfo& rt);

// Deterministic shard membership: the case at position `index` of the sorted
// supported plan belongs to shard index % count.
bool InShard(std::size_t index, int shard_index, int shard_count);

}  // namespace servecast::collect
