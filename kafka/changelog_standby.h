// StandbyCopies keeps copies of partitions in the engine that follow their
// changelogs (docs/scale-out.md, "Standby copies"), and builds the copy a
// restore takes over. Each copy reads both changelog topics from where it
// left off and applies to the engine the commits that completed since: the
// first time replacing the engine's copy of the partition
// (Engine::ImportPartition), then on top of it
// (Engine::ApplyPartitionChanges). It applies every `chunk` records read,
// so a copy holds at most a chunk of changes in memory, whatever the
// partition's size.
//
// A copy the consumer keeps for a partition another member holds
// (ConsumerOptions::standby_partitions) carries no epoch (kEpochStateKey):
// it is not this member's. ChangelogKeeper::Check takes a copy over (a warm
// one, or a cold one it fills) by applying its last changes with a new
// epoch. What a copy has read is kept in memory only: after a restart every
// copy starts cold, and a copy half-applied by a crash has no epoch of its
// own, so the next check restores it again.
//
// Not thread-safe: used from the consumer's polling thread.

#ifndef IDEM_KAFKA_CHANGELOG_STANDBY_H_
#define IDEM_KAFKA_CHANGELOG_STANDBY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "idem/timers.h"
#include "kafka/changelog_image.h"
#include "kafka/changelog_txn.h"
#include "kafka/consumer_hooks.h"
#include "kafka/partition_reader.h"

namespace idem::kafka {

// Where a read of a copy ends.
enum class CopyReadEnd {
  // The end of the log, once every transaction open there is decided
  // (PartitionReader::ReadSome): a check or restore that takes the copy
  // over needs the previous owner's last commit.
  kDecided,
  // The last stable offset, without waiting (PartitionReader::
  // ReadSomeToStable): a standby copy, which reads on at its next round,
  // applies none of an open transaction's records and reads them once it
  // committed, without holding up the consumer's poll meanwhile.
  kStable,
};

// One partition's copy: where it stands in both changelog topics, the
// builder that folds what it read, and what it did so far.
struct StandbyCopy {
  int64_t changelog_next = 0;  // the next offset to read of each topic
  int64_t dedupe_next = 0;
  // Where the changelog topic was last read to its end (its high watermark
  // then, or its last stable offset for CopyReadEnd::kStable): the copy
  // holds everything before it.
  int64_t changelog_end = 0;
  ChangelogImageBuilder builder;
  // The engine holds the copy (the changes the builder handed out), at
  // this offset.
  bool applied = false;
  std::optional<int64_t> applied_offset;
  std::optional<absl::Time> stream_time;
  // Since the copy started: changelog records and their keys' and values'
  // bytes read; state writes and dedupe records applied.
  int64_t records_read = 0;
  int64_t bytes_read = 0;
  int64_t writes_applied = 0;
  int64_t records_applied = 0;
  // Records read since the last Apply (a chunk's worth applies them).
  int64_t unapplied = 0;
};

class StandbyCopies {
  // A copy applies what completed every this many records read.
  static constexpr int64_t kChunkRecords = 100000;

 public:
  // All borrowed; they must outlive this. `hooks`: restore_chunk_records
  // (a smaller chunk), restore_step ("chunk" after each chunk applied
  // during a read), and the broken variants standby_without_dedupe and
  // standby_takes_log_end.
  StandbyCopies(Engine* engine, PartitionReader* reader,
                const ChangelogTarget* target, Clock* clock,
                const ConsumerHooks* hooks)
      : engine_(engine),
        reader_(reader),
        target_(target),
        clock_(clock),
        hooks_(hooks) {}

  // Reads both changelog topics of (topic, partition) from where `copy`
  // left off to their ends (as `end_at` says), applying what completed
  // every chunk of records (Apply without an epoch). What completed in the
  // last chunk stays for the caller's Apply. On an error the copy is to be
  // dropped: where it stands in the topics is only updated on success.
  absl::Status Read(const std::string& topic, int32_t partition,
                    StandbyCopy& copy, absl::Duration timeout,
                    CopyReadEnd end_at = CopyReadEnd::kDecided);

  // As Read, but stops once `limit` records were read (0: no limit):
  // true once both topics were read to their ends, false if a next step
  // has more to read. `*read`, if given: the records this call read. On an
  // error the copy is to be dropped.
  absl::StatusOr<bool> ReadStep(const std::string& topic, int32_t partition,
                                StandbyCopy& copy, int64_t limit,
                                absl::Duration timeout, int64_t* read = nullptr,
                                CopyReadEnd end_at = CopyReadEnd::kDecided);

  // Applies to the engine what completed in `copy` since its last Apply,
  // with `epoch` (if set) as the partition's epoch in the same commit.
  // Without an epoch nothing is applied until the changelog holds a
  // complete commit; with one, a copy of a changelog without any replaces
  // the engine's copy with an empty one (no state, no offset).
  absl::Status Apply(const std::string& topic, int32_t partition,
                     StandbyCopy& copy, std::optional<int64_t> epoch);

  // One round for the copy of (topic, partition) this member keeps while
  // another holds the partition (created cold if there is none): Read to
  // the last stable offsets (CopyReadEnd::kStable), then Apply. Returns the
  // records read. On an error the copy is dropped (the
  // next round starts it cold).
  absl::StatusOr<int64_t> CatchUp(const std::string& topic, int32_t partition,
                                  absl::Duration timeout);

  // Removes and returns the copy of `partition`; nullptr if there is none.
  std::unique_ptr<StandbyCopy> Take(int32_t partition);

 private:
  // The timers `timers` sets, as PartitionSnapshot::timers lists them.
  static std::vector<TimerFire> SetTimers(
      const std::string& topic, int32_t partition,
      const absl::btree_map<std::string, std::optional<ChangelogTimer>>&
          timers);

  Engine* const engine_;
  PartitionReader* const reader_;
  const ChangelogTarget* const target_;
  Clock* const clock_;
  const ConsumerHooks* const hooks_;
  absl::flat_hash_map<int32_t, std::unique_ptr<StandbyCopy>> copies_;
};

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_CHANGELOG_STANDBY_H_
