// Txn is a handler's view of the application state while it processes one
// message, and Handler the user code that the engine runs once per message ID.
//
// A Txn is valid only during the handler call that received it and is not
// thread-safe: use it from the handler's thread only. Its writes and emits
// are buffered and committed atomically with the message's dedupe record and
// source offset if, and only if, the handler returns OK.

#ifndef IDEM_TXN_H_
#define IDEM_TXN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "idem/merge.h"
#include "idem/message.h"
#include "idem/timers.h"

namespace idem {

// Called for each key-value pair a scan visits, in scan order; return false
// to stop the scan there. Both views are valid only during the call.
using ScanVisitor =
    absl::FunctionRef<bool(std::string_view key, std::string_view value)>;

// How a scan (Txn::Scan, Engine::ScanState) walks its range.
struct ScanOptions {
  // Visit from the last key of the range down to the first.
  bool reverse = false;
  // Stop after visiting this many keys; 0 means no limit. A limit also
  // narrows what a handler's scan is validated against (docs/state.md).
  size_t limit = 0;
};

// How Txn::Put with options writes a value.
struct PutOptions {
  // How long the value lives: it expires at the engine's time of the write
  // (processing time, read from Options::clock when the commit starts,
  // never going back: idem/clock.h) plus `ttl`. From then on every read
  // (Get, scans, Engine::GetState and ScanState, exports) sees the key as
  // absent, and compaction drops it (docs/state.md, "State that expires").
  // A later write of the key replaces the value and its expiry; a Merge
  // keeps the expiry of the value it folds onto (or, under
  // Options::state_ttl, sets a new one). Must be positive; infinite (the
  // default) means the value has no TTL of its own: Options::state_ttl
  // applies (none by default).
  absl::Duration ttl = absl::InfiniteDuration();
};

class Txn {
 public:
  virtual ~Txn() = default;

  // Returns the value of `key`, or nullopt if absent. Sees this message's own
  // writes, then those of earlier messages of the same batch, then the store.
  // A storage error is returned as is; the handler should return it.
  virtual absl::StatusOr<std::optional<std::string>> Get(
      std::string_view key) = 0;

  // Buffers a write of `value` to `key`. Keys and values are arbitrary bytes.
  virtual void Put(std::string_view key, std::string_view value) = 0;

  // As Put, with options: a value that expires (PutOptions::ttl).
  // kInvalidArgument for a ttl that is zero or negative; the message then
  // fails with that error (as an invalid Emit does), even if the handler
  // goes on. The first write with a ttl to a store of format 5 or older
  // marks it format 6 (docs/design.md, "Store format"), which older builds
  // refuse to open. The default, for Txn implementations outside idem,
  // writes a value without a ttl with Put and returns kUnimplemented for
  // one with a ttl.
  virtual absl::Status Put(std::string_view key, std::string_view value,
                           const PutOptions& options);

  // Buffers a deletion of `key`. Deleting an absent key is not an error.
  virtual void Delete(std::string_view key) = 0;

  // Visits the keys in [begin, end) in byte order (reverse order with
  // options.reverse), with their values, until `visit` returns false or
  // options.limit keys were visited. An empty `end` means no upper bound.
  // Sees what Get sees: this message's own writes, those of earlier
  // messages of the batch and of commits in flight, over the store, merged
  // in key order, with deleted keys hidden and merges folded.
  // The part of the range the scan read (up to the last key visited when it
  // stopped early) is validated when the commit is queued: if any key in it
  // was written, inserted or deleted by a commit queued after the scan
  // read, the handlers run again, as for a Get (no range locks: a slow
  // handler blocks no one; a wide scan over keys others insert into reruns
  // often, so narrow it, or give it a limit).
  // kInvalidArgument if `end` is non-empty and below `begin`, or a bound is
  // larger than a key may be (4 GiB); a storage error as Get returns it.
  // An exception thrown by `visit` propagates to the handler (the message
  // then fails, and nothing of it commits). The default, for Txn
  // implementations outside idem, returns kUnimplemented.
  virtual absl::Status Scan(std::string_view begin, std::string_view end,
                            ScanVisitor visit,
                            const ScanOptions& options = ScanOptions());

