#pragma once

#include <string>

namespace servecast::log {

enum class Level { kDebug, kInfo, kWarn, kError };

// Messages at or above the level go to stderr; every message also goes to the
// log file when one is open (collector.log in the run dir).
void SetLevel(Level level);
void OpenFile(const std::string& path);  // appends
void CloseFile();
// Suspends stderr output while a progress bar owns the terminal line (messages
// still reach the file); Resume prints them again.
void SetQuiet(bool quiet);

void Write(Level level, const std::string& message);
inline void Debug(const std::string& m) { Write(Level::kDebug, m); }
inline void Info(const std::string& m) { Write(Level::kInfo, m); }
inline void Warn(const std::string& m) { Write(Level::kWarn, m); }
inline void Error(const std::string& m) { Write(Level::kError, m); }

}  // namespace servecast::log
