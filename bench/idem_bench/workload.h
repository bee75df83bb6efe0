// The message stream idem-bench delivers: message IDs of a chosen shape, a
// fraction of them redeliveries of an earlier ID, and, for each delivery,
// the outcome a correct dedupe store must give (the "truth"), computed from
// the clock time of each batch and the dedupe window.
//
// Workload is not thread-safe: idem-bench's runner calls it under its own
// mutex. IdFor is a pure function of (shape, seed, index) and thread-safe.

#ifndef IDEM_BENCH_IDEM_BENCH_WORKLOAD_H_
#define IDEM_BENCH_IDEM_BENCH_WORKLOAD_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace idem::bench {

enum class IdShape {
  kUuid,   // "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx", 36 bytes
  kKafka,  // "<topic>-<partition>-<offset>", as a Kafka consumer would build
};

// The topic name and partition count of IdShape::kKafka.
inline constexpr char kBenchTopic[] = "orders";
inline constexpr int32_t kBenchPartitions = 12;

// One delivery.
struct Delivery {
  std::string id;
  // Only for IdShape::kKafka (source kBenchTopic); -1 otherwise.
  int32_t partition = 0;
  int64_t offset = -1;
  // Whether this delivery repeats an earlier ID.
  bool redelivery = false;
  // What a correct store answers at the batch's time: true if a live record
  // for the ID exists (the ID was last processed less than a window ago, or
  // earlier in the same batch).
  bool expect_duplicate = false;
};

struct WorkloadOptions {
  IdShape shape = IdShape::kUuid;
  uint64_t seed = 1;
  // Fraction of deliveries that redeliver an earlier ID, in [0, 1).
  double duplicate_rate = 0.1;
  // A redelivery repeats one of the last `duplicate_reach` distinct IDs,
  // chosen uniformly. >= 1.
  int64_t duplicate_reach = 10000;
  absl::Duration window = absl::Hours(1);
};

// The ID of the `index`-th distinct message.
std::string IdFor(IdShape shape, uint64_t seed, int64_t index);

class Workload {
 public:
  explicit Workload(const WorkloadOptions& options);

  // Appends `count` deliveries for a batch committed at time `now` (the
  // clock time the store will read) to `out`.
  void NextBatch(int count, absl::Time now, std::vector<Delivery>* out);

  // Distinct IDs generated so far (indexes 0 .. unique() - 1).
  int64_t unique() const { return next_; }
  int64_t redeliveries() const { return redeliveries_; }
  // Redeliveries whose ID had expired, so a correct store processes them
  // again.
  int64_t expired_redeliveries() const { return expired_redeliveries_; }

 private:
  const WorkloadOptions options_;
  std::mt19937_64 rng_;
  std::bernoulli_distribution redeliver_;
  int64_t next_ = 0;
  int64_t redeliveries_ = 0;
  int64_t expired_redeliveries_ = 0;
  // When each of the last `duplicate_reach` distinct IDs was last processed,
  // as int64 microseconds; slot index % duplicate_reach.
  std::vector<int64_t> last_processed_;
};

}  // namespace idem::bench

#endif  // IDEM_BENCH_IDEM_BENCH_WORKLOAD_H_