  // Scan over the keys that start with `prefix` (all keys if it is empty).
  absl::Status ScanPrefix(std::string_view prefix, ScanVisitor visit,
                          const ScanOptions& options = ScanOptions());

  // Buffers a merge of `operand` into `key` by `op` (idem/merge.h): a blind
  // write that reads nothing, so merges of one key by concurrent handlers
  // never conflict and never make a handler run again. A later Get or scan
  // of the key, in this handler or another, sees the folded value.
  // kInvalidArgument for an unknown `op` or an operand that does not fit
  // it; the message then fails with that error (as an invalid Emit does),
  // even if the handler goes on. The default, for Txn implementations
  // outside idem, reads the key, folds and writes it back (Get + Put).
  virtual absl::Status Merge(std::string_view key, MergeOp op,
                             std::string_view operand);

  // Buffers a deletion of every key in [begin, end), committed in the same
  // write as the rest of the message. It counts as a write of every key in
  // the range: a handler in flight that read or scanned any of them runs
  // again. kInvalidArgument if `end` is empty or below `begin` (the message
  // then fails with that error, as an invalid Emit does); begin == end
  // deletes nothing. The default, for Txn implementations outside idem,
  // scans the range and deletes each key it finds.
  virtual absl::Status DeleteRange(std::string_view begin,
                                   std::string_view end);

  // Sets the bytes stored with the dedupe record and returned to this
  // delivery and to every duplicate of it. The last call wins.
  virtual void SetResult(std::string_view result) = 0;

  // When this message's dedupe record expires if its commit lands: the
  // engine's time when the call began (which never goes back, even when
  // Options::clock does: idem/clock.h) plus the message's ttl, or the
  // dedupe window, rounded as the record stores it. For a copy of the
  // record kept elsewhere (a changelog) that must expire with it.
  // InfiniteFuture from a Txn that is not the engine's (a test double).
  virtual absl::Time record_expires_at() const {
    return absl::InfiniteFuture();
  }

  // One header of an emitted message: (name, value), arbitrary bytes.
  using Header = std::pair<std::string_view, std::string_view>;

  // Where and how a message is published.
  struct EmitOptions {
    // The partition of `destination` to publish to (>= 0), or -1 to let the
    // relay's partitioner choose one by key.
    int32_t partition = -1;
    // Publish a null value, a Kafka tombstone (log compaction then removes
    // `key`), instead of an empty one. `value` must be empty.
    bool tombstone = false;
    // Headers stored with the entry (OutboxEntry::headers) for the relay to
    // publish.
    absl::Span<const Header> headers;
  };

  // Buffers an outgoing message, committed in the same write as this
  // message's dedupe record, state writes and offset, into the store's
  // outbox (idem/outbox.h; a relay reads it with Engine::ReadOutbox), with
  // its destination partition, tombstone flag and headers
  // (OutboxEntry::partition, OutboxEntry::tombstone, OutboxEntry::headers).
  // Nothing is emitted for a failed handler or a duplicate. `destination`
  // must be 1 to kMaxSourceBytes bytes without a NUL byte, and `key`,
  // `value` and headers together under 4 GiB; a partition < -1, or a
  // tombstone with a non-empty value, is refused too. Otherwise the message
  // fails with kInvalidArgument (kFailed) and nothing of it commits.
  //
  // The one emit a Txn implements: Emit and EmitWithHeaders call it.
  virtual void EmitWithOptions(std::string_view destination,
                               std::string_view key, std::string_view value,
                               const EmitOptions& options) = 0;

  // EmitWithOptions with the default options: no headers, the partitioner
  // chooses the partition.
  void Emit(std::string_view destination, std::string_view key,
            std::string_view value) {
    EmitWithOptions(destination, key, value, EmitOptions());
  }

