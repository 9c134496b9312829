#include "model/quant_infer.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "core/error.h"
#include "model/family.h"

namespace servecast::model {
namespace {

using nlohmann::json;

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string TypeName(const json& v) {
  return v.is_null() ? "null" : v.type_name();
}

[[noreturn]] void Fail(const std::string& file, const std::string& key, const std::string& what,
                       const std::string& expected) {
  throw ConfigError(SourceLocation{file, 0, key}, what, expected);
}

// The object at `key` of `obj`, or nullptr when absent or null; any other type fails.
const json* OptionalObject(const json& obj, const std::string& key, const std::string& file, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  if (!it->is_object()) Fail(file, path, "wrong type: " + TypeName(*it), "an object");
  return &*it;
}

// The string at `key` of `obj`, or nullopt when absent or null; any other type fails.
std::optional<std::string> OptionalString(const json& obj, const std::string& key, const std::string& file,
                                          const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) Fail(file, path, "wrong type: " + TypeName(*it), "a string");
  return it->get<std::string>();
}

std::optional<bool> OptionalBool(const json& obj, const std::string& key, const std::string& file,
                                 const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) Fail(file, path, "wrong type: " + TypeName(*it), "true or false");
  return it->get<bool>();
}

std::int64_t OptionalCount(const json& obj, const std::string& key, const std::string& file, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return 0;
  if (!it->is_number_integer()) Fail(file, path, "wrong type: " + TypeName(*it), "an integer");
  return it->get<std::int64_t>();
}

const char* kSupportedAlgos =
    "fp8, fp8 with weight_block_size (fp8_block), nvfp4, mxfp4, compressed-tensors with one config group, "
    "or no quantization at all";

// One scheme of a compressed-tensors config group: "weights" or "input_activations".
struct CtScheme {
  std::string type;  // "float" | "int"
  std::int64_t num_bits = 0;
  std::string strategy;
  bool dynamic = false;
  bool has_block_structure = false;
};

std::optional<CtScheme> ReadCtScheme(const json& group, const std::string& key, const std::string& file,
                                     const std::string& path) {
  const json* s = OptionalObject(group, key, file, path);
  if (s == nullptr) return std::nullopt;
  CtScheme out;
  out.type = Lower(OptionalString(*s, "type", file, path + ".type").value_or(""));
  out.num_bits = OptionalCount(*s, "num_bits", file, path + ".num_bits");
  out.strategy = Lower(OptionalString(*s, "strategy", file, path + ".strategy").value_or(""));
  out.dynamic = OptionalBool(*s, "dynamic", file, path + ".dynamic").value_or(false);
  auto bs = s->find("block_structure");
  out.has_block_structure = bs != s->end() && !bs->is_null();
  return out;
}

std::string SchemeText(const std::optional<CtScheme>& s) {
  if (!s) return "none";
  return s->type + std::to_string(s->num_bits);
}

