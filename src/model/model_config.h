#pragma once

// A language model as the estimator sees it: the architecture facts read from a
// Hugging Face config.json (+ hf_quant_config.json / quantization_config) and
// the quantization of each op class (docs/models.md, "Quantization").
//
// The family is decided by architectures[0] through the family registry
// (model/family.h; docs/models.md lists them):
//   dense     LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MiMoForCausalLM, MistralForCausalLM,
//             GraniteForCausalLM, Olmo2ForCausalLM
//   moe       MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, GptOssForCausalLM,
//             OlmoeForCausalLM, MiniMaxM2ForCausalLM, Llama4ForConditionalGeneration / Llama4ForCausalLM
//   deepseek  DeepseekV3ForCausalLM (parsed fully; the estimator says "not yet supported")
// Multimodal configs are read from their `text_config`.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace servecast::model {

class ModelFamily;  // model/family.h

// The quantization of each op class, by the perf tables' dtype names:
//   gemm  bfloat16 | fp8 | fp8_static | fp8_block | int8_wo | int4_wo | nvfp4 | nvfp4_wo | ...
//   moe   bfloat16 | fp8 | fp8_block | w4a16_mxfp4 | nvfp4 | ...
//   kv    bfloat16 | fp8 | int8        (KV cache)
//   fmha  bfloat16 | fp8               (attention math)
//   comm  half | int8 | fp8            (collectives)
struct QuantConfig {
  std::string gemm = "bfloat16";
  std::string moe = "bfloat16";
  std::string kv = "bfloat16";
  std::string fmha = "bfloat16";
  std::string comm = "half";
  bool operator==(const QuantConfig&) const = default;
};

// User overrides (--gemm-quant ...); a set field wins over inference.
struct QuantOverrides {
  std::optional<std::string> gemm, moe, kv, fmha, comm;
};

struct ModelConfig {
  std::string name;          // bundled name / HF id ("meta-llama/Meta-Llama-3.1-8B") or the directory given
  std::string config_path;   // the config.json read
  // How --model was resolved when it did not name a bundled model or a config
  // file directly (an alias of models/aliases.yaml, the Hugging Face cache):
  // "<id> is bundled <id> (<file> line N: <reason>)" or "<id>: read from the
  // Hugging Face cache, <path>"; "" otherwise. The commands print it as a note.
  std::string resolution_note;
  std::string architecture;  // architectures[0]
  const ModelFamily* family = nullptr;  // the registered family accepting `architecture`

  std::int64_t num_layers = 0;    // num_hidden_layers (L)
  std::int64_t hidden_size = 0;   // H
  std::int64_t num_heads = 0;     // num_attention_heads (n)
  std::int64_t num_kv_heads = 0;  // num_key_value_heads (n_kv); = n when absent
  std::int64_t head_dim = 0;      // head_dim | attention_head_dim | H / n  (d)
  std::int64_t intermediate_size = 0;  // I (dense FFN; intermediate_size_mlp where an MoE model has one)
  std::int64_t vocab_size = 0;         // V
  std::int64_t max_position_embeddings = 0;
  // SGLang runs the architecture's prefill context-parallel (Architecture::prefill_cp).
  bool prefill_cp = false;
  bool qk_norm = false;  // Qwen3 / Qwen3-MoE: RMSNorm on q and k per head (the architecture's, or use_qk_norm)

  // Attention window per layer (0 = full attention); size num_layers. Filled from
  // layer_types + sliding_window (gpt-oss: alternating 128 / full), or from a
  // global sliding_window applied to every layer (when use_sliding_window is not false).
  std::vector<std::int64_t> layer_windows;
  // Chunked-local attention (Llama-4: attention_chunk_size): the chunk, 0 when
  // none. Its layers (the RoPE layers: no_rope_layers, else every layer but each
  // no_rope_layer_interval-th, default 4) hold the chunk as their window above.
  std::int64_t attention_chunk = 0;

  // MoE (0 when dense).
  std::int64_t num_experts = 0;              // E
  std::int64_t experts_per_token = 0;        // topk
  std::int64_t moe_intermediate_size = 0;    // I_moe (else I)
  std::int64_t num_shared_experts = 0;       // shared experts, each I_moe wide
  std::int64_t shared_expert_intermediate_size = 0;  // total width of the shared experts (0: none)
  std::int64_t moe_layer_interval = 1;  // every k-th layer is MoE, the others dense (interleave_moe_layer_step)

