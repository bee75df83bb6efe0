// ChangelogImageBuilder folds the records of one changelog partition's two
// topics (kafka/changelog_format.h) into what they say about the input
// partition: the state (with the expiries of values that expire), timers,
// stream time, dedupe records and offset of the last complete commit,
// without Kafka, so restores are tested on their own. Not thread-safe.
//
// Only complete commits count: a commit's changes (the records carrying its
// epoch's mark) are handed out when its epoch's next "o/" record arrives.
// Changes not followed by such a record are the remains of a commit whose
// publication an owner did not finish (it was killed, or a delivery
// failed); their keys (state keys, and timer keys apart) are `orphans`,
// which the next owner sets back
// (docs/scale-out.md). A dedupe record counts only if the commit that wrote
// it is complete: its offset is at most the last offset of its epoch.
//
// Epochs supersede each other in log order: once an "o/" record of a new
// epoch arrives, the epoch before it is over. A record of an epoch that is
// over (a member that lost the partition and still published: a zombie)
// completes nothing: its writes are dropped, and their keys count as
// orphans, so that the next owner publishes their values again (after
// compaction a dropped write may be the only record of its key left). The
// builder hands out what completed since it was last asked (TakeChanges): a
// restore, or a copy that follows the changelog as it grows, applies each piece
// on top of the last.

#ifndef IDEM_KAFKA_CHANGELOG_IMAGE_H_
#define IDEM_KAFKA_CHANGELOG_IMAGE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "idem/partition_snapshot.h"
#include "kafka/changelog_format.h"
#include "kafka/partition_reader.h"

namespace idem::kafka {

// What became complete since the builder's last TakeChanges: what a copy
// that follows the changelog (a standby) applies on top of itself.
struct ChangelogChanges {
  // The last complete commit's mark so far; nullopt if none yet.
  std::optional<ChangelogMark> last;
  // (key, value), or nullopt for a key deleted.
  absl::btree_map<std::string, std::optional<std::string>> writes;
  // Of `writes`, the keys whose last write expires, with their expiry
  // (format version 2); the other keys of `writes` never expire.
  absl::btree_map<std::string, absl::Time> expires_at;
  // (timer key, timer), or nullopt for a timer cancelled or fired (format
  // version 2).
  absl::btree_map<std::string, std::optional<ChangelogTimer>> timers;
  // The partition's stream time as the last complete commit that carried
  // one left it; nullopt if none did.
  std::optional<absl::Time> stream_time;
  // The dedupe records whose commits completed, in id_hash order; the
  // latest of each ID, unless expired.
  std::vector<PartitionRecord> records;
  // What was read since the last TakeChanges: records of both topics, and
  // their keys' and values' bytes.
  int64_t records_read = 0;
  int64_t bytes_read = 0;
  // Of records_read: records of epochs that were over (left out).
  int64_t stale_records = 0;
};

class ChangelogImageBuilder {
 public:
  // Without `keep_state` the builder keeps no state values: it tells the
  // last complete commit and the orphans only, in memory that does not grow
  // with the partition.
  explicit ChangelogImageBuilder(bool keep_state = true)
      : keep_state_(keep_state) {}

  // A record of the changelog topic, in log order. kDataLoss naming its
  // offset if it does not decode (an unknown key, an "o/" record without
  // an offset); kFailedPrecondition naming its format version if that is
  // newer than this build reads (kChangelogFormatVersion).
  absl::Status AddChangelogRecord(const LogRecord& record);
  // A record of the dedupe topic, in log order. kDataLoss as above.
  absl::Status AddDedupeRecord(const LogRecord& record);

  // The changes completed since the last call (or since the start), with
  // dedupe records that expired by `now` left out. A dedupe record whose
  // commit is not complete yet stays for a later call.
  ChangelogChanges TakeChanges(absl::Time now);
  // Keys written by a commit not finished (yet), or by an epoch that was
  // over, and not written by a complete commit since.
  absl::btree_set<std::string> Orphans() const;
  // The same for timer keys ("t/" records).
  absl::btree_set<std::string> TimerOrphans() const;
  // Whether there are orphans of either kind.
  bool HasOrphans() const {
    return !Orphans().empty() || !TimerOrphans().empty();
  }
  // The last complete commit's mark so far; nullopt if none.
  std::optional<ChangelogMark> Last() const { return changes_.last; }

  // false: the broken variant in which no epoch is ever over (every "o/"
  // record completes every pending write, whatever its epoch), for tests
  // that must show a zombie's records are caught. Default: true.
  void set_epochs_end(bool epochs_end) { epochs_end_ = epochs_end; }

 private:
  struct Dedupe {
    ChangelogMark mark;
    std::string id_hash;
    absl::Time expires_at;
    std::string result;
  };

  // A state write (value nullopt: deleted) and its expiry, if it has one.
  struct StateWrite {
    std::optional<std::string> value;
    std::optional<absl::Time> expires_at;
  };
  // One epoch's writes since its last "o/" record.
  struct Writes {
    absl::btree_map<std::string, StateWrite> state;
    absl::btree_map<std::string, std::optional<ChangelogTimer>> timers;
  };

  // The "o/" record of `epoch`: completes that epoch's pending writes, or,
  // for an epoch that is over, drops them.
  void Mark(int64_t epoch, int64_t offset,
            std::optional<absl::Time> stream_time);
  // Lays a complete commit's `writes` onto changes_.
  void Complete(Writes& writes);
  // A "t/" record of the epoch of `mark`, or a dropped one.
  absl::Status AddTimerRecord(const LogRecord& record, std::string_view key,
                              const ChangelogMark& mark);
  // Drops `epoch`'s pending writes; their keys become orphans.
  void DropPending(int64_t epoch);

  const bool keep_state_;
  bool epochs_end_ = true;
  ChangelogChanges changes_;
  // Per epoch, its writes since its last "o/" record (nullopt: deleted).
  absl::flat_hash_map<int64_t, Writes> pending_;
  // Keys of dropped writes not written by a complete commit since.
  absl::btree_set<std::string> dropped_;
  absl::btree_set<std::string> dropped_timers_;
  // Epochs that are over: another epoch's "o/" record followed theirs.
  absl::flat_hash_set<int64_t> over_;
  // The last offset of each epoch, from its last "o/" record.
  absl::flat_hash_map<int64_t, int64_t> last_offset_;
  std::vector<Dedupe> dedupe_;  // not taken yet, in log order
};

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_CHANGELOG_IMAGE_H_
