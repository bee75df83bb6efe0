// idem::Engine is an embedded dedupe store for at-least-once consumers: it
// runs a handler once per message ID within a dedupe window and commits the
// message's dedupe record, the handler's state writes and the message's source
// offset in one atomic RocksDB write (the inbox pattern, without a server).
//
// An Engine is safe for concurrent access from multiple threads without
// external synchronization. The handlers of concurrent Process and
// ProcessBatch calls run at the same time; no engine-wide lock is held while
// a handler runs or while the write-ahead log syncs, and concurrent kSync
// commits share syncs. Every guarantee holds under concurrency: a delivery
// of an ID that another call is processing waits for that call's outcome
// (kDuplicate with its result, or it runs itself if the first failed
// transiently); handlers' state reads and writes behave as if the handlers
// had run one at a time in commit order (a handler whose reads another
// commit changed runs again: see Handler in idem/txn.h); a partition's
// committed offset never goes backwards; outbox positions increase in commit
// order. Only one writable Engine (in any process) may have a store open at
// a time; read-only engines (Options::read_only) may open it beside it.
//
// Storage errors (I/O failure, disk full, corruption) fail the whole call and
// commit nothing, except a write-ahead-log sync that fails after the write
// reached the log: the call then returns kUnknown, the outcome unknown (see
// Process); a handler error fails only its own message (kFailed).

#ifndef IDEM_ENGINE_H_
#define IDEM_ENGINE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "idem/clock.h"
#include "idem/message.h"
#include "idem/options.h"
#include "idem/outbox.h"
#include "idem/partition_snapshot.h"
#include "idem/stats.h"
#include "idem/timers.h"
#include "idem/txn.h"

namespace idem {

// One stored item, as Engine::Dump reports it.
struct DumpEntry {
  enum class Kind { kDedupe, kState, kOffset, kOutbox };
  Kind kind = Kind::kState;
  // kDedupe: 32 lowercase hex digits of the ID's XXH3-128 hash.
  // kState: the state key. kOffset: the source name. kOutbox: the entry's
  // key.
  std::string key;
  // kDedupe: the stored result. kState: the value. kOffset: empty.
  // kOutbox: the entry's value.
  std::string value;
  // kDedupe: the record's absolute expiry and whether it has passed.
  // kState: the value's expiry (PutOptions::ttl, Options::state_ttl;
  // InfiniteFuture for none) and whether it has passed (a dump shows
  // expired values that compaction has not dropped yet; reads never do).
  absl::Time expires_at = absl::InfinitePast();
  bool expired = false;
  // kDedupe only: the record format's version (1 or 2); when the ID was
  // first processed (absl::InfinitePast() if the record does not say, as
  // version 1 records do not); the first delivery's fingerprint
  // (Options::detect_conflicts); and a remembered permanent failure (then
  // `value` is empty), otherwise OK.
  int record_version = 0;
  absl::Time first_processed_at = absl::InfinitePast();
  std::optional<uint64_t> fingerprint;
  absl::Status failure;
  // kOffset: the offset's source (as `key`) and partition. kDedupe in a
  // partition-scoped store (DedupeScope::kPartition): the record's source
  // and partition; otherwise empty and 0. kOutbox: `partition` is the
  // entry's destination partition (OutboxEntry::partition, -1 by key).
  std::string source;
  int32_t partition = 0;
  // kOffset only.
  int64_t offset = -1;
  // kOutbox only: the unacknowledged entry's position, message ID,
  // destination and headers (OutboxEntry).
  uint64_t position = 0;
  std::string message_id;
  std::string destination;
  std::vector<std::pair<std::string, std::string>> headers;
};

class Engine {
 public:
  // Opens (or, with create_if_missing, creates) the store at `path`: a
  // missing directory (its parent must exist) or an empty one, such as ".",
  // a mount point or a symlink to a directory; creation is crash-safe.
  // Returns kInvalidArgument for bad options; kNotFound if there is no store
  // at `path` and create_if_missing is false or read_only is set, or if the
  // parent of a missing `path` does not exist; kFailedPrecondition, changing
  // nothing on disk, if `path` is not an idem store (a file, a non-empty
  // directory of something else, a RocksDB database without idem's format
  // marker), was written by a newer format, or is open in another writable
  // engine, in this process or another, under any spelling of its path
  // (unless read_only), or is being created by another opener; kDataLoss,
  // changing nothing, if the store is damaged: a write-ahead log with
  // damage that valid records follow (only a torn last record, as a power
  // loss leaves, is recovered from, to the commits before it), a missing
  // CURRENT or MANIFEST file, or a missing column family;
  // kResourceExhausted on a full disk; kUnavailable for other I/O errors.
  static absl::StatusOr<std::unique_ptr<Engine>> Open(const std::string& path,
                                                      const Options& options);

  Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  // Syncs the write-ahead log (best effort) and closes the store.
  // REQUIRES: no call on this engine is in progress.
  virtual ~Engine() = default;

