// The scratch directory and filesystem helpers (bench/peers/scratch.h).

#include "bench/peers/scratch.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_format.h"

namespace idem::peers {

ScratchDir::ScratchDir(const std::string& path) {
  if (!path.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    path_ = path;
    return;
  }
  const char* base = std::getenv("TMPDIR");
  std::string templ =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") +
      "/idem_peers_XXXXXX";
  if (mkdtemp(templ.data()) != nullptr) {
    path_ = templ;
    owned_ = true;
  }
}

ScratchDir::~ScratchDir() {
  if (owned_) RemoveTree(path_);
}

std::string FreshPath(const std::string& scratch, const std::string& name) {
  static int counter = 0;
  std::string path = absl::StrFormat("%s/%s-%d", scratch, name, ++counter);
  RemoveTree(path);
  return path;
}

uint64_t DirectoryBytes(const std::string& path) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(path, ec);
       !ec && it != std::filesystem::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const uintmax_t size = it->file_size(size_ec);
      if (!size_ec) total += size;
    }
  }
  return total;
}

void RemoveTree(const std::string& path) {
  std::error_code ignored;  // cleanup is best effort
  std::filesystem::remove_all(path, ignored);
}

}  // namespace idem::peers
