// TempDir is a new directory, by default under $TMPDIR (or /tmp), removed
// with everything in it when the TempDir is destroyed (best effort) unless
// Keep() was called. The tools, the benchmarks and the tests keep their
// stores in one. A movable value type; not thread-safe.

#ifndef IDEM_UTIL_TEMP_DIR_H_
#define IDEM_UTIL_TEMP_DIR_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace idem::util {

// $TMPDIR, or /tmp when it is unset or empty.
std::string DefaultTempParent();

class TempDir {
 public:
  // Creates a directory named `prefix` followed by six random characters
  // (mkdtemp(3): mode 0700) in `parent`, or in DefaultTempParent() if
  // `parent` is empty. kUnavailable naming the path and the reason if it
  // cannot be created.
  static absl::StatusOr<TempDir> Create(std::string_view prefix,
                                        std::string_view parent = {});

  // For tests, which cannot go on without one: as Create("idem_test_"),
  // and aborts the process with a message on stderr if that fails.
  TempDir();

  TempDir(TempDir&& other) noexcept;
  TempDir& operator=(TempDir&& other) noexcept;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  // Empty only for a TempDir that was moved from.
  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string Sub(std::string_view name) const;

  // Leaves the directory and its contents in place on destruction.
  void Keep() { keep_ = true; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  void RemoveUnlessKept();

  std::string path_;
  bool keep_ = false;
};

}  // namespace idem::util

#endif  // IDEM_UTIL_TEMP_DIR_H_