  // Processes one delivery: if a live record for message.id exists, returns
  // kDuplicate with the stored result and runs nothing (or kConflict, or a
  // remembered permanent kFailed: see Outcome, Options::detect_conflicts,
  // PermanentError; under Options::refresh_on_duplicate a duplicate
  // commits its record's new expiry); otherwise runs
  // `handler` and, if it returns OK, commits its writes and emits, the dedupe
  // record (expiring at now + ttl) and the source offset in one write
  // (kProcessed).
  // If the handler fails, nothing is committed (kFailed, see Result::error).
  // Returns kInvalidArgument for a bad message (nothing runs),
  // kFailedPrecondition when called from inside one of this engine's
  // handlers, directly or through handlers of other engines it called (so do
  // Forget, WaitDurable, ReadOutbox, AckOutbox, CompactExpired, Checkpoint,
  // SetCommittedOffset, ImportPartition and ApplyPartitionChanges),
  // kFailedPrecondition if the clock returned a non-finite time and
  // kUnavailable if it threw (idem/clock.h; nothing runs, nothing is
  // committed), and a storage error if the commit failed: kResourceExhausted (a
  // full disk), kUnavailable or another code of an I/O error when nothing was
  // committed, but kUnknown when the write reached the write-ahead log and only
  // its sync failed: the outcome is then unknown (the reopen before the next
  // call may recover the commit). Either way the message may be retried once
  // the cause is gone: a retry returns the committed outcome (kDuplicate) if
  // the commit was kept, and runs the handler again if not.
  virtual absl::StatusOr<Result> Process(const Message& message,
                                         Handler handler) = 0;

  // Processes `messages` in order as one commit; one Result per message, in
  // the same order. Concurrent calls with IDs in common wait for each other
  // (the whole batch waits until none of its IDs is in flight elsewhere).
  // Within the batch the first occurrence of an ID wins and later ones are
  // kDuplicate of it (or run again if it failed). Handlers see the writes of
  // earlier messages of the batch. Per (source, partition) the recorded offset
  // is the highest offset of a kProcessed, kDuplicate, kConflict or permanent
  // kFailed message that comes before the partition's first transient kFailed
  // message in the batch. The handler is given the elements of `messages`
  // themselves (a message's place in the batch is its address minus
  // messages.data()). Errors as for Process; any invalid message rejects the
  // whole batch before anything runs.
  virtual absl::StatusOr<std::vector<Result>> ProcessBatch(
      absl::Span<const Message> messages, Handler handler) = 0;

  // Returns the committed value of state key `key`, or nullopt if absent
  // (or expired: PutOptions::ttl). A store that holds values that expire
  // (format 6) reads the clock: kFailedPrecondition or kUnavailable if it
  // cannot be read (idem/clock.h); ScanState likewise.
  virtual absl::StatusOr<std::optional<std::string>> GetState(
      std::string_view key) = 0;

