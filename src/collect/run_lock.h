#pragma once

#include <string>

namespace servecast::collect {

// One collector per run directory: an exclusive flock(2) on a lock file in the
// run dir, held from construction to destruction. The file records the holder's
// pid and host. The kernel drops a flock when the last descriptor of its open file
// closes, so the lock ends with the process however it ends (kill -9 included),
// and a lock file left behind by a dead collector blocks nobody: only a live
// holder does. The descriptor is O_CLOEXEC, so the workers the collector forks
// and execs never hold it.
class RunLock {
 public:
  // Takes the lock on run_dir/file_name (created when absent). Throws
  // StartupError "run dir <run_dir> in use by pid N" when another process holds
  // it, and StartupError naming the path and the reason when it cannot be taken.
  RunLock(const std::string& run_dir, const std::string& file_name);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace servecast::collect
