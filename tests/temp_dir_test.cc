// util::TempDir: a new directory under $TMPDIR (or /tmp, or a given parent)
// that goes with its contents when the TempDir does, unless kept; moving one
// moves the ownership.

#include "util/temp_dir.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace idem::util {
namespace {

namespace fs = std::filesystem;

bool IsDirectory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

TEST(TempDirTest, CreatesADirectoryInTheParentNamedAfterThePrefix) {
  TempDir parent;
  absl::StatusOr<TempDir> dir = TempDir::Create("store_", parent.path());
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_TRUE(IsDirectory(dir->path()));
  EXPECT_EQ(fs::path(dir->path()).parent_path(), fs::path(parent.path()));
  EXPECT_EQ(fs::path(dir->path()).filename().string().rfind("store_", 0), 0u);
  EXPECT_EQ(dir->Sub("db"), dir->path() + "/db");
}

TEST(TempDirTest, RemovesItsContentsOnDestruction) {
  std::string path;
  {
    TempDir dir;
    path = dir.path();
    fs::create_directories(dir.Sub("a/b"));
    std::ofstream(dir.Sub("a/b/file")) << "bytes";
  }
  EXPECT_FALSE(IsDirectory(path));
}

TEST(TempDirTest, KeptDirectoryStays) {
  TempDir parent;
  std::string path;
  {
    absl::StatusOr<TempDir> dir = TempDir::Create("kept_", parent.path());
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir->Keep();
    path = dir->path();
  }
  EXPECT_TRUE(IsDirectory(path));
}

TEST(TempDirTest, MovingHandsOverTheDirectory) {
  TempDir a;
  const std::string path = a.path();
  TempDir b = std::move(a);
  EXPECT_EQ(b.path(), path);
  EXPECT_TRUE(a.path().empty());  // NOLINT(bugprone-use-after-move)
  TempDir c;
  const std::string replaced = c.path();
  c = std::move(b);
  EXPECT_EQ(c.path(), path);
  EXPECT_FALSE(IsDirectory(replaced));  // the directory c held went
  EXPECT_TRUE(IsDirectory(path));
}

TEST(TempDirTest, MissingParentIsUnavailable) {
  TempDir parent;
  absl::StatusOr<TempDir> dir = TempDir::Create("x_", parent.Sub("missing"));
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kUnavailable);
}

TEST(TempDirTest, DefaultParentIsTmpdirOrTmp) {
  const char* saved = std::getenv("TMPDIR");
  const std::string restore = saved != nullptr ? saved : "";
  setenv("TMPDIR", "/some/where", 1);
  EXPECT_EQ(DefaultTempParent(), "/some/where");
  setenv("TMPDIR", "", 1);
  EXPECT_EQ(DefaultTempParent(), "/tmp");
  unsetenv("TMPDIR");
  EXPECT_EQ(DefaultTempParent(), "/tmp");
  if (saved != nullptr) setenv("TMPDIR", restore.c_str(), 1);
}

}  // namespace
}  // namespace idem::util
