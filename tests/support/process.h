#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace servecast::testing {

struct ProcessResult {
  int exit_code = -1;  // -signal when killed
  std::string out, err;
};

// Runs a command to completion (killed after timeout_s), capturing its output.
ProcessResult RunProcess(const std::vector<std::string>& argv, double timeout_s = 600,
                         const std::string& cwd = "");

// Starts a command in the background with output sent to files; returns its pid.
pid_t StartProcess(const std::vector<std::string>& argv, const std::string& out_path, const std::string& err_path);
// Waits for a started process; returns its exit code (-signal when killed).
int WaitProcess(pid_t pid);

std::string ReadText(const std::string& path);
void WriteText(const std::string& path, const std::string& text);
// A fresh empty directory under the system temp dir.
std::string MakeTempDir(const std::string& prefix);

}  // namespace servecast::testing
