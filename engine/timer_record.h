// The on-disk encoding of timers and stream times, in the idem.timers column
// family (engine/store.h). Every key starts with a kind byte and the
// partition key P: the source's length (2 bytes big-endian), the source and
// the partition (4 bytes big-endian), so that no partition's keys are a
// prefix range of another's.
//
//   'S' P                            -> stream time: int64 µs, little-endian
//   'Q' P domain fire_at timer_key   -> payload (the queue, in fire order)
//   'K' P timer_key                  -> domain, fire_at (the by-key index)
//   'D' P domain fire_at timer_key   -> a dead-lettered timer: status code
//                                       (4 bytes LE), message length (4 bytes
//                                       LE), message, payload
//
// fire_at is in microseconds since the epoch, stored big-endian with its
// sign bit flipped so that byte order is time order (in the index, the same
// 8 bytes). Thread-safe: pure functions.

#ifndef IDEM_ENGINE_TIMER_RECORD_H_
#define IDEM_ENGINE_TIMER_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "idem/timers.h"

namespace idem {

// The partition key P.
std::string TimerPartitionKey(std::string_view source, int32_t partition);

// 'S' P.
std::string StreamTimeKey(std::string_view partition_key);
std::string EncodeStreamTime(int64_t micros);
std::optional<int64_t> DecodeStreamTime(std::string_view value);

// 'Q' P domain fire_at timer_key, and the first queue key of the domain
// ('Q' P domain) and the end of the queue keys due at or before
// `up_to_micros`.
std::string TimerQueueKey(std::string_view partition_key, TimeDomain domain,
                          int64_t fire_at_micros, std::string_view timer_key);
std::string TimerQueueStart(std::string_view partition_key, TimeDomain domain);
std::string TimerQueueEnd(std::string_view partition_key, TimeDomain domain,
                          int64_t up_to_micros);
// The domain, fire time and timer key of a queue key whose partition key is
// `partition_key` bytes long; nullopt if it does not decode.
struct QueuedTimer {
  TimeDomain domain = TimeDomain::kEvent;
  int64_t fire_at_micros = 0;
  std::string_view timer_key;
};
std::optional<QueuedTimer> DecodeTimerQueueKey(std::string_view key,
                                               size_t partition_key_bytes);

// 'K' P timer_key, and its value.
std::string TimerIndexKey(std::string_view partition_key,
                          std::string_view timer_key);
std::string EncodeTimerIndex(TimeDomain domain, int64_t fire_at_micros);
struct TimerIndex {
  TimeDomain domain = TimeDomain::kEvent;
  int64_t fire_at_micros = 0;
};
std::optional<TimerIndex> DecodeTimerIndex(std::string_view value);

// 'D' P domain fire_at timer_key, and its value.
std::string DeadTimerKey(std::string_view partition_key, TimeDomain domain,
                         int64_t fire_at_micros, std::string_view timer_key);
std::string EncodeDeadTimer(const absl::Status& failure,
                            std::string_view payload);

// Whether `domain` is a TimeDomain value.
bool ValidTimeDomain(TimeDomain domain);

}  // namespace idem

#endif  // IDEM_ENGINE_TIMER_RECORD_H_
