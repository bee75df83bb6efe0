// The simulated broker: a deterministic, partitioned log of deliveries built
// from a workload's unique messages, with producer duplicates (the same
// message again at a later offset of its partition). Immutable after
// BuildStream; thread-safe to read.

#ifndef IDEM_CRASH_STREAM_H_
#define IDEM_CRASH_STREAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "idem/crash/harness.h"

namespace idem::crash {

// The source name the harness records offsets under.
inline constexpr char kStreamSource[] = "stream";

struct Stream {
  std::vector<StreamMessage> messages;  // unique, by index
  // partitions[p][offset] = index into messages.
  std::vector<std::vector<uint32_t>> partitions;
  // conflicting[p][offset]: that entry is a conflicting redelivery (its
  // message's ID again, delivered with another fingerprint,
  // kConflictFingerprint); the same shape as partitions.
  std::vector<std::vector<bool>> conflicting;

  size_t entries() const;
};

// Each message's partition, by index into Stream::messages (a producer
// duplicate stays in its original's partition).
std::vector<int32_t> MessagePartitions(const Stream& stream);

// The fingerprint a conflicting redelivery carries (Message::fingerprint).
inline constexpr char kConflictFingerprint[] = "idem-crash/conflicting";

// With `conflicting_redeliveries`, about half the producer duplicates are
// conflicting redeliveries; the stream is otherwise the same as without.
Stream BuildStream(std::vector<StreamMessage> messages, int partitions,
                   double producer_duplicate_rate, uint64_t seed,
                   bool conflicting_redeliveries = false);

}  // namespace idem::crash

#endif  // IDEM_CRASH_STREAM_H_
