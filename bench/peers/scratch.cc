// Store paths under the scratch directory (bench/peers/scratch.h).

#include "bench/peers/scratch.h"

#include "absl/strings/str_format.h"
#include "util/directory.h"

namespace idem::peers {

std::string FreshPath(const std::string& scratch, const std::string& name) {
  static int counter = 0;
  std::string path = absl::StrFormat("%s/%s-%d", scratch, name, ++counter);
  util::RemoveTree(path);
  return path;
}

}  // namespace idem::peers