  // The committed value of state key `key` in the shard of (source,
  // partition) (ShardOf): what a handler of a message of that partition
  // reads. For an unsharded engine, GetState(key). Errors as GetState(key).
  absl::StatusOr<std::optional<std::string>> GetState(std::string_view source,
                                                      int32_t partition,
                                                      std::string_view key);

  // ---- Shards (Options::shards) ----

  // How many shards the store has: Options::shards, 1 for an ordinary store.
  virtual int shard_count() const { return 1; }

  // The shard whose write path commits messages of `partition` (and every
  // source's partition of that number): partition modulo shard_count(); 0
  // for a negative partition.
  int ShardOf(int32_t partition) const {
    return partition < 0 ? 0 : partition % shard_count();
  }

  // Shard `index` as an engine of its own: its state, offsets, outbox (a
  // sharded engine relays each shard's outbox through its shard), stats and
  // maintenance. Owned by this engine; nullptr for an index outside
  // [0, shard_count()). An ordinary engine's shard(0) is itself.
  virtual Engine* shard(int index) { return index == 0 ? this : nullptr; }

  // Visits the committed state keys in [begin, end) (`end` empty: no upper
  // bound) with their values, in byte order (reverse order with
  // options.reverse), until `visit` returns false or options.limit keys
  // were visited, as Txn::Scan does, from one snapshot of the store: no
  // commit that lands meanwhile shows, and merges are folded. Under
  // kBuffered what it shows may not be durable yet. kInvalidArgument for a
  // bad range (as Txn::Scan); kUnavailable while the store is closed after
  // an I/O error. Reads only: may be called from a handler, where it sees
  // only committed data (Txn::Scan sees the batch, and is validated).
  virtual absl::Status ScanState(
      std::string_view begin, std::string_view end, ScanVisitor visit,
      const ScanOptions& options = ScanOptions()) = 0;

  // Returns whether a non-expired dedupe record for `id` exists. Under
  // kBuffered the record may not be durable yet. kInvalidArgument for a bad
  // id; kDataLoss if the stored record cannot be decoded; kFailedPrecondition
  // or kUnavailable if the clock cannot be read (idem/clock.h).
  // kFailedPrecondition for a partition-scoped store (DedupeScope::kPartition),
  // where an ID alone names no record: use the overload below.
  virtual absl::StatusOr<bool> Seen(std::string_view id) = 0;
  // Whether a live record exists for `id` delivered on (source, partition):
  // in a partition-scoped store that partition's record, otherwise the
  // store's (source and partition are then ignored). `source` may be empty
  // (a message without one) and at most kMaxSourceBytes; partition >= 0;
  // kInvalidArgument otherwise. Other errors as Seen(id).
  virtual absl::StatusOr<bool> Seen(std::string_view id,
                                    std::string_view source,
                                    int32_t partition) = 0;

  // Removes the dedupe record for `id` (state writes are untouched), so its
  // next delivery runs the handler again. Absent ids are not an error.
  // Durable on return under kSync. kFailedPrecondition or kUnavailable if the
  // clock cannot be read (idem/clock.h; nothing removed).
  // kFailedPrecondition for a partition-scoped store, as Seen(id).
  virtual absl::Status Forget(std::string_view id) = 0;
  // Removes the record of `id` delivered on (source, partition), as
  // Seen(id, source, partition) finds it. Errors as Forget(id) and
  // Seen(id, source, partition).
  virtual absl::Status Forget(std::string_view id, std::string_view source,
                              int32_t partition) = 0;

  // Returns the highest committed offset of (source, partition), or nullopt
  // if none was ever recorded. kInvalidArgument for an empty or too long
  // source or a negative partition.
  virtual absl::StatusOr<std::optional<int64_t>> CommittedOffset(
      std::string_view source, int32_t partition) = 0;

