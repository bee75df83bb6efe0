#include "engine/store_claim.h"

#include <sys/stat.h>

#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace idem {
namespace {

// The claimed directories of this process, each with the name it was
// claimed under (for the error a second claim gets).
class ClaimRegistry {
 public:
  static ClaimRegistry& Get() {
    static ClaimRegistry* const registry = new ClaimRegistry();  // never freed
    return *registry;
  }

  // The name the directory is claimed under, if it is; otherwise claims it
  // under `name` and returns nothing.
  std::optional<std::string> Add(dev_t device, ino_t inode,
                                 const std::string& name)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto [it, added] = claimed_.try_emplace({device, inode}, name);
    if (added) return std::nullopt;
    return it->second;
  }

  void Remove(dev_t device, ino_t inode) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    claimed_.erase({device, inode});
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::pair<dev_t, ino_t>, std::string> claimed_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<StoreClaim> StoreClaim::Claim(const std::string& dir,
                                             const std::string& shown) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return StoreClaim();
  if (std::optional<std::string> holder =
          ClaimRegistry::Get().Add(st.st_dev, st.st_ino, dir);
      holder.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        shown, " is open in another writable engine of this process",
        *holder == dir ? ""
                       : absl::StrCat(", as ", *holder,
                                      " (the same directory under another "
                                      "name, such as a bind mount)")));
  }
  return StoreClaim(st.st_dev, st.st_ino);
}

StoreClaim::StoreClaim(StoreClaim&& other) noexcept
    : device_(other.device_), inode_(other.inode_), held_(other.held_) {
  other.held_ = false;
}

StoreClaim& StoreClaim::operator=(StoreClaim&& other) noexcept {
  if (this != &other) {
    Release();
    device_ = other.device_;
    inode_ = other.inode_;
    held_ = other.held_;
    other.held_ = false;
  }
  return *this;
}

StoreClaim::~StoreClaim() { Release(); }

void StoreClaim::Release() {
  if (!held_) return;
  ClaimRegistry::Get().Remove(device_, inode_);
  held_ = false;
}

}  // namespace idem
