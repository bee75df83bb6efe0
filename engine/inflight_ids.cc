#include "engine/inflight_ids.h"

#include <utility>

namespace idem {

InflightIds::Claim::Claim(Claim&& other) noexcept
    : table_(std::exchange(other.table_, nullptr)),
      keys_(std::move(other.keys_)) {}

InflightIds::Claim& InflightIds::Claim::operator=(Claim&& other) noexcept {
  if (this != &other) {
    Release();
    table_ = std::exchange(other.table_, nullptr);
    keys_ = std::move(other.keys_);
  }
  return *this;
}

void InflightIds::Claim::Release() {
  if (table_ == nullptr) return;
  table_->Release(keys_);
  table_ = nullptr;
  keys_.clear();
}

InflightIds::Claim InflightIds::Acquire(absl::Span<const RecordKey> keys,
                                        bool enabled) {
  Claim claim;
  if (!enabled || keys.empty()) return claim;
  claim.keys_.reserve(keys.size());
  if (keys.size() == 1) {
    claim.keys_.push_back(keys[0]);
  } else {
    absl::flat_hash_set<RecordKey> distinct;
    distinct.reserve(keys.size());
    for (const RecordKey& key : keys) {
      if (distinct.insert(key).second) claim.keys_.push_back(key);
    }
  }
  auto none_held = [this, &claim]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const RecordKey& key : claim.keys_) {
      if (held_.contains(key)) return false;
    }
    return true;
  };
  PlainMutexLock lock(&mu_);
  mu_.Await(released_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return none_held();  // runs with mu_ held (PlainMutex::Await)
  });
  held_.insert(claim.keys_.begin(), claim.keys_.end());
  claim.table_ = this;
  return claim;
}

void InflightIds::Release(absl::Span<const RecordKey> keys) {
  PlainMutexLock lock(&mu_);
  for (const RecordKey& key : keys) held_.erase(key);
  released_.notify_all();  // the waiting claims check their keys again
}

size_t InflightIds::held_for_testing() const {
  PlainMutexLock lock(&mu_);
  return held_.size();
}

}  // namespace idem
