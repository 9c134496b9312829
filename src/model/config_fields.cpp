#include "model/config_fields.h"

#include <cmath>

#include "core/error.h"

namespace servecast::model {

using nlohmann::json;

std::string JsonTypeName(const json& v) {
  return v.is_null() ? "null" : v.type_name();
}

bool ConfigFields::Has(const std::string& key) const {
  auto it = obj_.find(key);
  return it != obj_.end() && !it->is_null();
}

void ConfigFields::Fail(const std::string& key, const std::string& what, const std::string& expected) const {
  throw ConfigError(SourceLocation{file_, 0, Path(key)}, what, expected);
}

std::int64_t ConfigFields::Required(const std::string& key, std::int64_t max) const {
  if (!Has(key)) Fail(key, "missing key", "a positive integer");
  return Positive(key, max);
}

std::int64_t ConfigFields::OptionalPositive(const std::string& key, std::int64_t fallback, std::int64_t max) const {
  return Has(key) ? Positive(key, max) : fallback;
}

std::int64_t ConfigFields::OptionalCount(const std::string& key) const {
  if (!Has(key)) return 0;
  const std::int64_t v = Integer(key);
  if (v < 0) Fail(key, "value " + std::to_string(v) + " is negative", "an integer >= 0");
  if (v > kMaxConfigSize)
    Fail(key, "value " + std::to_string(v) + " is implausibly large",
         "an integer <= " + std::to_string(kMaxConfigSize));
  return v;
}

std::pair<std::int64_t, std::string> ConfigFields::FirstOf(std::initializer_list<const char*> keys) const {
  for (const char* k : keys)
    if (Has(k)) return {Positive(k), k};
  return {0, ""};
}

std::int64_t ConfigFields::Integer(const std::string& key) const {
  const json& v = obj_.at(key);
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<std::int64_t>(d);
    Fail(key, "value " + v.dump() + " is not a whole number", "an integer");
  }
  Fail(key, "wrong type: " + JsonTypeName(v), "an integer");
}

std::string ConfigFields::StringOr(const std::string& key, const std::string& fallback) const {
  if (!Has(key)) return fallback;
  const json& v = obj_.at(key);
  if (!v.is_string()) Fail(key, "wrong type: " + JsonTypeName(v), "a string");
  return v.get<std::string>();
}

std::int64_t ConfigFields::Positive(const std::string& key, std::int64_t max) const {
  const std::int64_t v = Integer(key);
  if (v <= 0) Fail(key, "value " + std::to_string(v) + " is not positive", "a positive integer");
  if (v > max)
    Fail(key, "value " + std::to_string(v) + " is implausibly large", "a positive integer <= " + std::to_string(max));
  return v;
}

}  // namespace servecast::model
