// Nemotron-H (docs/estimator.md, "Hybrid and sparse attention"): a stack of
// single-mixer layers named by hybrid_override_pattern, one character a layer:
//   M  Mamba2: in_proj (z, x, B, C, dt: 2 nh p + 2 g N + nh outputs), the short
//      causal convolution over x, B, C and the SSD scan (mamba2_perf: chunked in
//      prefill, one state update per token in decode), the z-gated RMSNorm,
//      out_proj; heads and groups split over tp;
//   *  attention (grouped-query, no positional encoding): qkv, attention, o_proj;
//   E  routed experts (relu2, not gated) plus a shared expert, behind the
//      engine's dispatch;
//   -  a dense relu2 MLP.
// Each layer is norm -> mixer -> residual. The Mamba2 state (nh p N float32 per
// layer, plus the convolution window) is per sequence and constant in length;
// only the attention layers keep a KV cache.

#include <string>

#include "model/family.h"
#include "model/op_builder.h"

namespace servecast::model {
namespace {

class NemotronHFamily final : public ModelFamily {
 public:
  const char* Name() const override { return "nemotron_h"; }
  std::vector<Architecture> Architectures() const override { return {{"NemotronHForCausalLM", "nemotron_h", false}}; }
  void ReadConfig(const ConfigFields& f, ModelConfig& m) const override {
    const std::string pattern = f.StringOr("hybrid_override_pattern", "");
    if (static_cast<std::int64_t>(pattern.size()) != m.num_layers)
      f.Fail("hybrid_override_pattern", pattern.empty() ? "missing key" : "has " + std::to_string(pattern.size()) + " layers",
             "one of M, *, E, - per layer (num_hidden_layers = " + std::to_string(m.num_layers) + ")");
    for (std::size_t i = 0; i < pattern.size(); ++i) {
      switch (pattern[i]) {
        case 'M': ++m.recurrent_layers; break;
        case '*': ++m.attention_layers; break;
        case 'E': ++m.moe_layers; break;
        case '-': ++m.mlp_layers; break;
        default:
          f.Fail("hybrid_override_pattern", "layer " + std::to_string(i) + " is '" + std::string(1, pattern[i]) + "'",
                 "M (Mamba2), * (attention), E (experts) or - (MLP)");
      }
    }
    if (m.moe_layers > 0) {
      ReadRoutedExperts(f, m);
      // The shared expert's width has its own key here.
      m.shared_expert_intermediate_size = f.OptionalCount("moe_shared_expert_intermediate_size");
      m.num_shared_experts = m.shared_expert_intermediate_size > 0 ? 1 : 0;
    }
    m.mamba_heads = f.Required("mamba_num_heads");
    m.mamba_head_dim = f.Required("mamba_head_dim");
    m.mamba_groups = f.Required("n_groups");
    m.ssm_state = f.Required("ssm_state_size");
    m.mamba_chunk = f.Required("chunk_size");
    m.conv_kernel = f.Required("conv_kernel");
    const std::string act = f.StringOr("mlp_hidden_act", "relu2");
    if (act != "relu2") f.Fail("mlp_hidden_act", "is '" + act + "'", "relu2 (the non-gated MLP the estimator models)");
  }
  bool HasExperts() const override { return true; }
  void ValidateParallel(const ModelConfig& m, const ParallelConfig& p, Engine e) const override {
    const auto Str = [](std::int64_t v) { return std::to_string(v); };
    if (m.moe_layers > 0)
      ValidateExpertParallel(m, p, e);
    else
      Require(p.dp == 1 && p.moe_ep == 1, m.name + " has no experts: attention dp and moe_ep must be 1");
    Require(m.mamba_heads % p.tp == 0 && m.mamba_groups % p.tp == 0,
            "tp " + Str(p.tp) + " does not divide the " + Str(m.mamba_heads) + " Mamba2 heads and " +
                Str(m.mamba_groups) + " groups of " + m.name);
    if (m.mlp_layers > 0)
      Require(m.intermediate_size % p.tp == 0,
              "tp " + Str(p.tp) + " does not divide the MLP width " + Str(m.intermediate_size) + " of " + m.name);
  }
  SearchKnobs Knobs() const override { return {8, true, true}; }