  // Sets the committed offset of (source, partition) to `offset`, rewinding
  // or advancing it, in one durable commit; a consumer that resumes from the
  // engine then starts at offset + 1. State and dedupe records are untouched
  // (so messages replayed within the dedupe window are still duplicates:
  // Forget them to run them again). On success CommittedOffset returns
  // `offset`; on error nothing is changed. kInvalidArgument for a bad source
  // or partition, or an offset outside [0, INT64_MAX); kFailedPrecondition
  // from inside a handler or on a read-only engine; a storage error if the
  // write or its sync failed.
  // REQUIRES: nothing consumes the partition on this engine meanwhile (its
  // next commit would move the offset on from wherever it stands).
  virtual absl::Status SetCommittedOffset(std::string_view source,
                                          int32_t partition,
                                          int64_t offset) = 0;

  // Returns once every commit with a sequence <= `sequence` is durable,
  // syncing the write-ahead log if needed (one sync serves all waiters).
  // kInvalidArgument for a sequence the engine never issued; a storage error
  // if the sync failed (nothing newer than the last successful sync is then
  // durable; a later call retries).
  virtual absl::Status WaitDurable(uint64_t sequence) = 0;

  // Returns counters and RocksDB-derived figures; see Stats.
  virtual absl::StatusOr<Stats> GetStats() = 0;

  // Outbox entries committed and not yet acknowledged (Stats::outbox_pending
  // alone): cheap enough to ask before every batch, as the delivery loop's
  // backpressure does (idem/brokers/delivery_loop.h). The default, for
  // Engine implementations outside idem, asks GetStats. Errors as GetStats.
  virtual absl::StatusOr<uint64_t> OutboxPending() {
    absl::StatusOr<Stats> stats = GetStats();
    if (!stats.ok()) return stats.status();
    return stats->outbox_pending;
  }

  // The options the engine was opened with, but with the store's own
  // dedupe_scope (which a read-only open adopts). The default, for Engine
  // implementations outside idem, returns Options().
  virtual Options options() { return Options(); }

  // Drops the expiry buckets that have ended (Options::expiry_buckets), then
  // flushes memtables and compacts every dedupe record through the TTL
  // filter now, so expired records are dropped from disk; likewise the state
  // values that expired (PutOptions::ttl, Options::state_ttl), once the
  // store holds any (format 6). It waits for no commit in flight (only a
  // bucket's drop does): a state value that expired after the time of the
  // oldest commit still in flight is cut down to a marker, which reads as
  // absent, and removed by a later call. kFailedPrecondition
  // or kUnavailable if the clock cannot be read (idem/clock.h; nothing
  // dropped).
  virtual absl::Status CompactExpired() = 0;

  // Up to `max_entries` unacknowledged outbox entries (idem/outbox.h), oldest
  // first, whose commits are durable: under kBuffered it syncs the
  // write-ahead log first if needed, so a relay never publishes an entry a
  // crash could take back. Does not consume: the same entries come back
  // until AckOutbox removes them. kInvalidArgument for max_entries == 0;
  // kFailedPrecondition from inside a handler (as WaitDurable); kDataLoss
  // naming the position if an entry does not decode; a storage error if
  // the read or the sync failed.
  virtual absl::StatusOr<std::vector<OutboxEntry>> ReadOutbox(
      size_t max_entries) = 0;

  // As ReadOutbox, but only the entries with positions above `position`: a
  // relay that published up to `position`, not yet acknowledged, reads the
  // entries that follow (OutboxRelay reads a transactional round's
  // successor while the round commits). `position` need not be issued:
  // above the last one, the result is empty. Same errors as ReadOutbox.
  virtual absl::StatusOr<std::vector<OutboxEntry>> ReadOutboxAfter(
      uint64_t position, size_t max_entries) = 0;

