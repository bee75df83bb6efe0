// TempDir is a fresh directory under $TMPDIR (or /tmp), removed with its
// contents when the TempDir is destroyed. Not thread-safe.

#ifndef IDEM_TESTS_TESTING_TEMP_DIR_H_
#define IDEM_TESTS_TESTING_TEMP_DIR_H_

#include <string>

namespace idem::testing {

class TempDir {
 public:
  TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string Sub(const std::string& name) const;

 private:
  std::string path_;
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_TESTING_TEMP_DIR_H_