  std::vector<Op> BuildPhase(const ModelConfig& m, const ParallelConfig& p, const OpListOptions& o, bool context,
                             double phase_scale) const override {
    const double layers = static_cast<double>(m.num_layers) * phase_scale;
    const double M = static_cast<double>(m.recurrent_layers) * phase_scale;
    const double A = static_cast<double>(m.attention_layers) * phase_scale;
    const double E = static_cast<double>(m.moe_layers) * phase_scale;
    const double D = static_cast<double>(m.mlp_layers) * phase_scale;
    const std::string phase = context ? "context" : "generation";
    const std::int64_t H = m.hidden_size;
    const std::string& q = m.quant.gemm;
    PhaseBuilder b(phase, layers);
    AddEmbedding(b, m, p, phase_scale);  // the embedding and every layer's norm

    // Mamba2.
    const std::int64_t nh = m.mamba_heads / p.tp, hd = m.mamba_head_dim, g = m.mamba_groups / p.tp, N = m.ssm_state;
    b.Gemm("mamba_in_proj_gemm", 2 * nh * hd + 2 * g * N + nh, H, q, M);
    Op& s = b.Add("mamba2", OpKind::kTable, M);
    s.table = "mamba2_perf";
    s.table_key = Params{{"phase", phase},          {"d_state", N},        {"d_conv", m.conv_kernel},
                         {"nheads", nh},            {"head_dim", hd},      {"n_groups", g},
                         {"chunk_size", m.mamba_chunk}};
    if (!context) s.table_key.Set("seq_len", Value(std::int64_t{1}));
    s.weight_elems = static_cast<double>((nh * hd + 2 * g * N) * m.conv_kernel);  // the convolution (bf16)
    b.Elementwise("mamba_gated_norm", 2 * nh * hd, nh * hd, "", 0).scale = M;
    b.Gemm("mamba_out_proj_gemm", H, nh * hd, q, M).low_precision_input = true;
    if (p.tp > 1) b.AllReduce("mamba_ar", p.tp, H, m.quant.comm, M);

    // Attention.
    const std::int64_t d = m.head_dim, heads = m.num_heads / p.tp, kv_heads = CeilDiv(m.num_kv_heads, p.tp);
    b.Gemm("qkv_gemm", heads * d + 2 * d * kv_heads, H, q, A);
    AddAttentionOp(b, m, "attention", context, A, heads, kv_heads);
    b.Gemm("proj_gemm", H, heads * d, q, A).low_precision_input = true;
    if (p.tp > 1) b.AllReduce("attention_ar", p.tp, H, m.quant.comm, A);

    // Experts: the shared expert (up, relu2, down over tp), the router, the
    // routed experts behind the dispatch (which carries the reductions).
    if (E > 0) {
      const std::int64_t S = m.shared_expert_intermediate_size / p.tp;
      if (S > 0) {
        b.Gemm("shared_ffn1_gemm", S, H, q, E);
        b.Elementwise("shared_act", S, S, "", 0).scale = E;
        b.Gemm("shared_ffn2_gemm", H, S, q, E);
      }
      b.Gemm("router_gemm", m.num_experts, H, "bfloat16", E);
      const std::size_t first = b.size();
      AddMoeDispatch(b, m, p, o, true);
      AddRoutedExperts(b, m, p, ExpertDistribution(o), E);
      AddMoeDispatch(b, m, p, o, false);
      for (std::size_t i = first; i < b.size(); ++i) b.at(i).scale = E;  // dispatch ops come at the layer count
    }
    // Dense MLP layers.
    if (D > 0) {
      const std::int64_t I = m.intermediate_size / p.tp;
      b.Gemm("mlp_ffn1_gemm", I, H, q, D);
      b.Elementwise("mlp_act", I, I, "", 0).scale = D;
      b.Gemm("mlp_ffn2_gemm", H, I, q, D);
      if (p.tp > 1) b.AllReduce("mlp_ar", p.tp, H, m.quant.comm, D);
    }
    AddLogits(b, m, p, context, phase_scale);
    AddTail(b, m, p, phase_scale);
    return b.Take();
  }
  void AddNotes(const ModelConfig& m, const OpListOptions& o, std::vector<std::string>& notes) const override {
    notes.push_back(std::to_string(m.recurrent_layers) + " Mamba2 layers (mamba2_perf), " +
                    std::to_string(m.attention_layers) + " attention, " + std::to_string(m.moe_layers) + " MoE and " +
                    std::to_string(m.mlp_layers) +
                    " MLP layers (hybrid_override_pattern); the Mamba2 state is per sequence, constant in length");
    if (m.moe_layers > 0)
      notes.push_back("MoE expert load: " + ExpertDistribution(o) +
                      " routing; the relu2 experts (two projections) read moe_perf rows of the expert width: rows "
                      "whose kernel_source says nongated (servecast's relu2 sweep, AIC's TensorRT-LLM rows) are these "
                      "experts, gated rows of that width an upper bound");
  }
  double KvElemsPerToken(const ModelConfig& m, const ParallelConfig& p) const override {
    return static_cast<double>(CeilDiv(m.num_kv_heads, p.tp)) * static_cast<double>(m.head_dim) *
           static_cast<double>(m.attention_layers) * 2.0;
  }
  // Per Mamba2 layer: the float32 state nh p N and the convolution's last (c - 1)
  // inputs of its nh p + 2 g N channels at 2 B.
  double StateBytesPerSequence(const ModelConfig& m, const ParallelConfig& p) const override {
    const double nh = static_cast<double>(m.mamba_heads / p.tp), hd = static_cast<double>(m.mamba_head_dim);
    const double g = static_cast<double>(m.mamba_groups / p.tp), N = static_cast<double>(m.ssm_state);
    const double conv = (nh * hd + 2 * g * N) * static_cast<double>(m.conv_kernel - 1) * 2;
    return static_cast<double>(m.recurrent_layers) * (nh * hd * N * 4 + conv);
  }
  const char* ActivationKey() const override { return "moe"; }
};

}  // namespace

std::unique_ptr<ModelFamily> MakeNemotronHFamily() {
  return std::make_unique<NemotronHFamily>();
}

}  // namespace servecast::model
