// StandbyCopies keeps copies of chosen input partitions warm while other
// members hold them (ConsumerOptions::standby_partitions;
// docs/scale-out.md, "Standby copies"): each copy follows its partition's
// changelog from where it left off and applies to the engine the commits
// that completed since (Engine::ApplyPartitionChanges), so that when the
// partition is assigned here the restore reads only the changelog's tail
// (ChangelogKeeper::Check).
//
// A copy starts cold: its first round reads the whole changelog and
// replaces the engine's copy of the partition (Engine::ImportPartition);
// it is warm from then on. What a copy has read of the changelog is kept
// in memory only: after a restart every copy starts cold again. The
// engine's copy of a standby partition carries no epoch (kEpochStateKey):
// it is not this member's, and taking it over always starts a new epoch.
//
// Not thread-safe: used from the consumer's polling thread.

#ifndef IDEM_KAFKA_CHANGELOG_STANDBY_H_
#define IDEM_KAFKA_CHANGELOG_STANDBY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "kafka/changelog_image.h"
#include "kafka/changelog_txn.h"
#include "kafka/partition_reader.h"

namespace idem::kafka {

// One partition's copy: where it stands in both changelog topics, and the
// builder that folds what it read.
struct StandbyCopy {
  int64_t changelog_next = 0;  // the next offset to read of each topic
  int64_t dedupe_next = 0;
  ChangelogImageBuilder builder;
  // The engine's copy is what the builder has handed out (TakeChanges),
  // at this offset.
  bool applied = false;
  std::optional<int64_t> applied_offset;
};

class StandbyCopies {
 public:
  // All borrowed; they must outlive this. `without_dedupe`: the broken
  // variant of ConsumerHooks::standby_without_dedupe.
  StandbyCopies(Engine* engine, PartitionReader* reader,
                const ChangelogTarget* target, Clock* clock,
                bool without_dedupe)
      : engine_(engine),
        reader_(reader),
        target_(target),
        clock_(clock),
        without_dedupe_(without_dedupe) {}

  // Reads both changelog topics of `partition` from where `copy` left off
  // to their ends, into copy.builder.
  absl::Status Read(StandbyCopy& copy, int32_t partition,
                    absl::Duration timeout);

  // One round for (topic, partition): reads its changelog's new records
  // and applies the commits that completed. Returns the records read. On
  // an error the copy is dropped (the next round starts it cold).
  absl::StatusOr<int64_t> CatchUp(const std::string& topic, int32_t partition,
                                  absl::Duration timeout);

  // What completed in `copy` since it was last asked (its builder's
  // TakeChanges at the clock's time).
  ChangelogChanges TakeChanges(StandbyCopy& copy);

  // Removes and returns the copy of `partition`; nullptr if there is none.
  std::unique_ptr<StandbyCopy> Take(int32_t partition);

 private:
  absl::Status Apply(const std::string& topic, int32_t partition,
                     StandbyCopy& copy, const ChangelogChanges& changes);

  Engine* const engine_;
  PartitionReader* const reader_;
  const ChangelogTarget* const target_;
  Clock* const clock_;
  const bool without_dedupe_;
  absl::flat_hash_map<int32_t, std::unique_ptr<StandbyCopy>> copies_;
};

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_CHANGELOG_STANDBY_H_
