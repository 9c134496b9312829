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
    ValidateDenseParallel(m, p);
  }
  SearchKnobs Knobs() const override { return {8, false, false, false, true}; }

  std::vector<Op> BuildPhase(const ModelConfig& m, const ParallelConfig& p, const OpListOptions& o, bool context,
                             double phase_scale) const override {
    (void)o;
    const double layers = static_cast<double>(m.num_layers) * phase_scale;
    PhaseBuilder b(context ? "context" : "generation", layers);
    AddAttentionBlock(b, m, p, context, phase_scale);
    AddGatedFfn(b, m, p);
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
