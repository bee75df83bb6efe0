// One commit to a partition's copy (EngineImpl::CommitToPartition,
// engine/engine_partition_commit.cc), and what its first step places. Plain
// value types over views: not thread-safe.

#ifndef IDEM_ENGINE_PARTITION_COMMIT_H_
#define IDEM_ENGINE_PARTITION_COMMIT_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"
#include "engine/commit_batch.h"
#include "engine/record.h"
#include "engine/timer_writes.h"
#include "idem/message.h"
#include "idem/partition_snapshot.h"
#include "idem/timers.h"

namespace idem {

// One commit to a partition's copy: ImportPartition's or
// ApplyPartitionChanges' (engine/engine_partition.cc). Views into the
// caller's snapshot or changes.
struct PartitionCommit {
  const char* what = "";  // the API's name, for errors
  std::string_view source;
  int32_t partition = 0;
  std::optional<int64_t> offset;
  // Drop the partition's state and records first, and its offset when
  // `offset` is nullopt.
  bool replace = false;
  // A dedupe record of the commit's own under this ID: a repeat of the
  // commit writes nothing.
  std::optional<std::string_view> commit_id;
  std::vector<std::pair<std::string_view, std::optional<std::string_view>>>
      writes;  // nullopt: delete
  absl::Span<const PartitionRecord> records;
  // The partition's stream time (µs) to record (a replace: kNoStreamTime
  // records none; otherwise only a later one is written) and, for a
  // replace, its timers.
  int64_t stream_micros = kNoStreamTime;
  absl::Span<const TimerFire> timers;
  // The expiries of writes with a TTL, by key (PartitionSnapshot's).
  const std::map<std::string, absl::Time>* expires_at = nullptr;
  // Not for a replace: timers set or deleted on top of the partition's
  // (PartitionChanges::timers).
  absl::Span<const std::pair<std::string, std::optional<TimerFire>>>
      timer_changes;
};

// What CommitToPartition places: the commit's own record (`own`, whose
// views point into the commit; its key `own_key` set once the store is
// known), then its live records (`live`, from `first_live` in
// `placements`), each in the expiry bucket it belongs to at `now_micros`.
struct PartitionPlan {
  int64_t now_micros = 0;
  Message own;
  RecordPlacements placements;
  size_t first_live = 0;
  std::vector<const PartitionRecord*> live;
  std::optional<RecordKey> own_key;
};

}  // namespace idem

#endif  // IDEM_ENGINE_PARTITION_COMMIT_H_