// compressed-tensors (llm-compressor's format): one config group whose weights /
// input_activations schemes select the GEMM mode; kv_cache_scheme selects the KV
// cache; an `ignore` entry naming experts leaves the MoE in bfloat16.
void InferCompressedTensors(ModelConfig& m, const json& qc, const std::string& file, const std::string& key) {
  const std::string groups_key = key + ".config_groups";
  const json* groups = OptionalObject(qc, "config_groups", file, groups_key);
  if (groups == nullptr || groups->empty())
    Fail(file, groups_key, "compressed-tensors config without config_groups is not supported",
         "one config group with weights (and input_activations) schemes");
  if (groups->size() != 1)
    Fail(file, groups_key,
         "compressed-tensors with " + std::to_string(groups->size()) + " config groups is not supported",
         "exactly one config group (mixed schemes per layer cannot be mapped to one mode per op class)");
  const std::string group_name = groups->begin().key();
  const json& group = groups->begin().value();
  const std::string gk = groups_key + "." + group_name;
  if (!group.is_object()) Fail(file, gk, "wrong type: " + TypeName(group), "an object");
  const std::optional<CtScheme> w = ReadCtScheme(group, "weights", file, gk + ".weights");
  const std::optional<CtScheme> a = ReadCtScheme(group, "input_activations", file, gk + ".input_activations");
  if (!w) Fail(file, gk + ".weights", "missing key", "a weights scheme");

  const std::string what = "weights " + SchemeText(w) + ", activations " + SchemeText(a);
  std::string gemm, moe;
  const bool dense = !FamilyOf(m).HasExperts();  // int8 schemes exist only for dense GEMMs
  if (w->type == "float" && w->num_bits == 8 && a && a->type == "float" && a->num_bits == 8) {
    const bool block = w->strategy == "block" || w->has_block_structure;
    m.dynamic_activations = a->dynamic;
    if (block) {
      m.quant_algo = "fp8_block";
      gemm = moe = "fp8_block";
    } else {
      m.quant_algo = "fp8";
      gemm = a->dynamic ? "fp8" : "fp8_static";
      moe = "fp8";
    }
  } else if (w->type == "float" && w->num_bits == 4 && a && a->type == "float" && a->num_bits == 4) {
    m.quant_algo = "nvfp4";
    gemm = moe = "nvfp4";
  } else if (w->type == "float" && w->num_bits == 4 && !a) {
    m.quant_algo = "w4a16_nvfp4";
    gemm = moe = "w4a16_nvfp4";
  } else if (w->type == "int" && w->num_bits == 4 && !a) {
    m.quant_algo = "int4_wo";
    gemm = moe = "int4_wo";
  } else if (w->type == "int" && w->num_bits == 8 && !a && dense) {
    m.quant_algo = "int8_wo";
    gemm = "int8_wo";
    moe = "bfloat16";
  } else if (w->type == "int" && w->num_bits == 8 && a && a->type == "int" && a->num_bits == 8 && dense) {
    m.quant_algo = "sq";
    gemm = "sq";
    moe = "bfloat16";
  } else {
    Fail(file, gk, "compressed-tensors scheme (" + what + (dense ? "" : ", MoE model") + ") is not supported",
         "fp8/fp8 (fp8, fp8_static or fp8_block), fp4/fp4 (nvfp4), fp4 weight-only (w4a16_nvfp4), int4 weight-only "
         "(int4_wo), or on dense models int8 weight-only (int8_wo) and int8/int8 (sq)");
  }
  m.quant.gemm = gemm;
  m.quant.moe = moe;
  m.quant_notes.push_back("quant_algo " + m.quant_algo + ": " + key + " compressed-tensors, " + what +
                          (m.dynamic_activations ? " (dynamic)" : ""));
  m.quant_notes.push_back("gemm " + gemm + ", moe " + moe + ": from the compressed-tensors scheme");

  // ignore: entries naming the routed experts leave the MoE unquantized; entries
  // naming the attention projections and the dense MLP (and, on MoE models, the
  // shared experts) leave every GEMM unquantized: only the routed experts are
  // (Kimi-K2.5's int4 checkpoint).
  auto ig = qc.find("ignore");
  if (ig != qc.end() && !ig->is_null()) {
    if (!ig->is_array()) Fail(file, key + ".ignore", "wrong type: " + TypeName(*ig), "a list of module names");
    bool attn = false, mlp = false, shared = false;
    for (const auto& entry : *ig) {
      if (!entry.is_string()) Fail(file, key + ".ignore", "wrong type of an entry: " + TypeName(entry), "strings");
      const std::string e = entry.get<std::string>();
      const bool names_shared = e.find("shared_expert") != std::string::npos;
      if (e.find("experts") != std::string::npos && !names_shared && m.quant.moe != "bfloat16") {
        m.quant.moe = "bfloat16";
        m.quant_notes.push_back("moe bfloat16: " + key + ".ignore lists '" + e + "'");
      }
      attn = attn || e.find("self_attn") != std::string::npos;
      shared = shared || names_shared;
      mlp = mlp || (e.find("mlp") != std::string::npos && e.find("experts") == std::string::npos &&
                    (e.find("gate") != std::string::npos || e.find("up") != std::string::npos ||
                     e.find("down") != std::string::npos));
    }
    if (attn && mlp && (dense || shared) && m.quant.gemm != "bfloat16") {
      m.quant.gemm = "bfloat16";
      m.quant_notes.push_back("gemm bfloat16: " + key +
                              ".ignore lists the attention, dense-MLP" + (dense ? "" : " and shared-expert") +
                              " projections, so only the routed experts are " + m.quant_algo);
    }
  }

  if (const json* kvs = OptionalObject(qc, "kv_cache_scheme", file, key + ".kv_cache_scheme")) {
    const std::string t = Lower(OptionalString(*kvs, "type", file, key + ".kv_cache_scheme.type").value_or(""));
    const std::int64_t bits = OptionalCount(*kvs, "num_bits", file, key + ".kv_cache_scheme.num_bits");
    if (t == "float" && bits == 8) {
      m.quant.kv = "fp8";
    } else if (t == "int" && bits == 8) {
      m.quant.kv = "int8";
    } else {
      Fail(file, key + ".kv_cache_scheme", "KV cache scheme " + t + std::to_string(bits) + " is not supported",
           "float 8-bit (fp8) or int 8-bit (int8)");
    }
    m.quant_notes.push_back("kv " + m.quant.kv + ": " + key + ".kv_cache_scheme");
  }
}

