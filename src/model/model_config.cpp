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
#include "model/config_fields.h"
#include "model/family.h"
#include "model/quant_infer.h"

namespace servecast::model {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Parses JSON text; malformed text -> ConfigError with the parser's line, column and byte.
// Object keys seen while parsing, to refuse a key written twice in one object
// (the parser would keep the last one silently).
class RepeatedKeys {
 public:
  bool operator()(int depth, json::parse_event_t event, json& parsed) {
    (void)depth;
    switch (event) {
      case json::parse_event_t::object_start: levels_.emplace_back(); break;
      case json::parse_event_t::object_end:
        if (!levels_.empty()) levels_.pop_back();
        break;
      case json::parse_event_t::key:
        if (!levels_.empty()) {
          const std::string key = parsed.get<std::string>();
          Level& l = levels_.back();
          if (repeated_.empty() && std::find(l.keys.begin(), l.keys.end(), key) != l.keys.end())
            repeated_ = PathTo(key);
          l.keys.push_back(key);
          l.current = key;
        }
        break;
      default: break;
    }
    return true;
  }
  // The dotted path of the first key written twice ("" when none).
  const std::string& repeated() const { return repeated_; }

 private:
  struct Level {
    std::vector<std::string> keys;
    std::string current;
  };
  std::string PathTo(const std::string& key) const {
    std::string p;
    for (std::size_t i = 0; i + 1 < levels_.size(); ++i) p += levels_[i].current + ".";
    return p + key;
  }
  std::vector<Level> levels_;
  std::string repeated_;
};

json ParseJson(const std::string& text, const std::string& file) {
  try {
    RepeatedKeys keys;
    json doc = json::parse(text, [&keys](int d, json::parse_event_t e, json& j) { return keys(d, e, j); });
    if (!keys.repeated().empty())
      throw ConfigError(SourceLocation{file, 0, keys.repeated()}, "key appears more than once in one object",
                        "each key once");
    return doc;
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
std::string FirstArchitecture(const ConfigFields& f) {
  if (!f.Has("architectures")) return "";
  const json& a = f.obj().at("architectures");
  if (!a.is_array()) f.Fail("architectures", "wrong type: " + JsonTypeName(a), "a list of architecture names");
  if (a.empty()) f.Fail("architectures", "empty list", "a list of architecture names");
  if (!a[0].is_string()) f.Fail("architectures", "wrong type of entry 0: " + JsonTypeName(a[0]), "a string");
  return a[0].get<std::string>();
}

// Decides the architecture and its family: architectures[0] of the root; for a
// multimodal config whose root architecture is not a text model we know, the
// text_config's architectures[0] or model_type.
ArchitectureMatch ResolveArchitecture(const ConfigFields& root, const ConfigFields* text) {
  const std::string top = FirstArchitecture(root);
  if (ArchitectureMatch a = FindArchitecture(top); a.family) return a;
  if (text != nullptr) {
    if (ArchitectureMatch a = FindArchitecture(FirstArchitecture(*text)); a.family) return a;
    if (ArchitectureMatch a = FindModelType(text->StringOr("model_type", "")); a.family) return a;
  }
  if (top.empty())
    root.Fail("architectures", "missing key", "a list whose first entry is one of: " + AcceptedArchitectures());
  root.Fail("architectures", "unknown architecture '" + top + "'", "one of: " + AcceptedArchitectures());
}

// layer_windows: layer_types + sliding_window, else a global sliding_window.
void ReadWindows(const ConfigFields& f, ModelConfig& m) {
  m.layer_windows.assign(static_cast<std::size_t>(m.num_layers), 0);
  const std::int64_t window = f.Has("sliding_window") ? f.Integer("sliding_window") : 0;
  auto need_window = [&] {
    if (window <= 0)
      f.Fail("sliding_window", window == 0 && !f.Has("sliding_window") ? "missing key" : "value is not positive",
             "a positive window size for the sliding_attention layers");
  };
  if (f.Has("layer_types")) {
    const json& types = f.obj().at("layer_types");
    if (!types.is_array()) f.Fail("layer_types", "wrong type: " + JsonTypeName(types), "a list of attention kinds");
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
    if (!u.is_boolean()) f.Fail("use_sliding_window", "wrong type: " + JsonTypeName(u), "true or false");
    use = u.get<bool>();
  }
  if (!use) return;
  // With use_sliding_window explicitly on (Qwen2 style), layers below max_window_layers keep full attention.
  const std::int64_t first = f.Has("use_sliding_window") ? f.OptionalCount("max_window_layers") : 0;
  for (std::int64_t i = first; i < m.num_layers; ++i) m.layer_windows[static_cast<std::size_t>(i)] = window;
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
  if (fs::is_regular_file(hf_quant, ec) && IsBlank(hf_text))
    throw ConfigError(SourceLocation{hf_quant.string(), 0, ""}, "empty file",
                      "ModelOpt's JSON object with quantization.quant_algo (or no file at all)");
  ModelConfig m = ParseHfConfig(ReadFile(config.string()), hf_text, config.string());
  m.name = name;
  return m;
}

}  // namespace

const ModelFamily& FamilyOf(const ModelConfig& m) {
  if (m.family == nullptr) throw Error("model '" + m.name + "' has no model family (not read from a config)");
  return *m.family;
}

ModelConfig ParseHfConfig(const std::string& config_json, const std::string& hf_quant_json, const std::string& where) {
  const json doc = ParseJson(config_json, where);
  if (!doc.is_object())
    throw ConfigError(SourceLocation{where, 1, ""}, "top level is " + JsonTypeName(doc), "a JSON object");
  const ConfigFields root(doc, where, "");
  std::optional<ConfigFields> text;
  if (root.Has("text_config")) {
    const json& tc = doc.at("text_config");
    if (!tc.is_object()) root.Fail("text_config", "wrong type: " + JsonTypeName(tc), "an object");
    text.emplace(tc, where, "text_config.");
  }
  const ConfigFields& f = text ? *text : root;

  ModelConfig m;
  m.name = where;
  m.config_path = where;
  const ArchitectureMatch arch = ResolveArchitecture(root, text ? &*text : nullptr);
  m.architecture = arch.architecture->name;
  m.family = arch.family;
  m.qk_norm = arch.architecture->qk_norm;

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
  m.max_position_embeddings = f.OptionalPositive("max_position_embeddings", 0, std::int64_t{1} << 31);
  for (const char* key : {"torch_dtype", "dtype"}) {
    const std::string dtype = f.StringOr(key, "");
    if (!dtype.empty() && dtype != "bfloat16" && dtype != "float16" && dtype != "float32" && dtype != "auto")
      f.Fail(key, "unknown weight dtype '" + dtype + "'", "bfloat16, float16, float32 or auto");
  }

  m.family->ReadConfig(f, m);
  ReadWindows(f, m);

  json hf_doc;
  QuantSources src;
  src.config_where = where;
  src.hf_quant_where = HfQuantWhere(where);
  if (!IsBlank(hf_quant_json)) {
    hf_doc = ParseJson(hf_quant_json, src.hf_quant_where);
    src.hf_quant = &hf_doc;
  }
  for (const ConfigFields* holder : std::initializer_list<const ConfigFields*>{&root, text ? &*text : nullptr}) {
    if (holder == nullptr || !holder->Has("quantization_config")) continue;
    src.quantization_config = &holder->obj().at("quantization_config");
    src.quantization_config_key = holder->Path("quantization_config");
    if (!src.quantization_config->is_object())
      holder->Fail("quantization_config", "wrong type: " + JsonTypeName(*src.quantization_config), "an object");
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
