#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace servecast {

// Reads a whole file; throws DataError when it cannot be opened.
std::string ReadFile(const std::string& path);
// The last `max_bytes` bytes of a file (all of it when shorter); DataError when
// it cannot be opened.
// `file_size`, when given, receives the file's size.
std::string ReadFileTail(const std::string& path, std::size_t max_bytes, std::size_t* file_size = nullptr);
// Writes `content` to `path` atomically: temp file in the same directory, fsync,
// rename, fsync of the directory. Creates parent directories.
void WriteFileAtomic(const std::string& path, std::string_view content);
// Creates the directory and its parents; no error if it exists.
void MakeDirs(const std::string& path);
bool PathExists(const std::string& path);
// fsyncs a directory so that a rename inside it is durable.
void SyncDirectory(const std::string& dir);

}  // namespace servecast
