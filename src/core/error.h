#pragma once

#include <stdexcept>
#include <string>

namespace servecast {

// Where in an input something went wrong. Empty fields are left out of messages.
struct SourceLocation {
  std::string file;
  int line = 0;  // 1-based; 0 when unknown
  std::string key;

  std::string ToString() const;  // "file:line: key 'k'"
};

// Base of every error that ends an operation. Expected per-case outcomes of the
// collector are Dispositions, never exceptions.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A configuration or input file is unusable: says what, where, and what was expected.
class ConfigError : public Error {
 public:
  ConfigError(const SourceLocation& where, const std::string& what, const std::string& expected = "");
  explicit ConfigError(const std::string& message) : Error(message) {}
};

// The command line is wrong (bad flag, unknown op, conflicting options).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(message) {}
};

// A data file (CSV table, journal) is malformed.
class DataError : public Error {
 public:
  DataError(const SourceLocation& where, const std::string& what, const std::string& expected = "");
  explicit DataError(const std::string& message) : Error(message) {}
};

// The run cannot start: no device, a runtime that differs from the journal's, ...
class StartupError : public Error {
 public:
  explicit StartupError(const std::string& message) : Error(message) {}
};

// An operating-system call failed (errno captured in the message).
class SystemError : public Error {
 public:
  SystemError(const std::string& what, int err);
};

// Builds "where: what; expected X".
std::string FormatProblem(const SourceLocation& where, const std::string& what, const std::string& expected);

}  // namespace servecast
