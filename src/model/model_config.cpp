#include "model/model_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <system_error>
#include <utility>

#include "core/error.h"
#include "core/fs.h"
#include "model/quant_infer.h"

namespace servecast::model {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct ArchEntry {
  const char* architecture;
  const char* model_type;  // text_config.model_type of the same architecture (multimodal fallback)
  Family family;
  bool qk_norm;
};

constexpr ArchEntry kArchitectures[] = {
    {"LlamaForCausalLM", "llama", Family::kDense, false},
    {"Qwen2ForCausalLM", "qwen2", Family::kDense, false},
    {"Qwen3ForCausalLM", "qwen3", Family::kDense, true},
    {"MiMoForCausalLM", "mimo", Family::kDense, false},
    {"MixtralForCausalLM", "mixtral", Family::kMoe, false},
    {"Qwen2MoeForCausalLM", "qwen2_moe", Family::kMoe, false},
    {"Qwen3MoeForCausalLM", "qwen3_moe", Family::kMoe, true},
    {"GptOssForCausalLM", "gpt_oss", Family::kMoe, false},
    {"DeepseekV3ForCausalLM", "deepseek_v3", Family::kDeepSeek, false},
};

const ArchEntry* FindArchitecture(const std::string& name) {
  for (const ArchEntry& e : kArchitectures)
    if (name == e.architecture) return &e;
  return nullptr;
}

const ArchEntry* FindModelType(const std::string& model_type) {
  for (const ArchEntry& e : kArchitectures)
    if (model_type == e.model_type) return &e;
  return nullptr;
}

std::string SupportedArchitectures() {
  std::string out;
  for (const ArchEntry& e : kArchitectures) out += (out.empty() ? "" : ", ") + std::string(e.architecture);
  return out;
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string TypeName(const json& v) {
  return v.is_null() ? "null" : v.type_name();
}

// Reads fields of one JSON object (the config root or its text_config); every
// message names the file and the key path.
class Fields {
 public:
  Fields(const json& obj, std::string file, std::string prefix)
      : obj_(obj), file_(std::move(file)), prefix_(std::move(prefix)) {}

  const json& obj() const { return obj_; }
  const std::string& file() const { return file_; }
  std::string Path(const std::string& key) const { return prefix_ + key; }

  // Present and not null.
  bool Has(const std::string& key) const {
    auto it = obj_.find(key);
    return it != obj_.end() && !it->is_null();
  }

  [[noreturn]] void Fail(const std::string& key, const std::string& what, const std::string& expected) const {
    throw ConfigError(SourceLocation{file_, 0, Path(key)}, what, expected);
  }

  // A positive integer that must be there.
  std::int64_t Required(const std::string& key) const {
    if (!Has(key)) Fail(key, "missing key", "a positive integer");
    return Positive(key);
  }

  // A positive integer, or `fallback` when absent or null.
  std::int64_t OptionalPositive(const std::string& key, std::int64_t fallback) const {
    return Has(key) ? Positive(key) : fallback;
  }

  // An integer >= 0, or 0 when absent or null.
  std::int64_t OptionalCount(const std::string& key) const {
    if (!Has(key)) return 0;
    const std::int64_t v = Integer(key);
    if (v < 0) Fail(key, "value " + std::to_string(v) + " is negative", "an integer >= 0");
    return v;
  }

  // The first of `keys` that is present (positive integer), with the key used; {0, ""} when none is.
  std::pair<std::int64_t, std::string> FirstOf(std::initializer_list<const char*> keys) const {
    for (const char* k : keys)
      if (Has(k)) return {Positive(k), k};
    return {0, ""};
  }

  std::int64_t Integer(const std::string& key) const {
    const json& v = obj_.at(key);
    if (v.is_number_integer()) return v.get<std::int64_t>();
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<std::int64_t>(d);
      Fail(key, "value " + v.dump() + " is not a whole number", "an integer");
    }
    Fail(key, "wrong type: " + TypeName(v), "an integer");
  }

 private:
  std::int64_t Positive(const std::string& key) const {
    const std::int64_t v = Integer(key);
    if (v <= 0) Fail(key, "value " + std::to_string(v) + " is not positive", "a positive integer");
    return v;
  }

  const json& obj_;
  std::string file_;
  std::string prefix_;
};

// Parses JSON text; malformed text -> ConfigError with the parser's line, column and byte.
json ParseJson(const std::string& text, const std::string& file) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    // Line and column of the byte the parser stopped at (e.byte is 1-based).
    const std::size_t stop = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    int line = 1;
    std::size_t line_start = 0;
    for (std::size_t i = 0; i < stop; ++i)
      if (text[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    std::string detail = e.what();
    const std::size_t colon = detail.find(": ", detail.find("column"));
    if (colon != std::string::npos) detail = detail.substr(colon + 2);
    throw ConfigError(SourceLocation{file, line, ""}, "malformed JSON at line " + std::to_string(line) + ", column " +
                                                          std::to_string(stop - line_start + 1) + " (byte " +
                                                          std::to_string(e.byte) + "): " + detail);
  }
}

bool IsBlank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}

