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
         std::to_string(moe_tp) + " moe_ep" + std::to_string(moe_ep) + (cp > 1 ? " cp" + std::to_string(cp) : "");
}

std::string ParallelConfig::Compact() const {
  return "tp" + std::to_string(tp) + "pp" + std::to_string(pp) + "dp" + std::to_string(dp) + "etp" +
         std::to_string(moe_tp) + "ep" + std::to_string(moe_ep) + (cp > 1 ? "cp" + std::to_string(cp) : "");
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

namespace {

// The architectures whose prefill SGLang runs context-parallel and whose
// family's op list models it ("Qwen3MoeForCausalLM, ...").
std::string ContextParallelArchitectures() {
  std::string names;
  for (const ModelFamily* f : Families()) {
    if (!f->Knobs().context_parallel) continue;
    for (const Architecture& a : f->Architectures())
      if (a.prefill_cp) names += (names.empty() ? "" : ", ") + a.name;
  }
  return names;
}

// Context parallelism (cp > 1): SGLang's prefill CP on an architecture it runs
// it for, modelled by the family's op list, with attention tp 1 and dp 1.
void ValidateContextParallel(const ModelConfig& m, const ParallelConfig& p, Engine e) {
  if (p.cp == 1) return;
  const std::string cp = "context parallelism (cp " + std::to_string(p.cp) + ")";
  Require(e == Engine::kSglang, cp + " is modelled for sglang only (its prefill CP: zigzag split and a KV "
                                "all-gather); " + std::string(EngineName(e)) +
                                    "'s context parallelism is another scheme that servecast does not model");
  Require(FamilyOf(m).Knobs().context_parallel,
          cp + ": the " + std::string(FamilyOf(m).Name()) + " op list of " + m.name +
              " does not model it (modelled for: " + ContextParallelArchitectures() + ")");
  Require(m.prefill_cp, cp + ": SGLang runs no context-parallel prefill for " + m.architecture + " (" + m.name +
                            "); it does for " + ContextParallelArchitectures());
  Require(p.tp == 1 && p.dp == 1, cp + " needs tp 1 and dp 1: CP takes the place of attention tensor and data "
                                       "parallelism on a worker (got " + p.ToString() + ")");
}

}  // namespace

void ValidateParallel(const ModelConfig& m, const ParallelConfig& p, Engine e) {
  RequireSupported(m);
  Require(p.tp >= 1 && p.pp >= 1 && p.dp >= 1 && p.moe_tp >= 1 && p.moe_ep >= 1 && p.cp >= 1,
          "parallel sizes must be >= 1 (got " + p.ToString() + ")");
  ValidateContextParallel(m, p, e);
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
  // Context parallelism: every context op but those on the gathered tokens runs
  // on one rank's share of the prefill (decode steps are not split).
  if (p.cp > 1) {
    for (Op& op : list.context)
      if (op.tokens != TokenRule::kAllRanks) op.seq_split = p.cp;
    list.notes.push_back("context parallelism: the prefill split over " + std::to_string(p.cp) +
                         " GPUs (zigzag attention, KV all-gather); decode steps run unsplit on every CP rank");
  }
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
