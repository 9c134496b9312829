// DeepSeek-V3/R1 and Kimi-K2 (docs/estimator.md, "DeepSeek-V3/R1 and Kimi-K2"): multi-head latent
// attention (MLA), the first `first_k_dense_replace` layers with a dense FFN, the
// rest with routed experts plus a shared expert, and optional MTP draft layers.
//
// Per layer (AIC §2.5, with the deliberate differences named in docs/models.md):
//   attention  downscale GEMM (q_a + kv_a + rope, replicated), q_b and (prefill)
//              kv_b projections, then
//                prefill: MLA over the unabsorbed q, k, v (context_mla_perf);
//                decode:  absorbed MLA: the per-head BMM q_nope x W_UK
//                         (mla_bmm_perf mla_gen_pre), MLA over the latent cache
//                         (generation_mla_perf), the BMM out x W_UV (mla_gen_post);
//              then the output projection. The same for the three engines.
//   dense FFN  (first_k_dense_replace layers) gate/up, activation, down, sharded
//              over the attention tp with its all-reduces.
//   MoE        shared expert, router, the engines' dispatch around the routed
//              experts; in decode the shared expert runs on a second stream,
//              overlapped with the routed path (latency = the longer of the two).
//   MTP        the nextn draft layers are MoE layers: decode adds nextn of them.

#include <cmath>
#include <string>

#include "model/family.h"
#include "model/op_builder.h"
#include "tables/cost_model.h"

namespace servecast::model {
namespace {

// The absorbed decode's BMMs use the kv_b projection's dtype class: bfloat16
// for a bf16 checkpoint, else fp8 (AIC's rule).
std::string MlaBmmQuant(const ModelConfig& m) {
  return m.quant.gemm == "bfloat16" ? "bfloat16" : "fp8";
}

class DeepSeekFamily : public ModelFamily {
 public:
  const char* Name() const override { return "deepseek"; }
  std::vector<Architecture> Architectures() const override { return {{"DeepseekV3ForCausalLM", "deepseek_v3", false}}; }
  void ReadConfig(const ConfigFields& f, ModelConfig& m) const override {
    ReadRoutedExperts(f, m);
    m.q_lora_rank = f.OptionalCount("q_lora_rank");  // null: queries are not low-rank
    m.kv_lora_rank = f.Required("kv_lora_rank");
    m.qk_nope_head_dim = f.Required("qk_nope_head_dim");
    m.qk_rope_head_dim = f.Required("qk_rope_head_dim");
    m.v_head_dim = f.Required("v_head_dim");
    m.first_k_dense_replace = f.OptionalCount("first_k_dense_replace");
    m.num_nextn_predict_layers = f.OptionalCount("num_nextn_predict_layers");
    if (m.first_k_dense_replace > m.num_layers)
      f.Fail("first_k_dense_replace", "value " + std::to_string(m.first_k_dense_replace) + " exceeds the layer count",
             "at most num_hidden_layers");
  }
  bool HasExperts() const override { return true; }

  void ValidateParallel(const ModelConfig& m, const ParallelConfig& p, Engine e) const override {
    ValidateExpertParallel(m, p, e);
    if (m.first_k_dense_replace > 0)
      Require(m.intermediate_size % p.tp == 0, "tp " + std::to_string(p.tp) + " does not divide the dense FFN width " +
                                                   std::to_string(m.intermediate_size) + " of " + m.name);
  }
  SearchKnobs Knobs() const override {
    SearchKnobs k;
    k.max_tp = 16;
    k.expert_parallel = true;
    k.attention_dp = true;
    k.mtp = true;
    return k;
  }