// The string at architectures[0] of `f`, or "" when the key is absent or null.
std::string FirstArchitecture(const Fields& f) {
  if (!f.Has("architectures")) return "";
  const json& a = f.obj().at("architectures");
  if (!a.is_array()) f.Fail("architectures", "wrong type: " + TypeName(a), "a list of architecture names");
  if (a.empty()) f.Fail("architectures", "empty list", "a list of architecture names");
  if (!a[0].is_string()) f.Fail("architectures", "wrong type of entry 0: " + TypeName(a[0]), "a string");
  return a[0].get<std::string>();
}

std::string StringOr(const Fields& f, const std::string& key, const std::string& fallback) {
  if (!f.Has(key)) return fallback;
  const json& v = f.obj().at(key);
  if (!v.is_string()) f.Fail(key, "wrong type: " + TypeName(v), "a string");
  return v.get<std::string>();
}

// Decides the architecture and its family: architectures[0] of the root; for a
// multimodal config whose root architecture is not a text model we know, the
// text_config's architectures[0] or model_type.
const ArchEntry& ResolveArchitecture(const Fields& root, const Fields* text, std::string& architecture) {
  const std::string top = FirstArchitecture(root);
  if (const ArchEntry* e = FindArchitecture(top)) {
    architecture = top;
    return *e;
  }
  if (text != nullptr) {
    const std::string inner = FirstArchitecture(*text);
    if (const ArchEntry* e = FindArchitecture(inner)) {
      architecture = inner;
      return *e;
    }
    if (const ArchEntry* e = FindModelType(StringOr(*text, "model_type", ""))) {
      architecture = e->architecture;
      return *e;
    }
  }
  if (top.empty())
    root.Fail("architectures", "missing key", "a list whose first entry is one of: " + SupportedArchitectures());
  root.Fail("architectures", "unknown architecture '" + top + "'", "one of: " + SupportedArchitectures());
}

