#include "process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace servecast::testing {

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteText(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string MakeTempDir(const std::string& prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

std::string CopyH200TablesWithout(const std::string& source_dir, const std::string& dir, const std::string& family) {
  namespace fs = std::filesystem;
  const fs::path src = fs::path(source_dir) / "systems/data/h200_sxm", dst = fs::path(dir) / "h200_sxm";
  fs::create_directories(dst);
  for (const fs::directory_entry& e : fs::directory_iterator(src)) {
    const std::string name = e.path().filename().string();
    if (name == family || name == "runs") continue;
    fs::copy(e.path(), dst / name, fs::copy_options::recursive);
  }
  return dst.string();
}

pid_t StartProcess(const std::vector<std::string>& argv, const std::string& out_path, const std::string& err_path) {
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, STDIN_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::_Exit(127);
  }
  return pid;
}

int WaitProcess(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1;
}

ProcessResult RunProcess(const std::vector<std::string>& argv, double timeout_s, const std::string& cwd) {
  std::string dir = MakeTempDir("sc_proc_");
  std::string out = dir + "/out", err = dir + "/err";
  std::string old_cwd = std::filesystem::current_path().string();
  if (!cwd.empty()) std::filesystem::current_path(cwd);
  pid_t pid = StartProcess(argv, out, err);
  if (!cwd.empty()) std::filesystem::current_path(old_cwd);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  for (;;) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ProcessResult res;
  res.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : (WIFSIGNALED(status) ? -WTERMSIG(status) : -1);
  res.out = ReadText(out);
  res.err = ReadText(err);
  std::filesystem::remove_all(dir);
  return res;
}

}  // namespace servecast::testing
