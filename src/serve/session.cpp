#include "serve/session.h"

#include "core/error.h"

namespace servecast::serve {

namespace {

// Hopper and older have no FP4 tensor cores (nor the block-scaled MMA that mxfp8
// activations need). An fp4 GEMM or MoE asked of them, inferred or by a flag or
// a validate row, is answered with what the engines run there: the GEMMs in
// bf16, the experts as 4-bit weights with bf16 activations (w4a16_mxfp4, the
// weight-only MoE kernel of moe_perf). Each change is a note.
void AdjustQuantForSystem(model::ModelConfig& m, const systems::SystemSpec& spec, std::vector<std::string>& notes) {
  if (spec.gpu.sm_version >= 100) return;
  const std::string why = ": sm " + std::to_string(spec.gpu.sm_version) + " has no FP4 tensor cores; engines run ";
  if (m.quant.gemm == "nvfp4") {
    m.quant.gemm = "bfloat16";
    notes.push_back("gemm nvfp4 -> bfloat16" + why + "the GEMMs in bf16 there");
  }
  if (m.quant.moe == "nvfp4" || m.quant.moe == "w4a8_mxfp4_mxfp8" || m.quant.moe == "w4a8_mxfp4_mxfp8_trtllm") {
    notes.push_back("moe " + m.quant.moe + " -> w4a16_mxfp4" + why +
                    "the experts as 4-bit weights with bf16 activations there (weight-only)");
    m.quant.moe = "w4a16_mxfp4";
  }
}

// The prefill table a model's attention reads: context_mla_perf for MLA models
// (a latent KV, kv_lora_rank > 0), else context_attention_perf.
void AdjustQuantForData(model::ModelConfig& m, const Database& db, const model::QuantOverrides& o) {
  if (o.fmha || m.quant.fmha != "fp8") return;
  const char* table = nullptr;
  if (m.kv_lora_rank > 0) {
    if (!db.context_mla()) return;
    for (const auto& [key, grid] : db.context_mla()->slices())
      if (key.first == "fp8") return;
    table = "context_mla_perf";
  } else {
    if (!db.context_attention()) return;
    for (const auto& [key, grid] : db.context_attention()->slices())
      if (key.attn_dtype == "fp8") return;
    table = "context_attention_perf";
  }
  m.quant.fmha = "bfloat16";
  m.quant_notes.push_back(std::string("fmha fp8 -> bfloat16: ") + table + " of " + db.source() + " has no fp8 slice");
}

}  // namespace

std::set<TableNeed> NeedsOf(const model::OpList& ops) {
  std::set<TableNeed> needs{TableNeed::kElementwise};
  for (const auto* phase : {&ops.context, &ops.generation}) {
    for (const model::Op& op : *phase) {
      switch (op.kind) {
        case model::OpKind::kGemm:
          needs.insert(TableNeed::kGemm);
          if (op.quant == "fp8_static") needs.insert(TableNeed::kQuantize);
          break;
        case model::OpKind::kContextAttention:
          needs.insert(TableNeed::kContextAttention);
          break;
        case model::OpKind::kGenerationAttention:
          needs.insert(TableNeed::kGenerationAttention);
          break;
        case model::OpKind::kMoe:
          needs.insert(TableNeed::kMoe);
          break;
        case model::OpKind::kNccl:
          needs.insert(TableNeed::kNccl);
          break;
        case model::OpKind::kCustomAllReduce:
          needs.insert(TableNeed::kCustomAllReduce);
          break;
        case model::OpKind::kContextMla:
          needs.insert(TableNeed::kContextMla);
          break;
        case model::OpKind::kGenerationMla:
          needs.insert(TableNeed::kGenerationMla);
          break;
        case model::OpKind::kMlaBmm:  // mla_bmm_perf: a declared table (tables/table_spec.cpp)
          needs.insert(TableNeed::Declared("mla_bmm_perf"));
          break;
        case model::OpKind::kTable:
          needs.insert(TableNeed::Declared(op.table));
          break;
        default:
          break;
      }
    }
  }
  return needs;
}

model::OpListOptions OpOptionsFor(model::Engine engine, const systems::SystemSpec& spec) {
  model::OpListOptions o;
  o.engine = engine;
  o.gpus_per_node = spec.node.gpus_per_node;
  return o;
}

Deployment::Deployment(model::ModelConfig m, systems::SystemSpec spec, const model::QuantOverrides& overrides)
    : model_(std::move(m)), spec_(std::move(spec)), overrides_(overrides) {
  model::ApplyQuantOverrides(model_, overrides_);
  AdjustQuantForSystem(model_, spec_, system_notes_);
  for (const std::string& n : system_notes_) model_.quant_notes.push_back(n);
}

std::set<TableNeed> Deployment::Needs(const std::vector<model::ParallelConfig>& configs,
                                      const model::OpListOptions& o) const {
  std::set<TableNeed> needs;
  for (const model::ParallelConfig& p : configs) needs.merge(NeedsOf(model::BuildOpList(model_, p, o)));
  return needs;
}

const Database& Deployment::OpenData(const DatabaseOptions& options, const std::set<TableNeed>& needs) {
  owned_ = Database::Open(spec_, options, needs);
  UseData(*owned_);
  return *owned_;
}

void Deployment::UseData(const Database& db) {
  if (db_ != nullptr && db_ != &db) throw Error("deployment of " + model_.name + ": the data is already settled");
  db_ = &db;
  AdjustQuantForData(model_, db, overrides_);
}

model::OpList Deployment::Ops(const model::ParallelConfig& p, const model::OpListOptions& o) const {
  return model::BuildOpList(model_, p, o);
}

const Database& Deployment::db() const {
  if (db_ == nullptr) throw Error("deployment of " + model_.name + ": no data opened");
  return *db_;
}

}  // namespace servecast::serve
