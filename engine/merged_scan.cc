#include "engine/merged_scan.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "engine/status_util.h"

namespace idem {

absl::Status ValidateScanRange(std::string_view begin, std::string_view end) {
  constexpr size_t kMaxKeyBytes = std::numeric_limits<uint32_t>::max();
  if (begin.size() > kMaxKeyBytes || end.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(
        "scan: a bound is larger than a state key may be (4 GiB)");
  }
  if (!end.empty() && end < begin) {
    return absl::InvalidArgumentError(
        "scan: end is below begin (an empty end means no upper bound)");
  }
  return absl::OkStatus();
}

namespace {

// One layer's points in the range, walked in scan order.
class LayerCursor {
 public:
  LayerCursor(const StateLayer::Points& points, std::string_view begin,
              std::string_view end, bool reverse)
      : reverse_(reverse) {
    first_ = points.lower_bound(begin);
    last_ = end.empty() ? points.end() : points.lower_bound(end);
    if (first_ == last_) {
      done_ = true;
    } else {
      at_ = reverse_ ? std::prev(last_) : first_;
    }
  }
  bool done() const { return done_; }
  std::string_view key() const { return at_->first; }
  void Next() {
    if (reverse_) {
      if (at_ == first_) {
        done_ = true;
      } else {
        --at_;
      }
    } else if (++at_ == last_) {
      done_ = true;
    }
  }

 private:
  const bool reverse_;
  StateLayer::Points::const_iterator first_;
  StateLayer::Points::const_iterator last_;
  StateLayer::Points::const_iterator at_;
  bool done_ = false;
};

// Whether a layer says anything of `key`: a cursor is at it, or a range
// deletion covers it.
bool HeldByALayer(absl::Span<const StateLayer* const> layers,
                  absl::Span<const LayerCursor> cursors, std::string_view key) {
  for (const LayerCursor& cursor : cursors) {
    if (!cursor.done() && cursor.key() == key) return true;
  }
  for (const StateLayer* layer : layers) {
    for (const KeyRange& range : layer->ranges()) {
      if (range.Contains(key)) return true;
    }
  }
  return false;
}

// Whether `a` comes before `b` in scan order.
// Moves `store` to its first key in scan order, or one key on.
void SeekStoreStart(rocksdb::Iterator* store, bool reverse) {
  if (reverse) {
    store->SeekToLast();
  } else {
    store->SeekToFirst();
  }
}
void StepStore(rocksdb::Iterator* store, bool reverse) {
  if (reverse) {
    store->Prev();
  } else {
    store->Next();
  }
}

// [begin, end), or, where the scan stopped early, cut at the key it stopped
// at (what it covered).
ScanExtent ScanExtentOf(std::string_view begin, std::string_view end,
                        std::optional<std::string> stopped_at, bool reverse) {
  ScanExtent extent{std::string(begin), std::string(end)};
  if (stopped_at.has_value()) {
    if (reverse) {
      extent.begin = *std::move(stopped_at);
    } else {
      extent.end = *std::move(stopped_at) + '\0';
    }
  }
  return extent;
}

bool Before(std::string_view a, std::string_view b, bool reverse) {
  return reverse ? b < a : a < b;
}

}  // namespace

absl::StatusOr<ScanExtent> MergedScan(
    absl::Span<const StateLayer* const> layers, rocksdb::Iterator* store,
    std::string_view begin, std::string_view end, const ScanOptions& options,
    ScanVisitor visit, const StateReadTime& time) {
  const bool reverse = options.reverse;
  absl::InlinedVector<LayerCursor, 4> cursors;
  for (const StateLayer* layer : layers) {
    cursors.emplace_back(layer->points(), begin, end, reverse);
  }
  if (store != nullptr) SeekStoreStart(store, reverse);
  auto store_valid = [&] { return store != nullptr && store->Valid(); };
  size_t visited = 0;
  std::optional<std::string> stopped_at;
  std::string key;
  for (;;) {
    // The next key in scan order that any layer or the store holds.
    bool found = false;
    std::string_view next;
    for (const LayerCursor& cursor : cursors) {
      if (!cursor.done() && (!found || Before(cursor.key(), next, reverse))) {
        next = cursor.key();
        found = true;
      }
    }
    const bool store_here =
        store_valid() &&
        (!found || !Before(next, store->key().ToStringView(), reverse));
    if (store_here) {
      next = store->key().ToStringView();
      found = true;
    }
    if (!found) break;
    if (store_here && !HeldByALayer(layers, cursors, next)) {
      // Only the store has this key: visit its bytes where they are.
      const std::optional<std::string_view> live =
          LiveStateValue(store->value().ToStringView(), time);
      bool stop = false;
      if (live.has_value()) {
        ++visited;
        stop = !visit(next, *live) ||
               (options.limit != 0 && visited == options.limit);
      }
      if (stop) stopped_at = std::string(next);  // before the iterator moves
      StepStore(store, reverse);
      if (stop) break;
      continue;
    }
    key.assign(next);
    // Its value through the layers, newest first, over the store's.
    LayeredRead read(time.now_micros);
    for (const StateLayer* layer : layers) {
      if (read.Take(layer->Find(key))) break;
    }
    std::optional<std::string> value;
    if (read.decided()) {
      value = read.value();
    } else if (store_here) {
      value = read.Over(LiveStateValue(store->value().ToStringView(), time));
    } else {
      value = read.Over(std::nullopt);
    }
    // Past this key in every cursor that holds it.
    for (LayerCursor& cursor : cursors) {
      if (!cursor.done() && cursor.key() == key) cursor.Next();
    }
    if (store_here) StepStore(store, reverse);
    if (!value.has_value()) continue;
    ++visited;
    const bool go_on = visit(key, *value);
    if (!go_on || (options.limit != 0 && visited == options.limit)) {
      stopped_at = key;
      break;
    }
  }
  if (store != nullptr && !store->status().ok()) {
    return FromRocksStatus(store->status(), "scanning state");
  }
  return ScanExtentOf(begin, end, std::move(stopped_at), reverse);
}

}  // namespace idem
