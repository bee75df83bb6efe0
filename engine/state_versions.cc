#include "engine/state_versions.h"

#include "engine/absl_view.h"

namespace idem {

StateVersions::Read StateVersions::ReadKey(std::string_view key) const {
  absl::MutexLock lock(&mu_);
  Read read;
  read.version = counter_;
  if (auto it = keys_.find(AbslView(key));
      it != keys_.end() && it->second.in_flight > 0) {
    read.in_flight = it->second.value;
  }
  return read;
}

bool StateVersions::Changed(const StateReads& reads) const {
  if (reads.empty()) return false;
  absl::MutexLock lock(&mu_);
  if (all_pending_ > 0) return true;
  for (const auto& [key, version] : reads.reads()) {
    if (version < floor_) return true;
    auto it = keys_.find(key);
    if (it != keys_.end() && it->second.version > version) return true;
  }
  return false;
}

void StateVersions::Pend(const BatchOverlay& writes) {
  if (writes.empty()) return;
  absl::MutexLock lock(&mu_);
  const uint64_t version = ++counter_;
  for (const auto& [key, value] : writes) {
    Entry& entry = keys_[key];
    entry.version = version;
    ++entry.in_flight;
    entry.value = value;
  }
}

void StateVersions::Publish(const BatchOverlay& writes) {
  if (writes.empty()) return;
  absl::MutexLock lock(&mu_);
  for (const auto& [key, value] : writes) {
    Entry& entry = keys_[key];
    if (--entry.in_flight == 0) entry.value.reset();
  }
  if (keys_.size() > kMaxKeys) {
    // Forget the keys not in flight; reads noted before now count as stale.
    for (auto it = keys_.begin(); it != keys_.end();) {
      if (it->second.in_flight == 0) {
        keys_.erase(it++);
      } else {
        ++it;
      }
    }
    floor_ = ++counter_;
  }
}

void StateVersions::PendAll() {
  absl::MutexLock lock(&mu_);
  ++all_pending_;
}

void StateVersions::PublishAll() {
  absl::MutexLock lock(&mu_);
  floor_ = ++counter_;
  --all_pending_;
}

}  // namespace idem
