#include "collect/worker_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "collect/journal.h"
#include "core/error.h"

namespace servecast::collect {

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void Spawn(Slot& s, const SchedulerOptions& opt, const std::string& backend) {
  int in_pipe[2], out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0)
    throw SystemError("cannot create worker pipes", errno);
  std::vector<std::string> args = {opt.worker_exe, "__worker", "--backend", backend, "--device",
                                   std::to_string(s.device)};
  args.insert(args.end(), opt.worker_args.begin(), opt.worker_args.end());
  args.insert(args.end(), s.extra_args.begin(), s.extra_args.end());
  pid_t pid = ::fork();
  if (pid < 0) throw SystemError("cannot fork a worker", errno);
  if (pid == 0) {
    // A worker never outlives its parent (kill -9 of the collector included).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(in_pipe[0], STDIN_FILENO);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    if (!opt.worker_log.empty()) {
      int log = ::open(opt.worker_log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (log >= 0) ::dup2(log, STDERR_FILENO);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(opt.worker_exe.c_str(), argv.data());
    std::fprintf(stderr, "cannot exec %s: %s\n", opt.worker_exe.c_str(), std::strerror(errno));
    std::_Exit(127);
  }
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  s.pid = pid;
  s.to_worker = in_pipe[1];
  s.from_worker = out_pipe[0];
  s.buffer.clear();
  s.inflight.clear();
  s.ready = false;
  s.spawned = WorkerClock::now();
}

bool SendCase(Slot& s, const Case& c) {
  Json msg{{"id", c.id}, {"op", c.op}, {"params", ParamsToJson(c.params)}};
  std::string line = msg.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(s.to_worker, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;  // EPIPE: the worker died; its exit is handled by the reader side
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return std::string("worker killed by signal ") + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
  }
  if (WIFEXITED(status)) return "worker exited with code " + std::to_string(WEXITSTATUS(status));
  return "worker ended abnormally";
}

int KillAndReap(Slot& s) {
  int status = 0;
  if (s.pid > 0) {
    ::kill(s.pid, SIGKILL);
    ::waitpid(s.pid, &status, 0);
  }
  CloseFd(s.to_worker);
  CloseFd(s.from_worker);
  s.pid = -1;
  s.ready = false;
  return status;
}

bool ReadLines(Slot& s, std::vector<std::string>& lines) {
  char buf[65536];
  ssize_t n = ::read(s.from_worker, buf, sizeof(buf));
  if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return false;
  if (n > 0) s.buffer.append(buf, static_cast<std::size_t>(n));
  std::size_t nl;
  while ((nl = s.buffer.find('\n')) != std::string::npos) {
    lines.push_back(s.buffer.substr(0, nl));
    s.buffer.erase(0, nl + 1);
  }
  return true;
}

bool IsReadyLine(const std::string& line) {
  try {
    return Json::parse(line).value("ready", false);
  } catch (const std::exception&) {
    return false;
  }
}

WorkerResult ParseWorkerResult(const std::string& line, const std::string& want_id) {
  WorkerResult r;
  try {
    Json j = Json::parse(line);
    if (j.at("id").get<std::string>() != want_id)
      throw Error("result for '" + j.at("id").get<std::string>() + "' while '" + want_id + "' was running");
    auto st = ParseDisposition(j.at("status").get<std::string>());
    auto cls = ParseFailureClass(j.at("class").get<std::string>());
    if (!st || !cls) throw Error("unknown status or class in worker result");
    r.status = *st;
    r.cls = *cls;
    r.type = j.value("error_type", "");
    r.message = j.value("message", "");
    r.elapsed_s = j.value("elapsed_s", 0.0);
    for (const auto& row : j.at("rows")) r.rows.push_back(ParamsFromJson(row, "worker result"));
  } catch (const std::exception& e) {
    r = WorkerResult{};
    r.type = "ProtocolError";
    r.message = std::string("bad worker result: ") + e.what();
  }
  return r;
}

}  // namespace servecast::collect
