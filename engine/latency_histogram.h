// LatencyHistogram holds latencies in microseconds in logarithmic buckets
// 1% wide, so its memory stays constant however many it is given (idem-bench
// runs for billions of commits). Count, sum, mean and max are exact; a
// percentile is the upper edge of the bucket holding it, so at most 1% above
// the exact value, and never above the max. A plain value type: not
// thread-safe (give each thread its own and Merge them). Part of the core
// (the engine times its commits with it, Stats::commit_durations) and used by
// idem-bench, the peers benchmark and the crash harness; not installed.

#ifndef IDEM_ENGINE_LATENCY_HISTOGRAM_H_
#define IDEM_ENGINE_LATENCY_HISTOGRAM_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace idem {

// Latencies in microseconds; all zero when there were none.
struct LatencySummary {
  int64_t count = 0;
  double mean = 0, p50 = 0, p99 = 0, p999 = 0, max = 0;
};

class LatencyHistogram {
 public:
  void Add(double micros);
  void Merge(const LatencyHistogram& other);

  int64_t count() const { return count_; }
  double sum() const { return sum_; }

  // How many latencies are at most `micros`, as the bucket edge: every one
  // <= micros, and also those in micros's own bucket above it (at most 1%
  // above). Cumulative, so it never decreases as `micros` grows.
  int64_t CountAtMost(double micros) const;

  // The nearest-rank `q` quantile, q in (0, 1]: the smallest recorded
  // latency L such that at least ceil(q * count()) latencies are <= L (as
  // the bucket edge, see above). 0 if there are none.
  double Percentile(double q) const;

  // count, mean, max and the 50th, 99th and 99.9th percentiles.
  LatencySummary Summary() const;

 private:
  static constexpr double kMin = 0.01;  // microseconds
  static constexpr double kGrowth = 1.01;
  static constexpr size_t kBuckets = 3000;  // up to ~1e11 us
  static size_t Bucket(double micros);

  int64_t count_ = 0;
  double sum_ = 0;
  double max_ = 0;
  std::vector<int64_t> counts_ = std::vector<int64_t>(kBuckets, 0);
};

}  // namespace idem

#endif  // IDEM_ENGINE_LATENCY_HISTOGRAM_H_
