#pragma once

// The coverage gate (`servecast check --coverage`, docs/commands.md): every
// bundled model x engine (trtllm, vllm, sglang) x the parallel configurations
// the search enumerates on one node of a system, costed in SILICON mode at a
// representative workload against one data source. Every lookup that misses is
// listed by its table and key; a declared-gaps file names, for each known gap,
// the issue or the reason. The gate fails on a miss no gap declares and on a
// gap that no longer misses, so the file cannot rot.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/model_config.h"
#include "model/ops.h"
#include "serve/database.h"
#include "system/system_spec.h"

namespace servecast::search {

// The table an op reads and the key of its lookup: the table's key columns
// that the op fixes (the workload columns, tokens and batch, left out), e.g.
// moe_perf {moe_dtype: w4a16_mxfp4, hidden_size: 2880, ...}. An op kind without
// a key here gets the table "<kind>_perf" (when declared) and an empty key.
struct OpLookup {
  std::string table;
  std::vector<std::pair<std::string, std::string>> key;
  std::string KeyText() const;  // "moe_dtype=w4a16_mxfp4, hidden_size=2880, ..."
};
OpLookup LookupOf(const model::Op& op);

// One declared gap (the gaps file's entry).
struct CoverageGap {
  std::string model;                                     // HF id of a bundled model
  std::vector<std::string> engines;                      // empty: every engine
  bool unsupported = false;                              // the family cannot estimate the model at all
  std::string table;                                     // else: the table that misses
  std::vector<std::pair<std::string, std::string>> key;  // the key columns that must match (a subset)
  std::int64_t issue = 0;                                // 0: none given
  std::string reason;
  int line = 0;
};

// Reads a gaps file. Strict: an unknown key, a missing model, neither or both
// of table / unsupported, a key column the table does not declare, an engine
// that is not trtllm, vllm or sglang, neither issue nor reason, a repeated
// entry -> ConfigError naming the file and line. `models` are the bundled ids:
// a gap on another model is an error too.
std::vector<CoverageGap> LoadCoverageGaps(const std::string& file, const std::vector<std::string>& models);

// One lookup that missed, over the engines and configurations where it did.
struct CoverageMiss {
  std::string model;
  std::string table;  // "" when the model cannot be estimated at all (`reason` says why)
  std::vector<std::pair<std::string, std::string>> key;
  std::set<std::string> engines;
  std::set<std::string> ops;
  std::map<std::string, std::set<std::string>> configs;  // engine -> parallel configurations
  std::string reason;                                    // the first miss's message (first line)
  int gap = -1;                                          // index of the declaring gap, -1 when undeclared
  std::string KeyText() const;
};

struct CoverageReport {
  std::string system, data;  // data: the source read ("cuda/13.0-...")
  int gpus = 0;
  std::int64_t isl = 4000, osl = 1000;
  std::vector<std::int64_t> batches = {1, 64};
  std::size_t models = 0, configs = 0, lookups = 0;  // configurations checked (over engines) and ops costed
  std::vector<CoverageMiss> misses;                  // by model, then table, then key
  std::vector<CoverageGap> gaps;
  std::vector<int> stale;  // gaps that matched no miss
  std::size_t Undeclared() const;
  bool Pass() const { return Undeclared() == 0 && stale.empty(); }
};

struct CoverageOptions {
  std::string models_dir;
  serve::DatabaseOptions data;  // roots, backend, version (the mode is forced to SILICON)
  std::vector<CoverageGap> gaps;
};

// Runs the gate for every bundled model on `spec` (one node: its GPUs per node).
CoverageReport RunCoverage(const systems::SystemSpec& spec, const CoverageOptions& options);

}  // namespace servecast::search
