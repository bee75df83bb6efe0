#include "kafka/parallel_runner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace idem::kafka {

ParallelRunner::ParallelRunner(int workers, Ordering ordering, int max_group,
                               bool lane_per_record)
    : ordering_(ordering),
      max_group_(std::max(1, max_group)),
      lane_per_record_(lane_per_record) {
  workers_.reserve(std::max(1, workers));
  for (int i = 0; i < std::max(1, workers); ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
}

ParallelRunner::~ParallelRunner() {
  std::vector<TopicPartition> all;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [partition, state] : partitions_) all.push_back(partition);
  }
  Cancel(all);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& worker : workers_) worker.join();
}

void ParallelRunner::Begin(RunGroup run) {
  absl::MutexLock lock(&mu_);
  run_ = std::move(run);
}

void ParallelRunner::Add(QueuedRecord record) {
  absl::MutexLock lock(&mu_);
  TopicPartition partition{std::string(record.record.topic),
                           record.record.partition};
  PartitionState& state = partitions_[partition];
  state.first_taken = std::min(state.first_taken, record.record.offset);
  if (state.failed || state.cancelled->load(std::memory_order_relaxed)) {
    state.rewind = std::min(state.rewind, record.record.offset);
    return;
  }
  ++state.waiting[record.record.offset];
  ++state.waiting_count;
  ++waiting_total_;
  std::string lane_name;
  if (lane_per_record_) {
    lane_name = absl::StrCat(record.record.offset);
  } else if (ordering_ == Ordering::kKey) {
    lane_name = std::string(record.record.key);
  }
  LaneKey key{std::move(partition), std::move(lane_name)};
  Lane& lane = lanes_[key];
  lane.queue.push_back(std::move(record));
  if (lane.queue.size() == 1 && !lane.running) ready_.push_back(key);
}

int64_t ParallelRunner::Waiting(const TopicPartition& partition) const {
  absl::MutexLock lock(&mu_);
  auto it = partitions_.find(partition);
  return it == partitions_.end() ? 0 : it->second.waiting_count;
}

bool ParallelRunner::Idle() const {
  absl::MutexLock lock(&mu_);
  return waiting_total_ == 0;
}

void ParallelRunner::WaitIdle() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int64_t* waiting) { return *waiting == 0; }, &waiting_total_));
}

void ParallelRunner::Finish(const std::vector<TopicPartition>& partitions) {
  absl::MutexLock lock(&mu_);
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const TopicPartition& partition : partitions) {
      auto it = partitions_.find(partition);
      if (it != partitions_.end() && it->second.waiting_count > 0) return false;
    }
    return true;
  };
  mu_.Await(absl::Condition(&done));
}

void ParallelRunner::Cancel(const std::vector<TopicPartition>& partitions) {
  absl::MutexLock lock(&mu_);
  for (const TopicPartition& partition : partitions) {
    auto it = partitions_.find(partition);
    if (it == partitions_.end()) continue;
    it->second.cancelled->store(true, std::memory_order_release);
    DropQueued(partition, it->second);
  }
  auto stopped = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const TopicPartition& partition : partitions) {
      auto it = partitions_.find(partition);
      if (it != partitions_.end() && it->second.running_groups > 0) {
        return false;
      }
    }
    return true;
  };
  mu_.Await(absl::Condition(&stopped));
}

std::optional<int64_t> ParallelRunner::NextOffset(
    const TopicPartition& partition) const {
  absl::MutexLock lock(&mu_);
  auto it = partitions_.find(partition);
  if (it == partitions_.end()) return std::nullopt;
  const PartitionState& state = it->second;
  if (state.waiting_count > 0 || state.rewind != INT64_MAX ||
      state.next_offset < 0) {
    return std::nullopt;
  }
  return state.next_offset;
}

uint64_t ParallelRunner::MaxSequence() const {
  absl::MutexLock lock(&mu_);
  return outcome_.max_sequence;
}

ParallelRunner::Outcome ParallelRunner::TakeOutcome() {
  absl::MutexLock lock(&mu_);
  Outcome outcome = std::exchange(outcome_, Outcome());
  for (const auto& [partition, state] : partitions_) {
    outcome.first_taken[partition] = state.first_taken;
    if (state.rewind != INT64_MAX) {
      outcome.rewind[partition] = state.rewind;
    } else if (state.next_offset >= 0) {
      outcome.next_offsets[partition] = state.next_offset;
    }
  }
  partitions_.clear();
  return outcome;
}