  std::vector<Op> BuildPhase(const ModelConfig& m, const ParallelConfig& p, const OpListOptions& o, bool context,
                             double phase_scale) const override {
    // Decode runs the nextn MTP draft layers too (MoE layers); prefill does not.
    const double draft = context ? 0.0 : static_cast<double>(m.num_layers) * (phase_scale - 1.0);
    const double layers = static_cast<double>(m.num_layers) + draft;
    const double dense_layers = static_cast<double>(m.first_k_dense_replace);
    const double moe_layers = layers - dense_layers;
    PhaseBuilder b(context ? "context" : "generation", layers);
    const std::int64_t H = m.hidden_size;

    AddEmbedding(b, m, p, phase_scale);
    AddAttention(b, m, p, context);
    b.Elementwise("add_norm_2", 2 * H, 2 * H, "rmsnorm_residual", H);

    if (dense_layers > 0) {
      const std::int64_t I = m.intermediate_size / p.tp;
      if (p.tp > 1) b.AllReduce("dense_ar_1", p.tp, H, m.quant.comm, dense_layers);
      b.Gemm("dense_gate_ffn1_gemm", 2 * I, H, m.quant.gemm, dense_layers);
      b.Elementwise("dense_act_gate", 2 * I, I, "silu_and_mul", I).scale = dense_layers;
      b.Gemm("dense_ffn2_gemm", H, I, m.quant.gemm, dense_layers);
      if (p.tp > 1) b.AllReduce("dense_ar_2", p.tp, H, m.quant.comm, dense_layers);
    }

    if (moe_layers > 0) {
      // Decode: the shared expert (group 2) overlaps the routed path (group 1).
      const int routed = context ? 0 : 1, shared_group = context ? 0 : 2;
      const std::int64_t S = m.shared_expert_intermediate_size / p.tp;
      if (S > 0) {
        b.Gemm("shared_gate_ffn1_gemm", 2 * S, H, m.quant.gemm, moe_layers).overlap = shared_group;
        Op& act = b.Elementwise("shared_act_gate", 2 * S, S, "silu_and_mul", S);
        act.scale = moe_layers;
        act.overlap = shared_group;
        b.Gemm("shared_ffn2_gemm", H, S, m.quant.gemm, moe_layers).overlap = shared_group;
      }
      const std::size_t first_routed = b.size();
      b.Gemm("router_gemm", m.num_experts, H, "bfloat16", moe_layers);
      AddMoeDispatch(b, m, p, o, true);
      AddRoutedExperts(b, m, p, Distribution(o), moe_layers);
      AddMoeDispatch(b, m, p, o, false);
      for (std::size_t i = first_routed; i < b.size(); ++i) {
        b.at(i).scale = moe_layers;  // the dispatch ops were added at the attention layer count
        b.at(i).overlap = routed;
      }
    }
    AddLogits(b, m, p, context, phase_scale);
    AddTail(b, m, p, phase_scale);
    return b.Take();
  }

  void AddNotes(const ModelConfig& m, const OpListOptions& o, std::vector<std::string>& notes) const override {
    notes.push_back("MoE expert load: " + Distribution(o) + " routing");
    notes.push_back(AttentionNote());
    if (m.first_k_dense_replace > 0)
      notes.push_back("dense FFN in the first " + std::to_string(m.first_k_dense_replace) +
                      " layer(s) (first_k_dense_replace), experts in the other " +
                      std::to_string(m.num_layers - m.first_k_dense_replace));
    notes.push_back("decode: shared expert overlapped with the routed experts (the longer stream counts)");
  }

  // The latent cache: kv_lora_rank + qk_rope_head_dim per token and layer, the
  // same on every GPU (MLA's cache is not split by tp).
  double KvElemsPerToken(const ModelConfig& m, const ParallelConfig& p) const override {
    (void)p;
    return static_cast<double>(m.num_layers) * static_cast<double>(m.kv_lora_rank + m.qk_rope_head_dim);
  }

