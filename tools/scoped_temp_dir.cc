#include "tools/scoped_temp_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace idem::tools {

absl::StatusOr<std::unique_ptr<ScopedTempDir>> ScopedTempDir::Create(
    const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(base != nullptr && *base != '\0' ? base : "/tmp", "/",
                   prefix, "XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot create a directory from ", pattern, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<ScopedTempDir>(new ScopedTempDir(pattern));
}

ScopedTempDir::~ScopedTempDir() {
  std::error_code ignored;  // cleanup is best effort
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace idem::tools
