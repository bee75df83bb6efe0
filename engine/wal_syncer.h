// WalSyncer makes buffered commits durable on demand, as a group commit.
// A caller of WaitDurable whose sequence is not yet durable either waits for
// the running sync and returns if it covered it, or, when no sync runs,
// leads the next one: it writes a sync barrier (an empty log record written
// with sync=true, which fdatasyncs every live WAL file through RocksDB's own
// write path), covering every commit published before it. Syncing through
// the write path, rather than DB::SyncWAL, keeps syncs ordered with writes,
// so a failed write is never followed by a sync of the same log file.
//
// The barrier holds RocksDB's write queue for the length of the sync, so
// commits cannot pile up behind a running sync. To group them anyway, the
// leader first waits until no commit is in flight (commits bracket
// themselves with CommitScope, from their start, handlers included, until
// their write returned), for at most the duration of the previous sync
// (capped at kMaxGroupWait): with N threads committing and waiting, one sync
// then covers up to N commits, at the price of at most doubling a wait.
//
// Safe for concurrent access from multiple threads without external
// synchronization.

#ifndef IDEM_ENGINE_WAL_SYNCER_H_
#define IDEM_ENGINE_WAL_SYNCER_H_

#include <atomic>
#include <cstdint>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rocksdb/db.h"

namespace idem {

// The longest a sync waits for commits in flight to join it.
inline constexpr absl::Duration kMaxGroupWait = absl::Milliseconds(5);

class WalSyncer {
 public:
  // Marks one commit in flight for the lifetime of the scope.
  class CommitScope {
   public:
    explicit CommitScope(WalSyncer* syncer);
    CommitScope(const CommitScope&) = delete;
    CommitScope& operator=(const CommitScope&) = delete;
    ~CommitScope();

   private:
    WalSyncer* const syncer_;
  };

  // Returns once every commit to `db` with a sequence <= `sequence` is
  // durable. On failure nothing newer than durable_sequence() is durable.
  absl::Status WaitDurable(rocksdb::DB* db, uint64_t sequence);

  // Records that every commit up to `sequence` is durable (e.g. after the
  // store was reopened and synced).
  void MarkDurable(uint64_t sequence);

  uint64_t durable_sequence() const {
    return durable_.load(std::memory_order_acquire);
  }

  // Test-only: pretend every sync succeeds without syncing (a broken variant
  // that acknowledges before durability).
  void set_skip_sync_for_testing(bool skip) { skip_sync_ = skip; }

  // Test-only: a leader waits up to `wait` for commits in flight, instead of
  // the last sync's duration capped at kMaxGroupWait. Set before any sync.
  void set_group_wait_for_testing(absl::Duration wait) {
    group_wait_for_testing_ = wait;
  }

  // Test-only broken variant: the commit that ends the last one in flight
  // does not wake a waiting leader, which then waits out its limit.
  void set_skip_wakeup_for_testing(bool skip) { skip_wakeup_ = skip; }

 private:
  // Returns once no commit is in flight, or after `limit`.
  void WaitForCommitsInFlight(absl::Duration limit);

  bool skip_sync_ = false;
  bool skip_wakeup_ = false;
  std::optional<absl::Duration> group_wait_for_testing_;
  std::atomic<uint64_t> durable_{0};
  absl::Mutex mu_;
  // One sync at a time: set while a leader gathers commits and syncs.
  bool sync_running_ ABSL_GUARDED_BY(mu_) = false;
  // How long the last sync took (its barrier write).
  absl::Duration last_sync_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  // Commits in flight, counted without a lock so that a commit pays two
  // atomic operations rather than two mutex round trips. A leader waiting
  // for them sets leader_waiting_ and waits on commits_mu_; the commit that
  // brings the count to zero then takes and releases commits_mu_, which
  // wakes the leader. Both sides use sequentially consistent operations, so
  // either the commit sees the flag or the leader sees the zero.
  std::atomic<int> commits_in_flight_{0};
  std::atomic<bool> leader_waiting_{false};
  absl::Mutex commits_mu_;
};

// Writes the sync barrier described above to `db`.
rocksdb::Status WriteSyncBarrier(rocksdb::DB* db);

}  // namespace idem

#endif  // IDEM_ENGINE_WAL_SYNCER_H_
