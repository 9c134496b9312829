// Mixture-of-experts transformers: the dense family's attention block, then a
// router, optional shared experts, and routed experts behind each engine's
// dispatch communication.

#include <cmath>

#include "model/family.h"
#include "model/op_builder.h"

namespace servecast::model {

void ReadRoutedExperts(const ConfigFields& f, ModelConfig& m) {
  auto [experts, experts_key] = f.FirstOf({"num_local_experts", "n_routed_experts", "moe_num_experts", "num_experts"});
  if (experts_key.empty())
    f.Fail("num_local_experts", "missing key",
           "the expert count in num_local_experts, n_routed_experts, moe_num_experts or num_experts");
  auto [topk, topk_key] = f.FirstOf({"num_experts_per_tok", "top_k_experts", "moe_top_k"});
  if (topk_key.empty())
    f.Fail("num_experts_per_tok", "missing key",
           "the experts per token in num_experts_per_tok, top_k_experts or moe_top_k");
  if (topk > experts)
    f.Fail(topk_key, "value " + std::to_string(topk) + " exceeds the expert count " + std::to_string(experts),
           "at most " + experts_key);
  m.num_experts = experts;
  m.experts_per_token = topk;
  m.moe_intermediate_size = f.OptionalPositive("moe_intermediate_size", m.intermediate_size);

  auto [shared, shared_key] = f.FirstOf({"n_shared_experts", "num_shared_experts"});
  if (!shared_key.empty()) {
    m.num_shared_experts = shared;
    m.shared_expert_intermediate_size = shared * m.moe_intermediate_size;
  } else if (f.Has("shared_expert_intermediate_size")) {
    m.shared_expert_intermediate_size = f.OptionalCount("shared_expert_intermediate_size");
    m.num_shared_experts = m.shared_expert_intermediate_size / m.moe_intermediate_size;
  }
  m.moe_layer_interval = f.OptionalPositive("interleave_moe_layer_step", 1);
  // The dense layers' FFN width when it differs from the experts' (Llama-4).
  m.intermediate_size = f.OptionalPositive("intermediate_size_mlp", m.intermediate_size);
}

void ValidateExpertParallel(const ModelConfig& m, const ParallelConfig& p, Engine e) {
  const auto Str = [](std::int64_t v) { return std::to_string(v); };
  if (p.cp == 1)
    Require(p.tp * p.dp == p.moe_tp * p.moe_ep, "MoE needs tp x dp = moe_tp x moe_ep (got " + p.ToString() + ")");
  else
    Require(p.tp * p.dp * p.cp == p.moe_tp * p.moe_ep,
            "MoE needs tp x dp x cp = moe_tp x moe_ep (got " + p.ToString() + ")");
  Require(m.num_experts >= p.moe_ep,
          "moe_ep " + Str(p.moe_ep) + " exceeds the " + Str(m.num_experts) + " experts of " + m.name);
  Require(m.num_experts % p.moe_ep == 0,
          "moe_ep " + Str(p.moe_ep) + " does not divide the " + Str(m.num_experts) + " experts of " + m.name);
  Require(m.moe_intermediate_size % p.moe_tp == 0, "moe_tp " + Str(p.moe_tp) + " does not divide the expert width " +
                                                       Str(m.moe_intermediate_size) + " of " + m.name);
  if (m.quant.moe == "fp8_block")
    Require((m.moe_intermediate_size / p.moe_tp) % 128 == 0, "fp8_block experts need the per-GPU expert width (" +
                                                                 Str(m.moe_intermediate_size) + " / moe_tp " +
                                                                 Str(p.moe_tp) + ") to be a multiple of 128");
  if (e == Engine::kTrtllm)
    Require(p.dp == 1 || p.tp == 1, "trtllm: attention dp > 1 needs tp 1 (got " + p.ToString() + ")");
  if (e == Engine::kVllm)
    Require(p.moe_tp == 1 || p.moe_ep == 1, "vllm: moe_tp and moe_ep cannot both exceed 1 (got " + p.ToString() + ")");
}

std::string ExpertDistribution(const OpListOptions& o) {
  return o.moe_distribution.empty() ? std::string("power_law_1.2") : o.moe_distribution;
}

// The FFN half of an expert layer, at the builder's layer count: norm, router,
// shared experts, and the routed experts behind the engine's dispatch.
void AddExpertLayer(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, const OpListOptions& o) {
  const double layers = b.layers();
  const std::int64_t H = m.hidden_size;
  b.Elementwise("add_norm_2", 2 * H, 2 * H, "rmsnorm_residual", H);
  b.Gemm("router_gemm", m.num_experts, H, "bfloat16", layers);
  const std::int64_t shared = m.shared_expert_intermediate_size > 0 ? m.shared_expert_intermediate_size
                                                                    : m.num_shared_experts * m.moe_intermediate_size;
  if (shared > 0) {
    const std::int64_t S = shared / p.tp;
    b.Gemm("shared_gate_ffn1_gemm", 2 * S, H, m.quant.gemm, layers);
    b.Elementwise("shared_act_gate", 2 * S, S, "silu_and_mul", S);
    b.Gemm("shared_ffn2_gemm", H, S, m.quant.gemm, layers);
  }
  AddMoeDispatch(b, m, p, o, true);
  AddRoutedExperts(b, m, p, ExpertDistribution(o), layers);
  AddMoeDispatch(b, m, p, o, false);
}

namespace {

class MoeFamily final : public ModelFamily {
 public:
  const char* Name() const override { return "moe"; }
  std::vector<Architecture> Architectures() const override {
    // SGLang's prefill CP (Architecture::prefill_cp): Qwen2-MoE and Qwen3-MoE
    // split the prefill in their model code, gpt-oss runs CP v2 by default.
    return {{"MixtralForCausalLM", "mixtral", false},
            {"Qwen2MoeForCausalLM", "qwen2_moe", false, 0, true},
            {"Qwen3MoeForCausalLM", "qwen3_moe", true, 0, true},
            {"GptOssForCausalLM", "gpt_oss", false, 0, true},
            {"OlmoeForCausalLM", "olmoe", true},
            // MiniMax-M2: q/k norm over all heads of the layer (qk_norm_type per_layer),
            // routed experts only (intermediate_size is the expert width).
            {"MiniMaxM2ForCausalLM", "minimax_m2", true},
            // Llama-4: one shared expert beside the routed ones in every MoE layer
            // (no config key names it), chunked-local attention (attention_chunk_size).
            {"Llama4ForConditionalGeneration", "llama4", false, 1},
            {"Llama4ForCausalLM", "llama4_text", false, 1}};
  }
  void ReadConfig(const ConfigFields& f, ModelConfig& m) const override { ReadRoutedExperts(f, m); }
  bool HasExperts() const override { return true; }
  void ValidateParallel(const ModelConfig& m, const ParallelConfig& p, Engine e) const override {
    ValidateExpertParallel(m, p, e);
    if (m.moe_layer_interval > 1)
      Require(m.intermediate_size % p.tp == 0, "tp " + std::to_string(p.tp) + " does not divide the dense FFN width " +
                                                   std::to_string(m.intermediate_size) + " of " + m.name);
  }
  SearchKnobs Knobs() const override { return {16, true, true, false, true}; }

