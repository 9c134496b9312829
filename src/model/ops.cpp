#include "model/ops.h"

#include "core/error.h"
#include "model/family.h"
#include "model/op_builder.h"

namespace servecast::model {

const char* EngineName(Engine e) {
  switch (e) {
    case Engine::kTrtllm: return "trtllm";
    case Engine::kVllm: return "vllm";
    case Engine::kSglang: return "sglang";
  }
  return "?";
}

Engine ParseEngine(const std::string& name) {
  if (name == "trtllm") return Engine::kTrtllm;
  if (name == "vllm") return Engine::kVllm;
  if (name == "sglang") return Engine::kSglang;
  throw UsageError("unknown serving engine '" + name + "' (expected trtllm, vllm or sglang)");
}

std::string ParallelConfig::ToString() const {
  return "tp" + std::to_string(tp) + " pp" + std::to_string(pp) + " dp" + std::to_string(dp) + " moe_tp" +
         std::to_string(moe_tp) + " moe_ep" + std::to_string(moe_ep);
}

const char* OpKindName(OpKind k) {
  switch (k) {
    case OpKind::kGemm: return "gemm";
    case OpKind::kContextAttention: return "context_attention";
    case OpKind::kGenerationAttention: return "generation_attention";
    case OpKind::kElementwise: return "elementwise";
    case OpKind::kEmbedding: return "embedding";
    case OpKind::kCustomAllReduce: return "custom_allreduce";
    case OpKind::kNccl: return "nccl";
    case OpKind::kP2P: return "p2p";
    case OpKind::kMoe: return "moe";
    case OpKind::kContextMla: return "context_mla";
    case OpKind::kGenerationMla: return "generation_mla";
    case OpKind::kMlaBmm: return "mla_bmm";
    case OpKind::kTable: return "table";
  }
  return "?";
}

void RequireSupported(const ModelConfig& m) {
  const std::string why = FamilyOf(m).Unsupported(m);
  if (!why.empty()) throw UsageError(m.name + " (" + m.architecture + "): " + why);
}

void ValidateParallel(const ModelConfig& m, const ParallelConfig& p, Engine e) {
  RequireSupported(m);
  Require(p.tp >= 1 && p.pp >= 1 && p.dp >= 1 && p.moe_tp >= 1 && p.moe_ep >= 1,
          "parallel sizes must be >= 1 (got " + p.ToString() + ")");
  Require(m.num_heads % p.tp == 0, "tp " + std::to_string(p.tp) + " does not divide the " +
                                       std::to_string(m.num_heads) + " attention heads of " + m.name);
  Require(p.pp <= m.num_layers, "pp " + std::to_string(p.pp) + " exceeds the " + std::to_string(m.num_layers) +
                                    " layers of " + m.name);
  FamilyOf(m).ValidateParallel(m, p, e);
}

OpList BuildOpList(const ModelConfig& m, const ParallelConfig& p, const OpListOptions& o) {
  ValidateParallel(m, p, o.engine);
  Require(o.nextn >= 0, "nextn must be >= 0");
  const ModelFamily& family = FamilyOf(m);
  OpList list;
  const double gen_scale = static_cast<double>(m.num_layers + o.nextn) / static_cast<double>(m.num_layers);
  list.context = family.BuildPhase(m, p, o, true, 1.0);
  list.generation = family.BuildPhase(m, p, o, false, gen_scale);
  family.AddNotes(m, o, list.notes);
  const auto groups = WindowGroups(m);
  if (groups.size() > 1) {
    std::string note = "attention layers by window:";
    for (const auto& [w, n] : groups)
      note += " " + std::to_string(n) + (w > 0 ? " x window " + std::to_string(w) : " x full");
    list.notes.push_back(note);
  }
  if (o.nextn > 0) list.notes.push_back("MTP: decode ops scaled by (L + " + std::to_string(o.nextn) + ") / L");
  return list;
}

double KvElemsPerToken(const ModelConfig& m, const ParallelConfig& p) { return FamilyOf(m).KvElemsPerToken(m, p); }

}  // namespace servecast::model