  // The block-scale (128-wide groups, fp32 scales) workspace of the expert
  // dispatch, as AIC sizes it: tokens x H x dp x E x topk / ep / 128 x 4 B.
  double WorkspaceBytes(const ModelConfig& m, const ParallelConfig& p, double tokens) const override {
    if (m.quant.moe != "fp8_block") return 0;
    return tokens * static_cast<double>(m.hidden_size) * p.dp * static_cast<double>(m.num_experts) *
           static_cast<double>(m.experts_per_token) / p.moe_ep / 128.0 * 4.0;
  }
  const char* ActivationKey() const override { return "moe"; }

 protected:
  // The attention of one layer (x the builder's layer count): MLA here; DSA's module below.
  virtual void AddAttention(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, bool context) const {
    AddMla(b, m, p, context);
  }
  virtual std::string AttentionNote() const {
    return "MLA: prefill unabsorbed (context_mla_perf), decode absorbed (mla_bmm_perf + generation_mla_perf)";
  }

 private:
  // DeepSeek's routing is close to balanced (auxiliary-loss-free balancing): AIC's power_law_1.01.
  static std::string Distribution(const OpListOptions& o) {
    return o.moe_distribution.empty() ? std::string("power_law_1.01") : o.moe_distribution;
  }

  static void AddMla(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, bool context) {
    const std::int64_t H = m.hidden_size, heads = m.num_heads / p.tp;
    const std::int64_t qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
    const std::string& q = m.quant.gemm;
    const double L = b.layers();
    // The latent projections are replicated on every GPU of the attention group.
    if (m.q_lora_rank > 0) {
      b.Gemm("downscale_gemm", m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim, H, q, L);
      b.Gemm("q_b_proj_gemm", heads * qk, m.q_lora_rank, q, L);
    } else {
      b.Gemm("kv_a_proj_gemm", m.kv_lora_rank + m.qk_rope_head_dim, H, q, L);
      b.Gemm("q_proj_gemm", heads * qk, H, q, L);
    }
    if (context) {
      b.Gemm("kv_b_proj_gemm", heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank, q, L);
      Op& a = b.Add("attention", OpKind::kContextMla, L);
      a.heads = heads;
      a.kv_quant = m.quant.kv;
      a.fmha_quant = m.quant.fmha;
    } else {
      const std::string bmm = MlaBmmQuant(m);
      Op& pre = b.Add("bmm_pre", OpKind::kMlaBmm, L);
      pre.heads = heads;
      pre.quant = bmm;
      pre.measured_op = "mla_gen_pre";
      pre.weight_elems = static_cast<double>(heads * m.qk_nope_head_dim * m.kv_lora_rank);
      Op& a = b.Add("attention", OpKind::kGenerationMla, L);
      a.heads = heads;
      a.kv_quant = m.quant.kv;
      Op& post = b.Add("bmm_post", OpKind::kMlaBmm, L);
      post.heads = heads;
      post.quant = bmm;
      post.measured_op = "mla_gen_post";
      post.weight_elems = static_cast<double>(heads * m.v_head_dim * m.kv_lora_rank);
    }
    Op& proj = b.Gemm("proj_gemm", H, heads * m.v_head_dim, q, L);
    proj.low_precision_input = true;
  }
};

// DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5; docs/estimator.md, "Hybrid and
// sparse attention"): the DeepSeek layer with MLA plus a lightning indexer. The
// indexer projects q (from the q latent) and one key per token (kept in its own
// fp8 cache with a float32 scale), scores every cached token and keeps the top
// index_topk (2048); MLA then attends over those only. Its attention is one
// module per layer, read from AIC's DSA module tables (dsa_context_module_perf,
// dsa_generation_module_perf: projections, indexer, top-k, sparse MLA, output
// projection), whose geometry is the architecture's (tables/cost_model.h DsaGeometry).
class DsaFamily final : public DeepSeekFamily {
 public:
  const char* Name() const override { return "deepseek_dsa"; }
  std::vector<Architecture> Architectures() const override {
    return {{"DeepseekV32ForCausalLM", "deepseek_v32", false}, {"GlmMoeDsaForCausalLM", "glm_moe_dsa", false}};
  }
  void ReadConfig(const ConfigFields& f, ModelConfig& m) const override {
    DeepSeekFamily::ReadConfig(f, m);
    m.index_n_heads = f.Required("index_n_heads");
    m.index_head_dim = f.Required("index_head_dim");
    m.index_topk = f.Required("index_topk");
  }
  std::string Unsupported(const ModelConfig& m) const override {
    if (std::string why = DeepSeekFamily::Unsupported(m); !why.empty()) return why;
    // The module tables are keyed by architecture: the config must have its geometry.
    const tables::DsaGeometry& g = tables::DsaGeometryOf(m.architecture);
    const auto same = [](double a, std::int64_t b) { return a == static_cast<double>(b); };
    if (!same(g.hidden, m.hidden_size) || !same(g.q_lora, m.q_lora_rank) || !same(g.kv_lora, m.kv_lora_rank) ||
        !same(g.nope, m.qk_nope_head_dim) || !same(g.rope, m.qk_rope_head_dim) || !same(g.v, m.v_head_dim) ||
        !same(g.index_heads, m.index_n_heads) || !same(g.index_dim, m.index_head_dim) ||
        !same(g.topk, m.index_topk))
      return "its attention geometry differs from the " + m.architecture +
             " geometry of the DSA module tables (tables/cost_model.h DsaGeometryOf), so this model is not yet "
             "supported";
    return "";
  }
  // The indexer's key cache: index_head_dim fp8 values and one float32 scale per
  // token and layer, on every GPU (not split by tp), whatever the KV dtype.
  double SideCacheBytesPerToken(const ModelConfig& m, const ParallelConfig& p) const override {
    (void)p;
    return static_cast<double>(m.num_layers) * (static_cast<double>(m.index_head_dim) * 1.0 + 4.0);
  }

