#include "core/progress.h"

#include <unistd.h>

#include <cmath>

#include "core/log.h"

namespace servecast {

std::string FormatDuration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  long long t = static_cast<long long>(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof(buf), "%lldh%02lldm", t / 3600, (t % 3600) / 60);
  else if (t >= 60) std::snprintf(buf, sizeof(buf), "%lldm%02llds", t / 60, t % 60);
  else std::snprintf(buf, sizeof(buf), "%llds", t);
  return buf;
}

ProgressBar::ProgressBar(std::string label, std::size_t total, std::FILE* out, double interval_s)
    : label_(std::move(label)),
      total_(total),
      out_(out),
      interval_s_(interval_s),
      tty_(::isatty(::fileno(out)) != 0),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {
  if (tty_) log::SetQuiet(true);
}

ProgressBar::~ProgressBar() { Finish(); }

std::string ProgressBar::Render(std::size_t done, std::size_t failed, double elapsed) const {
  double frac = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
  double eta = rate > 0 ? static_cast<double>(total_ - std::min(done, total_)) / rate : NAN;
  char buf[256];
  std::string bar;
  if (tty_) {
    int width = 24, filled = static_cast<int>(frac * width);
    bar = "[" + std::string(filled, '#') + std::string(width - filled, '.') + "] ";
  }
  std::snprintf(buf, sizeof(buf), "%s %s%zu/%zu (%.0f%%) %.1f/s elapsed %s ETA %s failed %zu", label_.c_str(),
                bar.c_str(), done, total_, 100 * frac, rate, FormatDuration(elapsed).c_str(),
                done >= total_ ? "0s" : FormatDuration(eta).c_str(), failed);
  return buf;
}

void ProgressBar::Update(std::size_t done, std::size_t failed) {
  done_ = done;
  failed_ = failed;
  auto now = std::chrono::steady_clock::now();
  double since = std::chrono::duration<double>(now - last_print_).count();
  double min_gap = tty_ ? 0.1 : interval_s_;
  if (since < min_gap) return;
  last_print_ = now;
  double elapsed = std::chrono::duration<double>(now - start_).count();
  if (tty_) std::fprintf(out_, "\r\033[K%s", Render(done, failed, elapsed).c_str());
  else std::fprintf(out_, "%s\n", Render(done, failed, elapsed).c_str());
  std::fflush(out_);
}

void ProgressBar::Finish() {
  if (finished_) return;
  finished_ = true;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(out_, "%s%s\n", tty_ ? "\r\033[K" : "", Render(done_, failed_, elapsed).c_str());
  std::fflush(out_);
  if (tty_) log::SetQuiet(false);
}

}  // namespace servecast
