// The dedupe policies' pieces that need no engine lock (docs/design.md,
// "Dedupe policies"): the mark PermanentError puts on a status, whether a
// duplicate came late in its record's window, and the histogram of
// redelivery ages behind Stats::redelivery_age_*.
//
// Free functions are pure and thread-safe. RedeliveryAges is safe for
// concurrent access from multiple threads without external synchronization.

#ifndef IDEM_ENGINE_DEDUPE_POLICY_H_
#define IDEM_ENGINE_DEDUPE_POLICY_H_

#include <array>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace idem {

// The type URL of the payload PermanentError adds.
inline constexpr char kPermanentErrorPayload[] = "idem.permanent";

// Whether a duplicate arriving at `now_micros` is late: its record, first
// processed at `first_micros` and expiring at `expiry_micros`, is more than
// 80% through that window. False when the first processing is unknown
// (kUnknownFirstProcessed).
bool IsLateDuplicate(int64_t first_micros, int64_t expiry_micros,
                     int64_t now_micros);

// Ages of records at their duplicates, in a log-scale histogram of
// milliseconds (buckets 2^(1/16) wide, about 4.4%, from 1 ms to about 35
// years; ages below 1 ms count as 0): constant memory however many.
class RedeliveryAges {
 public:
  // Adds the ages (microseconds, >= 0) of one commit's duplicates.
  void Add(absl::Span<const int64_t> ages_micros);

  struct Summary {
    absl::Duration p50;
    absl::Duration p99;
    absl::Duration max;
  };
  // Nearest-rank percentiles (the upper edge of the bucket holding them,
  // never above the max) and the exact max; zero when nothing was added.
  Summary Get() const;

 private:
  static constexpr int kPerDoubling = 16;
  static constexpr int kBuckets = 1 + 40 * kPerDoubling;
  static int Bucket(int64_t age_micros);
  // The upper edge of bucket `b`, in microseconds.
  static int64_t UpperEdgeMicros(int b);
  // The nearest-rank `q` quantile. REQUIRES: total_ > 0.
  absl::Duration Percentile(double q) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::array<uint64_t, kBuckets> counts_ ABSL_GUARDED_BY(mu_) = {};
  uint64_t total_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t max_micros_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace idem

#endif  // IDEM_ENGINE_DEDUPE_POLICY_H_
