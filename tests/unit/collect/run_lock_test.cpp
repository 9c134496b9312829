#include "collect/run_lock.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "../core/core_test_util.h"
#include "core/error.h"
#include "core/fs.h"

namespace servecast::collect {
namespace {

using servecast::testing::HasText;
using servecast::testing::TempDir;
using servecast::testing::ThrownMessage;
using servecast::testing::WriteText;

std::string ReadAll(const std::string& path) { return ReadFile(path); }

std::string InUse(const std::string& dir) {
  return "run dir " + dir + " in use by pid " + std::to_string(::getpid());
}

TEST(RunLockTest, ASecondLockOnTheRunDirIsRefusedNamingTheHolder) {
  TempDir dir;
  {
    RunLock held(dir.path(), ".lock");
    EXPECT_EQ(held.path(), dir.File(".lock"));
    EXPECT_EQ(ReadAll(dir.File(".lock")).rfind(std::to_string(::getpid()) + " ", 0), 0u) << ReadAll(dir.File(".lock"));
    // flock conflicts between open files, also within one process.
    std::string msg = ThrownMessage<StartupError>([&] { RunLock second(dir.path(), ".lock"); });
    EXPECT_TRUE(HasText(msg, InUse(dir.path()) + ";")) << msg;
    EXPECT_FALSE(HasText(msg, "on host")) << msg;  // the same host is not named
    // Another file of the same dir (a launched rank's) is independent.
    RunLock rank1(dir.path(), ".lock.rank1");
    EXPECT_TRUE(
        HasText(ThrownMessage<StartupError>([&] { RunLock again(dir.path(), ".lock.rank1"); }), InUse(dir.path())));
  }
  // Released with the holder; the file stays.
  RunLock after(dir.path(), ".lock");
  EXPECT_TRUE(std::filesystem::exists(dir.File(".lock")));
}

TEST(RunLockTest, ALockFileOfADeadProcessBlocksNothingAndIsRewritten) {
  TempDir dir;
  WriteText(dir.File(".lock"), "999999999 some-other-host-name-that-is-long\n");
  RunLock lock(dir.path(), ".lock");
  std::string text = ReadAll(dir.File(".lock"));
  EXPECT_EQ(text.rfind(std::to_string(::getpid()) + " ", 0), 0u) << text;
  EXPECT_FALSE(HasText(text, "999999999")) << text;
  EXPECT_EQ(text.back(), '\n');
}

TEST(RunLockTest, AHolderOnAnotherHostIsNamedWithItsHost) {
  TempDir dir;
  // Hold the lock on a file whose text names another host (as a rank on another
  // node of a shared file system would write it).
  int fd = ::open(dir.File(".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  std::string text = "4242 node-17\n";
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  std::string msg = ThrownMessage<StartupError>([&] { RunLock second(dir.path(), ".lock"); });
  EXPECT_TRUE(HasText(msg, "run dir " + dir.path() + " in use by pid 4242 on host node-17")) << msg;
  ::close(fd);
}

TEST(RunLockTest, AWorkerTheCollectorExecsDoesNotKeepTheLock) {
  TempDir dir;
  std::optional<RunLock> lock;
  lock.emplace(dir.path(), ".lock");
  // A child forked while the lock is held execs a long sleep; the close-on-exec
  // pipe tells when the exec happened (its write end closes then).
  int exec_pipe[2];
  ASSERT_EQ(::pipe2(exec_pipe, O_CLOEXEC), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(exec_pipe[1]);
  char byte = 0;
  ASSERT_EQ(::read(exec_pipe[0], &byte, 1), 0);  // EOF: the child has exec'd
  ::close(exec_pipe[0]);
  // The collector ends (as kill -9 would end it, its descriptor closes); the
  // worker is still alive but holds nothing, so a new collector gets the lock.
  lock.reset();
  std::string msg;
  try {
    RunLock next(dir.path(), ".lock");
  } catch (const StartupError& e) {
    msg = e.what();
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(msg, "") << "the exec'd child kept the lock";
}

TEST(RunLockTest, ARunDirThatCannotHoldTheFileIsAStartupErrorNamingThePath) {
  TempDir dir;
  std::string missing = dir.File("no/such/dir");
  std::string msg = ThrownMessage<StartupError>([&] { RunLock lock(missing, ".lock"); });
  EXPECT_TRUE(
      HasText(msg, "cannot lock run dir " + missing + ": open " + missing + "/.lock: No such file or directory"))
      << msg;
}

}  // namespace
}  // namespace servecast::collect
