#include "engine/state_layer.h"

#include <utility>

namespace idem {

void StateLayer::Put(std::string_view key, std::string_view value,
                     int64_t expires_micros) {
  StateWrite& write = points_[key];
  write.kind = StateWrite::Kind::kPut;
  write.value.assign(value);
  write.merges = PendingMerges();
  write.expires_micros = expires_micros;
  if (expires_micros != kNeverExpires) has_expiry_ = true;
}

void StateLayer::Delete(std::string_view key) {
  StateWrite& write = points_[key];
  write.kind = StateWrite::Kind::kDelete;
  write.value.clear();
  write.merges = PendingMerges();
  write.expires_micros = kNeverExpires;
}

void StateLayer::Merge(std::string_view key, MergeOp op,
                       std::string_view operand,
                       std::optional<int64_t> expires_micros,
                       std::optional<int64_t> written_micros) {
  PendingMerges merges;
  merges.Add(op, operand, expires_micros, written_micros);
  MergeAll(key, merges);
}

void StateLayer::MergeAll(std::string_view key, const PendingMerges& merges) {
  has_merges_ = true;
  if (merges.expiry().has_value()) has_expiry_ = true;
  auto it = points_.find(key);
  if (it == points_.end()) {
    StateWrite write;
    if (RangeDeleted(key)) {
      // Deleted here: the merges fold over an absent value.
      write.value = merges.FoldOnto(std::nullopt);
      write.expires_micros = merges.expiry().value_or(kNeverExpires);
    } else {
      write.kind = StateWrite::Kind::kMerge;
      write.merges = merges;
    }
    points_.emplace(std::string(key), std::move(write));
    return;
  }
  StateWrite& write = it->second;
  switch (write.kind) {
    case StateWrite::Kind::kPut:
      // Within one commit a value's expiry is judged by the reads, which
      // fold over it as over any put: it stays unless the merges set one.
      write.value = merges.FoldOnto(write.value);
      write.expires_micros = merges.expiry().value_or(write.expires_micros);
      break;
    case StateWrite::Kind::kDelete:
      write.kind = StateWrite::Kind::kPut;
      write.value = merges.FoldOnto(std::nullopt);
      write.expires_micros = merges.expiry().value_or(kNeverExpires);
      break;
    case StateWrite::Kind::kMerge:
      write.merges.Append(merges);
      break;
  }
}

void StateLayer::DeleteRange(std::string_view begin, std::string_view end) {
  points_.erase(points_.lower_bound(begin), points_.lower_bound(end));
  ranges_.push_back(KeyRange{std::string(begin), std::string(end)});
}

void StateLayer::Absorb(StateLayer&& newer) {
  if (empty()) {
    // The first writes of a batch: the maps move, nothing is copied.
    std::swap(points_, newer.points_);
    std::swap(ranges_, newer.ranges_);
    std::swap(has_merges_, newer.has_merges_);
    std::swap(has_expiry_, newer.has_expiry_);
    return;
  }
  for (KeyRange& range : newer.ranges_) {
    DeleteRange(range.begin, range.end);
  }
  for (auto& [key, write] : newer.points_) {
    if (write.kind == StateWrite::Kind::kMerge) {
      MergeAll(key, write.merges);
    } else {
      points_.insert_or_assign(key, std::move(write));
    }
  }
  newer.points_.clear();
  newer.ranges_.clear();
  if (newer.has_expiry_) has_expiry_ = true;
  newer.has_merges_ = false;
  newer.has_expiry_ = false;
}

StateLayer::Lookup StateLayer::FindIn(std::string_view key) const {
  Lookup found;
  if (auto it = points_.find(key); it != points_.end()) {
    found.write = &it->second;
  } else {
    found.range_deleted = RangeDeleted(key);
  }
  return found;
}

bool StateLayer::RangeDeleted(std::string_view key) const {
  for (const KeyRange& range : ranges_) {
    if (range.Contains(key)) return true;
  }
  return false;
}

bool LayeredRead::Take(const StateLayer::Lookup& found) {
  if (decided_) return true;
  if (found.write != nullptr) {
    switch (found.write->kind) {
      case StateWrite::Kind::kPut:
        // An expired value reads as absent; merges over it start fresh.
        value_ = found.write->expires_micros > now_micros_
                     ? Over(found.write->value)
                     : Over(std::nullopt);
        decided_ = true;
        break;
      case StateWrite::Kind::kDelete:
        value_ = Over(std::nullopt);
        decided_ = true;
        break;
      case StateWrite::Kind::kMerge:
        merges_.push_back(&found.write->merges);
        break;
    }
  } else if (found.range_deleted) {
    value_ = Over(std::nullopt);
    decided_ = true;
  }
  return decided_;
}

std::optional<std::string> LayeredRead::Over(
    std::optional<std::string_view> base) const {
  if (merges_.empty()) {
    if (!base.has_value()) return std::nullopt;
    return std::string(*base);
  }
  std::optional<std::string> value;
  if (base.has_value()) value.emplace(*base);
  // Oldest layer's merges first.
  for (auto it = merges_.rbegin(); it != merges_.rend(); ++it) {
    value = (*it)->FoldOnto(value);
  }
  return value;
}

}  // namespace idem
