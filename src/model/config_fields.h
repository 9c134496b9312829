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

// The largest size a config field may hold (2^24): far above any real model
// (hidden sizes are ~10^4, vocabularies ~10^5, expert counts ~10^2) and small
// enough that products of a few sizes stay exact in int64 and double.
inline constexpr std::int64_t kMaxConfigSize = std::int64_t{1} << 24;

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

  // A positive integer <= `max` that must be there.
  std::int64_t Required(const std::string& key, std::int64_t max = kMaxConfigSize) const;
  // A positive integer <= `max`, or `fallback` when absent or null.
  std::int64_t OptionalPositive(const std::string& key, std::int64_t fallback, std::int64_t max = kMaxConfigSize) const;
  // An integer in [0, kMaxConfigSize], or 0 when absent or null.
  std::int64_t OptionalCount(const std::string& key) const;
  // The first of `keys` that is present (positive integer <= kMaxConfigSize), with the key used; {0, ""} when none is.
  std::pair<std::int64_t, std::string> FirstOf(std::initializer_list<const char*> keys) const;
  // An integer (a whole float is accepted); the key must be present.
  std::int64_t Integer(const std::string& key) const;
  // A string, or `fallback` when absent or null.
  std::string StringOr(const std::string& key, const std::string& fallback) const;

 private:
  std::int64_t Positive(const std::string& key, std::int64_t max = kMaxConfigSize) const;

  const nlohmann::json& obj_;
  std::string file_;
  std::string prefix_;
};

}  // namespace servecast::model
