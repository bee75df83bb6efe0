// ScopedTempDir is a fresh directory under $TMPDIR (or /tmp), removed with
// its contents on destruction (best effort). The demos keep their stores in
// one. Not thread-safe.

#ifndef IDEM_TOOLS_SCOPED_TEMP_DIR_H_
#define IDEM_TOOLS_SCOPED_TEMP_DIR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace idem::tools {

class ScopedTempDir {
 public:
  // `prefix` starts the directory's name, e.g. "idem_demo_".
  // kUnavailable if the directory cannot be created.
  static absl::StatusOr<std::unique_ptr<ScopedTempDir>> Create(
      const std::string& prefix);
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  ~ScopedTempDir();

  const std::string& path() const { return path_; }

 private:
  explicit ScopedTempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace idem::tools

#endif  // IDEM_TOOLS_SCOPED_TEMP_DIR_H_
