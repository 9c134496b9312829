// Dense decoder-only transformers: grouped-query attention (optionally with
// per-layer sliding windows) and a gated FFN in every layer.

#include "model/family.h"
#include "model/op_builder.h"

namespace servecast::model {
namespace {

class DenseFamily final : public ModelFamily {
 public:
  const char* Name() const override { return "dense"; }
  std::vector<Architecture> Architectures() const override {
    return {{"LlamaForCausalLM", "llama", false},     {"Qwen2ForCausalLM", "qwen2", false},
            {"Qwen3ForCausalLM", "qwen3", true},      {"MiMoForCausalLM", "mimo", false},
            {"MistralForCausalLM", "mistral", false}, {"GraniteForCausalLM", "granite", false},
            {"Olmo2ForCausalLM", "olmo2", true}};
  }
  void ReadConfig(const ConfigFields& f, ModelConfig& m) const override { (void)f, (void)m; }
  bool HasExperts() const override { return false; }

  void ValidateParallel(const ModelConfig& m, const ParallelConfig& p, Engine e) const override {
    (void)e;
    Require(p.dp == 1, "attention data parallelism (dp " + std::to_string(p.dp) + ") applies to MoE models; " + m.name +
                           " is dense (run more replicas instead)");
    Require(m.intermediate_size % p.tp == 0, "tp " + std::to_string(p.tp) + " does not divide the FFN width " +
                                                 std::to_string(m.intermediate_size) + " of " + m.name);
  }
  SearchKnobs Knobs() const override { return {8, false, false}; }

  std::vector<Op> BuildPhase(const ModelConfig& m, const ParallelConfig& p, const OpListOptions& o, bool context,
                             double phase_scale) const override {
    (void)o;
    const double layers = static_cast<double>(m.num_layers) * phase_scale;
    PhaseBuilder b(context ? "context" : "generation", layers);
    const std::int64_t H = m.hidden_size, I = m.intermediate_size / p.tp;
    AddAttentionBlock(b, m, p, context, phase_scale);
    if (p.tp > 1) b.AllReduce("ar_1", p.tp, H, m.quant.comm, layers);
    b.Elementwise("add_norm_2", 2 * H, 2 * H, "rmsnorm_residual", H);
    b.Gemm("gate_ffn1_gemm", 2 * I, H, m.quant.gemm, layers);
    b.Elementwise("act_gate", 2 * I, I, "silu_and_mul", I);
    b.Gemm("ffn2_gemm", H, I, m.quant.gemm, layers);
    if (p.tp > 1) b.AllReduce("ar_2", p.tp, H, m.quant.comm, layers);
    AddLogits(b, m, p, context, phase_scale);
    AddTail(b, m, p, phase_scale);
    return b.Take();
  }
  const char* ActivationKey() const override { return "dense"; }
};

}  // namespace

std::unique_ptr<ModelFamily> MakeDenseFamily() {
  return std::make_unique<DenseFamily>();
}

}  // namespace servecast::model
