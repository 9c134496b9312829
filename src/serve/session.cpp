#include "serve/session.h"

namespace servecast::serve {

std::set<TableNeed> NeedsOf(const model::OpList& ops) {
  std::set<TableNeed> needs{TableNeed::kElementwise};
  for (const auto* phase : {&ops.context, &ops.generation}) {
    for (const model::Op& op : *phase) {
      switch (op.kind) {
        case model::OpKind::kGemm:
          needs.insert(TableNeed::kGemm);
          if (op.quant == "fp8_static") needs.insert(TableNeed::kQuantize);
          break;
        case model::OpKind::kContextAttention: needs.insert(TableNeed::kContextAttention); break;
        case model::OpKind::kGenerationAttention: needs.insert(TableNeed::kGenerationAttention); break;
        case model::OpKind::kMoe: needs.insert(TableNeed::kMoe); break;
        case model::OpKind::kNccl: needs.insert(TableNeed::kNccl); break;
        case model::OpKind::kCustomAllReduce: needs.insert(TableNeed::kCustomAllReduce); break;
        default: break;
      }
    }
  }
  return needs;
}

void AdjustQuantForSystem(model::ModelConfig& m, const systems::SystemSpec& spec, const model::QuantOverrides& o) {
  if (spec.gpu.sm_version >= 100) return;
  if (!o.gemm && m.quant.gemm == "nvfp4") {
    m.quant.gemm = "nvfp4_wo";
    m.quant_notes.push_back("gemm nvfp4 -> nvfp4_wo: sm " + std::to_string(spec.gpu.sm_version) +
                            " has no FP4 tensor cores (weight-only)");
  }
  if (!o.moe && m.quant.moe == "nvfp4") {
    m.quant.moe = "nvfp4_wo";
    m.quant_notes.push_back("moe nvfp4 -> nvfp4_wo: sm " + std::to_string(spec.gpu.sm_version) +
                            " has no FP4 tensor cores (weight-only)");
  }
}

void AdjustQuantForData(model::ModelConfig& m, const Database& db, const model::QuantOverrides& o) {
  if (o.fmha || m.quant.fmha != "fp8" || !db.context_attention()) return;
  for (const auto& [key, grid] : db.context_attention()->slices())
    if (key.attn_dtype == "fp8") return;
  m.quant.fmha = "bfloat16";
  m.quant_notes.push_back("fmha fp8 -> bfloat16: context_attention_perf of " + db.source() + " has no fp8 slice");
}

}  // namespace servecast::serve
