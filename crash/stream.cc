#include "crash/stream.h"

#include <random>

namespace idem::crash {

size_t Stream::entries() const {
  size_t n = 0;
  for (const auto& p : partitions) n += p.size();
  return n;
}

Stream BuildStream(std::vector<StreamMessage> messages, int partitions,
                   double producer_duplicate_rate, uint64_t seed) {
  Stream stream;
  stream.messages = std::move(messages);
  stream.partitions.resize(partitions);
  std::mt19937_64 rng(seed * 0x2545F4914F6CDD1Dull + 7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  // Pending producer retries per partition: (index, entries still to wait).
  std::vector<std::vector<std::pair<uint32_t, int>>> pending(partitions);
  for (uint32_t i = 0; i < stream.messages.size(); ++i) {
    const int p = static_cast<int>(rng() % partitions);
    stream.partitions[p].push_back(i);
    if (unit(rng) < producer_duplicate_rate) {
      pending[p].push_back({i, 1 + static_cast<int>(rng() % 20)});
    }
    // Release retries whose delay has passed, in the partition just written.
    auto& queue = pending[p];
    for (size_t k = 0; k < queue.size();) {
      if (--queue[k].second <= 0) {
        stream.partitions[p].push_back(queue[k].first);
        queue.erase(queue.begin() + static_cast<long>(k));
      } else {
        ++k;
      }
    }
  }
  for (int p = 0; p < partitions; ++p) {
    for (const auto& [index, delay] : pending[p]) {
      stream.partitions[p].push_back(index);
    }
  }
  return stream;
}

}  // namespace idem::crash
