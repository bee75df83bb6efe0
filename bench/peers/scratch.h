// The scratch directory idem_peers_bench keeps its embedded stores and
// temporary files in, and the filesystem helpers the embedded peers share:
// a fresh store path per config, the bytes under a directory and best-effort
// removal.

#ifndef IDEM_BENCH_PEERS_SCRATCH_H_
#define IDEM_BENCH_PEERS_SCRATCH_H_

#include <cstdint>
#include <string>

namespace idem::peers {

// The scratch directory for one run. Not thread-safe.
class ScratchDir {
 public:
  // Uses `path` if non-empty (created if missing, kept at the end), else a
  // new directory under $TMPDIR or /tmp (removed at the end). path() is
  // empty if the new directory could not be created.
  explicit ScratchDir(const std::string& path);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool owned_ = false;
};

// A fresh subdirectory path of `scratch` for one config, named after `name`
// and numbered; anything left at that path is removed. Not thread-safe.
std::string FreshPath(const std::string& scratch, const std::string& name);

// The sizes of the regular files under `path`, recursively (0 if absent).
uint64_t DirectoryBytes(const std::string& path);

// Removes `path` and everything under it; best effort (errors are ignored).
void RemoveTree(const std::string& path);

}  // namespace idem::peers

#endif  // IDEM_BENCH_PEERS_SCRATCH_H_
