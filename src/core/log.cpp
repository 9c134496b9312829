#include "core/log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace servecast::log {
namespace {

std::mutex g_mu;
Level g_level = Level::kInfo;
std::FILE* g_file = nullptr;
bool g_quiet = false;

const char* Name(Level l) {
  switch (l) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warning";
    case Level::kError: return "error";
  }
  return "?";
}

}  // namespace

void SetLevel(Level level) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_level = level;
}

void OpenFile(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_file) std::fclose(g_file);
  g_file = std::fopen(path.c_str(), "a");
}

void CloseFile() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_file) std::fclose(g_file);
  g_file = nullptr;
}

void SetQuiet(bool quiet) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_quiet = quiet;
}

void Write(Level level, const std::string& message) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_file) {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char ts[32];
    std::strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
    std::fprintf(g_file, "%s %s: %s\n", ts, Name(level), message.c_str());
    std::fflush(g_file);
  }
  if (level >= g_level && (!g_quiet || level >= Level::kWarn)) {
    std::fprintf(stderr, "%s%s: %s\n", g_quiet ? "\r\033[K" : "", Name(level), message.c_str());
  }
}

}  // namespace servecast::log
