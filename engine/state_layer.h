// StateLayer: state writes not yet in the store, as one layer of the stack
// a handler reads through (docs/state.md): a message's own writes, over the
// writes of earlier messages of its batch, over those of commits in flight,
// over the store. Each key holds its last write: a value, a deletion, or
// merges not yet folded (engine/merge_operator.h); and the layer holds the
// ranges it deleted. Every point write in a layer is newer than every range
// it deleted (a range deletion erases the points under it), which is what
// lets Find answer with one lookup. LayeredRead folds what the layers say
// of a key, newest first, into its value.
//
// Neither class is thread-safe.

#ifndef IDEM_ENGINE_STATE_LAYER_H_
#define IDEM_ENGINE_STATE_LAYER_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/inlined_vector.h"
#include "engine/merge_operator.h"
#include "idem/merge.h"

namespace idem {

// The keys in [begin, end). `end` is never empty here.
struct KeyRange {
  std::string begin;
  std::string end;

  bool Contains(std::string_view key) const {
    return begin <= key && key < end;
  }
};

// The last write of one key in a layer.
struct StateWrite {
  enum class Kind : uint8_t { kPut, kDelete, kMerge };
  Kind kind = Kind::kPut;
  std::string value;     // kPut
  PendingMerges merges;  // kMerge: folded over the layers below
  // kPut: when the value expires (engine/state_value.h).
  int64_t expires_micros = kNeverExpires;
};

class StateLayer {
 public:
  using Points = absl::btree_map<std::string, StateWrite, std::less<>>;

  // What this layer says of a key: its write, or that a range deletion of
  // the layer covers it, or nothing (both unset).
  struct Lookup {
    const StateWrite* write = nullptr;
    bool range_deleted = false;
  };

  void Put(std::string_view key, std::string_view value,
           int64_t expires_micros = kNeverExpires);
  void Delete(std::string_view key);
  // With `expires_micros`, the merge sets the value's expiry;
  // `written_micros` is the engine time of its commit (PendingMerges::Add).
  // REQUIRES: ValidateMerge(op, operand) is OK.
  void Merge(std::string_view key, MergeOp op, std::string_view operand,
             std::optional<int64_t> expires_micros = {},
             std::optional<int64_t> written_micros = {});
  // REQUIRES: begin < end.
  void DeleteRange(std::string_view begin, std::string_view end);

  // Lays `newer` on top of this layer: its range deletions erase the points
  // under them, its puts and deletions replace, its merges fold into what
  // this layer holds of their key. `newer` is left empty.
  void Absorb(StateLayer&& newer);

  Lookup Find(std::string_view key) const {
    if (empty()) return Lookup();  // most layers of most reads
    return FindIn(key);
  }

  const Points& points() const { return points_; }
  const std::vector<KeyRange>& ranges() const { return ranges_; }
  bool empty() const { return points_.empty() && ranges_.empty(); }
  // Whether a merge was laid into this layer (its commit may write merge
  // operands, which need store format 4: engine/store.h).
  bool has_merges() const { return has_merges_; }
  // Whether a write of this layer carries an expiry (its commit needs store
  // format 6: engine/state_value.h).
  bool has_expiry() const { return has_expiry_; }

 private:
  Lookup FindIn(std::string_view key) const;
  // Folds `merges` into `key`'s write.
  void MergeAll(std::string_view key, const PendingMerges& merges);
  bool RangeDeleted(std::string_view key) const;

  Points points_;
  std::vector<KeyRange> ranges_;
  bool has_merges_ = false;
  bool has_expiry_ = false;
};

// The value of one key read through a stack of layers, newest first: Take
// each layer's Lookup until decided(), then, if it never was, Over the
// value under them all (the store's).
class LayeredRead {
 public:
  // A value a layer put that expires at or before `now_micros` reads as
  // absent (the default: nothing has expired).
  explicit LayeredRead(int64_t now_micros = StateReadTime::kNoExpiryCheck)
      : now_micros_(now_micros) {}
  // Takes what the next older layer says. Returns decided().
  bool Take(const StateLayer::Lookup& found);
  bool decided() const { return decided_; }
  // The value, once decided (nullopt: absent).
  const std::optional<std::string>& value() const { return value_; }
  // Whether a layer taken holds merges, still to fold over the base.
  bool has_merges() const { return !merges_.empty(); }
  // The value over `base`, the value under the layers taken.
  std::optional<std::string> Over(std::optional<std::string_view> base) const;

 private:
  absl::InlinedVector<const PendingMerges*, 2> merges_;  // newest first
  int64_t now_micros_;
  bool decided_ = false;
  std::optional<std::string> value_;
};

}  // namespace idem

#endif  // IDEM_ENGINE_STATE_LAYER_H_
