// ParallelRunner runs a Consumer's records on worker threads
// (ConsumerOptions::workers > 1). Records are queued in lanes: one per
// partition under Ordering::kPartition, one per (partition, Kafka key) under
// Ordering::kKey. A lane runs on one worker at a time, its records in the
// order they were added, in groups of at most `max_group` records (one
// ProcessRecords call each, made by the RunGroup function); different lanes
// run at the same time.
//
// The polling thread adds records while the workers run them, and between
// PollBatch calls waits until the runner is idle and takes its outcome: what
// the groups did, and per partition either the next offset to commit (every
// record taken was handled) or the offset to read again from (a group
// failed, or records were dropped). It knows nothing of librdkafka, so it is
// tested on its own.
//
// Thread-safe. The RunGroup function runs on the workers, without the
// runner's lock.

#ifndef IDEM_KAFKA_PARALLEL_RUNNER_H_
#define IDEM_KAFKA_PARALLEL_RUNNER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "idem/kafka/consumer_options.h"
#include "idem/kafka/consumer_stats.h"
#include "kafka/batch_processor.h"

namespace idem::kafka {

// A record waiting for a worker, with whatever keeps its views valid
// (the librdkafka message it points into; null when the caller owns them).
struct QueuedRecord {
  Record record;
  std::shared_ptr<const void> owner;
};

class ParallelRunner {
 public:
  // One group of a lane's records, as a worker hands it to RunGroup.
  struct Group {
    absl::Span<Record> records;
    // ProcessControls::cancelled and ::stored_offset for the group: set
    // when its partition is cancelled; under kKey, the partition's low
    // watermark - 1 when the group began.
    const std::atomic<bool>* cancelled = nullptr;
    std::optional<int64_t> stored_offset;
  };
  using RunGroup =
      std::function<absl::StatusOr<ProcessedBatch>(const Group& group)>;

  // What the groups did since the last TakeOutcome.
  struct Outcome {
    BatchReport report;  // summed over the groups
    // Partitions whose every record taken was handled: the highest handled
    // offset + 1.
    absl::btree_map<TopicPartition, int64_t> next_offsets;
    // Partitions with records taken but not handled (a group failed, was
    // cancelled, or records were dropped behind a failure): the lowest such
    // offset, where reading must start again.
    absl::btree_map<TopicPartition, int64_t> rewind;
    // Every partition with records taken: the lowest offset taken.
    absl::btree_map<TopicPartition, int64_t> first_taken;
    // The first error of a group that was not cancelled.
    absl::Status error;
    // Time spent in RunGroup, summed over the workers.
    absl::Duration busy;
    // The highest commit sequence of the groups (ProcessedBatch).
    uint64_t max_sequence = 0;
  };

  // Starts `workers` (>= 1) threads. REQUIRES: max_group >= 1.
  // `lane_per_record` is a deliberately broken variant for tests
  // (ConsumerHooks::lane_per_record): every record gets a lane of its own,
  // so nothing keeps any order.
  ParallelRunner(int workers, Ordering ordering, int max_group,
                 bool lane_per_record = false);
  ParallelRunner(const ParallelRunner&) = delete;
  ParallelRunner& operator=(const ParallelRunner&) = delete;
  // Drops what is queued, waits for running groups, joins the workers.
  ~ParallelRunner();

  // Sets the function the next groups run with. REQUIRES: Idle().
  void Begin(RunGroup run);

  // Queues `record` in its lane. A record of a partition that failed or was
  // cancelled since the last TakeOutcome is dropped (and counted in the
  // partition's rewind offset).
  void Add(QueuedRecord record);

  // Records of (topic, partition) taken and not yet handled.
  int64_t Waiting(const TopicPartition& partition) const;

  // Whether every record taken was handled or dropped.
  bool Idle() const;
  void WaitIdle();

  // Waits until every record of `partitions` taken so far was handled.
  void Finish(const std::vector<TopicPartition>& partitions);
  // Drops the queued records of `partitions`, tells their running groups to
  // stop calling handlers (Group::cancelled), and waits for those groups.
  void Cancel(const std::vector<TopicPartition>& partitions);

  // After Finish(partition): the next offset to commit (the highest handled
  // + 1) if every record of it taken since the last TakeOutcome was
  // handled and at least one was; nullopt otherwise.
  std::optional<int64_t> NextOffset(const TopicPartition& partition) const;

  // The highest commit sequence of the groups completed since the last
  // TakeOutcome.
  uint64_t MaxSequence() const;

  // What happened since the last call. REQUIRES: Idle().
  Outcome TakeOutcome();

 private:
  using LaneKey = std::pair<TopicPartition, std::string>;

  struct Lane {
    std::deque<QueuedRecord> queue;
    bool running = false;
  };

  struct PartitionState {
    // Offsets taken and not yet handled, with their counts (a record read
    // again after a rewind may be taken twice).
    absl::btree_map<int64_t, int> waiting;
    int64_t waiting_count = 0;
    int running_groups = 0;
    int64_t next_offset = -1;         // highest handled + 1
    int64_t rewind = INT64_MAX;       // lowest offset not handled
    int64_t first_taken = INT64_MAX;  // lowest offset added
    bool failed = false;              // a group failed: drop the rest
    std::shared_ptr<std::atomic<bool>> cancelled =
        std::make_shared<std::atomic<bool>>(false);
  };

  void WorkerLoop();
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !ready_.empty();
  }
  // The group's records leave the waiting set; its result is recorded.
  void CompleteGroup(const LaneKey& key, const std::vector<QueuedRecord>& group,
                     const absl::StatusOr<ProcessedBatch>& result,
                     absl::Duration busy) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the queued records of `partition`'s lanes.
  void DropQueued(const TopicPartition& partition, PartitionState& state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Forget(PartitionState& state, int64_t offset)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Ordering ordering_;
  const int max_group_;
  const bool lane_per_record_;

  mutable absl::Mutex mu_;
  RunGroup run_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<LaneKey, Lane> lanes_ ABSL_GUARDED_BY(mu_);
  std::deque<LaneKey> ready_ ABSL_GUARDED_BY(mu_);  // queued, not running
  absl::flat_hash_map<TopicPartition, PartitionState> partitions_
      ABSL_GUARDED_BY(mu_);
  int64_t waiting_total_ ABSL_GUARDED_BY(mu_) = 0;
  Outcome outcome_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::vector<std::thread> workers_;  // last: they use everything above
};

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_PARALLEL_RUNNER_H_
