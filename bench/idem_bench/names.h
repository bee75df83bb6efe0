// Names and units that idem-bench's report, time series and command line
// share (internal to bench/idem_bench/).

#ifndef IDEM_BENCH_IDEM_BENCH_NAMES_H_
#define IDEM_BENCH_IDEM_BENCH_NAMES_H_

#include "bench/idem_bench/workload.h"
#include "idem/options.h"

namespace idem::bench {

inline constexpr double kMiB = 1024.0 * 1024.0;

inline const char* ShapeName(IdShape s) {
  return s == IdShape::kKafka ? "kafka" : "uuid";
}

inline const char* DurabilityName(Durability d) {
  return d == Durability::kSync ? "sync" : "buffered";
}

}  // namespace idem::bench

#endif  // IDEM_BENCH_IDEM_BENCH_NAMES_H_