// layer_windows: layer_types + sliding_window, else a global sliding_window.
void ReadWindows(const Fields& f, ModelConfig& m) {
  m.layer_windows.assign(static_cast<std::size_t>(m.num_layers), 0);
  const std::int64_t window = f.Has("sliding_window") ? f.Integer("sliding_window") : 0;
  auto need_window = [&] {
    if (window <= 0)
      f.Fail("sliding_window", window == 0 && !f.Has("sliding_window") ? "missing key" : "value is not positive",
             "a positive window size for the sliding_attention layers");
  };
  if (f.Has("layer_types")) {
    const json& types = f.obj().at("layer_types");
    if (!types.is_array()) f.Fail("layer_types", "wrong type: " + TypeName(types), "a list of attention kinds");
    if (static_cast<std::int64_t>(types.size()) != m.num_layers)
      f.Fail("layer_types", "has " + std::to_string(types.size()) + " entries",
             "one per layer (num_hidden_layers = " + std::to_string(m.num_layers) + ")");
    for (std::size_t i = 0; i < types.size(); ++i) {
      const std::string t = types[i].is_string() ? types[i].get<std::string>() : types[i].dump();
      if (t == "sliding_attention") {
        need_window();
        m.layer_windows[i] = window;
      } else if (t != "full_attention") {
        f.Fail("layer_types", "entry " + std::to_string(i) + " is '" + t + "'", "sliding_attention or full_attention");
      }
    }
    return;
  }
  if (window == 0) return;  // absent or null: full attention everywhere
  need_window();
  bool use = true;
  if (f.Has("use_sliding_window")) {
    const json& u = f.obj().at("use_sliding_window");
    if (!u.is_boolean()) f.Fail("use_sliding_window", "wrong type: " + TypeName(u), "true or false");
    use = u.get<bool>();
  }
  if (!use) return;
  // With use_sliding_window explicitly on (Qwen2 style), layers below max_window_layers keep full attention.
  const std::int64_t first = f.Has("use_sliding_window") ? f.OptionalCount("max_window_layers") : 0;
  for (std::int64_t i = first; i < m.num_layers; ++i) m.layer_windows[static_cast<std::size_t>(i)] = window;
}

void ReadMoe(const Fields& f, ModelConfig& m) {
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
}

