#include "util/directory.h"

#include <filesystem>
#include <system_error>

namespace idem::util {

uint64_t DirectoryBytes(const std::string& path) {
  uint64_t total = 0;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(path, ec), end;
       !ec && it != end; it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const uintmax_t size = it->file_size(size_ec);
      if (!size_ec) total += size;
    }
  }
  return total;
}

void RemoveTree(const std::string& path) {
  std::error_code ignored;  // best effort
  std::filesystem::remove_all(path, ignored);
}

}  // namespace idem::util
