#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace servecast {

// Progress of a long job. On a terminal it redraws one line (bar, count, rate,
// ETA, failures); elsewhere (CI, a log file, nohup) it prints a plain line every
// `interval_s` seconds, so logs stay readable.
class ProgressBar {
 public:
  ProgressBar(std::string label, std::size_t total, std::FILE* out = stderr, double interval_s = 10);
  ~ProgressBar();

  // Called as work completes; cheap when nothing needs printing.
  void Update(std::size_t done, std::size_t failed);
  // Prints the final state once.
  void Finish();
  bool is_tty() const { return tty_; }

  // The line as printed (exposed for tests).
  std::string Render(std::size_t done, std::size_t failed, double elapsed_s) const;

 private:
  std::string label_;
  std::size_t total_;
  std::FILE* out_;
  double interval_s_;
  bool tty_;
  bool finished_ = false;
  std::size_t done_ = 0, failed_ = 0;
  std::chrono::steady_clock::time_point start_, last_print_;
};

// "1h02m", "3m05s", "12s".
std::string FormatDuration(double seconds);

}  // namespace servecast
