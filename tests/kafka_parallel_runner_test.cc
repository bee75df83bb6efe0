// ParallelRunner (kafka/parallel_runner.h) on its own, without Kafka: lanes
// overlap, each lane keeps its order, kKey groups store only the watermark,
// a failed group rewinds its partition, and a cancelled partition stops.
// Groups sleep, as handlers that wait on a call, so overlap shows on any
// number of cores. The order check is shown to catch a runner that gives
// every record a lane of its own.

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "kafka/parallel_runner.h"
#include "tests/testing/overlap.h"
#include "util/temp_dir.h"

namespace idem::kafka {
namespace {

using ::testing::IsEmpty;
using ::testing::Not;

// Records (topic "t") whose views point into strings the test owns.
class RecordSource {
 public:
  QueuedRecord Make(int32_t partition, int64_t offset, std::string key) {
    auto owned = std::make_shared<std::string>(std::move(key));
    QueuedRecord queued;
    queued.record.topic = "t";
    queued.record.partition = partition;
    queued.record.offset = offset;
    queued.record.key = *owned;
    queued.owner = owned;
    return queued;
  }
};

// A RunGroup that sleeps `per_record` per record and logs what it saw: the
// order of each lane, how many groups ran at once, and each group's stored
// offset against the records already handled.
class GroupLog {
 public:
  explicit GroupLog(absl::Duration per_record) : per_record_(per_record) {}

  ParallelRunner::RunGroup Function() {
    return [this](const ParallelRunner::Group& group)
               -> absl::StatusOr<ProcessedBatch> { return Run(group); };
  }

  absl::StatusOr<ProcessedBatch> Run(const ParallelRunner::Group& group) {
    test::OverlapCounter::Scope scope(overlap_);
    CheckStoredOffset(group);
    ProcessedBatch batch;
    for (const Record& record : group.records) {
      if (group.cancelled != nullptr && group.cancelled->load()) {
        return absl::CancelledError("cancelled");
      }
      absl::SleepFor(per_record_);
      Handled(record);
      ++batch.report.records;
      ++batch.report.processed;
      int64_t& next =
          batch.next_offsets[{std::string(record.topic), record.partition}];
      next = std::max(next, record.offset + 1);
    }
    return batch;
  }

  // Lanes whose records ran out of order, as "partition/key: a after b".
  std::vector<std::string> OrderViolations() const {
    absl::MutexLock lock(&mu_);
    return violations_;
  }
  // Groups whose stored offset was not below every record not yet handled.
  std::vector<std::string> StoredOffsetViolations() const {
    absl::MutexLock lock(&mu_);
    return stored_violations_;
  }
  int max_running() const { return overlap_.max(); }
  int64_t handled() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int64_t>(handled_.size());
  }

 private:
  void Handled(const Record& record) {
    absl::MutexLock lock(&mu_);
    const std::string lane =
        absl::StrCat(record.partition, "/", std::string(record.key));
    auto [it, first] = last_offset_.emplace(lane, record.offset);
    if (!first) {
      if (record.offset < it->second) {
        violations_.push_back(
            absl::StrCat(lane, ": ", record.offset, " after ", it->second));
      }
      it->second = std::max(it->second, record.offset);
    }
    handled_.insert({record.partition, record.offset});
  }

  void CheckStoredOffset(const ParallelRunner::Group& group) {
    if (!group.stored_offset.has_value()) return;
    absl::MutexLock lock(&mu_);
    const int32_t partition = group.records.front().partition;
    for (int64_t offset = 0; offset <= *group.stored_offset; ++offset) {
      if (!handled_.contains({partition, offset})) {
        stored_violations_.push_back(
            absl::StrCat("stored ", *group.stored_offset, " but ", partition,
                         "/", offset, " was not handled"));
        return;
      }
    }
  }

