// ChangelogTxn is the Txn a Consumer in changelog mode
// (ConsumerOptions::changelog_topic) hands its handler for one record of
// input partition p. It passes reads, results and emits through to the
// engine's Txn, passes and keeps the writes made through
// PartitionTxn(topic, p), and refuses every other write: such a write would
// not follow the partition to its next owner, so the message fails with
// kFailedPrecondition and nothing of it commits. After the handler returns
// OK, Finish emits the commit's changelog records (kafka/changelog_format.h)
// through the engine's outbox, so they commit with the state writes, the
// dedupe record and the offset, or not at all.
//
// Valid during one handler call; not thread-safe, as any Txn.

#ifndef IDEM_KAFKA_CHANGELOG_TXN_H_
#define IDEM_KAFKA_CHANGELOG_TXN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/forwarding_txn.h"
#include "idem/kafka/consumer_options.h"
#include "idem/timers.h"
#include "idem/txn.h"
#include "kafka/changelog_format.h"

namespace idem::kafka {

// Where a partition's changelog records go, and as which commit.
struct ChangelogTarget {
  std::string changelog_topic;
  std::string dedupe_topic;
};

class ChangelogTxn final : public ForwardingTxn {
 public:
  // `txn`, `record` and `target` are borrowed for the ChangelogTxn's life.
  // `epoch`: the member's epoch of the partition. The changelog's copy of
  // the record's dedupe record expires when the engine's does
  // (Txn::record_expires_at).
  // `expiry_override`, for a broken variant only, replaces that expiry.
  ChangelogTxn(Txn& txn, const Record& record, const ChangelogTarget& target,
               int64_t epoch,
               std::optional<absl::Time> expiry_override = std::nullopt);

  // A value that expires (PutOptions::ttl, Options::state_ttl) carries its
  // expiry, as the engine's Txn stored it, in its changelog record
  // (kChangelogExpiresHeader), so that a restored copy expires when the
  // original does. Inside a Txn that is not the engine's (whose expiries it
  // cannot tell) a Put with a ttl is refused (kUnimplemented, the message
  // fails) and other writes carry no expiry.
  void Put(std::string_view key, std::string_view value) override;
  absl::Status Put(std::string_view key, std::string_view value,
                   const PutOptions& options) override;
  void Delete(std::string_view key) override;
  // A merge is read, folded and written (Get + Put), so that the changelog,
  // compacted to the last record of each key, holds the folded value; it is
  // no longer blind, and concurrent merges of one key conflict here.
  absl::Status Merge(std::string_view key, MergeOp op,
                     std::string_view operand) override;
  // A range deletion is a deletion of each key the range holds (found with
  // Scan), each a tombstone in the changelog that a restore applies.
  absl::Status DeleteRange(std::string_view begin,
                           std::string_view end) override;
  void SetResult(std::string_view result) override;
  // A timer set or cancelled here is set or cancelled in the engine's Txn
  // and, if that accepted it, becomes a "t/" record of the commit.
  absl::Status SetTimer(std::string_view timer_key, TimeDomain domain,
                        absl::Time fire_at,
                        std::string_view payload = {}) override;
  absl::Status CancelTimer(std::string_view timer_key) override;

  // Makes this the Txn of `fire`'s handler rather than of a record's: the
  // commit emits no dedupe record, and the timer's tombstone unless the
  // handler sets it again. `record`'s offset is then the partition's
  // committed offset, which a fire leaves as it is. Call before the
  // handler runs.
  void ForFire(const TimerFire& fire);

  // The broken variant (ConsumerHooks::changelog_drops_timers): the commit
  // emits no "t/" records.
  void DropTimers() { timers_.clear(); }

  // Call once the handler returned OK: the first refused write's error, or
  // OK after emitting the changelog records (the dedupe record, the state
  // changes in key order, the timer changes in key order, then the offset
  // record with the partition's stream time).
  absl::Status Finish() { return FinishInto(target()); }
  // As Finish, emitting into `out` instead of the engine's Txn.
  absl::Status FinishInto(Txn& out);

 private:
  // The key relative to the partition's prefix, or nullopt (and the write
  // refused) if `key` is outside it or is the epoch key.
  std::optional<std::string_view> Relative(std::string_view key);
  // Notes a write of `relative` (nullopt: deleted) expiring at `expiry`
  // (µs, kNeverExpires for none).
  void NoteWrite(std::string_view relative,
                 std::optional<std::string_view> value, int64_t expiry);
  // The expiry the engine's Txn gives a write with `ttl`; nullopt if the
  // target is not the engine's.
  std::optional<int64_t> ExpiryOf(absl::Duration ttl) const;
  // The record's dedupe key in hex: the engine's hash of its ID
  // (engine/handler_scope.h) inside the engine's handler call; hashed here
  // for a Txn of another kind.
  std::string DedupeKeyHex() const;

  const Record& record_;
  const ChangelogTarget& target_;
  const int64_t epoch_;
  const std::optional<absl::Time> expiry_override_;
  const std::string prefix_;
  // Relative key -> value (nullopt: deleted), the last write of each.
  absl::btree_map<std::string, std::optional<std::string>> writes_;
  // Of writes_, the keys whose value expires, with the expiry (µs).
  absl::flat_hash_map<std::string, int64_t> expiries_;
  // Timer key -> timer (nullopt: cancelled or fired), the last of each.
  absl::btree_map<std::string, std::optional<ChangelogTimer>> timers_;
  bool fire_ = false;
  std::string result_;
  absl::Status refused_;
};

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_CHANGELOG_TXN_H_
