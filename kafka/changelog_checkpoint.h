// CheckpointTracker keeps what a changelog-mode member needs to checkpoint
// its partitions (docs/scale-out.md, "Restarts"): a member whose copy is
// known to be the changelog's up to an offset C (ChangelogCheckpoint, kept in
// the partition's state under kCheckpointStateKey) reads only the changelog
// from C when the partition is assigned again, not from its start.
//
// A checkpoint is only ever written at an offset up to which the member knows
// the changelog holds nothing but what its copy holds:
// - after ChangelogKeeper::Check read the changelog (from its start, or from
//   an earlier checkpoint) and found its last complete commit to be the
//   engine's, at the end of that read;
// - at a revocation or close, once the relay published everything, at the
//   partition's high watermark, if the tracker counted every record between
//   the last such point and it as the member's own: the relay reported each
//   published changelog record (and, with transactions, each committed
//   transaction's marker) since, no round failed, and the last record
//   published is the mark of the engine's last commit. A record of anyone
//   else (a zombie, a member restored meanwhile) makes the count differ, and
//   nothing is written.
// A checkpoint is a shortcut only: Check still reads the changelog from C
// and restores when what follows is not this member's copy.
//
// Thread-safe: the relay's reports arrive on the consumer's polling thread,
// beside the keeper's calls.

#ifndef IDEM_KAFKA_CHANGELOG_CHECKPOINT_H_
#define IDEM_KAFKA_CHANGELOG_CHECKPOINT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "idem/outbox.h"
#include "kafka/changelog_format.h"

namespace idem::kafka {

class CheckpointTracker {
 public:
  explicit CheckpointTracker(std::string changelog_topic)
      : changelog_topic_(std::move(changelog_topic)) {}

  // The member's copy of `partition` is the changelog's up to `end`:
  // counting starts there.
  void Verified(int32_t partition, int64_t end);

  // The relay's report of a round: the entries it published (delivered;
  // with `transaction`, in a committed transaction). `complete` false: the
  // round failed, so what reached the brokers is not known, and nothing is
  // counted until the next Verified.
  void NotePublished(absl::Span<const OutboxEntry* const> published,
                     bool complete, bool transaction);

  // The checkpoint to write for `partition` now that its changelog's high
  // watermark is `high` and the engine's last commit is `last` (the mark of
  // the member's epoch and the engine's offset): nullopt unless every record
  // up to `high` is accounted for (see the file comment).
  std::optional<ChangelogCheckpoint> Checkpoint(int32_t partition,
                                                const ChangelogMark& last,
                                                int64_t high) const;

  // The partition left the member: nothing more is counted for it.
  void Forget(int32_t partition);

 private:
  // What the relay published of one partition's changelog since `from`.
  struct Coverage {
    int64_t from = 0;
    int64_t records = 0;
    int64_t transactions = 0;  // committed transactions that carried some
    std::optional<ChangelogMark> last_mark;  // the last "o/" record's
  };

  const std::string changelog_topic_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<int32_t, Coverage> coverage_ ABSL_GUARDED_BY(mu_);
};

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_CHANGELOG_CHECKPOINT_H_