void ReadDeepSeek(const Fields& f, ModelConfig& m) {
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

std::string HfQuantWhere(const std::string& where) {
  const fs::path p(where);
  if (p.filename() == "config.json") return (p.parent_path() / "hf_quant_config.json").string();
  return "hf_quant_config.json";
}

// "Qwen--Qwen3-32B" -> "Qwen/Qwen3-32B".
std::string DirToId(const std::string& dir) {
  const std::size_t sep = dir.find("--");
  if (sep == std::string::npos) return dir;
  return dir.substr(0, sep) + "/" + dir.substr(sep + 2);
}

// Bundled directory names (those holding config.json), sorted.
std::vector<std::string> BundledDirs(const std::string& models_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(models_dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(models_dir, ec)) {
    if (!entry.is_directory(ec)) continue;
    if (fs::is_regular_file(entry.path() / "config.json", ec)) out.push_back(entry.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

ModelConfig LoadDirectory(const fs::path& dir, const std::string& name) {
  const fs::path config = dir / "config.json";
  const fs::path hf_quant = dir / "hf_quant_config.json";
  std::error_code ec;
  const std::string hf_text = fs::is_regular_file(hf_quant, ec) ? ReadFile(hf_quant.string()) : "";
  ModelConfig m = ParseHfConfig(ReadFile(config.string()), hf_text, config.string());
  m.name = name;
  return m;
}

}  // namespace

const char* FamilyName(Family f) {
  switch (f) {
    case Family::kDense:
      return "dense";
    case Family::kMoe:
      return "moe";
    case Family::kDeepSeek:
      return "deepseek";
  }
  return "unknown";
}

ModelConfig ParseHfConfig(const std::string& config_json, const std::string& hf_quant_json, const std::string& where) {
  const json doc = ParseJson(config_json, where);
  if (!doc.is_object())
    throw ConfigError(SourceLocation{where, 1, ""}, "top level is " + TypeName(doc), "a JSON object");
  const Fields root(doc, where, "");
  std::optional<Fields> text;
  if (root.Has("text_config")) {
    const json& tc = doc.at("text_config");
    if (!tc.is_object()) root.Fail("text_config", "wrong type: " + TypeName(tc), "an object");
    text.emplace(tc, where, "text_config.");
  }
  const Fields& f = text ? *text : root;

  ModelConfig m;
  m.name = where;
  m.config_path = where;
  const ArchEntry& arch = ResolveArchitecture(root, text ? &*text : nullptr, m.architecture);
  m.family = arch.family;
  m.qk_norm = arch.qk_norm;

  m.num_layers = f.Required("num_hidden_layers");
  m.hidden_size = f.Required("hidden_size");
  m.num_heads = f.Required("num_attention_heads");
  m.num_kv_heads = f.OptionalPositive("num_key_value_heads", m.num_heads);
  if (m.num_heads % m.num_kv_heads != 0)
    f.Fail("num_key_value_heads",
           "value " + std::to_string(m.num_kv_heads) + " does not divide num_attention_heads " +
               std::to_string(m.num_heads),
           "a divisor of num_attention_heads");
  auto [head_dim, head_dim_key] = f.FirstOf({"head_dim", "attention_head_dim"});
  if (head_dim_key.empty()) {
    if (m.hidden_size % m.num_heads != 0)
      f.Fail("head_dim",
             "missing key, and hidden_size " + std::to_string(m.hidden_size) +
                 " is not a multiple of num_attention_heads " + std::to_string(m.num_heads),
             "head_dim or attention_head_dim");
    head_dim = m.hidden_size / m.num_heads;
  }
  m.head_dim = head_dim;
  m.intermediate_size = f.Required("intermediate_size");
  m.vocab_size = f.Required("vocab_size");
  m.max_position_embeddings = f.OptionalPositive("max_position_embeddings", 0);

  if (m.family != Family::kDense) ReadMoe(f, m);
  if (m.family == Family::kDeepSeek) ReadDeepSeek(f, m);
  ReadWindows(f, m);

  json hf_doc;
  QuantSources src;
  src.config_where = where;
  src.hf_quant_where = HfQuantWhere(where);
  if (!IsBlank(hf_quant_json)) {
    hf_doc = ParseJson(hf_quant_json, src.hf_quant_where);
    src.hf_quant = &hf_doc;
  }
  for (const Fields* holder : std::initializer_list<const Fields*>{&root, text ? &*text : nullptr}) {
    if (holder == nullptr || !holder->Has("quantization_config")) continue;
    src.quantization_config = &holder->obj().at("quantization_config");
    src.quantization_config_key = holder->Path("quantization_config");
    if (!src.quantization_config->is_object())
      holder->Fail("quantization_config", "wrong type: " + TypeName(*src.quantization_config), "an object");
    break;
  }
  InferQuant(m, src);
  return m;
}

ModelConfig LoadModel(const std::string& spec, const std::string& models_dir) {
  std::error_code ec;
  if (spec.empty()) throw UsageError("--model: empty; expected a bundled model, a Hugging Face id or a directory");
  if (fs::is_directory(spec, ec)) {
    if (!fs::is_regular_file(fs::path(spec) / "config.json", ec))
      throw UsageError("--model: directory '" + spec + "' has no config.json");
    return LoadDirectory(spec, spec);
  }
  // A bundled model by directory name or by HF id, case-insensitively.
  std::string wanted = spec;
  if (const std::size_t slash = wanted.find('/'); slash != std::string::npos && wanted.find("--") == std::string::npos)
    wanted = wanted.substr(0, slash) + "--" + wanted.substr(slash + 1);
  wanted = Lower(wanted);
  const std::vector<std::string> dirs = BundledDirs(models_dir);
  for (const std::string& d : dirs)
    if (Lower(d) == wanted) return LoadDirectory(fs::path(models_dir) / d, DirToId(d));

  std::vector<std::string> ids;
  for (const std::string& d : dirs) ids.push_back(DirToId(d));
  throw UsageError("--model: unknown model '" + spec +
                   "'; expected a directory holding config.json or a bundled model (" + models_dir +
                   "): " + (ids.empty() ? std::string("none found") : Join(ids)));
}

std::vector<std::string> BundledModels(const std::string& models_dir) {
  std::vector<std::string> ids;
  for (const std::string& d : BundledDirs(models_dir)) ids.push_back(DirToId(d));
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace servecast::model