void ParallelRunner::WorkerLoop() {
  mu_.Lock();
  while (true) {
    mu_.Await(absl::Condition(this, &ParallelRunner::HasWorkOrStopping));
    if (stopping_) break;
    const LaneKey key = std::move(ready_.front());
    ready_.pop_front();
    Lane& lane = lanes_[key];
    PartitionState& state = partitions_[key.first];
    std::vector<QueuedRecord> group;
    while (!lane.queue.empty() && static_cast<int>(group.size()) < max_group_) {
      group.push_back(std::move(lane.queue.front()));
      lane.queue.pop_front();
    }
    if (group.empty()) {  // not expected: a ready lane has records
      if (!lane.running) lanes_.erase(key);
      continue;
    }
    lane.running = true;
    ++state.running_groups;
    Group run;
    run.cancelled = state.cancelled.get();
    if (ordering_ == Ordering::kKey) {
      // Every record below the lowest waiting offset has committed; the
      // group's own records are waiting, so this is below all of them.
      run.stored_offset = state.waiting.begin()->first - 1;
    }
    // The state's flag outlives the group even if the state is erased.
    std::shared_ptr<std::atomic<bool>> cancelled = state.cancelled;
    // A copy, taken under the lock: run_ is mu_'s (Begin replaces it).
    const RunGroup function = run_;
    mu_.Unlock();

    std::vector<Record> records;
    records.reserve(group.size());
    for (const QueuedRecord& queued : group) records.push_back(queued.record);
    run.records = absl::MakeSpan(records);
    const absl::Time start = absl::Now();
    absl::StatusOr<ProcessedBatch> result = function(run);
    const absl::Duration busy = absl::Now() - start;

    mu_.Lock();
    CompleteGroup(key, group, result, busy);
  }
  mu_.Unlock();
}

void ParallelRunner::CompleteGroup(const LaneKey& key,
                                   const std::vector<QueuedRecord>& group,
                                   const absl::StatusOr<ProcessedBatch>& result,
                                   absl::Duration busy) {
  PartitionState& state = partitions_[key.first];
  --state.running_groups;
  for (const QueuedRecord& queued : group) Forget(state, queued.record.offset);
  outcome_.busy += busy;
  if (result.ok()) {
    AddRecordCounts(result->report, outcome_.report);
    outcome_.max_sequence =
        std::max(outcome_.max_sequence, result->max_sequence);
    for (const auto& [partition, next] : result->next_offsets) {
      state.next_offset = std::max(state.next_offset, next);
    }
  } else {
    // The group's records may be partly committed: read them again from
    // its first (the engine catches what committed as duplicates), and
    // drop the partition's queued records, which must not run before it.
    state.rewind = std::min(state.rewind, group.front().record.offset);
    state.failed = true;
    DropQueued(key.first, state);
    if (!absl::IsCancelled(result.status()) && outcome_.error.ok()) {
      outcome_.error = result.status();
    }
  }
  Lane& lane = lanes_[key];
  lane.running = false;
  if (!lane.queue.empty()) {
    ready_.push_back(key);
  } else {
    lanes_.erase(key);
  }
}

void ParallelRunner::DropQueued(const TopicPartition& partition,
                                PartitionState& state) {
  for (auto it = lanes_.begin(); it != lanes_.end();) {
    auto current = it++;
    if (current->first.first != partition) continue;
    for (const QueuedRecord& queued : current->second.queue) {
      state.rewind = std::min(state.rewind, queued.record.offset);
      Forget(state, queued.record.offset);
    }
    current->second.queue.clear();
    if (!current->second.running) {
      std::erase(ready_, current->first);
      lanes_.erase(current);
    }
  }
}

void ParallelRunner::Forget(PartitionState& state, int64_t offset) {
  auto it = state.waiting.find(offset);
  if (it != state.waiting.end() && --it->second == 0) state.waiting.erase(it);
  --state.waiting_count;
  --waiting_total_;
}

}  // namespace idem::kafka
