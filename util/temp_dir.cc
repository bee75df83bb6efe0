#include "util/temp_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "util/directory.h"

namespace idem::util {

std::string DefaultTempParent() {
  const char* base = std::getenv("TMPDIR");
  return base != nullptr && *base != '\0' ? base : "/tmp";
}

absl::StatusOr<TempDir> TempDir::Create(std::string_view prefix,
                                        std::string_view parent) {
  std::string pattern =
      (parent.empty() ? DefaultTempParent() : std::string(parent)) + "/" +
      std::string(prefix) + "XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot create a directory from ", pattern, ": ",
                     std::strerror(errno)));
  }
  return TempDir(std::move(pattern));
}

TempDir::TempDir() {
  absl::StatusOr<TempDir> dir = Create("idem_test_");
  if (!dir.ok()) {
    std::fprintf(stderr, "TempDir: %s\n",
                 std::string(dir.status().message()).c_str());
    std::abort();
  }
  *this = *std::move(dir);
}

TempDir::TempDir(TempDir&& other) noexcept
    : path_(std::exchange(other.path_, std::string())), keep_(other.keep_) {}

TempDir& TempDir::operator=(TempDir&& other) noexcept {
  if (this != &other) {
    RemoveUnlessKept();
    path_ = std::exchange(other.path_, std::string());
    keep_ = other.keep_;
  }
  return *this;
}

TempDir::~TempDir() { RemoveUnlessKept(); }

std::string TempDir::Sub(std::string_view name) const {
  return path_ + "/" + std::string(name);
}

void TempDir::RemoveUnlessKept() {
  if (!path_.empty() && !keep_) RemoveTree(path_);
}

}  // namespace idem::util
