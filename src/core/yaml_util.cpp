#include "core/yaml_util.h"

#include <charconv>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/fs.h"

namespace servecast {
namespace {

std::string Join(const std::string& path, const std::string& key) {
  if (path.empty()) return key;
  if (key.empty()) return path;
  return path + "." + key;
}

// A key written twice in one mapping: yaml-cpp keeps both and a lookup sees only
// one, so the other would be silently ignored. Refused in every YAML input.
void RejectRepeatedKeys(const YAML::Node& n, const std::string& origin, const std::string& path, int depth) {
  if (depth > 64) return;  // deeper than any servecast file; yaml-cpp bounds nesting itself
  if (n.IsMap()) {
    std::vector<std::string> seen;
    for (const auto& kv : n) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string("?");
      for (const std::string& s : seen)
        if (s == key)
          throw ConfigError(YamlWhere(origin, kv.first, Join(path, key)), "key appears more than once",
                            "each key once");
      seen.push_back(key);
      RejectRepeatedKeys(kv.second, origin, Join(path, key), depth + 1);
    }
  } else if (n.IsSequence()) {
    for (std::size_t i = 0; i < n.size(); ++i)
      RejectRepeatedKeys(n[i], origin, path + "[" + std::to_string(i) + "]", depth + 1);
  }
}

}  // namespace

YAML::Node LoadYamlString(const std::string& text, const std::string& origin) {
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(SourceLocation{origin, e.mark.line >= 0 ? e.mark.line + 1 : 0, ""},
                      "malformed YAML: " + e.msg, "valid YAML");
  }
  RejectRepeatedKeys(doc, origin, "", 0);
  return doc;
}

YAML::Node LoadYamlFile(const std::string& path) {
  if (!PathExists(path)) throw ConfigError(SourceLocation{path, 0, ""}, "file not found", "an existing YAML file");
  return LoadYamlString(ReadFile(path), path);
}

SourceLocation YamlWhere(const std::string& file, const YAML::Node& node, const std::string& key) {
  int line = 0;
  if (node.IsDefined() && node.Mark().line >= 0) line = node.Mark().line + 1;
  return SourceLocation{file, line, key};
}

std::int64_t YamlToInt(const std::string& file, const YAML::Node& n, const std::string& key) {
  if (!n.IsScalar()) throw ConfigError(YamlWhere(file, n, key), "not a scalar", "an integer");
  const std::string& s = n.Scalar();
  std::int64_t v = 0;
  auto res = std::from_chars(s.data(), s.data() + s.size(), v);
  if (res.ec == std::errc() && res.ptr == s.data() + s.size()) return v;
  // Accept integral values written in exponent form (1e9) when exact.
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (end && *end == '\0' && !s.empty() && d == static_cast<double>(static_cast<std::int64_t>(d)))
    return static_cast<std::int64_t>(d);
  throw ConfigError(YamlWhere(file, n, key), "value '" + s + "' is not an integer", "an integer");
}

double YamlToDouble(const std::string& file, const YAML::Node& n, const std::string& key) {
  if (!n.IsScalar()) throw ConfigError(YamlWhere(file, n, key), "not a scalar", "a number");
  const std::string& s = n.Scalar();
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (s.empty() || !end || *end != '\0')
    throw ConfigError(YamlWhere(file, n, key), "value '" + s + "' is not a number", "a number");
  return d;
}

std::string YamlToString(const std::string& file, const YAML::Node& n, const std::string& key) {
  if (!n.IsScalar()) throw ConfigError(YamlWhere(file, n, key), "not a scalar", "a string");
  return n.Scalar();
}

bool YamlToBool(const std::string& file, const YAML::Node& n, const std::string& key) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    if (s == "true" || s == "True" || s == "yes") return true;
    if (s == "false" || s == "False" || s == "no") return false;
  }
  throw ConfigError(YamlWhere(file, n, key), "not a boolean", "true or false");
}

YamlReader::YamlReader(std::string file, YAML::Node node, std::string path)
    : file_(std::move(file)), node_(std::move(node)), path_(std::move(path)) {
  if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap())
    throw ConfigError(YamlWhere(file_, node_, path_), "not a mapping", "a mapping of keys to values");
}

SourceLocation YamlReader::Where(const std::string& key) const {
  YAML::Node n = key.empty() ? node_ : Get(key);
  return YamlWhere(file_, n.IsDefined() ? n : node_, Join(path_, key));
}

YAML::Node YamlReader::Get(const std::string& key) const {
  if (!node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  return node_[key];
}

bool YamlReader::Has(const std::string& key) const {
  YAML::Node n = Get(key);
  return n.IsDefined() && !n.IsNull();
}

YamlReader YamlReader::Child(const std::string& key) const {
  if (!Has(key)) throw ConfigError(YamlWhere(file_, node_, Join(path_, key)), "missing key", "a mapping");
  return YamlReader(file_, Get(key), Join(path_, key));
}

std::string YamlReader::RequiredString(const std::string& key) const {
  if (!Has(key)) throw ConfigError(YamlWhere(file_, node_, Join(path_, key)), "missing key", "a string");
  return YamlToString(file_, Get(key), Join(path_, key));
}

std::int64_t YamlReader::RequiredInt(const std::string& key) const {
  if (!Has(key)) throw ConfigError(YamlWhere(file_, node_, Join(path_, key)), "missing key", "an integer");
  return YamlToInt(file_, Get(key), Join(path_, key));
}

double YamlReader::RequiredDouble(const std::string& key) const {
  if (!Has(key)) throw ConfigError(YamlWhere(file_, node_, Join(path_, key)), "missing key", "a number");
  return YamlToDouble(file_, Get(key), Join(path_, key));
}

std::string YamlReader::OptionalString(const std::string& key, const std::string& fallback) const {
  return Has(key) ? YamlToString(file_, Get(key), Join(path_, key)) : fallback;
}

std::int64_t YamlReader::OptionalInt(const std::string& key, std::int64_t fallback) const {
  return Has(key) ? YamlToInt(file_, Get(key), Join(path_, key)) : fallback;
}

double YamlReader::OptionalDouble(const std::string& key, double fallback) const {
  return Has(key) ? YamlToDouble(file_, Get(key), Join(path_, key)) : fallback;
}

bool YamlReader::OptionalBool(const std::string& key, bool fallback) const {
  return Has(key) ? YamlToBool(file_, Get(key), Join(path_, key)) : fallback;
}

std::vector<std::string> YamlReader::StringList(const std::string& key) const {
  std::vector<std::string> out;
  if (!Has(key)) return out;
  YAML::Node n = Get(key);
  if (n.IsScalar()) return {n.Scalar()};
  if (!n.IsSequence()) throw ConfigError(YamlWhere(file_, n, Join(path_, key)), "not a list", "a list of strings");
  for (const auto& item : n) out.push_back(YamlToString(file_, item, Join(path_, key)));
  return out;
}

void YamlReader::AllowOnlyKeys(const std::vector<std::string>& allowed) const {
  if (!node_.IsMap()) return;
  for (const auto& kv : node_) {
    std::string k = kv.first.as<std::string>();
    bool ok = false;
    for (const auto& a : allowed) ok = ok || a == k;
    if (!ok) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      throw ConfigError(YamlWhere(file_, kv.first, Join(path_, k)), "unknown key", "one of: " + list);
    }
  }
}

}  // namespace servecast
