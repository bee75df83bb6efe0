// StateVersions: the state keys and ranges written by commits, in key order,
// with the version of the last commit that wrote each, for the optimistic
// validation of concurrent handlers (docs/design.md, "Concurrency"); and the
// writes of the commits in flight, which handlers read instead of the
// store's until they land.
//
// A commit registers its writes in its ordered critical section (Pend), as
// it queues its write: they take the commit's version, above every version
// noted before, and handlers then read them (ReadKey, ReadRange) until the
// write has landed (Publish). So a handler that reads a key an earlier
// commit is about to write sees that write and queues behind it, rather
// than waiting for it to land (and, under kSync, to be synced): commits on
// a hot key still share a group write and its sync. That is safe because
// writes land in queue order and a failed write fails every later one
// (engine/commit_queue.h). A key whose commits in flight only merge into it
// has no value to read until its base is known: a read of it waits for
// those commits to land, then reads the store.
//
// A handler's reads (StateReads: one pass of a commit's handlers) note the
// version current when they read: a point read its key, a scan the part
// of its range it read. Validation (Changed) says whether a read may be
// stale: a key in it, or a range deletion over it, was registered at a
// later version. A spurious "changed" only costs a rerun. The versions
// are kept while a pass that could be stale against them is open: those
// at or below the version the oldest open pass started at are forgotten
// (a pass starts at its first read, and ends when its commit, validated,
// registers its writes, or is dropped), and a commit registered while no
// pass is open is not remembered at all, so the table holds what was written
// during the longest pass in flight, whatever the size of the keyspace.
// Past kMaxKeys keys even so, it forgets all of them and treats every
// older read as changed. Writers outside the handler path (imports,
// changes) that cannot list their keys make every read changed while they
// are in flight and before they land (PendAll/PublishAll).
//
// Safe for concurrent access from multiple threads without external
// synchronization; a StateReads is not (one handler pass uses it).

#ifndef IDEM_ENGINE_STATE_VERSIONS_H_
#define IDEM_ENGINE_STATE_VERSIONS_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/container/inlined_vector.h"
#include "engine/plain_mutex.h"
#include "engine/state_layer.h"

namespace idem {

class StateVersions;

// The state reads of one pass of a commit's handlers: each key with the
// version noted before it was read, each scanned range likewise. The pass
// is open from its first read until the StateReads is destroyed, and
// StateVersions keeps what validating it needs while it is.
class StateReads {
 public:
  // A scanned range: [begin, end), `end` empty for no upper bound.
  struct Range {
    std::string begin;
    std::string end;
    uint64_t version = 0;
  };

  StateReads() = default;
  StateReads(const StateReads&) = delete;
  StateReads& operator=(const StateReads&) = delete;
  ~StateReads();

  // Versions noted by one pass never decrease, and a read is stale at a
  // version whenever it is at a higher one: a key read again right after
  // its last note needs no note of its own.
  void Add(std::string_view key, uint64_t version) {
    if (!reads_.empty() && reads_.back().first == key) return;
    reads_.emplace_back(std::string(key), version);
  }
  void AddRange(std::string_view begin, std::string_view end,
                uint64_t version) {
    ranges_.push_back(Range{std::string(begin), std::string(end), version});
  }
  bool empty() const { return reads_.empty() && ranges_.empty(); }
  // Whether a read found a value of a commit in flight (one not landed
  // when it was read): the pass's outcome rests on that write landing.
  bool read_in_flight() const { return read_in_flight_; }
  const std::vector<std::pair<std::string, uint64_t>>& reads() const {
    return reads_;
  }
  const std::vector<Range>& ranges() const { return ranges_; }

 private:
  friend class StateVersions;

  std::vector<std::pair<std::string, uint64_t>> reads_;
  std::vector<Range> ranges_;
  bool read_in_flight_ = false;
  // Set by the first read: the table keeps versions above `start_`.
  StateVersions* versions_ = nullptr;
  uint64_t start_ = 0;
};

class StateVersions {
 public:
  // Versions remembered before the table forgets them all.
  static constexpr size_t kMaxKeys = size_t{1} << 22;

  // What a handler's read of a key finds here.
  struct Read {
    // The version the read notes (StateReads::Add).
    uint64_t version = 0;
    // The key's value as the commits in flight leave it (nullopt inside:
    // deleted); nullopt if none is in flight: read the store.
    std::optional<std::optional<std::string>> in_flight;
  };

  // What a handler's scan finds here.
  struct RangeRead {
    // The version the scan notes (StateReads::AddRange).
    uint64_t version = 0;
    // The commits in flight as one layer: each key they write in the range
    // with its value as they leave it, and the ranges they delete.
    StateLayer in_flight;
  };

  StateVersions() = default;
  StateVersions(const StateVersions&) = delete;
  StateVersions& operator=(const StateVersions&) = delete;

  // Looks up `key` for a read of the pass `reads` (which it opens, if this
  // is its first read). Waits while the commits in flight only merge into
  // the key.
  Read ReadKey(std::string_view key, StateReads& reads)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Looks up [begin, end) (`end` empty: no upper bound) for a scan of the
  // pass `reads`. Waits as ReadKey for every key in the range.
  RangeRead ReadRange(std::string_view begin, std::string_view end,
                      StateReads& reads) ABSL_LOCKS_EXCLUDED(mu_);

