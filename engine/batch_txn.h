// The Txn a handler receives, and the state overlay of the batch being built.
//
// A BatchTxn buffers one message's state writes in its own layer
// (engine/state_layer.h), and its emits in order. Reads look through that
// layer, then the writes of earlier messages of the batch (the
// BatchOverlay), then the commits in flight, then the store. If the handler
// succeeds, Apply lays its writes onto the overlay, which becomes the
// commit's state writes, and the caller takes the emits; if it fails, the
// BatchTxn is simply dropped, so nothing of it reaches the commit. Each
// read past the overlay (a key, or the part of a range a scan read) is
// noted in a StateReads with the version of engine/state_versions.h current
// at the read, so that the commit can tell whether a concurrent commit
// changed it since; a key that a commit in flight writes reads that
// commit's value rather than the store's.
//
// Not thread-safe; lives for one handler call.

#ifndef IDEM_ENGINE_BATCH_TXN_H_
#define IDEM_ENGINE_BATCH_TXN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/state_layer.h"
#include "engine/state_value.h"
#include "engine/state_versions.h"
#include "engine/timer_record.h"
#include "engine/timer_writes.h"
#include "idem/txn.h"
#include "rocksdb/db.h"

namespace idem {

// The state writes of earlier messages of the batch.
using BatchOverlay = StateLayer;

// One Txn::Emit call.
struct Emitted {
  std::string destination;
  int32_t partition = -1;
  std::string key;
  std::string value;
  bool tombstone = false;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Where a BatchTxn's timers go (engine/timer_writes.h). Pointers borrowed.
struct TimerScope {
  // idem.timers; null in a store without it (timers then fail).
  rocksdb::ColumnFamilyHandle* family = nullptr;
  // The validation of timer index reads.
  StateVersions* versions = nullptr;
  StateReads* reads = nullptr;
  // The timer writes of the commit so far (earlier messages or fires).
  const TimerWrites* batch = nullptr;
  StreamTimes* stream_times = nullptr;
  // The partition (engine/timer_record.h) of the fired timer, or empty:
  // then that of `source` and `partition`, the message's, made on first
  // use (a message without a source has none: timers then fail).
  std::string partition_key;
  std::string_view source;
  int32_t partition = 0;
  // The message's own event time in microseconds, or kNoStreamTime.
  int64_t event_micros = kNoStreamTime;
};

class BatchTxn : public Txn {
 public:
  // All pointers are borrowed and must outlive the BatchTxn. With `versions`
  // and `reads`, each store read is noted in `reads`.
  BatchTxn(const BatchOverlay* overlay, rocksdb::DB* db,
           rocksdb::ColumnFamilyHandle* state,
           StateVersions* versions = nullptr, StateReads* reads = nullptr);

  absl::StatusOr<std::optional<std::string>> Get(std::string_view key) override;
  void Put(std::string_view key, std::string_view value) override;
  absl::Status Put(std::string_view key, std::string_view value,
                   const PutOptions& options) override;
  void Delete(std::string_view key) override;
  absl::Status Scan(std::string_view begin, std::string_view end,
                    ScanVisitor visit,
                    const ScanOptions& options = ScanOptions()) override;
  absl::Status Merge(std::string_view key, MergeOp op,
                     std::string_view operand) override;
  absl::Status DeleteRange(std::string_view begin,
                           std::string_view end) override;
  void SetResult(std::string_view result) override;
  void EmitWithOptions(std::string_view destination, std::string_view key,
                       std::string_view value,
                       const EmitOptions& options) override;

  absl::Time stream_time() const override;
  absl::Status SetTimer(std::string_view timer_key, TimeDomain domain,
                        absl::Time fire_at,
                        std::string_view payload = {}) override;
  absl::Status CancelTimer(std::string_view timer_key) override;

  // Gives the Txn timers (without: SetTimer and CancelTimer fail with
  // kFailedPrecondition). `scope` is borrowed.
  void set_timers(const TimerScope* scope) { timers_ = scope; }
  // The index entry of `timer_key` in the scope's partition as this Txn
  // sees it (its writes, the commit's, the commits in flight, the store),
  // noted as a read; nullopt if there is no such timer. A storage error is
  // kept as read_error() too.
  absl::StatusOr<std::optional<TimerIndex>> ReadTimer(
      std::string_view timer_key);
  // This Txn's timer writes (laid onto the commit's by the caller once
  // Apply succeeded).
  TimerWrites& timer_writes() { return timer_writes_; }

  const std::string& result() const { return result_; }

  // The emits, in call order (valid ones only if Apply succeeded).
  std::vector<Emitted>& emitted() { return emitted_; }

  // The first error a Get hit reading the store (a storage error: the whole
  // commit fails even if the handler swallowed it).
  const absl::Status& read_error() const { return read_error_; }

  // What record_expires_at returns: the expiry the engine placed the
  // message's record at.
  void set_record_expires_at(absl::Time expires_at) {
    record_expires_at_ = expires_at;
  }
  absl::Time record_expires_at() const override { return record_expires_at_; }

  // How this Txn's state reads and writes handle expiry
  // (engine/state_value.h). Default: raw values, nothing expires, no
  // default ttl.
  struct StateTime {
    // How reads judge stored and buffered values.
    StateReadTime read;
    // The engine time writes expire from.
    int64_t now_micros = 0;
    // Options::state_ttl: the ttl of every write without its own.
    absl::Duration default_ttl = absl::InfiniteDuration();
  };
  void set_state_time(const StateTime& time) { time_ = time; }

  // Lays this message's writes onto `overlay`. kInvalidArgument (and
  // `overlay` unchanged) if a key or value is too large for RocksDB (4 GiB),
  // or an emit, merge or range deletion was invalid (say, an emit's
  // destination empty or over kMaxSourceBytes): the message must fail.
  absl::Status Apply(BatchOverlay* overlay);

  // The expiry (µs since the Unix epoch, engine time) of a write with `ttl`
  // (infinite: Options::state_ttl's), kNeverExpires for none: what a Put
  // with that ttl stores (the changelog carries it too).
  int64_t ExpiryOf(absl::Duration ttl) const;

 private:
  absl::Time record_expires_at_ = absl::InfiniteFuture();
  StateTime time_;
  const BatchOverlay* const overlay_;
  rocksdb::DB* const db_;
  rocksdb::ColumnFamilyHandle* const state_;
  // The first error a Get or Scan hit reading the store, kept.
  absl::Status NoteReadError(absl::Status error) const;

  // kFailedPrecondition unless the Txn has timers and a partition.
  absl::Status CheckTimers() const;
  // The scope's partition key (empty for none), made on first use.
  const std::string& TimerPartition() const;

  StateVersions* const versions_;
  StateReads* const reads_;
  StateLayer writes_;
  const TimerScope* timers_ = nullptr;
  mutable std::string timer_partition_;  // TimerPartition's, once made
  TimerWrites timer_writes_;
  std::string result_;
  std::vector<Emitted> emitted_;
  // The first invalid Emit, Merge or DeleteRange, reported by Apply.
  absl::Status emit_error_;
  mutable absl::Status read_error_;  // set by const stream_time() too
};

}  // namespace idem

#endif  // IDEM_ENGINE_BATCH_TXN_H_
