#include "core/error.h"

#include <cstring>

namespace servecast {

std::string SourceLocation::ToString() const {
  std::string out = file;
  if (line > 0) out.append(":").append(std::to_string(line));
  if (!key.empty()) {
    if (!out.empty()) out.append(": ");
    out.append("key '").append(key).append("'");
  }
  return out;
}

std::string FormatProblem(const SourceLocation& where, const std::string& what, const std::string& expected) {
  std::string out = where.ToString();
  if (!out.empty()) out += ": ";
  out += what;
  if (!expected.empty()) out += "; expected " + expected;
  return out;
}

ConfigError::ConfigError(const SourceLocation& where, const std::string& what, const std::string& expected)
    : Error(FormatProblem(where, what, expected)) {}

DataError::DataError(const SourceLocation& where, const std::string& what, const std::string& expected)
    : Error(FormatProblem(where, what, expected)) {}

SystemError::SystemError(const std::string& what, int err)
    : Error(what + ": " + std::strerror(err)) {}

}  // namespace servecast
