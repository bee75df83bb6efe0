// The records of a partition's changelog (ConsumerOptions::changelog_topic;
// docs/scale-out.md, "The changelog"). Changelog partition p holds input
// partition p's changes, in commit order:
//
// Changelog topic (log-compacted):
//   key "s/" + K   value: the state value of K (a key as PartitionTxn
//                  wrote it), or a tombstone when K was deleted.
//   key "o/" + E   value: the offset (decimal) that the commit made the
//                  partition's committed offset, or -1 for none yet (a new
//                  owner's first mark on an empty partition); written last
//                  in each commit, so it marks the commit complete. E is the
//                  writer's epoch (decimal, below 2^59), drawn at random
//                  whenever a member restores the partition; compaction
//                  keeps each epoch's last offset.
// Dedupe topic (changelog_topic + ".dedupe", time-retained):
//   key: 32 lowercase hex digits of the message ID's XXH3-128 hash;
//   value: the record's expiry as the engine computed it (Txn::
//   record_expires_at: engine time, which never goes back, plus the
//   window; int64 microseconds since the Unix epoch, 8 bytes
//   little-endian), then the handler's result.
// Every record of both carries the header kChangelogMarkHeader: "E O", the
// epoch and offset of the commit that wrote it, and the header
// kChangelogVersionHeader: the format version (decimal) of the record. A
// record without a version header is version 1 (builds before the header
// wrote version 1). A reader refuses a version above kChangelogFormatVersion
// with kFailedPrecondition rather than misreading it (docs/operations.md,
// "Upgrading a changelog-mode group").
//
// Pure functions; thread-safe.

#ifndef IDEM_KAFKA_CHANGELOG_FORMAT_H_
#define IDEM_KAFKA_CHANGELOG_FORMAT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"

namespace idem::kafka {

inline constexpr char kChangelogMarkHeader[] = "idem.changelog";
inline constexpr char kChangelogVersionHeader[] = "idem.changelog.version";
// The version this build writes, and the highest it reads.
inline constexpr int kChangelogFormatVersion = 1;
inline constexpr char kChangelogFormatVersionText[] = "1";

// The state key (relative to the partition's PartitionTxn prefix) where a
// member keeps its epoch of the partition. Handlers cannot write it.
inline constexpr std::string_view kEpochStateKey{"\0idem.changelog.epoch", 21};
// The state key where a member keeps its checkpoint of the partition
// (kafka/changelog_checkpoint.h). Handlers cannot write it either.
inline constexpr std::string_view kCheckpointStateKey{
    "\0idem.changelog.checkpoint", 26};

// The dedupe records' topic of `changelog_topic`.
std::string DedupeTopicOf(std::string_view changelog_topic);

// Which commit wrote a changelog record.
struct ChangelogMark {
  int64_t epoch = 0;
  int64_t offset = -1;  // -1: no offset yet
  bool operator==(const ChangelogMark&) const = default;
};
std::string EncodeMark(const ChangelogMark& mark);
// nullopt unless "E O" with E >= 0 and O >= -1 (decimal).
std::optional<ChangelogMark> DecodeMark(std::string_view text);

// A member's checkpoint of a changelog partition: its copy is the changelog's
// up to `changelog_end` (the offset after the last record counted), whose
// last complete commit is (epoch, offset) (kafka/changelog_checkpoint.h).
struct ChangelogCheckpoint {
  ChangelogMark mark;
  int64_t changelog_end = 0;
  bool operator==(const ChangelogCheckpoint&) const = default;
};
// "E O C" (decimal).
std::string EncodeCheckpoint(const ChangelogCheckpoint& checkpoint);
// nullopt unless "E O C" with E >= 0, O >= -1 and C >= 0.
std::optional<ChangelogCheckpoint> DecodeCheckpoint(std::string_view text);

// A version header's value: a decimal >= 1; nullopt otherwise.
std::optional<int64_t> DecodeFormatVersion(std::string_view text);

// An "o/" record's value: the offset, or -1; nullopt otherwise.
std::optional<int64_t> DecodeOffsetValue(std::string_view value);

std::string StateRecordKey(std::string_view state_key);
std::string OffsetRecordKey(int64_t epoch);

// A changelog topic key, decoded.
struct ChangelogKey {
  enum class Kind { kState, kOffset };
  Kind kind = Kind::kState;
  std::string_view state_key;  // kState: K of "s/K" (a view into the key)
  int64_t epoch = 0;           // kOffset
};
// nullopt for a key of neither form.
std::optional<ChangelogKey> DecodeChangelogKey(std::string_view key);

std::string EncodeDedupeValue(absl::Time expires_at, std::string_view result);
struct DedupeValue {
  absl::Time expires_at;
  std::string_view result;  // a view into the value
};
// nullopt if shorter than 8 bytes.
std::optional<DedupeValue> DecodeDedupeValue(std::string_view value);

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_CHANGELOG_FORMAT_H_
