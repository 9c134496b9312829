#include "model/model_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <system_error>
#include <utility>

#include "core/error.h"
#include "core/fs.h"
#include "core/yaml_util.h"
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
  } catch (const json::out_of_range& e) {
    // A number beyond a double's range (1e99999): the parser names the token but
    // not where it is; its first occurrence gives the line.
    std::string detail = e.what();
    if (const std::size_t b = detail.find("] "); b != std::string::npos) detail = detail.substr(b + 2);
    int line = 0;
    const std::size_t q1 = detail.find('\''), q2 = detail.rfind('\'');
    if (q1 != std::string::npos && q2 > q1) {
      const std::size_t at = text.find(detail.substr(q1 + 1, q2 - q1 - 1));
      if (at != std::string::npos) line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n'));
    }
    throw ConfigError(SourceLocation{file, line, ""}, detail, "numbers within a double's range (about 1.8e308)");
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
  if (f.Has("attention_chunk_size")) {
    // Chunked-local attention on the RoPE layers; the NoPE layers attend globally.
    m.attention_chunk = f.Required("attention_chunk_size");
    std::vector<bool> rope(static_cast<std::size_t>(m.num_layers), true);
    if (f.Has("no_rope_layers")) {
      const json& flags = f.obj().at("no_rope_layers");
      if (!flags.is_array() || static_cast<std::int64_t>(flags.size()) != m.num_layers)
        f.Fail("no_rope_layers", flags.is_array() ? "has " + std::to_string(flags.size()) + " entries" : "not a list",
               "one 0/1 flag per layer (num_hidden_layers = " + std::to_string(m.num_layers) + "), 1 = RoPE");
      for (std::size_t i = 0; i < flags.size(); ++i) {
        if (!flags[i].is_number_integer() || (flags[i] != 0 && flags[i] != 1))
          f.Fail("no_rope_layers", "entry " + std::to_string(i) + " is " + flags[i].dump(), "0 or 1");
        rope[i] = flags[i] == 1;
      }
    } else {
      const std::int64_t every = f.OptionalPositive("no_rope_layer_interval", 4);
      for (std::int64_t i = 0; i < m.num_layers; ++i) rope[static_cast<std::size_t>(i)] = (i + 1) % every != 0;
    }
    for (std::size_t i = 0; i < rope.size(); ++i)
      if (rope[i]) m.layer_windows[i] = m.attention_chunk;
    return;
  }
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
      } else if (t != "full_attention" && t != "linear_attention") {
        // linear_attention: a recurrent layer (Qwen3.5, Qwen3-Next), its family's to cost.
        f.Fail("layer_types", "entry " + std::to_string(i) + " is '" + t + "'",
               "sliding_attention, full_attention or linear_attention");
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

// A config.json file (name: how reports call the model); a file named
// config.json also brings the hf_quant_config.json of its folder.
ModelConfig LoadConfigFile(const fs::path& config, const std::string& name) {
  if (config.filename() == "config.json") return LoadDirectory(config.parent_path(), name);
  ModelConfig m = ParseHfConfig(ReadFile(config.string()), "", config.string());
  m.name = name;
  return m;
}

// "Qwen/Qwen3-32B" -> "Qwen--Qwen3-32B".
std::string IdToDir(const std::string& id) {
  const std::size_t slash = id.find('/');
  return slash == std::string::npos ? id : id.substr(0, slash) + "--" + id.substr(slash + 1);
}

// ORG/NAME: one slash, both parts non-empty, no spaces.
bool IsHfId(const std::string& s) {
  const std::size_t slash = s.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 >= s.size()) return false;
  if (s.find('/', slash + 1) != std::string::npos) return false;
  return std::none_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}

std::string AliasFile(const std::string& models_dir) {
  return (fs::path(models_dir) / "aliases.yaml").string();
}

struct HubLookup {
  std::string config;   // the snapshot's config.json ("" when not found)
  std::string problem;  // why a cached repository gave none
};

// models--ORG--NAME under the hub cache (exact, else case-insensitive), its
// snapshot for refs/main, else its only snapshot with a config.json.
HubLookup FindInHubCache(const std::string& hub, const std::string& id) {
  std::error_code ec;
  const std::string want = "models--" + IdToDir(id);
  fs::path repo = fs::path(hub) / want;
  if (!fs::is_directory(repo, ec)) {
    repo.clear();
    if (fs::is_directory(hub, ec))
      for (const auto& e : fs::directory_iterator(hub, ec))
        if (e.is_directory(ec) && Lower(e.path().filename().string()) == Lower(want)) repo = e.path();
    if (repo.empty()) return {};
  }
  const fs::path snapshots = repo / "snapshots";
  if (fs::is_regular_file(repo / "refs" / "main", ec)) {
    std::string rev = ReadFile((repo / "refs" / "main").string());
    while (!rev.empty() && std::isspace(static_cast<unsigned char>(rev.back()))) rev.pop_back();
    const fs::path config = snapshots / rev / "config.json";
    if (!rev.empty() && fs::is_regular_file(config, ec)) return {config.string(), ""};
  }
  std::vector<std::string> found;
  if (fs::is_directory(snapshots, ec))
    for (const auto& e : fs::directory_iterator(snapshots, ec))
      if (fs::is_regular_file(e.path() / "config.json", ec)) found.push_back((e.path() / "config.json").string());
  std::sort(found.begin(), found.end());
  if (found.size() == 1) return {found[0], ""};
  if (found.empty()) return {"", repo.string() + " has no snapshots/*/config.json"};
  return {"", repo.string() + " has " + std::to_string(found.size()) +
                  " snapshots and refs/main names none of them; give one config.json as --model: " + Join(found)};
}

