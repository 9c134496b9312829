#pragma once

// Model families: everything the estimator knows about one kind of architecture
// lives in one file, `family_<name>.cpp`, plus one line in family.cpp's registry
// (docs/extending.md, "Add a model family"). A family declares the Hugging Face
// architectures it accepts, reads its own config fields, states its parallel
// rules and search knobs, builds its op list per phase, and gives its KV bytes
// per token and its engine-profile activation key. Nothing outside the family
// files and the registry asks which family a model is.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/config_fields.h"
#include "model/model_config.h"
#include "model/ops.h"

namespace servecast::model {

// One accepted architecture: config.json's architectures[0], and the
// text_config.model_type naming the same model (the fallback for multimodal
// configs whose root architecture is not a text model).
struct Architecture {
  std::string name;        // "Qwen3ForCausalLM"
  std::string model_type;  // "qwen3"
  bool qk_norm = false;    // per-head RMSNorm on q and k (config.json's use_qk_norm, when set, wins)
  // Shared experts the architecture always has, each of the routed experts'
  // width, that config.json names with no key (Llama-4: one); 0 for none.
  int implicit_shared_experts = 0;
  // SGLang (0.5.16) runs this architecture's prefill context-parallel
  // (--enable-prefill-cp): its model code splits the prefill over the CP ranks
  // (qwen2_moe.py, qwen3_moe.py) or the architecture is one SGLang's CP v2 runs
  // by default (layers/cp/utils.py CP_V2_DEFAULT_MODEL_CLASSES).
  bool prefill_cp = false;
};

// What the deployment search may vary for this family.
struct SearchKnobs {
  int max_tp = 8;                // largest attention tensor parallelism tried
  bool expert_parallel = false;  // moe_tp x moe_ep over the experts (tp x dp = moe_tp x moe_ep)
  bool attention_dp = false;     // attention data parallelism (dp > 1)
  // Multi-token prediction: with --nextn N > 0 the search evaluates every point
  // both with N draft tokens (at --mtp-accepted) and without, and keeps the better.
  bool mtp = false;
  // The family's op list models context parallelism for prefill (cp > 1 on
  // architectures with Architecture::prefill_cp, SGLang only).
  bool context_parallel = false;
};

class ModelFamily {
 public:
  virtual ~ModelFamily() = default;

  // "dense", "moe", "deepseek": shown in reports and JSON.
  virtual const char* Name() const = 0;
  virtual std::vector<Architecture> Architectures() const = 0;

  // Reads the family's own fields; the common ones (layers, hidden size, heads,
  // head dim, FFN width, vocabulary, attention windows) are already in `m`.
  virtual void ReadConfig(const ConfigFields& f, ModelConfig& m) const = 0;
  // Routed experts: the model has a `moe` quantization class and expert parallelism.
  virtual bool HasExperts() const = 0;

  // "" when the estimator covers the model; otherwise why not (every op-list
  // build and the search refuse with it).
  virtual std::string Unsupported(const ModelConfig& m) const {
    (void)m;
    return "";
  }
  // The family's parallel rules (UsageError naming the rule). The common rules
  // (sizes >= 1, tp divides the heads, pp <= layers) are checked before.
  virtual void ValidateParallel(const ModelConfig& m, const ParallelConfig& p, Engine e) const = 0;
  virtual SearchKnobs Knobs() const = 0;

  // The ops of one phase (context = prefill; generation = one decode step whose
  // per-layer ops run `phase_scale` = (L + nextn) / L times).
  virtual std::vector<Op> BuildPhase(const ModelConfig& m, const ParallelConfig& p, const OpListOptions& o,
                                     bool context, double phase_scale) const = 0;
  // Modelling notes of the op list (e.g. the expert routing assumed).
  virtual void AddNotes(const ModelConfig& m, const OpListOptions& o, std::vector<std::string>& notes) const {
    (void)m, (void)o, (void)notes;
  }
  // KV-cache elements per token on one GPU over all layers; the default is
  // grouped-query attention: ceil(n_kv / tp) x d x L x 2 (K and V), not divided
  // by pp (AIC §3.5).
  virtual double KvElemsPerToken(const ModelConfig& m, const ParallelConfig& p) const;
  // Cache bytes per token on one GPU beyond the KV cache above, whatever the KV
  // dtype (DSA: the indexer's own fp8 keys and their scales); default none.
  virtual double SideCacheBytesPerToken(const ModelConfig& m, const ParallelConfig& p) const {
    (void)m, (void)p;
    return 0;
  }
  // Recurrent state bytes per sequence on one GPU over all layers (Gated
  // DeltaNet, Mamba2: the scan state and the convolution window), constant in
  // the sequence's length; default none.
  virtual double StateBytesPerSequence(const ModelConfig& m, const ParallelConfig& p) const {
    (void)m, (void)p;
    return 0;
  }
  // Activation bytes beyond the engine profile's coefficient rule for a pass of
  // `tokens` tokens on one GPU (DeepSeek: the MoE block-scale dispatch
  // workspace); the default is none.
  virtual double WorkspaceBytes(const ModelConfig& m, const ParallelConfig& p, double tokens) const {
    (void)m, (void)p, (void)tokens;
    return 0;
  }
  // The key of the engine profiles' activation coefficients ("dense", "moe").
  virtual const char* ActivationKey() const = 0;
};

// Shared by the families with routed experts (family_moe.cpp): the expert
// fields of config.json, the expert-parallel rules (tp x dp = moe_tp x moe_ep,
// experts and expert width divisible, the engines' rules), and the expert load
// assumed ("" in the options: power_law_1.2).
void ReadRoutedExperts(const ConfigFields& f, ModelConfig& m);
void ValidateExpertParallel(const ModelConfig& m, const ParallelConfig& p, Engine e);
std::string ExpertDistribution(const OpListOptions& o);
// The FFN half of an expert layer at the builder's layer count: norm, router,
// shared experts (gated), and the routed experts behind the engine's dispatch.
class PhaseBuilder;
void AddExpertLayer(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, const OpListOptions& o);

// The registered families, built-in ones first (family.cpp lists them).
const std::vector<const ModelFamily*>& Families();
// The family named `name`; Error when none is.
const ModelFamily& FindFamily(std::string_view name);
// The family and entry accepting architectures[0] = `architecture`, or
// (failing that) text_config.model_type = `model_type` ("" skips that match);
// {nullptr, nullptr} when none does.
struct ArchitectureMatch {
  const ModelFamily* family = nullptr;
  const Architecture* architecture = nullptr;
};
ArchitectureMatch FindArchitecture(std::string_view architecture);
ArchitectureMatch FindModelType(std::string_view model_type);
// Every accepted architecture name, in registry order ("LlamaForCausalLM, ...").
std::string AcceptedArchitectures();

// Adds a family after the built-in ones (tests and extensions; call before any
// lookup from another thread). Error when its name or one of its architectures
// is taken.
void AddFamily(std::unique_ptr<ModelFamily> family);

}  // namespace servecast::model
