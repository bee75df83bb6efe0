// PartitionSnapshot: what moves with a partition from one engine to another
// (Engine::ExportPartition, Engine::ImportPartition; docs/scale-out.md).
// Plain value types.

#ifndef IDEM_PARTITION_SNAPSHOT_H_
#define IDEM_PARTITION_SNAPSHOT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "idem/timers.h"

namespace idem {

// One live dedupe record of a partition (a partition-scoped store,
// DedupeScope::kPartition): the message ID's hash, as stored, its expiry and
// the handler's result.
struct PartitionRecord {
  std::string id_hash;  // XXH3-128 of the message ID: 16 bytes
  absl::Time expires_at = absl::InfinitePast();
  std::string result;
};

// The partition-scoped state of one (source, partition), the offset it
// includes and, from a partition-scoped store, its live dedupe records.
struct PartitionSnapshot {
  std::string source;
  int32_t partition = 0;
  // The engine's committed offset of the partition; nullopt if none.
  std::optional<int64_t> offset;
  // (key as the handler wrote it through PartitionTxn, value), in key order.
  std::vector<std::pair<std::string, std::string>> entries;
  // The expiry of each entry written with a TTL (PutOptions::ttl,
  // Options::state_ttl), by key; the other entries never expire. An import
  // keeps it, so the copy expires when the original does (marking the
  // store format 6 if needed); an expiry for a key not in `entries` is
  // ignored. Expired values are not exported.
  std::map<std::string, absl::Time> expires_at;
  // In id_hash order. Empty from a store-scoped store, whose records do not
  // say which partition they came from.
  std::vector<PartitionRecord> records;
  // The partition's stream time (Engine::StreamTime); InfinitePast: none.
  absl::Time stream_time = absl::InfinitePast();
  // The partition's timers (source and partition as above), event-time
  // ones first, each domain in (fire_at, timer_key) order. fire_at finite,
  // a valid domain, a timer_key at most once.
  std::vector<TimerFire> timers;
};

// Changes to one partition's copy, applied on top of it
// (Engine::ApplyPartitionChanges): what a standby copy that follows a
// changelog applies as the owner's commits arrive.
struct PartitionChanges {
  std::string source;
  int32_t partition = 0;
  // The partition's new committed offset; nullopt leaves it as it is.
  std::optional<int64_t> offset;
  // (key as the handler wrote it through PartitionTxn, new value), or
  // nullopt to delete the key. A key appears at most once.
  std::vector<std::pair<std::string, std::optional<std::string>>> writes;
  // Dedupe records to add; each replaces the partition's record of the
  // same id_hash, if any.
  std::vector<PartitionRecord> records;
  // The partition's new stream time, if later than its copy's; nullopt (or
  // InfinitePast) leaves it as it is.
  std::optional<absl::Time> stream_time;
  // The expiry of each write in `writes` with a TTL, by key, as
  // PartitionSnapshot::expires_at; the other writes never expire. An expiry
  // for a key not written (or deleted) is ignored.
  std::map<std::string, absl::Time> expires_at;
  // (timer key, the timer to set, replacing the key's timer if any), or
  // nullopt to delete the key's timer (none: nothing to delete). The
  // timer's source and partition are the changes'; its timer_key is the
  // pair's key. A fire_at finite, a valid domain, a key at most once.
  std::vector<std::pair<std::string, std::optional<TimerFire>>> timers;
};

}  // namespace idem

#endif  // IDEM_PARTITION_SNAPSHOT_H_
