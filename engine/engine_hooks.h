// Deliberately broken variants of the engine, for tests that must show their
// checks catch a broken guarantee, and for the crash harness's self-test.
// Never set outside tests. A plain value type.

#ifndef IDEM_ENGINE_ENGINE_HOOKS_H_
#define IDEM_ENGINE_ENGINE_HOOKS_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "idem/engine.h"
#include "rocksdb/compaction_filter.h"

namespace idem {

struct EngineHooks {
  // Claims no in-flight IDs (engine/inflight_ids.h): a delivery of an ID
  // that another thread is processing runs its handler too (breaks one
  // effect per ID under concurrency, guarantee 3).
  bool skip_inflight_ids = false;
  // Commits without validating the handlers' state reads
  // (engine/state_versions.h) or their reads of timers: a handler that read
  // a key another commit changed since still commits, so concurrent
  // read-modify-writes lose updates (breaks serializable state), a fire
  // that ran over a concurrent move of its timer deletes the moved one's
  // index entry (breaks "a fire conflicts with a set of its key"), and an
  // event-time timer whose partition's stream time a concurrent commit
  // moved past it is set anyway (breaks "a closed window cannot be
  // re-armed").
  bool skip_read_validation = false;
  // Validates the handlers' point reads but not the ranges their scans
  // read: a key inserted into a scanned range by a commit in between goes
  // unseen (a phantom), so a handler that counts the rows of a range and
  // inserts one below a limit can commit alongside another that did the
  // same: write skew (breaks serializable scans).
  bool skip_range_validation = false;
  // A handler's reads of state after its first take the quiet path of
  // engine/state_versions.h even while commits are in flight: such a read
  // of a key a commit in flight writes gets the store's older value, which
  // validation then takes for current, so a read-modify-write overwrites
  // the commit in flight (breaks "a handler reads the values of the commits
  // in flight", and serializable state with it).
  bool quiet_reads_ignore_in_flight = false;
  // Compares a commit's offsets only with the stored ones its commit read
  // before its handlers ran, not with those of commits queued since: a
  // commit of a lower offset that lands after a higher one moves the
  // partition's offset back (breaks "offsets never go backwards").
  bool skip_queued_offsets = false;
  // Each commit decided in the ordered critical section writes on its own,
  // after leaving it, instead of through the commit queue: commits land in
  // any order (every other one pauses 300 µs first, to widen the race), so
  // a relay can see a later outbox position before an earlier one and skip
  // it (breaks "positions increase in commit order").
  bool unordered_writes = false;
  // A commit that writes nothing returns without waiting for the commits in
  // flight whose values its handlers read: the outcome it returns (a
  // transient failure, say, decided on a balance read) can rest on a write
  // that has not landed, and may never land (breaks "a handler's reads are
  // of committed state" for the commits that write nothing).
  bool skip_nothing_wait = false;
  // A commit whose handlers keep losing conflicts never runs them with
  // priority: a handler slower than the writers of its key runs again for
  // as long as they keep writing (breaks the bound on reruns,
  // EngineImpl::kMaxReruns).
  bool no_rerun_priority = false;
  // CompactExpired takes the store lock exclusively even when no expiry
  // bucket has ended: it waits for a slow handler's commit, which holds the
  // lock shared, and every commit after it waits behind it (breaks "a slow
  // handler blocks no one", idem/txn.h).
  bool compact_always_locks_store = false;
  // CompactExpired's removal horizon in a store of format 6 is the engine
  // time alone, not min(it, the oldest commit in flight)
  // (engine/commit_time_watermark.h): an expired value is removed while a
  // commit in flight since before its expiry merges into it, and that
  // operand, landing after, folds onto nothing: a live value made of the
  // operand alone (breaks "expired state is never returned").
  bool watermark_ignores_in_flight = false;
  // The reopen after a failed write clears the commit queue's failure
  // (CommitQueue::Reset) before it takes the store lock exclusively, while
  // commits that read the failed write's values may still be in flight:
  // such a commit, queued after the failed write, then passes the queue as
  // if nothing had failed, and returns an outcome its handlers decided on a
  // value that never landed (breaks "no dirty read after a failed write":
  // Reset runs only with store_mu_ held exclusively, EngineImpl::
  // RecoverIfNeeded).
  bool reset_queue_before_store_lock = false;
  // Not a broken variant: called after a commit is queued, before it waits
  // for its write. A test makes it throw, as an allocation failing there
  // would, to show nothing is left in flight.
  std::function<void()> after_queue;
  // A commit's outcomes take the store's latest sequence once it landed,
  // not its own write's: commits that land in one group write, or one
  // behind another, report one sequence (the crash harness's commit_prefix
  // cannot order them).
  bool outcomes_take_latest_sequence = false;
  // Commits the state writes and offsets, then the dedupe records, in two
  // separate writes (breaks atomicity, guarantee 2).
  bool split_commit = false;
  // WaitDurable returns without syncing, and kSync commits are written
  // without a sync: outcomes are acknowledged before they are durable
  // (breaks guarantee 6).
  bool skip_wal_sync = false;
  // Drops an expiry bucket one bucket width before its end, while records
  // in it are still live (breaks strict expiry under expiry_buckets: a
  // redelivery within its window runs again). Needs Options::expiry_buckets.
  bool drop_buckets_at_start = false;
  // Engine time follows the clock backwards (engine/engine_clock.h keeps no
  // high-water mark): after the clock is set back, records whose bucket was
  // dropped are new again while the same records in idem.dedupe are live
  // (breaks agreement between expiry layouts and strict expiry).
  bool engine_time_follows_clock = false;
  // Options::detect_conflicts has no effect: a conflicting redelivery is a
  // duplicate (breaks conflict detection).
  bool ignore_conflicts = false;
  // A sharded engine (Options::shards > 1) routes partitions by a salt
  // drawn at each open, so a restart sends a partition to another shard,
  // away from its dedupe records and offsets (breaks one effect per
  // message across restarts; the crash harness's --self_test=wrong_shard).
  bool wrong_shard = false;
  // FireTimers writes the fired timers' deletions in a write of their own,
  // before the write of the handlers' effects: a crash or an I/O error in
  // between loses a fire's effects with its timer (breaks "a timer's
  // effects commit with its deletion").
  bool fire_outside_commit = false;
  // Reads of state (Txn::Get and scans, GetState, ScanState, exports) skip
  // the expiry check: a value whose TTL has passed is returned until
  // compaction drops it, as RocksDB's DBWithTTL does (breaks "expired
  // state is never returned").
  bool skip_state_expiry_check = false;
  // Replaces the TTL filter factory of the dedupe column family.
  std::shared_ptr<rocksdb::CompactionFilterFactory> dedupe_filter;
};

// Engine::Open with hooks; Engine::Open is OpenEngineWithHooks(path, options,
// {}).
absl::StatusOr<std::unique_ptr<Engine>> OpenEngineWithHooks(
    const std::string& path, const Options& options, const EngineHooks& hooks);

}  // namespace idem

#endif  // IDEM_ENGINE_ENGINE_HOOKS_H_
