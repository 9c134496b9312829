#pragma once

// One op's latency at one pass shape, with its provenance (docs/estimator.md,
// "How an op is costed").

#include <cstdint>
#include <string>

#include "model/ops.h"
#include "serve/database.h"

namespace servecast::serve {

// The shape of one forward pass.
//   context:    `batch` requests each adding `seq` new tokens after `prefix` cached ones;
//   generation: `batch` decode rows (requests x (nextn + 1)) against `seq` = cached + new tokens.
struct PassShape {
  bool context = true;
  std::int64_t batch = 1;
  std::int64_t seq = 1;
  std::int64_t prefix = 0;
  // Token-major ops see this many tokens (0: batch x seq for context, batch for
  // generation). The mixed step of in-flight batching sets it.
  std::int64_t tokens_override = 0;
  std::int64_t Tokens() const { return tokens_override > 0 ? tokens_override : (context ? batch * seq : batch); }
};

struct OpCost {
  double latency_ms = 0;  // one occurrence (multiply by Op::scale for the pass)
  double sol_ms = 0;      // the roofline of that occurrence
  double flops = 0;       // math of one occurrence (GEMM, attention, MoE; 0 for memory-bound ops)
  std::string source;     // silicon, interpolated, extrapolated, empirical, sol, estimated, roofline (an uncollected table)
  std::string detail;     // how: table slice, formula, fallback
  double math_ms = 0;     // flops / the peak rate of the op's math dtype
  // Energy of that occurrence (W*ms): the table's power x latency_ms when the
  // answer came from rows with a power column; 0 for formula, SOL and
  // util-empirical answers and for rows without power (AIC's convention).
  double energy_wms = 0;
};

// Raises OpMissError / MissingDataError (naming the op, its key and the data
// coverage) when the mode cannot answer.
OpCost EvaluateOp(const model::Op& op, const Database& db, const PassShape& shape);

// The AIC memory-bound formula for ops without a table: bytes / (bw x efficiency)
// + constant latency (system spec), in ms; SOL mode: bytes / bw.
double MemoryOpMs(const Database& db, double bytes);

}  // namespace servecast::serve
