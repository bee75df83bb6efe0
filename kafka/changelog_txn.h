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
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/forwarding_txn.h"
#include "idem/kafka/consumer_options.h"
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

  void Put(std::string_view key, std::string_view value) override;
  // Changelog records carry no expiry yet: a restored copy would keep the
  // value forever. So a write with a ttl is refused (the message fails
  // with kUnimplemented and nothing of it commits); a Put without one is
  // a plain Put. (Under Options::state_ttl the engine's values expire but
  // the changelog's do not: docs/state.md.)
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

  // Call once the handler returned OK: the first refused write's error, or
  // OK after emitting the changelog records (the dedupe record, the state
  // changes in key order, then the offset record).
  absl::Status Finish() { return FinishInto(target()); }
  // As Finish, emitting into `out` instead of the engine's Txn.
  absl::Status FinishInto(Txn& out);

 private:
  // The key relative to the partition's prefix, or nullopt (and the write
  // refused) if `key` is outside it or is the epoch key.
  std::optional<std::string_view> Relative(std::string_view key);
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
  std::string result_;
  absl::Status refused_;
};

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_CHANGELOG_TXN_H_
