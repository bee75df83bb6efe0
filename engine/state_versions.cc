#include "engine/state_versions.h"

#include <algorithm>

namespace idem {

StateReads::~StateReads() {
  if (versions_ != nullptr) versions_->ClosePass(start_);
}

void StateVersions::OpenPass(StateReads& reads) {
  if (reads.versions_ != nullptr) return;
  reads.versions_ = this;
  reads.start_ = counter_;
  open_passes_.insert(counter_);
}

void StateVersions::ClosePass(uint64_t start) {
  PlainMutexLock lock(&mu_);
  if (auto it = open_passes_.find(start); it != open_passes_.end()) {
    open_passes_.erase(it);
  }
  PruneLocked();
}

void StateVersions::ClosePassLocked(StateReads& reads) {
  if (reads.versions_ == nullptr) return;
  if (auto it = open_passes_.find(reads.start_); it != open_passes_.end()) {
    open_passes_.erase(it);
  }
  reads.versions_ = nullptr;
}

LayeredRead StateVersions::ResolveLocked(std::string_view key,
                                         uint64_t version) const {
  // What the commits in flight at or below `version` say of the key,
  // newest first; a commit's own point writes are newer than its range
  // deletions.
  struct Said {
    uint64_t version;
    bool point;
    StateLayer::Lookup lookup;
  };
  absl::InlinedVector<Said, 2> said;
  if (auto it = in_flight_.find(key); it != in_flight_.end()) {
    for (const InFlightWrite& write : it->second) {
      if (write.version <= version) {
        said.push_back(Said{write.version, true, {write.write, false}});
      }
    }
  }
  for (const auto& [range_version, range] : in_flight_ranges_) {
    if (range_version <= version && range.Contains(key)) {
      said.push_back(Said{range_version, false, {nullptr, true}});
    }
  }
  std::sort(said.begin(), said.end(), [](const Said& a, const Said& b) {
    if (a.version != b.version) return a.version > b.version;
    return a.point && !b.point;
  });
  LayeredRead read;
  for (const Said& s : said) {
    if (read.Take(s.lookup)) break;
  }
  return read;
}

bool StateVersions::MergesWithoutBaseLocked(std::string_view begin,
                                            std::string_view end,
                                            uint64_t version) const {
  for (auto it = in_flight_.lower_bound(begin);
       it != in_flight_.end() && (end.empty() || it->first < end); ++it) {
    LayeredRead read = ResolveLocked(it->first, version);
    if (!read.decided() && read.has_merges()) return true;
  }
  return false;
}

void StateVersions::AwaitBasesLocked(std::string_view begin,
                                     std::string_view end, uint64_t version) {
  // Runs with mu_ held (PlainMutex::Await).
  mu_.Await(landed_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !MergesWithoutBaseLocked(begin, end, version);
  });
}

std::optional<uint64_t> StateVersions::QuietVersion(
    const StateReads& reads) const {
  // The pass's own thread set versions_ when it opened the pass.
  if (reads.versions_ != this) return std::nullopt;
  const uint64_t quiet = quiet_version_.load(std::memory_order_acquire);
  if (quiet == kNotQuiet) return std::nullopt;
  return quiet;
}

void StateVersions::PublishQuietLocked() {
  const bool quiet = in_flight_.empty() && in_flight_ranges_.empty();
  quiet_version_.store(quiet || quiet_ignores_in_flight_ ? counter_ : kNotQuiet,
                       std::memory_order_release);
}

StateVersions::Read StateVersions::ReadKey(std::string_view key,
                                           StateReads& reads) {
  if (std::optional<uint64_t> quiet = QuietVersion(reads)) {
    // Nothing in flight: the store has the latest, nothing to wait for.
    return Read{*quiet, std::nullopt};
  }
  PlainMutexLock lock(&mu_);
  OpenPass(reads);
  Read read;
  read.version = counter_;
  LayeredRead in_flight = ResolveLocked(key, read.version);
  if (in_flight.decided()) {
    read.in_flight = in_flight.value();
    reads.read_in_flight_ = true;
  } else if (in_flight.has_merges()) {
    // Only merges in flight: once they landed, the store has the value
    // (commits queued since are later than the read, so its validation
    // catches them).
    const std::string end = std::string(key) + '\0';
    AwaitBasesLocked(key, end, read.version);
  }
  return read;
}

StateVersions::RangeRead StateVersions::ReadRange(std::string_view begin,
                                                  std::string_view end,
                                                  StateReads& reads) {
  if (std::optional<uint64_t> quiet = QuietVersion(reads)) {
    RangeRead read;
    read.version = *quiet;
    return read;
  }
  PlainMutexLock lock(&mu_);
  OpenPass(reads);
  RangeRead read;
  read.version = counter_;
  AwaitBasesLocked(begin, end, read.version);
  // Ranges first: a layer's point writes are newer than its deletions.
  for (const auto& [range_version, range] : in_flight_ranges_) {
    if (range_version <= read.version && (end.empty() || range.begin < end) &&
        begin < range.end) {
      read.in_flight.DeleteRange(range.begin, range.end);
    }
  }
  for (auto it = in_flight_.lower_bound(begin);
       it != in_flight_.end() && (end.empty() || it->first < end); ++it) {
    LayeredRead value = ResolveLocked(it->first, read.version);
    if (!value.decided()) continue;  // nothing in flight at the read
    if (value.value().has_value()) {
      read.in_flight.Put(it->first, *value.value());
    } else {
      read.in_flight.Delete(it->first);
    }
  }
  if (!read.in_flight.empty()) reads.read_in_flight_ = true;
  return read;
}

