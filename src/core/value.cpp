#include "core/value.h"

#include <charconv>
#include <cstdio>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace servecast {

ValueType TypeOf(const Value& v) { return static_cast<ValueType>(v.index()); }

bool ParseInt64(std::string_view s, std::int64_t& out) {
  if (s.empty()) return false;
  auto res = std::from_chars(s.data(), s.data() + s.size(), out);
  return res.ec == std::errc() && res.ptr == s.data() + s.size();
}

bool ParseNumber(std::string_view s, double& out) {
  if (s.empty()) return false;
  // from_chars is exact (correctly rounded) and fast; strtod covers the forms it
  // does not take (a leading '+', leading blanks, hex floats).
  auto res = std::from_chars(s.data(), s.data() + s.size(), out);
  if (res.ec == std::errc() && res.ptr == s.data() + s.size()) return true;
  const std::string copy(s);
  char* end = nullptr;
  out = std::strtod(copy.c_str(), &end);
  return end == copy.c_str() + copy.size();
}

const char* TypeName(ValueType t) {
  switch (t) {
    case ValueType::kInt64: return "int64";
    case ValueType::kDouble: return "double";
    case ValueType::kString: return "string";
  }
  return "?";
}

std::string FormatDouble(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d);
  return std::string(buf, res.ptr);
}

std::string FormatG6(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", d);
  return buf;
}

std::string ToString(const Value& v) {
  switch (TypeOf(v)) {
    case ValueType::kInt64: return std::to_string(std::get<std::int64_t>(v));
    case ValueType::kDouble: return FormatDouble(std::get<double>(v));
    case ValueType::kString: return std::get<std::string>(v);
  }
  return {};
}

bool IsNumeric(const Value& v) { return TypeOf(v) != ValueType::kString; }

double AsDouble(const Value& v) {
  if (auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  if (auto* d = std::get_if<double>(&v)) return *d;
  throw Error("expected a number, got the string '" + std::get<std::string>(v) + "'");
}

}  // namespace servecast
