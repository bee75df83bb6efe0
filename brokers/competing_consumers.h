// CompetingConsumers is what a broker adapter keeps of the other consumers
// it saw on its own queue or durable (see "Competing consumers" in
// docs/brokers.md): how many times it saw them (Broker::CompetingConsumers,
// LoopStats::competing_consumers), and one warning, the first time, through
// LoopOptions::logger (stderr without one). Not thread-safe: the adapter's
// thread only.

#ifndef IDEM_BROKERS_COMPETING_CONSUMERS_H_
#define IDEM_BROKERS_COMPETING_CONSUMERS_H_

#include <cstdint>
#include <string_view>

#include "idem/logger.h"

namespace idem::brokers {

class CompetingConsumers {
 public:
  // `logger` is borrowed; nullptr: stderr.
  explicit CompetingConsumers(Logger* logger) : logger_(logger) {}

  // Counts one sighting; the first one logs a warning saying `what` (which
  // source, how many others) and what to do about it.
  void Saw(std::string_view what);

  int64_t seen() const { return seen_; }

 private:
  Logger* const logger_;
  int64_t seen_ = 0;
};

}  // namespace idem::brokers

#endif  // IDEM_BROKERS_COMPETING_CONSUMERS_H_
