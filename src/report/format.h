#pragma once

// Number formatting shared by the report writers (terminal, HTML).

#include <cstdio>
#include <string>

namespace servecast::report {

// printf-style formatting of one number, e.g. Fmt("%.1f", 3.14159) -> "3.1".
inline std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace servecast::report
