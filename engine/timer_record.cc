#include "engine/timer_record.h"

#include "engine/coding.h"
#include "engine/record.h"

namespace idem {
namespace {

constexpr char kStreamTimeKind = 'S';
constexpr char kQueueKind = 'Q';
constexpr char kIndexKind = 'K';
constexpr char kDeadKind = 'D';

std::string KindKey(char kind, std::string_view partition_key) {
  std::string key;
  key.reserve(1 + partition_key.size() + 9);
  key.push_back(kind);
  key.append(partition_key);
  return key;
}

std::string TimedKey(char kind, std::string_view partition_key,
                     TimeDomain domain, int64_t fire_at_micros,
                     std::string_view timer_key) {
  std::string key = KindKey(kind, partition_key);
  key.push_back(static_cast<char>(domain));
  AppendOrderedInt64(key, fire_at_micros);
  key.append(timer_key);
  return key;
}

}  // namespace

std::string TimerPartitionKey(std::string_view source, int32_t partition) {
  std::string key;
  key.reserve(2 + source.size() + 4);
  key.push_back(static_cast<char>((source.size() >> 8) & 0xff));
  key.push_back(static_cast<char>(source.size() & 0xff));
  key.append(source);
  char p[4];
  PutBigEndian32(p, static_cast<uint32_t>(partition));
  key.append(p, sizeof(p));
  return key;
}

std::string StreamTimeKey(std::string_view partition_key) {
  return KindKey(kStreamTimeKind, partition_key);
}

// Encoded as an offset is: int64, little-endian.
std::string EncodeStreamTime(int64_t micros) {
  return EncodeOffsetValue(micros);
}

std::optional<int64_t> DecodeStreamTime(std::string_view value) {
  return DecodeOffsetValue(value);
}

std::string TimerQueueKey(std::string_view partition_key, TimeDomain domain,
                          int64_t fire_at_micros, std::string_view timer_key) {
  return TimedKey(kQueueKind, partition_key, domain, fire_at_micros, timer_key);
}

std::string TimerQueueStart(std::string_view partition_key, TimeDomain domain) {
  std::string key = KindKey(kQueueKind, partition_key);
  key.push_back(static_cast<char>(domain));
  return key;
}

std::string TimerQueueEnd(std::string_view partition_key, TimeDomain domain,
                          int64_t up_to_micros) {
  std::string key = TimerQueueStart(partition_key, domain);
  if (up_to_micros == INT64_MAX) {
    // Past every time of the domain: the next domain's first key.
    key.back() = static_cast<char>(static_cast<uint8_t>(domain) + 1);
    return key;
  }
  AppendOrderedInt64(key, up_to_micros + 1);
  return key;
}

std::optional<QueuedTimer> DecodeTimerQueueKey(std::string_view key,
                                               size_t partition_key_bytes) {
  const size_t header = 1 + partition_key_bytes;
  if (key.size() < header + 9 || key[0] != kQueueKind) return std::nullopt;
  QueuedTimer timer;
  timer.domain = static_cast<TimeDomain>(key[header]);
  timer.fire_at_micros = GetOrderedInt64(key.data() + header + 1);
  timer.timer_key = key.substr(header + 9);
  return timer;
}

std::string TimerIndexKey(std::string_view partition_key,
                          std::string_view timer_key) {
  std::string key = KindKey(kIndexKind, partition_key);
  key.append(timer_key);
  return key;
}

std::string EncodeTimerIndex(TimeDomain domain, int64_t fire_at_micros) {
  std::string value(1, static_cast<char>(domain));
  AppendOrderedInt64(value, fire_at_micros);
  return value;
}

std::optional<TimerIndex> DecodeTimerIndex(std::string_view value) {
  if (value.size() != 9) return std::nullopt;
  TimerIndex index;
  index.domain = static_cast<TimeDomain>(value[0]);
  if (!ValidTimeDomain(index.domain)) return std::nullopt;
  index.fire_at_micros = GetOrderedInt64(value.data() + 1);
  return index;
}

std::string DeadTimerKey(std::string_view partition_key, TimeDomain domain,
                         int64_t fire_at_micros, std::string_view timer_key) {
  return TimedKey(kDeadKind, partition_key, domain, fire_at_micros, timer_key);
}

std::string EncodeDeadTimer(const absl::Status& failure,
                            std::string_view payload) {
  std::string value;
  PutFixed32LE(&value, static_cast<uint32_t>(failure.code()));
  const std::string_view message(failure.message().data(),
                                 failure.message().size());
  PutFixed32LE(&value, static_cast<uint32_t>(message.size()));
  value.append(message);
  value.append(payload);
  return value;
}

bool ValidTimeDomain(TimeDomain domain) {
  return domain == TimeDomain::kEvent || domain == TimeDomain::kProcessing;
}

}  // namespace idem
