#include "crash/stream.h"

#include <random>

namespace idem::crash {

size_t Stream::entries() const {
  size_t n = 0;
  for (const auto& p : partitions) n += p.size();
  return n;
}

std::vector<int32_t> MessagePartitions(const Stream& stream) {
  std::vector<int32_t> partition_of(stream.messages.size(), 0);
  for (size_t p = 0; p < stream.partitions.size(); ++p) {
    for (uint32_t index : stream.partitions[p]) {
      partition_of[index] = static_cast<int32_t>(p);
    }
  }
  return partition_of;
}

Stream BuildStream(std::vector<StreamMessage> messages, int partitions,
                   double producer_duplicate_rate, uint64_t seed,
                   bool conflicting_redeliveries) {
  Stream stream;
  stream.messages = std::move(messages);
  stream.partitions.resize(partitions);
  stream.conflicting.resize(partitions);
  std::mt19937_64 rng(seed * 0x2545F4914F6CDD1Dull + 7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  // Pending producer retries per partition: (index, entries still to wait),
  // a conflicting one's index with kConflictBit set.
  constexpr uint32_t kConflictBit = uint32_t{1} << 31;
  std::vector<std::vector<std::pair<uint32_t, int>>> pending(partitions);
  auto append = [&](int p, uint32_t entry) {
    stream.partitions[p].push_back(entry & ~kConflictBit);
    stream.conflicting[p].push_back((entry & kConflictBit) != 0);
  };
  for (uint32_t i = 0; i < stream.messages.size(); ++i) {
    const int p = static_cast<int>(rng() % partitions);
    append(p, i);
    if (unit(rng) < producer_duplicate_rate) {
      const int delay = 1 + static_cast<int>(rng() % 20);
      const bool conflicting = conflicting_redeliveries && rng() % 2 == 0;
      pending[p].push_back({conflicting ? i | kConflictBit : i, delay});
    }
    // Release retries whose delay has passed, in the partition just written.
    auto& queue = pending[p];
    for (size_t k = 0; k < queue.size();) {
      if (--queue[k].second <= 0) {
        append(p, queue[k].first);
        queue.erase(queue.begin() + static_cast<long>(k));
      } else {
        ++k;
      }
    }
  }
  for (int p = 0; p < partitions; ++p) {
    for (const auto& [entry, delay] : pending[p]) append(p, entry);
  }
  return stream;
}

}  // namespace idem::crash
