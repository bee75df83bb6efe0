// StateVersions: the state keys written by commits in flight, and which
// changed since a handler read them, for the optimistic validation of
// concurrent handlers (docs/design.md, "Concurrency").
//
// A commit that writes keys registers them in its ordered critical section
// (Pend), as it queues its write: each key takes the commit's version, above
// every version noted before, and the commit's value, which handlers then
// read instead of the store's (Read) until the write has landed (Publish).
// So a handler that reads a key an earlier commit is about to write sees
// that write and queues behind it, rather than waiting for it to land (and,
// under kSync, to be synced): commits on a hot key still share a group
// write and its sync. That is safe because writes land in queue order and a
// failed write fails every later one (engine/commit_queue.h).
//
// A handler's read notes the version current when it read (StateReads,
// engine/batch_txn.h). Validation (Changed) says whether a read may be
// stale: its key was registered by a commit at a later version. A spurious
// "changed" only costs a rerun, so the table may forget: past kMaxKeys keys
// it forgets those not in flight and treats every older read as changed.
// Writers outside the handler path (imports, changes) that cannot list
// their keys make every read changed while they are in flight and before
// they land (PendAll/PublishAll).
//
// Safe for concurrent access from multiple threads without external
// synchronization.

#ifndef IDEM_ENGINE_STATE_VERSIONS_H_
#define IDEM_ENGINE_STATE_VERSIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "engine/batch_txn.h"

namespace idem {

class StateVersions {
 public:
  // Keys remembered before the table forgets those not in flight.
  static constexpr size_t kMaxKeys = size_t{1} << 16;

  // What a handler's read of a key finds here.
  struct Read {
    // The version the read notes (StateReads::Add).
    uint64_t version = 0;
    // The value of the latest commit in flight that writes the key (nullopt
    // inside: it deletes it); nullopt if none is in flight: read the store.
    std::optional<std::optional<std::string>> in_flight;
  };

  StateVersions() = default;
  StateVersions(const StateVersions&) = delete;
  StateVersions& operator=(const StateVersions&) = delete;

  // Looks up `key` for a handler's read.
  Read ReadKey(std::string_view key) const ABSL_LOCKS_EXCLUDED(mu_);

  // Whether any of `reads` may be stale: its key was registered at a
  // version above the one the read noted (or forgotten since).
  bool Changed(const StateReads& reads) const ABSL_LOCKS_EXCLUDED(mu_);

  // Registers the writes of a commit about to be queued, at a new version;
  // later reads of its keys see its values until Publish(writes).
  void Pend(const BatchOverlay& writes) ABSL_LOCKS_EXCLUDED(mu_);
  // The write of a commit registered by Pend(writes) has landed or failed.
  void Publish(const BatchOverlay& writes) ABSL_LOCKS_EXCLUDED(mu_);

  // For writes whose keys are unknown: every read noted before PublishAll
  // is stale, and so is every read validated in between.
  void PendAll() ABSL_LOCKS_EXCLUDED(mu_);
  void PublishAll() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    // The version of the last commit that registered a write of the key.
    uint64_t version = 0;
    // Commits in flight that write the key, and the last one's value.
    uint32_t in_flight = 0;
    std::optional<std::string> value;
  };

  mutable absl::Mutex mu_;
  uint64_t counter_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, Entry> keys_ ABSL_GUARDED_BY(mu_);
  // Reads noted below it are stale (keys were forgotten, or written by a
  // writer of unknown keys, at this version).
  uint64_t floor_ ABSL_GUARDED_BY(mu_) = 0;
  // PendAll calls not yet published.
  uint32_t all_pending_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace idem

#endif  // IDEM_ENGINE_STATE_VERSIONS_H_