  // Removes every outbox entry with position <= `position`, with range
  // deletions that rewrite no live data; durable on return under kSync
  // (under kBuffered with the next sync, as commits are: after a crash the
  // entries may come back, and a relay publishes them again). Acknowledging
  // an already acknowledged position is OK; kInvalidArgument for a position
  // never issued (0, or above the last one committed); kFailedPrecondition
  // from inside a handler or on a read-only engine; a storage error if the
  // write failed (nothing removed).
  virtual absl::Status AckOutbox(uint64_t position) = 0;

  // The partition's state (the keys PartitionTxn(source, partition) wrote,
  // idem/partition_state.h), its committed offset and, in a partition-scoped
  // store (DedupeScope::kPartition), its live dedupe records, from one
  // consistent snapshot. Reads only the partition's key ranges, not the
  // whole store. kInvalidArgument for a bad source or partition; kDataLoss
  // for a stored record or offset that does not decode; kFailedPrecondition
  // or kUnavailable if the clock cannot be read (idem/clock.h).
  virtual absl::StatusOr<PartitionSnapshot> ExportPartition(
      std::string_view source, int32_t partition) = 0;

  // Replaces the partition's state (and, in a partition-scoped store, its
  // dedupe records) with the snapshot's, and records its offset, in one
  // atomic commit, durable on return. The snapshot's records that have
  // expired by the engine's time are left out; into a store-scoped store
  // they are added to the store's records (an ID is then a duplicate on any
  // partition), which removes none. The commit is deduplicated under an ID
  // derived from the snapshot, so importing the same snapshot again writes
  // nothing (Stats counts the first import as processed, a repeat as a
  // duplicate); a rewinding import (ImportOptions::allow_rewind) is not: it
  // replaces the partition every time. kFailedPrecondition, changing
  // nothing, if the engine has committed a higher offset for the partition
  // than the snapshot, from inside a handler, or on a read-only engine;
  // kInvalidArgument, changing nothing, for a bad source, partition, offset
  // (0 <= offset < INT64_MAX) or record (id_hash not 16 bytes, non-finite
  // expiry), or for a state key or an id_hash that appears twice.
  // REQUIRES: nothing consumes the partition on this engine meanwhile
  // (import before the partition is assigned here).
  virtual absl::Status ImportPartition(const PartitionSnapshot& snapshot) = 0;

  // How ImportPartition(snapshot, options) imports.
  struct ImportOptions {
    // Also replace a partition whose committed offset is past the
    // snapshot's, moving the offset back to the snapshot's: a stale copy
    // corrected from a changelog. Such an import replaces the partition and
    // sets its offset every time, also when the same snapshot was imported
    // before (the partition may have moved on since). Default: false
    // (kFailedPrecondition).
    bool allow_rewind = false;
  };
  // As ImportPartition(snapshot), with `options`. The default, for Engine
  // implementations outside idem, imports as ImportPartition(snapshot) and
  // returns kUnimplemented for allow_rewind.
  virtual absl::Status ImportPartition(const PartitionSnapshot& snapshot,
                                       const ImportOptions& options) {
    if (options.allow_rewind) {
      return absl::UnimplementedError("ImportPartition: allow_rewind");
    }
    return ImportPartition(snapshot);
  }

  // Applies `changes` on top of the partition's copy in one atomic commit,
  // durable on return: writes and deletes its state keys (with their
  // expiries), adds its dedupe records (those expired by the engine's time
  // are left out), sets and deletes its timers, moves its stream time
  // forward and records its offset. Unlike ImportPartition it replaces nothing
  // else and writes no record of its own: applying the same changes twice
  // leaves the same copy. kFailedPrecondition, changing nothing, if the engine
  // has committed a higher offset for the partition than changes.offset (unless
  // options.allow_rewind), from inside a handler, on a read-only engine, or
  // for records into a store-scoped store; kInvalidArgument as for
  // ImportPartition (a bad offset, a key, timer key or id_hash twice, a
  // timer with a bad domain or an infinite fire_at). REQUIRES: nothing
  // consumes the partition on this engine meanwhile. The default, for
  // Engine implementations outside idem, returns kUnimplemented.
  virtual absl::Status ApplyPartitionChanges(const PartitionChanges& changes,
                                             const ImportOptions& options) {
    (void)changes;
    (void)options;
    return absl::UnimplementedError("ApplyPartitionChanges");
  }

