// Whole directory trees: the bytes they hold and their removal. Both are
// best effort (errors are skipped, not reported) and thread-safe.

#ifndef IDEM_UTIL_DIRECTORY_H_
#define IDEM_UTIL_DIRECTORY_H_

#include <cstdint>
#include <string>

namespace idem::util {

// The sizes of the regular files under `path`, recursively (0 if absent).
uint64_t DirectoryBytes(const std::string& path);

// Removes `path` and everything under it.
void RemoveTree(const std::string& path);

}  // namespace idem::util

#endif  // IDEM_UTIL_DIRECTORY_H_
