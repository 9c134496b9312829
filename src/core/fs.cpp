#include "core/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace servecast {

namespace {

// A file open for reading, closed on scope exit, with its status.
struct OpenFile {
  int fd = -1;
  struct stat st {};
  explicit OpenFile(const std::string& path) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw DataError(SourceLocation{path, 0, ""}, "cannot open file", "a readable file");
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      throw SystemError("cannot stat " + path, err);
    }
  }
  ~OpenFile() { ::close(fd); }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
};

}  // namespace

std::string ReadFile(const std::string& path) {
  // One read of the whole file into a buffer of its size (the tables are read
  // often and some are megabytes; a stream copy costs several times more).
  const OpenFile f(path);
  if (S_ISDIR(f.st.st_mode)) throw DataError(SourceLocation{path, 0, ""}, "is a folder", "a readable file");
  std::string out;
  if (S_ISREG(f.st.st_mode)) out.resize(static_cast<std::size_t>(f.st.st_size));
  std::size_t have = 0;
  while (true) {
    if (have == out.size()) {  // full: at the end, or the file grew / is not a regular file
      char probe;
      const ssize_t p = ::read(f.fd, &probe, 1);
      if (p < 0 && errno == EINTR) continue;
      if (p < 0) throw SystemError("cannot read " + path, errno);
      if (p == 0) break;
      out.resize(std::max<std::size_t>(4096, 2 * out.size()));
      out[have++] = probe;
      continue;
    }
    const ssize_t n = ::read(f.fd, out.data() + have, out.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SystemError("cannot read " + path, errno);
    if (n == 0) break;
    have += static_cast<std::size_t>(n);
  }
  out.resize(have);
  return out;
}

std::string ReadFileTail(const std::string& path, std::size_t max_bytes, std::size_t* file_size) {
  const OpenFile f(path);
  if (!S_ISREG(f.st.st_mode)) throw DataError(SourceLocation{path, 0, ""}, "is not a regular file", "a table file");
  const auto size = static_cast<std::size_t>(f.st.st_size);
  if (file_size) *file_size = size;
  const std::size_t n = std::min(size, max_bytes);
  std::string out(n, '\0');
  std::size_t have = 0;
  while (have < n) {
    const ssize_t r = ::pread(f.fd, out.data() + have, n - have, static_cast<off_t>(size - n + have));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw SystemError("cannot read " + path, errno);
    if (r == 0) break;  // shrank meanwhile
    have += static_cast<std::size_t>(r);
  }
  out.resize(have);
  return out;
}

void MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw SystemError("cannot create directory " + path, ec.value());
}

bool PathExists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

void SyncDirectory(const std::string& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) throw SystemError("cannot open directory " + dir, errno);
  ::fsync(fd);
  ::close(fd);
}

void WriteFileAtomic(const std::string& path, std::string_view content) {
  std::filesystem::path target(path);
  std::string dir = target.parent_path().string();
  if (!dir.empty()) MakeDirs(dir);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw SystemError("cannot create " + tmp, errno);
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw SystemError("cannot write " + tmp, err);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw SystemError("cannot fsync " + tmp, err);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw SystemError("cannot rename " + tmp + " to " + path, err);
  }
  SyncDirectory(dir);
}

}  // namespace servecast
