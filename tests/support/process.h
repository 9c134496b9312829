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
// The shipped H200 tables (systems/data/h200_sxm of source_dir) copied to
// dir/h200_sxm without the family folder `family` and the run archives: a data root
// (--data-root dir) that lacks those tables. Returns dir/h200_sxm.
std::string CopyH200TablesWithout(const std::string& source_dir, const std::string& dir, const std::string& family);

}  // namespace servecast::testing