bool StateVersions::Changed(const StateReads& reads, bool ranges) const {
  if (reads.empty()) return false;
  PlainMutexLock lock(&mu_);
  if (all_pending_ > 0) return true;
  // Whether a range deletion registered after `version` covers `key`, or
  // overlaps [begin, end) (`end` empty: no upper bound). Newest last.
  auto deleted_over =
      [&](uint64_t version, std::string_view key)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            for (auto it = deleted_ranges_.rbegin();
                 it != deleted_ranges_.rend() && it->first > version; ++it) {
              if (it->second.Contains(key)) return true;
            }
            return false;
          };
  auto deleted_across =
      [&](uint64_t version, std::string_view begin, std::string_view end)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            for (auto it = deleted_ranges_.rbegin();
                 it != deleted_ranges_.rend() && it->first > version; ++it) {
              if ((end.empty() || it->second.begin < end) &&
                  begin < it->second.end) {
                return true;
              }
            }
            return false;
          };
  for (const auto& [key, version] : reads.reads()) {
    if (version < floor_) return true;
    auto it = versions_.find(key);
    if (it != versions_.end() && it->second > version) return true;
    if (deleted_over(version, key)) return true;
  }
  for (const StateReads::Range& range : reads.ranges()) {
    if (!ranges) break;
    if (range.version < floor_) return true;
    for (auto it = versions_.lower_bound(range.begin);
         it != versions_.end() && (range.end.empty() || it->first < range.end);
         ++it) {
      if (it->second > range.version) return true;
    }
    if (deleted_across(range.version, range.begin, range.end)) return true;
  }
  return false;
}

uint64_t StateVersions::Pend(const StateLayer& writes, StateReads* reads) {
  if (writes.empty() && (reads == nullptr || reads->versions_ == nullptr)) {
    return 0;
  }
  PlainMutexLock lock(&mu_);
  // Validated: nothing later can make its reads stale.
  if (reads != nullptr) ClosePassLocked(*reads);
  if (writes.empty()) {
    PruneLocked();
    return 0;
  }
  const uint64_t version = ++counter_;
  // Only a pass open now can hold a read noted below `version`.
  const bool remember = !open_passes_.empty();
  for (const KeyRange& range : writes.ranges()) {
    if (remember) deleted_ranges_.emplace_back(version, range);
    in_flight_ranges_.emplace_back(version, range);
  }
  for (const auto& [key, write] : writes.points()) {
    if (remember) {
      versions_.insert_or_assign(key, version);
      key_order_.emplace_back(version, key);
    }
    in_flight_[key].push_back(InFlightWrite{version, &write});
  }
  PruneLocked();
  return version;
}

void StateVersions::Publish(const StateLayer& writes, uint64_t version) {
  if (writes.empty()) return;
  PlainMutexLock lock(&mu_);
  // Writes land in queue order: every commit at or below `version` has
  // landed (or failed) too.
  for (const auto& [key, write] : writes.points()) {
    auto it = in_flight_.find(key);
    if (it == in_flight_.end()) continue;
    Chain& chain = it->second;
    auto landed = std::find_if(
        chain.begin(), chain.end(),
        [&](const InFlightWrite& w) { return w.version > version; });
    chain.erase(chain.begin(), landed);
    if (chain.empty()) in_flight_.erase(it);
  }
  in_flight_ranges_.erase(
      std::remove_if(in_flight_ranges_.begin(), in_flight_ranges_.end(),
                     [&](const auto& r) { return r.first <= version; }),
      in_flight_ranges_.end());
  PruneLocked();
  landed_.notify_all();  // reads waiting for merges' bases
}

void StateVersions::PruneLocked() {
  const uint64_t horizon =
      open_passes_.empty() ? counter_ : *open_passes_.begin();
  while (!key_order_.empty() && key_order_.front().first <= horizon) {
    auto it = versions_.find(key_order_.front().second);
    if (it != versions_.end() && it->second == key_order_.front().first) {
      versions_.erase(it);
    }
    key_order_.pop_front();
  }
  while (!deleted_ranges_.empty() && deleted_ranges_.front().first <= horizon) {
    deleted_ranges_.pop_front();
  }
  if (versions_.size() > kMaxKeys) {
    // A pass open for very long: forget everything; reads noted before now
    // count as stale.
    versions_.clear();
    key_order_.clear();
    deleted_ranges_.clear();
    floor_ = ++counter_;
  }
  PublishQuietLocked();
}

void StateVersions::PendAll() {
  PlainMutexLock lock(&mu_);
  ++all_pending_;
}

void StateVersions::PublishAll() {
  PlainMutexLock lock(&mu_);
  floor_ = ++counter_;
  --all_pending_;
  PublishQuietLocked();
  landed_.notify_all();  // AwaitAllPublished
}

void StateVersions::AwaitAllPublished() {
  PlainMutexLock lock(&mu_);
  // Runs with mu_ held (PlainMutex::Await).
  mu_.Await(landed_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return all_pending_ == 0;
  });
}

size_t StateVersions::remembered() const {
  PlainMutexLock lock(&mu_);
  return versions_.size();
}

}  // namespace idem