// weight_block_size: the fp8_block tables are measured with 128 x 128 weight blocks.
void CheckBlockSize(const json& v, const std::string& file, const std::string& key) {
  const bool ok = v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[1].is_number_integer() &&
                  v[0].get<std::int64_t>() == 128 && v[1].get<std::int64_t>() == 128;
  if (!ok)
    Fail(file, key, "block size " + v.dump() + " is not supported",
         "[128, 128] (the block the fp8_block GEMM and MoE tables are measured at)");
}

bool ValidName(const std::vector<std::string>& names, const std::string& v) {
  return std::find(names.begin(), names.end(), v) != names.end();
}

}  // namespace

const std::vector<std::string>& GemmQuantNames() {
  static const std::vector<std::string> k = {"bfloat16", "fp8", "fp8_static", "fp8_block", "fp8_ootb",   "int8_wo",
                                             "int4_wo",  "sq",  "nvfp4",      "nvfp4_wo",  "w4a16_nvfp4"};
  return k;
}
const std::vector<std::string>& MoeQuantNames() {
  // AIC's MoE quant table (aic-estimator.md §1.2); every name here has a SOL
  // profile in perfdb/sol.cpp (MoeQuant).
  static const std::vector<std::string> k = {"bfloat16",         "fp8",
                                             "fp8_block",        "int4_wo",
                                             "w4afp8",           "w4a8_mxfp4_mxfp8",
                                             "w4a8_mxfp4_mxfp8_trtllm", "nvfp4",
                                             "nvfp4_wo",         "w4a16_nvfp4",
                                             "w4a16_mxfp4",      "w4a16_mxfp4_cutlass"};
  return k;
}
const std::vector<std::string>& KvQuantNames() {
  static const std::vector<std::string> k = {"bfloat16", "fp8", "int8"};
  return k;
}
const std::vector<std::string>& FmhaQuantNames() {
  static const std::vector<std::string> k = {"bfloat16", "fp8", "fp8_block"};
  return k;
}
const std::vector<std::string>& CommQuantNames() {
  static const std::vector<std::string> k = {"half", "int8", "fp8"};
  return k;
}

