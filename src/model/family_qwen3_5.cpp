// Qwen3.5 dense and MoE (docs/estimator.md, "Hybrid and sparse attention"): Gated
// DeltaNet layers interleaved with gated full attention (layer_types, else one
// full-attention layer in every full_attention_interval), each followed by a
// gated FFN (dense) or routed experts with a shared expert (MoE).
//
// Per layer, as the engines run it (vLLM's and SGLang's Qwen3-Next / Qwen3.5 code):
//   Gated DeltaNet  in_proj (q, k, v, the output gate z, and the per-head beta and
//                   decay a: 2 hk dk + 2 hv dv + 2 hv outputs), the short causal
//                   convolution over q, k, v and the delta-rule scan (gdn_perf:
//                   chunked in prefill, one recurrent step per token in decode),
//                   the z-gated RMSNorm, out_proj; heads split over tp.
//   gated attention q (with its sigmoid gate: 2 n d outputs), k, v; per-head q/k
//                   norm; attention (head dim 256); the gate; o_proj.
// The recurrent state (hv dk dv float32 per layer, plus the convolution window)
// is per sequence and constant in length; only the attention layers keep a KV cache.

#include <algorithm>
#include <string>

#include "model/family.h"
#include "model/op_builder.h"

namespace servecast::model {
namespace {

// The layer kinds: layer_types (linear_attention / full_attention), else every
// full_attention_interval-th layer attends.
void ReadHybridLayers(const ConfigFields& f, ModelConfig& m) {
  std::int64_t attention = 0;
  if (f.Has("layer_types")) {
    const nlohmann::json& types = f.obj().at("layer_types");
    if (!types.is_array() || static_cast<std::int64_t>(types.size()) != m.num_layers)
      f.Fail("layer_types", types.is_array() ? "has " + std::to_string(types.size()) + " entries" : "not a list",
             "one entry per layer (num_hidden_layers = " + std::to_string(m.num_layers) + ")");
    for (const auto& t : types) attention += t.is_string() && t.get<std::string>() == "full_attention" ? 1 : 0;
  } else {
    const std::int64_t every = f.Required("full_attention_interval");
    attention = m.num_layers / every;
  }
  m.attention_layers = attention;
  m.recurrent_layers = m.num_layers - attention;
  m.linear_k_heads = f.Required("linear_num_key_heads");
  m.linear_v_heads = f.Required("linear_num_value_heads");
  m.linear_k_dim = f.Required("linear_key_head_dim");
  m.linear_v_dim = f.Required("linear_value_head_dim");
  m.conv_kernel = f.Required("linear_conv_kernel_dim");
  if (m.linear_v_heads % m.linear_k_heads != 0)
    f.Fail("linear_num_value_heads", "value " + std::to_string(m.linear_v_heads) + " is not a multiple of " +
                                         std::to_string(m.linear_k_heads),
           "a multiple of linear_num_key_heads");
}

void ValidateLinearHeads(const ModelConfig& m, const ParallelConfig& p) {
  Require(m.linear_k_heads % p.tp == 0, "tp " + std::to_string(p.tp) + " does not divide the " +
                                            std::to_string(m.linear_k_heads) + " Gated DeltaNet key heads of " + m.name);
}

// The layers of a phase: decode with MTP (--nextn N, phase_scale (L + N) / L) also
// runs N draft layers, each a gated full-attention layer with its FFN (Qwen3.5's
// MTP module), so the draft layers add to the attention layers only.
struct Layers {
  double attention = 0, recurrent = 0;
};
Layers LayersOf(const ModelConfig& m, bool context, double phase_scale) {
  const double draft = context ? 0.0 : static_cast<double>(m.num_layers) * (phase_scale - 1.0);
  return {static_cast<double>(m.attention_layers) + draft, static_cast<double>(m.recurrent_layers)};
}

// The attention layers' and the Gated DeltaNet layers' mixers, each at its own
// layer count, after the embedding and first norm.
void AddMixers(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, bool context, double phase_scale) {
  const std::int64_t H = m.hidden_size, d = m.head_dim;
  const std::int64_t heads = m.num_heads / p.tp, kv_heads = CeilDiv(m.num_kv_heads, p.tp);
  const Layers n = LayersOf(m, context, phase_scale);
  const double A = n.attention, R = n.recurrent;
  const std::string& q = m.quant.gemm;
  // Gated attention: q and its gate (2 n d), k and v.
  b.Gemm("qkv_gemm", 2 * heads * d + 2 * d * kv_heads, H, q, A);
  AddAttentionOp(b, m, "attention", context, A, heads, kv_heads);
  b.Elementwise("attention_gate", 2 * heads * d, heads * d, "", 0).scale = A;
  b.Gemm("proj_gemm", H, heads * d, q, A).low_precision_input = true;
  // Gated DeltaNet.
  const std::int64_t hk = m.linear_k_heads / p.tp, hv = m.linear_v_heads / p.tp;
  const std::int64_t dk = m.linear_k_dim, dv = m.linear_v_dim;
  b.Gemm("gdn_in_proj_gemm", 2 * hk * dk + 2 * hv * dv + 2 * hv, H, q, R);
  Op& g = b.Add("gdn", OpKind::kTable, R);
  g.table = "gdn_perf";
  g.table_key = Params{{"phase", std::string(context ? "context" : "generation")},
                       {"d_conv", m.conv_kernel},
                       {"num_k_heads", hk},
                       {"head_k_dim", dk},
                       {"num_v_heads", hv},
                       {"head_v_dim", dv}};
  if (!context) g.table_key.Set("seq_len", Value(std::int64_t{1}));  // one token per sequence
  g.weight_elems = static_cast<double>((2 * hk * dk + hv * dv) * m.conv_kernel);  // the convolution (bf16)
  b.Elementwise("gdn_gated_norm", 2 * hv * dv, hv * dv, "", 0).scale = R;
  b.Gemm("gdn_out_proj_gemm", H, hv * dv, q, R).low_precision_input = true;
}

double HybridKvElems(const ModelConfig& m, const ParallelConfig& p) {
  return static_cast<double>(CeilDiv(m.num_kv_heads, p.tp)) * static_cast<double>(m.head_dim) *
         static_cast<double>(m.attention_layers) * 2.0;
}

// Per recurrent layer: the float32 state hv dk dv and the convolution's last
// (c - 1) inputs of its 2 hk dk + hv dv channels at 2 B.
double GdnStateBytes(const ModelConfig& m, const ParallelConfig& p) {
  const double hk = static_cast<double>(m.linear_k_heads / p.tp), hv = static_cast<double>(m.linear_v_heads / p.tp);
  const double dk = static_cast<double>(m.linear_k_dim), dv = static_cast<double>(m.linear_v_dim);
  const double conv = (2 * hk * dk + hv * dv) * static_cast<double>(m.conv_kernel - 1) * 2;
  return static_cast<double>(m.recurrent_layers) * (hv * dk * dv * 4 + conv);
}

void AddHybridNotes(const ModelConfig& m, std::vector<std::string>& notes) {
  notes.push_back(std::to_string(m.recurrent_layers) + " Gated DeltaNet layers (gdn_perf) and " +
                  std::to_string(m.attention_layers) +
                  " gated full-attention layers; the recurrent state is per sequence, constant in length");
  notes.push_back("Gated DeltaNet prefill with a cached prefix is costed over the whole sequence (an upper bound)");
  notes.push_back("MTP (--nextn): each draft layer is a gated full-attention layer with its FFN");
}

class Qwen35Family final : public ModelFamily {
 public:
  const char* Name() const override { return "qwen3_5"; }
  std::vector<Architecture> Architectures() const override {
    return {{"Qwen3_5ForConditionalGeneration", "qwen3_5_text", true}};
  }
  void ReadConfig(const ConfigFields& f, ModelConfig& m) const override { ReadHybridLayers(f, m); }
  bool HasExperts() const override { return false; }
  void ValidateParallel(const ModelConfig& m, const ParallelConfig& p, Engine e) const override {
    (void)e;
    ValidateDenseParallel(m, p);
    ValidateLinearHeads(m, p);
  }
  SearchKnobs Knobs() const override { return {8, false, false, true}; }
  std::vector<Op> BuildPhase(const ModelConfig& m, const ParallelConfig& p, const OpListOptions& o, bool context,
                             double phase_scale) const override {
    (void)o;
    const double layers = static_cast<double>(m.num_layers) * phase_scale;
    PhaseBuilder b(context ? "context" : "generation", layers);
    AddEmbedding(b, m, p, phase_scale);
    AddMixers(b, m, p, context, phase_scale);
    AddGatedFfn(b, m, p);
    AddLogits(b, m, p, context, phase_scale);
    AddTail(b, m, p, phase_scale);
    return b.Take();
  }
  void AddNotes(const ModelConfig& m, const OpListOptions& o, std::vector<std::string>& notes) const override {
    (void)o;
    AddHybridNotes(m, notes);
  }
  double KvElemsPerToken(const ModelConfig& m, const ParallelConfig& p) const override { return HybridKvElems(m, p); }
  double StateBytesPerSequence(const ModelConfig& m, const ParallelConfig& p) const override {
    return GdnStateBytes(m, p);
  }
  const char* ActivationKey() const override { return "dense"; }
};

class Qwen35MoeFamily final : public ModelFamily {
 public:
  const char* Name() const override { return "qwen3_5_moe"; }
  std::vector<Architecture> Architectures() const override {
    return {{"Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe_text", true}};
  }
  void ReadConfig(const ConfigFields& f, ModelConfig& m) const override {
    ReadRoutedExperts(f, m);
    ReadHybridLayers(f, m);
  }
  bool HasExperts() const override { return true; }
  void ValidateParallel(const ModelConfig& m, const ParallelConfig& p, Engine e) const override {
    ValidateExpertParallel(m, p, e);
    ValidateLinearHeads(m, p);
  }
  SearchKnobs Knobs() const override { return {16, true, true, true}; }
  std::vector<Op> BuildPhase(const ModelConfig& m, const ParallelConfig& p, const OpListOptions& o, bool context,
                             double phase_scale) const override {
    const double layers = static_cast<double>(m.num_layers) * phase_scale;
    PhaseBuilder b(context ? "context" : "generation", layers);
    AddEmbedding(b, m, p, phase_scale);
    AddMixers(b, m, p, context, phase_scale);
    AddExpertLayer(b, m, p, o);  // its pre-dispatch carries the mixers' reduction
    AddLogits(b, m, p, context, phase_scale);
    AddTail(b, m, p, phase_scale);
    return b.Take();
  }
  void AddNotes(const ModelConfig& m, const OpListOptions& o, std::vector<std::string>& notes) const override {
    notes.push_back("MoE expert load: " + ExpertDistribution(o) + " routing");
    AddHybridNotes(m, notes);
  }
  double KvElemsPerToken(const ModelConfig& m, const ParallelConfig& p) const override { return HybridKvElems(m, p); }
  double StateBytesPerSequence(const ModelConfig& m, const ParallelConfig& p) const override {
    return GdnStateBytes(m, p);
  }
  const char* ActivationKey() const override { return "moe"; }
};

}  // namespace

std::unique_ptr<ModelFamily> MakeQwen35Family() {
  return std::make_unique<Qwen35Family>();
}
std::unique_ptr<ModelFamily> MakeQwen35MoeFamily() {
  return std::make_unique<Qwen35MoeFamily>();
}

}  // namespace servecast::model
