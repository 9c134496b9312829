#pragma once

// Reading the fields of a Hugging Face config.json object (the root or its
// text_config): typed getters whose errors name the file and the key path.
// Shared by the common config reader (model_config.cpp) and the family files.

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace servecast::model {

// "null" for null, else nlohmann's type name ("string", "array", ...).
std::string JsonTypeName(const nlohmann::json& v);

class ConfigFields {
 public:
  ConfigFields(const nlohmann::json& obj, std::string file, std::string prefix)
      : obj_(obj), file_(std::move(file)), prefix_(std::move(prefix)) {}

  const nlohmann::json& obj() const { return obj_; }
  const std::string& file() const { return file_; }
  std::string Path(const std::string& key) const { return prefix_ + key; }

  // Present and not null.
  bool Has(const std::string& key) const;

  // ConfigError at `key`: what was wrong and what was expected.
  [[noreturn]] void Fail(const std::string& key, const std::string& what, const std::string& expected) const;

  // A positive integer that must be there.
  std::int64_t Required(const std::string& key) const;
  // A positive integer, or `fallback` when absent or null.
  std::int64_t OptionalPositive(const std::string& key, std::int64_t fallback) const;
  // An integer >= 0, or 0 when absent or null.
  std::int64_t OptionalCount(const std::string& key) const;
  // The first of `keys` that is present (positive integer), with the key used; {0, ""} when none is.
  std::pair<std::int64_t, std::string> FirstOf(std::initializer_list<const char*> keys) const;
  // An integer (a whole float is accepted); the key must be present.
  std::int64_t Integer(const std::string& key) const;
  // A string, or `fallback` when absent or null.
  std::string StringOr(const std::string& key, const std::string& fallback) const;

 private:
  std::int64_t Positive(const std::string& key) const;

  const nlohmann::json& obj_;
  std::string file_;
  std::string prefix_;
};

}  // namespace servecast::model