  // DeepSeek-V3/R1 (MLA).
  std::int64_t q_lora_rank = 0;
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
  std::int64_t first_k_dense_replace = 0;
  std::int64_t num_nextn_predict_layers = 0;
  // DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): the lightning indexer's
  // heads, head dim and the keys kept per query (0 when the model has none).
  std::int64_t index_n_heads = 0;
  std::int64_t index_head_dim = 0;
  std::int64_t index_topk = 0;

  // Recurrent (linear-attention) layers (issue 25), per layer kind of the model:
  // how many layers are recurrent, attention, and (Nemotron-H) MoE or dense MLP.
  std::int64_t recurrent_layers = 0;
  std::int64_t attention_layers = 0;  // of a hybrid model (0: every layer attends)
  std::int64_t moe_layers = 0;        // Nemotron-H: its E layers
  std::int64_t mlp_layers = 0;        // Nemotron-H: its - layers
  std::int64_t conv_kernel = 0;       // the short convolution's width
  // Gated DeltaNet (Qwen3.5, Qwen3-Next): linear key / value heads and head dims.
  std::int64_t linear_k_heads = 0, linear_v_heads = 0, linear_k_dim = 0, linear_v_dim = 0;
  // Mamba2 (Nemotron-H): heads x head dim, groups of B/C, state size, chunk.
  std::int64_t mamba_heads = 0, mamba_head_dim = 0, mamba_groups = 0, ssm_state = 0, mamba_chunk = 0;

  // Quantization: what the checkpoint says (raw algo name, "" when bf16), and the
  // per-op-class modes inferred from it (then overridden by the user).
  std::string quant_algo;        // e.g. "fp8", "fp8_block", "nvfp4", "mxfp4", ""
  bool dynamic_activations = false;
  QuantConfig quant;
  std::vector<std::string> quant_notes;  // how each mode was decided ("gemm fp8_static: quant_algo fp8, static scales")
};

// The model's family; Error when none is set (a hand-built config).
const ModelFamily& FamilyOf(const ModelConfig& m);

// Parses config.json text (and the optional hf_quant_config.json text, "" when
// absent). `where` names the file in errors. Malformed JSON, a missing or
// mistyped required field, or an unknown architecture -> ConfigError naming the
// file and the field.
ModelConfig ParseHfConfig(const std::string& config_json, const std::string& hf_quant_json, const std::string& where);

// Resolves --model, in order (models/README.md, "Ids as users type them"):
//   1. a directory holding config.json, or a path to a config.json file (its
//      folder's hf_quant_config.json is read too);
//   2. a bundled model by directory name under `models_dir` ("Qwen--Qwen3-32B")
//      or by HF id ("Qwen/Qwen3-32B"), case-insensitively;
//   3. an HF id in the local Hugging Face cache (HfHubCacheDir():
//      models--ORG--NAME/snapshots/<refs/main or the only snapshot>/config.json);
//   4. an alias of `models_dir`/aliases.yaml: the bundled model it names.
// 3 and 4 set resolution_note. Unknown -> UsageError with the closest bundled
// ids and aliases ("did you mean"), the bundled models and the cache searched.
ModelConfig LoadModel(const std::string& spec, const std::string& models_dir);

// An HF id naming a bundled architecture under another name (models/aliases.yaml).
struct ModelAlias {
  std::string id;      // as typed: "meta-llama/Llama-3.1-70B-Instruct"
  std::string model;   // the bundled HF id it resolves to: "meta-llama/Meta-Llama-3.1-70B"
  std::string reason;  // why it is the same architecture
  int line = 0;        // of the entry in the file
};
// Reads `models_dir`/aliases.yaml (no file: none). Strict: an unknown key, a
// missing or empty id / model / reason, an id that is not ORG/NAME, an id given
// twice or naming a bundled model itself, or a model that is not bundled ->
// ConfigError naming the file and line.
std::vector<ModelAlias> LoadModelAliases(const std::string& models_dir);

// The Hugging Face hub cache: $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else $HOME/.cache/huggingface/hub ("" when
// none of them is set).
std::string HfHubCacheDir();

// The bundled models' HF ids ("Qwen/Qwen3-32B"), sorted.
std::vector<std::string> BundledModels(const std::string& models_dir);

// Applies user overrides (validated against the known mode names; unknown ->
// UsageError listing them) and notes them in quant_notes.
void ApplyQuantOverrides(ModelConfig& m, const QuantOverrides& o);

}  // namespace servecast::model