  const absl::Duration per_record_;
  test::OverlapCounter overlap_;
  mutable absl::Mutex mu_;
  std::map<std::string, int64_t> last_offset_;
  std::set<std::pair<int32_t, int64_t>> handled_;
  std::vector<std::string> violations_;
  std::vector<std::string> stored_violations_;
};

TEST(ParallelRunnerTest, WorkersRunPartitionsInParallel) {
  GroupLog log(absl::Milliseconds(5));
  RecordSource source;
  ParallelRunner runner(/*workers=*/4, Ordering::kPartition, /*max_group=*/3);
  runner.Begin(log.Function());
  for (int64_t offset = 0; offset < 12; ++offset) {
    for (int32_t partition = 0; partition < 4; ++partition) {
      runner.Add(source.Make(partition, offset, "k"));
    }
  }
  runner.WaitIdle();
  const ParallelRunner::Outcome outcome = runner.TakeOutcome();
  EXPECT_TRUE(outcome.error.ok()) << outcome.error;
  EXPECT_EQ(outcome.report.processed, 48);
  EXPECT_EQ(log.max_running(), 4) << "four partitions, four workers";
  EXPECT_THAT(log.OrderViolations(), IsEmpty());
  for (int32_t partition = 0; partition < 4; ++partition) {
    EXPECT_EQ(outcome.next_offsets.at({"t", partition}), 12);
  }
  EXPECT_THAT(outcome.rewind, IsEmpty());
}

TEST(ParallelRunnerTest,
     OnePartitionRunsOnOneWorkerAtATimeUnderPartitionOrdering) {
  GroupLog log(absl::Milliseconds(1));
  RecordSource source;
  ParallelRunner runner(/*workers=*/4, Ordering::kPartition, /*max_group=*/2);
  runner.Begin(log.Function());
  for (int64_t offset = 0; offset < 20; ++offset) {
    runner.Add(source.Make(0, offset, absl::StrCat("k", offset % 5)));
  }
  runner.WaitIdle();
  EXPECT_EQ(log.max_running(), 1);
  EXPECT_EQ(runner.TakeOutcome().next_offsets.at({"t", 0}), 20);
}

// 16 keys of one partition, 8 records each, keys interleaved.
void AddKeyedRecords(ParallelRunner& runner, RecordSource& source) {
  for (int64_t offset = 0; offset < 128; ++offset) {
    runner.Add(source.Make(0, offset, absl::StrCat("key-", offset % 16)));
  }
}

// Runs the keyed records on 32 workers, each group sleeping less the later
// its record (so a later record of a key overtakes an earlier one unless
// the runner keeps them in order); returns the log.
std::unique_ptr<GroupLog> RunKeyedWithOvertaking(bool lane_per_record) {
  auto log = std::make_unique<GroupLog>(absl::Milliseconds(1));
  RecordSource source;
  ParallelRunner runner(/*workers=*/32, Ordering::kKey, /*max_group=*/1,
                        lane_per_record);
  runner.Begin([&log](const ParallelRunner::Group& group) {
    absl::SleepFor(absl::Milliseconds(
        8 - std::min<int64_t>(7, group.records.front().offset / 16)));
    return log->Run(group);
  });
  AddKeyedRecords(runner, source);
  runner.WaitIdle();
  EXPECT_EQ(runner.TakeOutcome().report.processed, 128);
  return log;
}

TEST(ParallelRunnerTest, KeyOrderingRunsKeysInParallelEachInOrder) {
  std::unique_ptr<GroupLog> log = RunKeyedWithOvertaking(false);
  EXPECT_GE(log->max_running(), 8) << "one partition, keys in parallel";
  EXPECT_THAT(log->OrderViolations(), IsEmpty());
  EXPECT_THAT(log->StoredOffsetViolations(), IsEmpty());
}

// The broken variant: every record in a lane of its own. The order check
// above must catch it.
TEST(ParallelRunnerTest, KeyOrderingCheckCatchesALanePerRecord) {
  EXPECT_THAT(RunKeyedWithOvertaking(true)->OrderViolations(), Not(IsEmpty()));
}

TEST(ParallelRunnerTest, KeyOrderingStoresTheWatermarkNotTheRecordsOffset) {
  RecordSource source;
  std::vector<std::optional<int64_t>> stored;
  absl::Mutex mu;
  GroupLog log(absl::Milliseconds(1));
  ParallelRunner runner(/*workers=*/4, Ordering::kKey, /*max_group=*/1);
  runner.Begin([&](const ParallelRunner::Group& group) {
    {
      absl::MutexLock lock(&mu);
      stored.push_back(group.stored_offset);
    }
    return log.Run(group);
  });
  AddKeyedRecords(runner, source);
  runner.WaitIdle();
  runner.TakeOutcome();
  ASSERT_EQ(stored.size(), 128u);
  for (const std::optional<int64_t>& offset : stored) {
    ASSERT_TRUE(offset.has_value());
  }
  EXPECT_THAT(log.StoredOffsetViolations(), IsEmpty());
  // The first groups begin before anything was handled: nothing stored.
  EXPECT_EQ(*std::min_element(stored.begin(), stored.end()), -1);
}

TEST(ParallelRunnerTest, FailedGroupRewindsItsPartitionAndDropsTheRest) {
  RecordSource source;
  // Partition 0's group holding offset 4 fails (a storage error); groups
  // form as the workers find records, so it may begin at 3 or 4.
  std::atomic<bool> failed{false};
  std::atomic<int64_t> failed_first{-1};
  std::atomic<int> ran_after_failure{0};
  GroupLog log(absl::ZeroDuration());
  ParallelRunner runner(/*workers=*/2, Ordering::kPartition, /*max_group=*/2);
  runner.Begin([&](const ParallelRunner::Group& group)
                   -> absl::StatusOr<ProcessedBatch> {
    const Record& first = group.records.front();
    if (first.partition == 0) {
      if (failed.load()) ++ran_after_failure;
      if (group.records.back().offset >= 4) {
        failed_first.store(first.offset);
        failed.store(true);
        return absl::UnavailableError("storage");
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return log.Run(group);
  });
  for (int64_t offset = 0; offset < 10; ++offset) {
    runner.Add(source.Make(0, offset, "k"));
    runner.Add(source.Make(1, offset, "k"));
  }
  runner.WaitIdle();
  const ParallelRunner::Outcome outcome = runner.TakeOutcome();
  EXPECT_TRUE(absl::IsUnavailable(outcome.error)) << outcome.error;
  EXPECT_EQ(ran_after_failure.load(), 0) << "records behind a failure ran";
  EXPECT_GE(failed_first.load(), 3);
  EXPECT_EQ(outcome.rewind.at({"t", 0}), failed_first.load());
  EXPECT_FALSE(outcome.next_offsets.contains({"t", 0}));
  EXPECT_EQ(outcome.next_offsets.at({"t", 1}), 10);
}

TEST(ParallelRunnerTest, CancelStopsTheRunningGroupAndDropsTheQueue) {
  RecordSource source;
  GroupLog log(absl::Milliseconds(20));
  ParallelRunner runner(/*workers=*/2, Ordering::kPartition, /*max_group=*/50);
  runner.Begin(log.Function());
  for (int64_t offset = 0; offset < 100; ++offset) {
    runner.Add(source.Make(0, offset, "k"));
  }
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time start = absl::Now();
  runner.Cancel({{"t", 0}});
  // Waits for one record's handler at most, not the group's 50.
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(500));
  EXPECT_TRUE(runner.Idle());
  const int64_t handled = log.handled();
  EXPECT_GT(handled, 0);
  EXPECT_LT(handled, 100);
  runner.Add(source.Make(0, 100, "k"));  // dropped: the partition is gone
  const ParallelRunner::Outcome outcome = runner.TakeOutcome();
  EXPECT_TRUE(outcome.error.ok()) << "a cancellation is not an error";
  // Reading again starts at or before the first record not handled (the
  // cancelled group's first: its records may be partly committed).
  EXPECT_LE(outcome.rewind.at({"t", 0}), handled);
  EXPECT_EQ(log.handled(), handled);
}

TEST(ParallelRunnerTest, FinishWaitsForThePartitionsRecordsOnly) {
  RecordSource source;
  GroupLog log(absl::Milliseconds(2));
  ParallelRunner runner(/*workers=*/2, Ordering::kPartition, /*max_group=*/5);
  runner.Begin(log.Function());
  for (int64_t offset = 0; offset < 20; ++offset) {
    runner.Add(source.Make(0, offset, "k"));
    runner.Add(source.Make(1, offset, "k"));
  }
  runner.Finish({{"t", 0}});
  EXPECT_EQ(runner.Waiting({"t", 0}), 0);
  EXPECT_EQ(runner.NextOffset({"t", 0}), 20);
  runner.WaitIdle();
  EXPECT_EQ(runner.TakeOutcome().report.processed, 40);
}

// The consumer's workers as they run, without librdkafka: groups of records
// of 4 partitions and 8 keys each, through ProcessRecords on one engine from
// 8 workers under kKey, each record adding 1 to its key's counter (a
// read-modify-write, so keys of one partition in parallel must not lose
// updates) and every tenth record a producer duplicate. Every counter is
// exact, and each partition's stored offset stays at or below its watermark
// and reaches the last offset once set there (as the consumer does).
TEST(ParallelRunnerTest, GroupsThroughTheEngineApplyEachRecordOnce) {
  util::TempDir dir;
  auto engine = Engine::Open(dir.Sub("store"), Options());
  ASSERT_TRUE(engine.ok()) << engine.status();
  ConsumerOptions options;
  options.retry_backoff = absl::ZeroDuration();
  const DeadLetterFunction no_dead_letter;
  auto bump = [](const Record& record, Txn& txn) -> absl::Status {
    const std::string key =
        absl::StrCat("count/", record.partition, "/", std::string(record.key));
    absl::StatusOr<std::optional<std::string>> current = txn.Get(key);
    if (!current.ok()) return current.status();
    const int64_t count = current->has_value() ? std::stoll(**current) + 1 : 1;
    absl::SleepFor(absl::Microseconds(200));
    txn.Put(key, absl::StrCat(count));
    return absl::OkStatus();
  };
  ParallelRunner runner(/*workers=*/8, Ordering::kKey, /*max_group=*/4);
  runner.Begin([&](const ParallelRunner::Group& group) {
    ProcessControls controls;
    controls.cancelled = group.cancelled;
    controls.stored_offset = group.stored_offset;
    controls.wait_durable = false;
    return ProcessRecords(**engine, group.records, options, no_dead_letter,
                          bump, controls);
  });
  RecordSource source;
  std::vector<std::shared_ptr<std::string>> ids;
  std::map<std::string, int> expected;  // per counter key
  for (int64_t offset = 0; offset < 200; ++offset) {
    for (int32_t partition = 0; partition < 4; ++partition) {
      // Every tenth record repeats the ID (and key) of the record before
      // it, as a producer's retry does.
      const int64_t id_offset = offset % 10 == 9 ? offset - 1 : offset;
      QueuedRecord queued =
          source.Make(partition, offset, absl::StrCat("k", id_offset % 8));
      auto id = std::make_shared<std::string>(
          absl::StrCat("m-", partition, "-", id_offset));
      queued.record.headers = {{"message-id", *id}};
      ids.push_back(id);
      if (id_offset == offset) {
        ++expected[absl::StrCat("count/", partition, "/k", offset % 8)];
      }
      runner.Add(std::move(queued));
    }
  }
  runner.WaitIdle();
  const ParallelRunner::Outcome outcome = runner.TakeOutcome();
  ASSERT_TRUE(outcome.error.ok()) << outcome.error;
  EXPECT_EQ(outcome.report.duplicates, 4 * 20);
  EXPECT_EQ(outcome.report.processed, 4 * 180);
  for (const auto& [key, count] : expected) {
    EXPECT_EQ((*engine)->GetState(key).value_or(std::nullopt),
              std::optional<std::string>(absl::StrCat(count)))
        << key;
  }
  ASSERT_TRUE((*engine)->WaitDurable(outcome.max_sequence).ok());
  for (int32_t partition = 0; partition < 4; ++partition) {
    EXPECT_EQ(outcome.next_offsets.at({"t", partition}), 200);
    absl::StatusOr<std::optional<int64_t>> stored =
        (*engine)->CommittedOffset("t", partition);
    ASSERT_TRUE(stored.ok());
    EXPECT_LT(stored->value_or(-1), 200);
    ASSERT_TRUE((*engine)->SetCommittedOffset("t", partition, 199).ok());
  }
}

}  // namespace
}  // namespace idem::kafka