// Edit distance (insert, delete, substitute one character), case-insensitive.
std::size_t EditDistance(const std::string& a, const std::string& b) {
  const std::string x = Lower(a), y = Lower(b);
  std::vector<std::size_t> row(y.size() + 1);
  for (std::size_t j = 0; j <= y.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= x.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= y.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (x[i - 1] == y[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[y.size()];
}

// `spec` without a checkpoint-variant suffix (-Instruct, -Base, -Chat, -hf, -it).
std::string WithoutVariant(const std::string& spec) {
  for (const char* suffix : {"-instruct", "-base", "-chat", "-hf", "-it"}) {
    const std::string l = Lower(spec), sfx = suffix;
    if (l.size() > sfx.size() && l.compare(l.size() - sfx.size(), sfx.size(), sfx) == 0)
      return spec.substr(0, spec.size() - sfx.size());
  }
  return spec;
}

// The `n` candidates nearest to `spec` or to `spec` without its variant suffix
// (by the name after the slash when `spec` has no organization), nearest
// first, ties in candidate order.
std::vector<std::string> Closest(const std::string& spec, const std::vector<std::string>& candidates, std::size_t n) {
  const bool has_org = spec.find('/') != std::string::npos;
  const std::string bare = WithoutVariant(spec);
  std::vector<std::pair<std::size_t, std::size_t>> scored;  // (distance, index)
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const std::string& c = candidates[i];
    const std::size_t slash = c.find('/');
    const std::string target = has_org || slash == std::string::npos ? c : c.substr(slash + 1);
    scored.emplace_back(std::min(EditDistance(spec, target), EditDistance(bare, target)), i);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && out.size() < n; ++i) out.push_back(candidates[scored[i].second]);
  return out;
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
  m.prefill_cp = arch.architecture->prefill_cp;

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
  // Absent only in a model whose every FFN is experts (Qwen3.5-MoE): then the
  // expert width, once the family has read it.
  m.intermediate_size = f.Has("intermediate_size") ? f.Required("intermediate_size") : 0;
  m.vocab_size = f.Required("vocab_size");
  m.max_position_embeddings = f.OptionalPositive("max_position_embeddings", 0, std::int64_t{1} << 31);
  for (const char* key : {"torch_dtype", "dtype"}) {
    const std::string dtype = f.StringOr(key, "");
    if (!dtype.empty() && dtype != "bfloat16" && dtype != "float16" && dtype != "float32" && dtype != "auto")
      f.Fail(key, "unknown weight dtype '" + dtype + "'", "bfloat16, float16, float32 or auto");
  }

  if (f.Has("use_qk_norm")) {
    const json& q = f.obj().at("use_qk_norm");
    if (!q.is_boolean()) f.Fail("use_qk_norm", "wrong type: " + JsonTypeName(q), "true or false");
    m.qk_norm = q.get<bool>();
  }
  m.family->ReadConfig(f, m);
  if (m.intermediate_size == 0) {
    if (m.moe_intermediate_size == 0) f.Required("intermediate_size");  // the missing-key error
    m.intermediate_size = m.moe_intermediate_size;
  }
  if (const int shared = arch.architecture->implicit_shared_experts;
      shared > 0 && m.shared_expert_intermediate_size == 0) {
    m.num_shared_experts = shared;
    m.shared_expert_intermediate_size = shared * m.moe_intermediate_size;
  }
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
  if (fs::is_regular_file(spec, ec)) return LoadConfigFile(spec, spec);
  // A bundled model by directory name or by HF id, case-insensitively.
  std::string wanted = spec;
  if (const std::size_t slash = wanted.find('/'); slash != std::string::npos && wanted.find("--") == std::string::npos)
    wanted = wanted.substr(0, slash) + "--" + wanted.substr(slash + 1);
  wanted = Lower(wanted);
  const std::vector<std::string> dirs = BundledDirs(models_dir);
  for (const std::string& d : dirs)
    if (Lower(d) == wanted) return LoadDirectory(fs::path(models_dir) / d, DirToId(d));

  const bool hf_id = IsHfId(spec);
  const std::string hub = HfHubCacheDir();
  std::string cache_problem;
  if (hf_id && !hub.empty()) {
    const HubLookup found = FindInHubCache(hub, spec);
    if (!found.config.empty()) {
      ModelConfig m = LoadConfigFile(found.config, spec);
      m.resolution_note = spec + ": read from the Hugging Face cache, " + found.config;
      return m;
    }
    cache_problem = found.problem;
  }
  const std::vector<ModelAlias> aliases = LoadModelAliases(models_dir);
  for (const ModelAlias& a : aliases) {
    if (Lower(a.id) != Lower(spec)) continue;
    const std::string dir = IdToDir(a.model);
    for (const std::string& d : dirs)
      if (Lower(d) == Lower(dir)) {
        ModelConfig m = LoadDirectory(fs::path(models_dir) / d, DirToId(d));
        m.resolution_note = spec + " is bundled " + DirToId(d) + " (" + AliasFile(models_dir) + " line " +
                            std::to_string(a.line) + ": " + a.reason + ")";
        return m;
      }
  }

  std::vector<std::string> ids;
  for (const std::string& d : dirs) ids.push_back(DirToId(d));
  std::vector<std::string> candidates = ids;
  for (const ModelAlias& a : aliases) candidates.push_back(a.id);
  const std::vector<std::string> near = Closest(spec, candidates, 3);
  std::string msg = "--model: unknown model '" + spec + "'";
  if (!hf_id) msg += " (no file or folder of that name, and not an ORG/NAME id)";
  if (!near.empty()) msg += "; did you mean " + Join(near) + "?";
  msg += " Expected a bundled model (" + models_dir + "): " + (ids.empty() ? std::string("none found") : Join(ids));
  msg += "; an alias of " + AliasFile(models_dir) + "; a folder holding config.json or a config.json file";
  if (hf_id)
    msg += "; or an id in the Hugging Face cache (" +
           (hub.empty() ? std::string("none: HF_HUB_CACHE, HF_HOME and HOME are unset")
                        : hub + (cache_problem.empty() ? "" : ": " + cache_problem)) +
           ")";
  throw UsageError(msg);
}

std::vector<ModelAlias> LoadModelAliases(const std::string& models_dir) {
  const std::string file = AliasFile(models_dir);
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return {};
  YamlReader top(file, LoadYamlFile(file));
  top.AllowOnlyKeys({"aliases"});
  const YAML::Node list = top.node()["aliases"];
  if (!list.IsDefined() || !list.IsSequence())
    throw ConfigError(top.Where("aliases"), "missing or not a list", "aliases: [{id, model, reason}, ...]");
  std::vector<std::string> bundled;
  for (const std::string& d : BundledDirs(models_dir)) bundled.push_back(Lower(DirToId(d)));
  std::vector<ModelAlias> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = "aliases[" + std::to_string(i) + "]";
    YamlReader r(file, list[i], path);
    if (!list[i].IsMap()) throw ConfigError(YamlWhere(file, list[i], path), "not a mapping", "{id, model, reason}");
    r.AllowOnlyKeys({"id", "model", "reason"});
    ModelAlias a;
    a.line = r.Where().line;
    a.id = r.RequiredString("id");
    a.model = r.RequiredString("model");
    a.reason = r.RequiredString("reason");
    for (const auto& [key, value] :
         {std::pair<const char*, const std::string*>{"id", &a.id}, {"model", &a.model}, {"reason", &a.reason}})
      if (IsBlank(*value)) throw ConfigError(r.Where(key), "empty", "a non-empty string");
    if (!IsHfId(a.id)) throw ConfigError(r.Where("id"), "'" + a.id + "' is not an HF id", "ORG/NAME");
    if (std::find(bundled.begin(), bundled.end(), Lower(a.id)) != bundled.end())
      throw ConfigError(r.Where("id"), "'" + a.id + "' is a bundled model itself", "an id that no folder holds");
    if (std::find(bundled.begin(), bundled.end(), Lower(a.model)) == bundled.end())
      throw ConfigError(r.Where("model"), "'" + a.model + "' is not bundled",
                        "the HF id of a folder under " + models_dir);
    for (const ModelAlias& b : out)
      if (Lower(b.id) == Lower(a.id))
        throw ConfigError(r.Where("id"), "'" + a.id + "' is listed already (line " + std::to_string(b.line) + ")",
                          "each id once");
    out.push_back(std::move(a));
  }
  return out;
}

std::string HfHubCacheDir() {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v == nullptr ? std::string() : std::string(v);
  };
  if (const std::string v = env("HF_HUB_CACHE"); !v.empty()) return v;
  if (const std::string v = env("HF_HOME"); !v.empty()) return (fs::path(v) / "hub").string();
  if (const std::string v = env("XDG_CACHE_HOME"); !v.empty()) return (fs::path(v) / "huggingface" / "hub").string();
  if (const std::string v = env("HOME"); !v.empty()) return (fs::path(v) / ".cache" / "huggingface" / "hub").string();
  return "";
}

std::vector<std::string> BundledModels(const std::string& models_dir) {
  std::vector<std::string> ids;
  for (const std::string& d : BundledDirs(models_dir)) ids.push_back(DirToId(d));
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace servecast::model
