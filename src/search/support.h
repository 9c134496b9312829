#pragma once

// `servecast support` (docs/commands.md): whether the perf data can answer a
// model on a system for one serving engine. Every op of every parallel
// configuration the search would enumerate is costed at a representative
// workload, first in SILICON mode (tables only), then in HYBRID mode (tables,
// else the util-empirical fallback):
//   PASS     some configuration has every op answered by the tables;
//   PARTIAL  none does, but HYBRID answers every op of some configuration
//            (the ops that fall back are named);
//   FAIL     neither: the data source is absent, or ops miss even in HYBRID
//            (the misses name the op, the key and what the data covers).

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/ops.h"
#include "serve/database.h"
#include "serve/evaluate.h"

namespace servecast::search {

enum class SupportVerdict { kPass, kPartial, kFail };
const char* SupportVerdictName(SupportVerdict v);  // "PASS", "PARTIAL", "FAIL"

// The shapes each op is costed at: context passes of `isl` tokens and decode
// steps at isl + osl / 2 cached tokens, for every batch.
struct SupportWorkload {
  std::int64_t isl = 1024, osl = 256;
  std::vector<std::int64_t> batches = {1, 64};
};

// The two passes an op list is probed at, for `batch` requests: the context pass of
// `isl` tokens and a decode step at isl + osl / 2 cached tokens (support and the
// coverage gate, search/coverage.h).
struct ProbePasses {
  serve::PassShape context, generation;
};
ProbePasses ProbeAt(std::int64_t batch, std::int64_t isl, std::int64_t osl);

// One op that a mode could not answer.
struct SupportMiss {
  std::string op;      // op name of the list ("context_qkv_gemm")
  std::string reason;  // first line of the MissingDataError
};

struct SupportConfig {
  model::ParallelConfig par;
  std::vector<SupportMiss> silicon_misses;  // ops the tables cannot answer
  std::vector<SupportMiss> hybrid_misses;   // ops HYBRID cannot answer either
  std::string invalid;                      // the op list could not be built (the rule)
};

struct SupportReport {
  model::Engine engine = model::Engine::kTrtllm;
  std::string data;  // the source read ("trtllm/1.3.0rc20"), "" when it could not be opened
  SupportVerdict verdict = SupportVerdict::kFail;
  std::string reason;                  // one line: why not PASS ("" when PASS)
  std::vector<std::string> fallbacks;  // PARTIAL: "op: reason" of the ops that fall back
  std::string config;                  // the configuration the verdict rests on ("tp4 pp1 ...")
  std::size_t configs = 0, configs_pass = 0, configs_partial = 0;
  std::vector<SupportConfig> details;
};

// Costs every op of each configuration. `hybrid` may be null (then no PARTIAL).
SupportConfig CheckConfig(const model::ModelConfig& m, const model::ParallelConfig& par,
                          const model::OpListOptions& oo, const serve::Database& silicon,
                          const serve::Database* hybrid, const SupportWorkload& w);

// The verdict over configurations (already checked).
SupportReport Judge(model::Engine e, std::vector<SupportConfig> configs);

// Enumerates the agg and disagg configurations for `gpus` (search rules), checks
// each and judges. The databases must be opened with the tables the lists need.
SupportReport CheckSupport(const model::ModelConfig& m, model::Engine e, int gpus, const serve::Database& silicon,
                           const serve::Database* hybrid, const SupportWorkload& w);

}  // namespace servecast::search
