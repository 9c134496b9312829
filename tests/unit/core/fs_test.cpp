#include "core/fs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "core_test_util.h"

namespace servecast {
namespace {

using testing::HasText;
using testing::TempDir;
using testing::ThrownMessage;

TEST(FsTest, WriteFileAtomicWritesExactBytes) {
  TempDir dir;
  std::string content("line one\nwith a NUL \0 byte\n", 27);
  WriteFileAtomic(dir.File("a.txt"), content);
  EXPECT_EQ(ReadFile(dir.File("a.txt")), content);
}

TEST(FsTest, WriteFileAtomicCreatesParentDirectories) {
  TempDir dir;
  std::string path = dir.path() + "/x/y/z/table.csv";
  WriteFileAtomic(path, "a,b\n1,2\n");
  EXPECT_TRUE(PathExists(path));
  EXPECT_EQ(ReadFile(path), "a,b\n1,2\n");
}

TEST(FsTest, WriteFileAtomicReplacesAndLeavesNoTempFile) {
  TempDir dir;
  WriteFileAtomic(dir.File("f"), "a much longer first version of the file");
  WriteFileAtomic(dir.File("f"), "short");
  EXPECT_EQ(ReadFile(dir.File("f")), "short");
  EXPECT_EQ(dir.List(), std::vector<std::string>{"f"});
}

TEST(FsTest, WriteFileAtomicOfEmptyContent) {
  TempDir dir;
  WriteFileAtomic(dir.File("empty"), "");
  EXPECT_TRUE(PathExists(dir.File("empty")));
  EXPECT_EQ(ReadFile(dir.File("empty")), "");
}

TEST(FsTest, WriteFileAtomicIntoAFileAsDirectoryFails) {
  TempDir dir;
  WriteFileAtomic(dir.File("plain"), "x");
  EXPECT_THROW(WriteFileAtomic(dir.File("plain") + "/child", "y"), Error);
  EXPECT_EQ(ReadFile(dir.File("plain")), "x");
}

TEST(FsTest, ReadFileOfMissingPathIsDataErrorNamingIt) {
  TempDir dir;
  std::string path = dir.File("missing.csv");
  std::string msg = ThrownMessage<DataError>([&] { ReadFile(path); });
  EXPECT_TRUE(HasText(msg, path));
  EXPECT_TRUE(HasText(msg, "cannot open file"));
}

TEST(FsTest, MakeDirsIsIdempotent) {
  TempDir dir;
  std::string path = dir.path() + "/a/b/c";
  MakeDirs(path);
  MakeDirs(path);
  EXPECT_TRUE(std::filesystem::is_directory(path));
}

TEST(FsTest, PathExists) {
  TempDir dir;
  EXPECT_TRUE(PathExists(dir.path()));
  EXPECT_FALSE(PathExists(dir.File("nope")));
  SyncDirectory(dir.path());  // no error on an existing directory
  EXPECT_THROW(SyncDirectory(dir.File("nope")), SystemError);
}

}  // namespace
}  // namespace servecast
