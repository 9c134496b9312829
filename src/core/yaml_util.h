#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace servecast {

// Loads a YAML file. A syntax error, or a key written twice in one mapping,
// becomes ConfigError with the file, the line (and the key path).
YAML::Node LoadYamlFile(const std::string& path);
YAML::Node LoadYamlString(const std::string& text, const std::string& origin);

// Location of a node (1-based line) in `file`, with an optional key path.
SourceLocation YamlWhere(const std::string& file, const YAML::Node& node, const std::string& key = "");

// Typed access that reports file, line, key and the expected type on error.
// `Required*` throw when the key is absent; `Optional*` return the fallback.
class YamlReader {
 public:
  YamlReader(std::string file, YAML::Node node, std::string path = "");

  const YAML::Node& node() const { return node_; }
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  SourceLocation Where(const std::string& key = "") const;

  bool Has(const std::string& key) const;
  YamlReader Child(const std::string& key) const;  // required map/seq child
  std::string RequiredString(const std::string& key) const;
  std::int64_t RequiredInt(const std::string& key) const;
  double RequiredDouble(const std::string& key) const;
  std::string OptionalString(const std::string& key, const std::string& fallback) const;
  std::int64_t OptionalInt(const std::string& key, std::int64_t fallback) const;
  double OptionalDouble(const std::string& key, double fallback) const;
  bool OptionalBool(const std::string& key, bool fallback) const;
  std::vector<std::string> StringList(const std::string& key) const;  // absent -> empty
  // Rejects keys not in `allowed` (catches typos), naming the key and the line.
  void AllowOnlyKeys(const std::vector<std::string>& allowed) const;

 private:
  YAML::Node Get(const std::string& key) const;
  std::string file_;
  YAML::Node node_;
  std::string path_;
};

// Converts a scalar node: throws ConfigError with location when it is not of the type.
std::int64_t YamlToInt(const std::string& file, const YAML::Node& n, const std::string& key);
double YamlToDouble(const std::string& file, const YAML::Node& n, const std::string& key);
std::string YamlToString(const std::string& file, const YAML::Node& n, const std::string& key);
bool YamlToBool(const std::string& file, const YAML::Node& n, const std::string& key);

}  // namespace servecast