  std::vector<Op> BuildPhase(const ModelConfig& m, const ParallelConfig& p, const OpListOptions& o, bool context,
                             double phase_scale) const override {
    const std::string phase = context ? "context" : "generation";
    const double layers = static_cast<double>(m.num_layers) * phase_scale;
    PhaseBuilder b(phase, layers);
    AddAttentionBlock(b, m, p, context, phase_scale);
    if (m.moe_layer_interval == 1) {
      AddExpertLayer(b, m, p, o);
      if (!context) AddLogits(b, m, p, context, phase_scale);
      AddTail(b, m, p, phase_scale);
      return b.Take();
    }
    // One layer in k is MoE (layers k-1, 2k-1, ...), the others dense: each part
    // is built at its own layer count, between the attention block and the tail.
    const std::int64_t moe_layers = m.num_layers / m.moe_layer_interval;
    std::vector<Op> ops = b.Take();
    PhaseBuilder dense(phase, static_cast<double>(m.num_layers - moe_layers) * phase_scale);
    AddGatedFfn(dense, m, p, "dense_");  // the FFN half of a dense layer (Llama-4 Maverick)
    PhaseBuilder experts(phase, static_cast<double>(moe_layers) * phase_scale);
    AddExpertLayer(experts, m, p, o);
    PhaseBuilder tail(phase, layers);
    if (!context) AddLogits(tail, m, p, context, phase_scale);
    AddTail(tail, m, p, phase_scale);
    for (PhaseBuilder* part : {&dense, &experts, &tail})
      for (Op& op : part->Take()) ops.push_back(std::move(op));
    return ops;
  }
  void AddNotes(const ModelConfig& m, const OpListOptions& o, std::vector<std::string>& notes) const override {
    notes.push_back("MoE expert load: " + ExpertDistribution(o) + " routing");
    if (m.moe_layer_interval > 1)
      notes.push_back(std::to_string(m.num_layers / m.moe_layer_interval) + " MoE layers (one in " +
                      std::to_string(m.moe_layer_interval) + ") and " +
                      std::to_string(m.num_layers - m.num_layers / m.moe_layer_interval) + " dense layers (FFN " +
                      std::to_string(m.intermediate_size) + ")");
    if (m.attention_chunk > 0)
      notes.push_back(
          "chunked-local attention (chunk " + std::to_string(m.attention_chunk) +
          ") costed as a sliding window of the chunk (an upper bound past the first chunk); its KV cache is "
          "counted for every token");
  }
  const char* ActivationKey() const override { return "moe"; }
};

}  // namespace

std::unique_ptr<ModelFamily> MakeMoeFamily() {
  return std::make_unique<MoeFamily>();
}

}  // namespace servecast::model
