#pragma once

// Glue shared by the commands, tests and benchmarks: which tables an op list
// needs, and AIC's post-steps of quantization inference that depend on the
// system and the data (docs/models.md, "Quantization").

#include <set>

#include "model/model_config.h"
#include "model/ops.h"
#include "serve/database.h"
#include "system/system_spec.h"

namespace servecast::serve {

// Tables the ops read (plus elementwise_perf, read when present).
std::set<TableNeed> NeedsOf(const model::OpList& ops);

// Before the data is opened: Hopper and older have no FP4 tensor cores, so an
// inferred nvfp4 GEMM/MoE runs weight-only (nvfp4_wo). Overridden fields stay.
void AdjustQuantForSystem(model::ModelConfig& m, const systems::SystemSpec& spec, const model::QuantOverrides& o);

// After: an inferred fp8 attention (fmha) falls back to bfloat16 when the
// context-attention table has no fp8 slice. Overridden fields stay.
void AdjustQuantForData(model::ModelConfig& m, const Database& db, const model::QuantOverrides& o);

}  // namespace servecast::serve
