// util/directory.h: DirectoryBytes counts the regular files under a tree,
// RemoveTree removes one; both quietly accept a missing path.

#include "util/directory.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "util/temp_dir.h"

namespace idem::util {
namespace {

TEST(DirectoryTest, CountsTheBytesOfEveryFileUnderTheTree) {
  TempDir dir;
  std::filesystem::create_directories(dir.Sub("a/b"));
  std::ofstream(dir.Sub("top")) << std::string(10, 'x');
  std::ofstream(dir.Sub("a/b/deep")) << std::string(1000, 'y');
  EXPECT_EQ(DirectoryBytes(dir.path()), 1010u);
  EXPECT_EQ(DirectoryBytes(dir.Sub("a")), 1000u);
  EXPECT_EQ(DirectoryBytes(dir.Sub("missing")), 0u);
}

TEST(DirectoryTest, RemovesATreeAndIgnoresAMissingOne) {
  TempDir dir;
  std::filesystem::create_directories(dir.Sub("a/b"));
  std::ofstream(dir.Sub("a/b/file")) << "z";
  RemoveTree(dir.Sub("a"));
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("a")));
  RemoveTree(dir.Sub("a"));  // no error, nothing to do
}

}  // namespace
}  // namespace idem::util