void InferQuant(ModelConfig& m, const QuantSources& src) {
  std::string algo, algo_from, kv_algo, kv_from, kv_file, kv_key;
  bool block = false;

  if (src.hf_quant != nullptr) {
    const json& hq = *src.hf_quant;
    if (!hq.is_object()) Fail(src.hf_quant_where, "", "top level is " + TypeName(hq), "a JSON object");
    const json* q = OptionalObject(hq, "quantization", src.hf_quant_where, "quantization");
    if (q == nullptr) Fail(src.hf_quant_where, "quantization", "missing key", "an object with quant_algo");
    algo = Lower(OptionalString(*q, "quant_algo", src.hf_quant_where, "quantization.quant_algo").value_or(""));
    if (!algo.empty()) algo_from = "hf_quant_config.json quantization.quant_algo";
    kv_algo = Lower(
        OptionalString(*q, "kv_cache_quant_algo", src.hf_quant_where, "quantization.kv_cache_quant_algo").value_or(""));
    if (!kv_algo.empty()) {
      kv_file = src.hf_quant_where;
      kv_key = "quantization.kv_cache_quant_algo";
      kv_from = "hf_quant_config.json " + kv_key;
    }
    if (algo.empty() && kv_algo.empty())
      Fail(src.hf_quant_where, "quantization", "names no quantization (quant_algo and kv_cache_quant_algo are both absent or null)",
           "quant_algo and/or kv_cache_quant_algo (or no hf_quant_config.json at all)");
  }

  // The field that names the algo, for messages about it.
  std::string algo_file = src.hf_quant_where, algo_key = "quantization.quant_algo";
  if (algo.empty() && src.quantization_config != nullptr) {
    const json& qc = *src.quantization_config;
    const std::string& key = src.quantization_config_key;
    const std::string& file = src.config_where;
    const std::optional<std::string> qa = OptionalString(qc, "quant_algo", file, key + ".quant_algo");
    const std::optional<std::string> qm = OptionalString(qc, "quant_method", file, key + ".quant_method");
    algo_file = file;
    if (qa && !qa->empty()) {
      algo = Lower(*qa);
      algo_key = key + ".quant_algo";
    } else if (qm && !qm->empty()) {
      algo = Lower(*qm);
      algo_key = key + ".quant_method";
      if (algo == "compressed-tensors") {
        InferCompressedTensors(m, qc, file, key);
        algo.clear();
      }
    } else {
      Fail(file, key, "neither quant_algo nor quant_method is set", "the quantization algorithm's name");
    }
    if (m.quant_algo.empty()) {  // not compressed-tensors
      algo_from = algo_key;
      const std::optional<std::string> scheme =
          OptionalString(qc, "activation_scheme", file, key + ".activation_scheme");
      if (scheme && Lower(*scheme) == "dynamic") m.dynamic_activations = true;
      auto wbs = qc.find("weight_block_size");
      block = wbs != qc.end() && !wbs->is_null();
      if (block) CheckBlockSize(*wbs, file, key + ".weight_block_size");
    }
    if (kv_algo.empty()) {
      kv_algo = Lower(OptionalString(qc, "kv_cache_quant_algo", file, key + ".kv_cache_quant_algo").value_or(""));
      if (!kv_algo.empty()) {
        kv_file = file;
        kv_key = kv_from = key + ".kv_cache_quant_algo";
      }
    }
  }

  if (!algo.empty()) {
    if (algo == "fp8" && block) {
      algo = "fp8_block";
      m.quant_notes.push_back("quant_algo fp8_block: " + algo_from + " fp8 with weight_block_size");
    } else {
      m.quant_notes.push_back("quant_algo " + algo + ": " + algo_from);
    }
    m.quant_algo = algo;
    if (algo == "fp8") {
      m.quant.gemm = m.dynamic_activations ? "fp8" : "fp8_static";
      m.quant.moe = "fp8";
      m.quant_notes.push_back("gemm " + m.quant.gemm + ", moe fp8: fp8 weights, " +
                              (m.dynamic_activations ? "dynamic" : "static") + " activation scales");
    } else if (algo == "fp8_block") {
      m.quant.gemm = m.quant.moe = "fp8_block";
      m.quant_notes.push_back("gemm fp8_block, moe fp8_block: block-scaled fp8 weights");
    } else if (algo == "nvfp4") {
      m.quant.gemm = m.quant.moe = "nvfp4";
      m.quant_notes.push_back("gemm nvfp4, moe nvfp4: nvfp4 weights and activations");
    } else if (algo == "mxfp4") {
      m.quant.gemm = "bfloat16";
      m.quant.moe = "w4a16_mxfp4";
      m.quant_notes.push_back("gemm bfloat16, moe w4a16_mxfp4: mxfp4 covers the expert weights only");
    } else {
      Fail(algo_file, algo_key, "quantization '" + algo + "' is not supported", kSupportedAlgos);
    }
  }

  if (!kv_algo.empty()) {
    if (kv_algo == "fp8" || kv_algo == "int8") {
      m.quant.kv = kv_algo;
      m.quant_notes.push_back("kv " + kv_algo + ": " + kv_from);
    } else {
      Fail(kv_file, kv_key, "KV cache quantization '" + kv_algo + "' is not supported", "fp8 or int8");
    }
  }

  const std::string& a = m.quant_algo;
  if (a == "fp8" || a == "fp8_block" || a == "nvfp4" || m.quant.kv == "fp8") {
    const std::string why = (a == "fp8" || a == "fp8_block" || a == "nvfp4") ? "quant_algo " + a : "fp8 KV cache";
    m.quant.fmha = "fp8";
    if (m.quant.kv != "fp8") {
      m.quant.kv = "fp8";
      m.quant_notes.push_back("fmha fp8, kv fp8: " + why);
    } else {
      m.quant_notes.push_back("fmha fp8: " + why);
    }
  }

  if (m.quant_algo.empty() && kv_algo.empty()) m.quant_notes.push_back("no quantization config: bfloat16 everywhere");
}

void ApplyQuantOverrides(ModelConfig& m, const QuantOverrides& o) {
  struct Slot {
    const char* op;
    const char* flag;
    const std::optional<std::string>* value;
    std::string* target;
    const std::vector<std::string>* names;
  };
  const Slot slots[] = {
      {"gemm", "--gemm-quant", &o.gemm, &m.quant.gemm, &GemmQuantNames()},
      {"moe", "--moe-quant", &o.moe, &m.quant.moe, &MoeQuantNames()},
      {"kv", "--kv-quant", &o.kv, &m.quant.kv, &KvQuantNames()},
      {"fmha", "--fmha-quant", &o.fmha, &m.quant.fmha, &FmhaQuantNames()},
      {"comm", "--comm-quant", &o.comm, &m.quant.comm, &CommQuantNames()},
  };
  // Validate everything first so that a bad name leaves the model untouched.
  for (const Slot& s : slots) {
    if (s.value->has_value() && !ValidName(*s.names, **s.value))
      throw UsageError(std::string(s.flag) + ": unknown " + s.op + " quantization '" + **s.value +
                       "'; valid: " + Join(*s.names));
  }
  for (const Slot& s : slots) {
    if (!s.value->has_value()) continue;
    const std::string before = *s.target;
    *s.target = **s.value;
    m.quant_notes.push_back(std::string(s.op) + " " + **s.value + ": user override (" + s.flag +
                            (before == **s.value ? ", same as inferred)" : ", inferred " + before + ")"));
  }
}

}  // namespace servecast::model
