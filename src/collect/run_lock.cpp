#include "collect/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.h"

namespace servecast::collect {
namespace {

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

// The lock file's text: "<pid> <host>\n"; empty when unreadable or not yet written.
std::string ReadHolder(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[512] = {};
  ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  ::close(fd);
  if (n <= 0) return "";
  std::string text(buf, static_cast<std::size_t>(n));
  if (text.back() != '\n') return "";  // mid-write
  text.pop_back();
  return text;
}

// flock(LOCK_EX | LOCK_NB), retried on EINTR: 1 when taken, 0 when another open
// file holds it, -1 with errno set on any other failure.
int TryLock(int fd) {
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return 1;
    if (errno == EINTR) continue;
    return errno == EWOULDBLOCK ? 0 : -1;
  }
}

}  // namespace

RunLock::RunLock(const std::string& run_dir, const std::string& file_name) : path_(run_dir + "/" + file_name) {
  // O_CLOEXEC: a worker between fork and exec briefly shares the descriptor, but
  // exec closes it, so no worker keeps the lock after the collector has died.
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw StartupError("cannot lock run dir " + run_dir + ": open " + path_ + ": " + std::strerror(errno));
  // The holder writes its pid right after taking the lock: give a collector that
  // started a moment ago the time to write it before reporting it.
  std::string holder;
  for (int attempt = 0;; ++attempt) {
    int got = TryLock(fd_);
    if (got < 0) {
      int err = errno;
      ::close(fd_);
      throw StartupError("cannot lock run dir " + run_dir + ": flock " + path_ + ": " + std::strerror(err) +
                         " (the run dir needs a file system with flock support)");
    }
    if (got == 1) break;
    holder = ReadHolder(path_);
    if (!holder.empty() || attempt >= 100) {
      ::close(fd_);
      std::string pid = holder.substr(0, holder.find(' '));
      std::string host = holder.find(' ') == std::string::npos ? "" : holder.substr(holder.find(' ') + 1);
      std::string on_host = !host.empty() && host != HostName() ? " on host " + host : "";
      throw StartupError(
          "run dir " + run_dir + " in use by " +
          (pid.empty() ? std::string("another process (it holds ") + path_ + ")" : "pid " + pid + on_host) +
          "; one collector per run dir: wait for it to end, or stop it and continue with --resume");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // A file left by a dead collector still names it: replace its text with ours.
  std::string text = std::to_string(::getpid()) + " " + HostName() + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    int err = errno;
    ::close(fd_);
    throw StartupError("cannot lock run dir " + run_dir + ": write " + path_ + ": " + std::strerror(err));
  }
}

RunLock::~RunLock() {
  // The file stays: removing it would let a process that opened it just before
  // lock a file no one else sees. Closing releases the lock.
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace servecast::collect