  // EmitWithOptions with headers only.
  void EmitWithHeaders(std::string_view destination, std::string_view key,
                       std::string_view value,
                       absl::Span<const Header> headers) {
    EmitOptions options;
    options.headers = headers;
    EmitWithOptions(destination, key, value, options);
  }

  // The stream time of this message's (source, partition): the largest
  // event time of its committed messages and of the earlier messages of
  // this batch, and this message's own (Message::event_time, unless beyond
  // kMaxEventTimeAhead); absl::InfinitePast() if none carried one. In a
  // timer's handler, the stream time of the timer's partition. The default,
  // for Txn implementations outside idem, returns absl::InfinitePast().
  virtual absl::Time stream_time() const { return absl::InfinitePast(); }

  // Buffers a timer named `timer_key` of this message's (source, partition)
  // (in a timer's handler, the timer's partition), committed in the same
  // write as the rest of the message: once `fire_at` is reached in
  // `domain`, Engine::FireTimers runs its TimerHandler with `payload`. One
  // timer per key per partition: setting a key again moves it (to a new
  // time, domain and payload). A set timer is read like a state key: a
  // handler that fires or sets the same key concurrently makes one of the
  // two run again. Returns kInvalidArgument for an infinite `fire_at` or a
  // `domain` that is no TimeDomain (the message then fails, as for an
  // invalid Emit, even if the handler goes on); kFailedPrecondition for a
  // message without a source; kOutOfRange, setting nothing, for an
  // event-time timer at or below stream_time() (that time has passed: a
  // closed window cannot be re-armed; the message is unaffected). The
  // default, for Txn implementations outside idem, returns kUnimplemented.
  virtual absl::Status SetTimer(std::string_view timer_key, TimeDomain domain,
                                absl::Time fire_at,
                                std::string_view payload = {});

  // Buffers the deletion of the timer named `timer_key` of this message's
  // partition, if there is one (cancelling none is not an error); read and
  // validated as SetTimer. kFailedPrecondition for a message without a
  // source. The default, for Txn implementations outside idem, returns
  // kUnimplemented.
  virtual absl::Status CancelTimer(std::string_view timer_key);
};

// User code run for each new message. Return OK to commit the Txn's writes;
// any other status (or a thrown exception) discards them and the message's
// outcome is kFailed.
//
// Concurrency: handlers of concurrent Process/ProcessBatch calls on one
// engine run at the same time, on the callers' threads, with no engine-wide
// lock held; so a handler may block on slow external I/O without stopping
// the others. Never two at once for one message ID: a second delivery waits
// for the first's outcome. Txn::Get/Put/Delete behave as if the handlers had
// run one at a time in commit order: if another commit changed a key this
// handler read (Txn::Get) after it read it, nothing of this run commits and
// the handler runs again, with fresh reads (its batch's handlers all run
// again; Stats::handler_reruns counts them). That happens only when two
// handlers in flight touched the same key, one of them reading it. So a
// handler may run more than once for one delivery, and what it does outside
// the Txn happens each time: pass the message ID as the idempotency key of
// external calls, and keep side effects in Txn writes and emits, which
// commit once.
//
// A handler must not call Process, ProcessBatch, Forget, WaitDurable,
// ReadOutbox, AckOutbox, CompactExpired, Checkpoint, SetCommittedOffset,
// ImportPartition or ApplyPartitionChanges on the same engine (they fail
// with kFailedPrecondition). Reading committed data (GetState, Seen,
// CommittedOffset, GetStats, Dump, options) is allowed, but Txn::Get is what
// sees the batch and is validated. The same holds at any depth: a handler
// may call another engine, whose handler may call back into the first engine
// (the calls above fail, the reads are served). Two threads that nest the
// same engines in opposite orders can deadlock if they deliver the same
// message IDs to both engines (each waits for the other's delivery of the
// ID), if handlers of both engines run again after a conflict at the same
// time (reruns of one engine take turns), or while both engines reopen
// their store or change expiry buckets.
using Handler = absl::FunctionRef<absl::Status(const Message&, Txn&)>;

}  // namespace idem

#endif  // IDEM_TXN_H_