 protected:
  void AddAttention(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, bool context) const override {
    const std::int64_t heads = m.num_heads / p.tp;
    Op& a = b.Add("dsa_attention", OpKind::kTable, b.layers());
    a.table = context ? "dsa_context_module_perf" : "dsa_generation_module_perf";
    a.table_key = Params{{"op_name", std::string(context ? "dsa_context_module" : "dsa_generation_module")},
                         {"architecture", m.architecture},
                         {"mla_dtype", std::string("bfloat16")},
                         {"kv_cache_dtype", m.quant.kv},
                         {"gemm_type", m.quant.gemm},
                         {"num_heads", heads}};
    // Prefill: the whole sequence as new tokens (a cached prefix costed as new:
    // an upper bound); decode: one token over `step` cached keys.
    if (context)
      a.table_key.Set("step", Value(std::int64_t{0}));
    else
      a.table_key.Set("isl", Value(std::int64_t{1}));
    // The module's projections (q_a, kv_a replicated; q_b, kv_b, o split over tp)
    // and the indexer's (replicated), at the GEMM quant.
    const std::int64_t H = m.hidden_size, qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
    const double w = static_cast<double>(H * m.q_lora_rank + H * (m.kv_lora_rank + m.qk_rope_head_dim) +
                                         m.q_lora_rank * heads * qk +
                                         m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim) +
                                         heads * m.v_head_dim * H + m.q_lora_rank * m.index_n_heads * m.index_head_dim +
                                         H * m.index_head_dim + H * m.index_n_heads);
    a.weight_elems = w;
    a.quant = m.quant.gemm;
  }
  std::string AttentionNote() const override {
    return "DSA: one attention module per layer (dsa_context_module_perf / dsa_generation_module_perf: MLA "
           "projections, lightning indexer over every cached key, top-2048 sparse MLA); the indexer keeps its own "
           "fp8 key cache";
  }
};

}  // namespace

std::unique_ptr<ModelFamily> MakeDeepSeekFamily() {
  return std::make_unique<DeepSeekFamily>();
}
std::unique_ptr<ModelFamily> MakeDsaFamily() {
  return std::make_unique<DsaFamily>();
}

}  // namespace servecast::model
