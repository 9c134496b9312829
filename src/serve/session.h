#pragma once

// Glue shared by the commands, tests and benchmarks: which tables an op list
// needs, and the deployment facade that settles a model's quantization for the
// system and the data once, then builds its op lists (docs/models.md,
// "Quantization").

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/ops.h"
#include "serve/database.h"
#include "system/system_spec.h"

namespace servecast::serve {

// Tables the ops read (plus elementwise_perf, read when present).
std::set<TableNeed> NeedsOf(const model::OpList& ops);

// Op-list options for `engine` on `spec` (its SM version and node size).
model::OpListOptions OpOptionsFor(model::Engine engine, const systems::SystemSpec& spec);

// A model made ready for one system and one data source. In order:
//   1. the user's quantization overrides (UsageError naming the flag for an unknown mode);
//   2. the system: Hopper and older have no FP4 tensor cores, so an fp4 GEMM / MoE
//      (inferred or overridden) is answered with what the engines run there: bf16
//      GEMMs, weight-only mxfp4 experts (w4a16_mxfp4), each change a note;
//   3. the data (OpenData / UseData): an inferred fp8 attention (fmha) falls back to
//      bfloat16 when the context-attention table has no fp8 slice.
// Other overridden fields stay as the user set them. Op lists built before the data is
// read serve only to name the tables it needs; Ops() after it builds from the
// settled model.
class Deployment {
 public:
  Deployment(model::ModelConfig m, systems::SystemSpec spec, const model::QuantOverrides& overrides = {});

  // Tables the op lists of `configs` read.
  std::set<TableNeed> Needs(const std::vector<model::ParallelConfig>& configs, const model::OpListOptions& o) const;
  // Opens the data source (only `needs`) and settles the quantization for it.
  const Database& OpenData(const DatabaseOptions& options, const std::set<TableNeed>& needs);
  // The same for a database opened elsewhere (validate's cache of sources); it must outlive this.
  void UseData(const Database& db);

  model::OpList Ops(const model::ParallelConfig& p, const model::OpListOptions& o) const;

  const model::ModelConfig& model() const { return model_; }
  const systems::SystemSpec& spec() const { return spec_; }
  const Database& db() const;  // Error before OpenData / UseData
  // The notes of step 2 (also in model().quant_notes): what the system changed.
  const std::vector<std::string>& system_notes() const { return system_notes_; }

 private:
  model::ModelConfig model_;
  systems::SystemSpec spec_;
  model::QuantOverrides overrides_;
  std::vector<std::string> system_notes_;
  std::shared_ptr<const Database> owned_;
  const Database* db_ = nullptr;
};

}  // namespace servecast::serve
