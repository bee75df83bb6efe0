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
//                  keeps each epoch's last offset. Since version 2 it
//                  carries the header kChangelogStreamTimeHeader: the
//                  partition's stream time after the commit (Engine::
//                  StreamTime; decimal microseconds since the Unix
//                  epoch), absent while it has none.
//   key "t/" + T   value: the partition's timer named T (Txn::SetTimer) as
//                  the commit left it: EncodeTimerValue (domain, fire_at,
//                  payload); a tombstone when the commit cancelled or
//                  fired it. Since version 2.
// A "s/" record of a value that expires (PutOptions::ttl, Options::
// state_ttl) carries, since version 2, the header kChangelogExpiresHeader:
// its expiry (decimal microseconds since the Unix epoch, processing time),
// so that a restored copy expires when the original does.
// A timer's fire is a commit of its own: its state changes, the timer's
// tombstone (or its new time, if the handler set it again) and an "o/"
// record whose offset is the partition's committed offset, unchanged; each
// of its records carries the header kChangelogFireHeader ("1"), so that a
// member that finds its copy current at that offset still publishes the
// fires it committed after it (they share the offset of a commit the
// changelog already holds).
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
#include "idem/timers.h"

namespace idem::kafka {

inline constexpr char kChangelogMarkHeader[] = "idem.changelog";
inline constexpr char kChangelogVersionHeader[] = "idem.changelog.version";
// The version this build writes, and the highest it reads.
// Version 2 added "t/" records and the stream time and expiry headers.
inline constexpr int kChangelogFormatVersion = 2;
inline constexpr char kChangelogFormatVersionText[] = "2";
inline constexpr char kChangelogStreamTimeHeader[] =
    "idem.changelog.stream_time";
inline constexpr char kChangelogExpiresHeader[] = "idem.changelog.expires";
inline constexpr char kChangelogFireHeader[] = "idem.changelog.fire";

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
std::string TimerRecordKey(std::string_view timer_key);

// A changelog topic key, decoded.
struct ChangelogKey {
  enum class Kind { kState, kOffset, kTimer };
  Kind kind = Kind::kState;
  // kState: K of "s/K"; kTimer: T of "t/T" (a view into the key).
  std::string_view state_key;
  int64_t epoch = 0;  // kOffset
};
// nullopt for a key of neither form.
std::optional<ChangelogKey> DecodeChangelogKey(std::string_view key);

// A time header's value (kChangelogStreamTimeHeader,
// kChangelogExpiresHeader): decimal microseconds since the Unix epoch, a
// finite time.
std::string EncodeTimeHeader(absl::Time time);
// nullopt unless a decimal integer (perhaps negative) of a finite time.
std::optional<absl::Time> DecodeTimeHeader(std::string_view text);

// A timer as a "t/" record carries it.
struct ChangelogTimer {
  TimeDomain domain = TimeDomain::kEvent;
  absl::Time fire_at = absl::InfinitePast();
  std::string payload;
  bool operator==(const ChangelogTimer&) const = default;
};
// The domain (1 byte), fire_at (int64 microseconds since the Unix epoch, 8
// bytes little-endian), then the payload.
std::string EncodeTimerValue(const ChangelogTimer& timer);
// nullopt if shorter than 9 bytes or of an unknown domain.
std::optional<ChangelogTimer> DecodeTimerValue(std::string_view value);

std::string EncodeDedupeValue(absl::Time expires_at, std::string_view result);
struct DedupeValue {
  absl::Time expires_at;
  std::string_view result;  // a view into the value
};
// nullopt if shorter than 8 bytes.
std::optional<DedupeValue> DecodeDedupeValue(std::string_view value);

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_CHANGELOG_FORMAT_H_