  // Whether any of `reads` may be stale: a key or range it read was
  // registered at a version above the one the read noted (or forgotten).
  // Without `ranges`, only the point reads are checked (a broken variant:
  // EngineHooks::skip_range_validation).
  bool Changed(const StateReads& reads, bool ranges = true) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Registers the writes of a commit about to be queued at a new version,
  // which it returns (0 for no writes); later reads see them until
  // Publish(writes, version). REQUIRES: `writes` is neither changed nor
  // destroyed before Publish(writes, version) returns. With `reads` (the
  // commit's pass, validated just before: Changed), closes that pass too. A
  // version is remembered for validation only while some pass is open: a pass
  // opened later notes a version at least as high.
  uint64_t Pend(const StateLayer& writes, StateReads* reads = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The write of the commit registered by Pend(writes) at `version` has
  // landed or failed, and so has every commit queued before it.
  void Publish(const StateLayer& writes, uint64_t version)
      ABSL_LOCKS_EXCLUDED(mu_);

  // For writes whose keys are unknown: every read noted before PublishAll
  // is stale, and so is every read validated in between.
  void PendAll() ABSL_LOCKS_EXCLUDED(mu_);
  void PublishAll() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until every PendAll has been published.
  void AwaitAllPublished() ABSL_LOCKS_EXCLUDED(mu_);

  // The number of versions remembered (for tests).
  size_t remembered() const ABSL_LOCKS_EXCLUDED(mu_);

  // A broken variant (EngineHooks::quiet_reads_ignore_in_flight): the quiet
  // version is published while commits are in flight too, so a read of a
  // pass already open misses their values and reads the store's older
  // ones, which validation then takes for current (lost updates). Set
  // before the first read.
  void set_quiet_reads_ignore_in_flight(bool broken) {
    quiet_ignores_in_flight_ = broken;
  }

 private:
  friend class StateReads;

  // A write of a commit in flight, and that commit's version. The write
  // is the commit's own, which lives until the commit is published.
  struct InFlightWrite {
    uint64_t version = 0;
    const StateWrite* write = nullptr;
  };
  using Chain = absl::InlinedVector<InFlightWrite, 1>;  // oldest first

  // Opens `reads`'s pass at the current version if it is not open yet.
  void OpenPass(StateReads& reads) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The end of the pass opened at `start`.
  void ClosePass(uint64_t start) ABSL_LOCKS_EXCLUDED(mu_);
  // The end of `reads`'s pass, if open.
  void ClosePassLocked(StateReads& reads) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Reads `key` through the commits in flight at or below `version`:
  // decided, or undecided with merges (wait), or undecided (read the
  // store).
  LayeredRead ResolveLocked(std::string_view key, uint64_t version) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a commit in flight at or below `version` only merges into a
  // key of [begin, end) (`end` empty: no upper bound), leaving it without
  // a value to read.
  bool MergesWithoutBaseLocked(std::string_view begin, std::string_view end,
                               uint64_t version) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits until no commit in flight at or below `version` merges into a
  // key of [begin, end) without a base.
  void AwaitBasesLocked(std::string_view begin, std::string_view end,
                        uint64_t version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Forgets the versions no open pass can be stale against.
  void PruneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Publishes the quiet version: counter_ if no commit is in flight, else
  // kNotQuiet. After every change of either.
  void PublishQuietLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The version a read of `reads`'s pass notes if the table is quiet and
  // the pass already open; nullopt: take the mutex.
  std::optional<uint64_t> QuietVersion(const StateReads& reads) const;

  static constexpr uint64_t kNotQuiet = std::numeric_limits<uint64_t>::max();

  mutable PlainMutex mu_;
  // Notified when commits land (Publish) and when a writer of unknown keys
  // is published (PublishAll): what the waits under mu_ wait for.
  std::condition_variable landed_;
  uint64_t counter_ ABSL_GUARDED_BY(mu_) = 0;
  // The version of the last commit that wrote each key, and of each range
  // deletion, with the keys in version order for pruning.
  absl::btree_map<std::string, uint64_t, std::less<>> versions_
      ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<uint64_t, std::string>> key_order_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<uint64_t, KeyRange>> deleted_ranges_
      ABSL_GUARDED_BY(mu_);
  // The writes of the commits in flight, by key, and their range deletions.
  absl::btree_map<std::string, Chain, std::less<>> in_flight_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<uint64_t, KeyRange>> in_flight_ranges_
      ABSL_GUARDED_BY(mu_);
  // The versions the open passes started at.
  absl::btree_multiset<uint64_t> open_passes_ ABSL_GUARDED_BY(mu_);
  // Reads noted below it are stale (versions were forgotten, or written by
  // a writer of unknown keys, at this version).
  uint64_t floor_ ABSL_GUARDED_BY(mu_) = 0;
  // PendAll calls not yet published.
  uint32_t all_pending_ ABSL_GUARDED_BY(mu_) = 0;
  // counter_ while no commit is in flight, else kNotQuiet; stored only
  // under mu_ (PublishQuietLocked), loaded without it.
  std::atomic<uint64_t> quiet_version_{0};
  bool quiet_ignores_in_flight_ = false;  // constant after the first read
};

}  // namespace idem

#endif  // IDEM_ENGINE_STATE_VERSIONS_H_