  // The stream time of (source, partition): the largest committed event
  // time of its messages (Message::event_time), never decreasing;
  // absl::InfinitePast() if none carried one. It commits in the same write
  // as the partition's offset and moves with ExportPartition and
  // ImportPartition. kInvalidArgument for a bad source or partition. The
  // default, for Engine implementations outside idem, returns
  // kUnimplemented.
  virtual absl::StatusOr<absl::Time> StreamTime(std::string_view source,
                                                int32_t partition) {
    (void)source;
    (void)partition;
    return absl::UnimplementedError("StreamTime");
  }

  // Fires the due timers of (source, partition) in `domain`, earliest first
  // (ties in timer-key order), at most `max`: those with fire_at <= `up_to`
  // and, for kEvent, <= the partition's stream time, for kProcessing, <= the
  // engine's clock. Each timer's `handler` runs in a Txn of the timer's
  // partition (Txn::stream_time, SetTimer and CancelTimer work there too);
  // its writes and emits commit in the same write as the timer's deletion,
  // and its emits get message IDs derived from the timer (its partition,
  // domain, key and fire_at), so a fire that runs again after a crash emits
  // the same IDs. Several fires may share one write. Returns how many
  // timers fired (those whose handler failed permanently included). A
  // handler's transient failure commits the fires before it, keeps its
  // timer (it fires again on a later call) and returns its status; a
  // permanent failure (PermanentError) deletes the timer without its
  // effects and counts it in Stats::timers_dead_lettered. kInvalidArgument
  // for a bad source or partition, a `domain` that is no TimeDomain or
  // `max` == 0; kFailedPrecondition from inside a handler or on a read-only
  // engine; storage and clock errors as Process. Durable on return under
  // kSync; under kBuffered with the next sync, as Process's commits. The
  // default, for Engine implementations
  // outside idem, returns kUnimplemented.
  virtual absl::StatusOr<size_t> FireTimers(std::string_view source,
                                            int32_t partition,
                                            TimeDomain domain, absl::Time up_to,
                                            size_t max, TimerHandler handler) {
    (void)source, (void)partition, (void)domain, (void)up_to, (void)max,
        (void)handler;
    return absl::UnimplementedError("FireTimers");
  }

  // The earliest committed timer of (source, partition) in `domain`, due or
  // not, or nullopt if there is none. Errors as StreamTime, and
  // kInvalidArgument for a `domain` that is no TimeDomain.
  virtual absl::StatusOr<std::optional<TimerFire>> NextTimer(
      std::string_view source, int32_t partition, TimeDomain domain) {
    (void)source, (void)partition, (void)domain;
    return absl::UnimplementedError("NextTimer");
  }

  // Writes a consistent copy of the store to `dir`, which must not exist;
  // Engine::Open can open it. kInvalidArgument if `dir` exists.
  virtual absl::Status Checkpoint(const std::string& dir) = 0;

  // Calls `visit` for every stored dedupe record, state entry, offset and
  // unacknowledged outbox entry, in that order (each in key order, the
  // outbox by position; with expiry buckets, dedupe records family
  // by family, so an ID re-processed after its expiry may appear twice, once
  // expired), from a consistent snapshot. Stops at, and returns, the first
  // non-OK status `visit` returns. kFailedPrecondition or kUnavailable,
  // visiting nothing, if the clock cannot be read (idem/clock.h).
  virtual absl::Status Dump(
      absl::FunctionRef<absl::Status(const DumpEntry&)> visit) = 0;
};

}  // namespace idem

#endif  // IDEM_ENGINE_H_
