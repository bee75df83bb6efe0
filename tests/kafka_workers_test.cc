// The Kafka consumer with parallel handlers (ConsumerOptions::workers and
// ::ordering) against librdkafka's mock cluster: partitions and keys
// overlap, each key keeps its order, offsets stop at the low watermark, and
// a consumer killed mid-stream under Ordering::kKey loses and doubles
// nothing. Handlers sleep, as handlers that wait on a call do, so overlap
// shows on any number of cores. Where a guarantee is subtle, a deliberately
// broken consumer (kafka/consumer_hooks.h) shows the check catches it.

#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "kafka/consumer_hooks.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/kafka_test_util.h"
#include "tests/testing/overlap.h"
#include "util/temp_dir.h"

namespace idem::kafka {
namespace {

using ::idem::test::AppliedCounts;
using ::idem::test::ApplyRecord;
using ::idem::test::EffectErrors;
using ::idem::test::KafkaTestBed;
using ::idem::test::MakeStream;
using ::idem::test::OverlapCounter;
using ::idem::test::PollUntil;
using ::idem::test::ProducedStream;
using ::idem::test::StartKafka;
using ::idem::test::TestConsumerOptions;
using ::idem::util::TempDir;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr int kWorkersPartitions = 4;

// The sum of each partition's committed offset + 1 in `engine`.
int64_t Committed(Engine& engine, const std::string& topic) {
  return test::CommittedRecords(engine, topic, kWorkersPartitions);
}

class KafkaWorkersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartKafka("orders", kWorkersPartitions, bed_));
  }

  ConsumerOptions WorkerOptions(int workers, Ordering ordering) {
    ConsumerOptions options = TestConsumerOptions(bed_, "g");
    options.workers = workers;
    options.ordering = ordering;
    options.max_batch = 50;
    return options;
  }

  TempDir dir_;
  KafkaTestBed bed_;
};

TEST_F(KafkaWorkersTest, ParallelPartitionsOverlapAndApplyEachMessageOnce) {
  const ProducedStream stream = MakeStream(bed_.topic, kWorkersPartitions, 400,
                                           /*duplicate_every=*/7, 11);
  ASSERT_TRUE(bed_.producer->Produce(stream.records).ok());
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  auto consumer = Consumer::Create(
      engine.get(), WorkerOptions(kWorkersPartitions, Ordering::kPartition));
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  OverlapCounter overlap;
  absl::Status s = PollUntil(
      **consumer,
      [&](const Record& record, Txn& txn) {
        OverlapCounter::Scope scope(overlap);
        // Long enough that every partition's records are fetched while the
        // first partition's are still being handled, whatever order
        // librdkafka's fetch responses come in.
        absl::SleepFor(absl::Milliseconds(10));
        return ApplyRecord(record, txn);
      },
      [&] { return Committed(*engine, bed_.topic) >= 400; });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(EffectErrors(stream.unique_ids, AppliedCounts(*engine)),
              IsEmpty());
  EXPECT_GE(overlap.max(), 2) << "the partitions' handlers never overlapped";
  const ConsumerStats stats = (*consumer)->stats();
  EXPECT_EQ(stats.records, 400);
  EXPECT_EQ(stats.processed + stats.duplicates, 400);
  EXPECT_EQ(stats.duplicates, static_cast<int64_t>(stream.duplicates));
}

// Records of 16 keys on one partition, each key's values 1, 2, 3...; the
// handler keeps "last/<key>" = the value and checks it never goes down.
struct KeyedRun {
  int max_overlap = 0;
  std::vector<std::string> order_violations;
  std::map<std::string, std::string> last;  // "last/<key>" in the engine
  std::optional<int64_t> engine_offset;
};

KeyedRun RunKeyed(KafkaTestBed& bed, const std::string& store,
                  const ConsumerOptions& options, const ConsumerHooks& hooks) {
  constexpr int kKeys = 16;
  constexpr int kPerKey = 12;
  std::vector<OutgoingRecord> records;
  for (int seq = 1; seq <= kPerKey; ++seq) {
    for (int k = 0; k < kKeys; ++k) {
      OutgoingRecord& record = records.emplace_back();
      record.topic = bed.topic;
      record.partition = 0;
      record.key = absl::StrCat("key-", k);
      record.value = absl::StrCat(seq);
      record.headers = {{"message-id", absl::StrCat("m-", k, "-", seq)}};
    }
  }
  EXPECT_TRUE(bed.producer->Produce(records).ok());
  KeyedRun run;
  auto engine = Engine::Open(store, Options());
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return run;
  auto consumer = CreateConsumerWithHooks(engine->get(), options, hooks);
  EXPECT_TRUE(consumer.ok()) << consumer.status();
  if (!consumer.ok()) return run;
  OverlapCounter overlap;
  absl::Mutex mu;
  std::map<std::string, int> seen;  // per key, the highest value run
  absl::Status s = PollUntil(
      **consumer,
      [&](const Record& record, Txn& txn) {
        OverlapCounter::Scope scope(overlap);
        int value = 0;
        EXPECT_TRUE(absl::SimpleAtoi(std::string(record.value), &value));
        // Later values of a key wait less, so they overtake earlier ones
        // unless the consumer keeps the key's order.
        absl::SleepFor(absl::Milliseconds(1 + kPerKey - value));
        {
          absl::MutexLock lock(&mu);
          int& highest = seen[std::string(record.key)];
          if (value < highest) {
            run.order_violations.push_back(absl::StrCat(
                std::string(record.key), ": ", value, " after ", highest));
          }
          highest = std::max(highest, value);
        }
        txn.Put(absl::StrCat("last/", std::string(record.key)), record.value);
        return absl::OkStatus();
      },
      [&] {
        auto offset = (*engine)->CommittedOffset(bed.topic, 0);
        return offset.ok() && offset->has_value() &&
               **offset >= kKeys * kPerKey - 1;
      });
  EXPECT_TRUE(s.ok()) << s;
  run.max_overlap = overlap.max();
  for (int k = 0; k < kKeys; ++k) {
    const std::string key = absl::StrCat("last/key-", k);
    run.last[key] = (*engine)->GetState(key)->value_or("");
  }
  run.engine_offset = *(*engine)->CommittedOffset(bed.topic, 0);
  return run;
}

TEST_F(KafkaWorkersTest, KeyOrderingRunsKeysOfOnePartitionInParallelInOrder) {
  // More workers than keys, so that a key's later records could start
  // beside its earlier ones (and overtake them) if nothing kept the order.
  const KeyedRun run =
      RunKeyed(bed_, dir_.Sub("store"), WorkerOptions(32, Ordering::kKey), {});
  EXPECT_THAT(run.order_violations, IsEmpty());
  EXPECT_GE(run.max_overlap, 4) << "one partition's keys never overlapped";
  for (const auto& [key, value] : run.last) EXPECT_EQ(value, "12") << key;
  // Every record committed: the engine's offset is at the watermark.
  EXPECT_EQ(run.engine_offset, 16 * 12 - 1);
}

// The broken variant: every record in a lane of its own. The order check
// must catch it.
TEST_F(KafkaWorkersTest, KeyOrderingCheckCatchesWorkersWithoutLanes) {
  ConsumerHooks hooks;
  hooks.lane_per_record = true;
  const KeyedRun run = RunKeyed(bed_, dir_.Sub("store"),
                                WorkerOptions(32, Ordering::kKey), hooks);
  EXPECT_THAT(run.order_violations, Not(IsEmpty()));
}

TEST_F(KafkaWorkersTest, PartitionOrderingRunsOnePartitionInOrder) {
  const KeyedRun run = RunKeyed(bed_, dir_.Sub("store"),
                                WorkerOptions(8, Ordering::kPartition), {});
  EXPECT_THAT(run.order_violations, IsEmpty());
  EXPECT_EQ(run.max_overlap, 1) << "one partition ran on two workers at once";
  EXPECT_EQ(run.engine_offset, 16 * 12 - 1);
}

TEST_F(KafkaWorkersTest, CreateRejectsBadWorkerOptions) {
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  auto create = [&](const ConsumerOptions& options) {
    return Consumer::Create(engine.get(), options).status();
  };
  ConsumerOptions options = WorkerOptions(0, Ordering::kPartition);
  EXPECT_THAT(create(options).message(), HasSubstr("workers must be in"));
  EXPECT_TRUE(absl::IsInvalidArgument(create(options)));
  options.workers = ConsumerOptions::kMaxWorkers + 1;
  EXPECT_TRUE(absl::IsInvalidArgument(create(options)));
  options.workers = 2;
  options.ordering = static_cast<Ordering>(7);
  EXPECT_THAT(create(options).message(), HasSubstr("ordering"));
  options.ordering = Ordering::kKey;
  options.changelog_topic = "orders-state";
  const absl::Status key_with_changelog = create(options);
  EXPECT_TRUE(absl::IsInvalidArgument(key_with_changelog));
  EXPECT_THAT(key_with_changelog.message(),
              HasSubstr("kKey cannot be combined with changelog_topic"));
}

// A member with 8 workers and Ordering::kKey, as a process of its own, whose
// records finish out of offset order (tests/kafka_consumer_child.cc), is
// killed mid-stream `kills` times: it SIGKILLs itself as its 100th to 180th
// handler call starts (--die_after; a kill the test sent once the store
// showed progress came too late under load, with the stream done), its
// other workers' records in flight. Then a consumer finishes the stream.
// Returns the IDs not applied exactly once.
std::vector<std::string> KillKeyOrderingWorkers(KafkaTestBed& bed, TempDir& dir,
                                                int kills,
                                                bool store_record_offsets) {
  // Room for five kills: a check of the committed offsets takes a store
  // open, meanwhile the child goes on, and the broken variant's offsets jump
  // ahead of the records committed; with 900 a fifth kill could find the
  // stream done.
  constexpr int kRecords = 2400;
  const ProducedStream stream = MakeStream(bed.topic, kWorkersPartitions,
                                           kRecords, /*duplicate_every=*/10, 5);
  EXPECT_TRUE(bed.producer->Produce(stream.records).ok());
  const std::string store = dir.Sub("store");
  {
    auto create = Engine::Open(store, Options());  // so read-only opens work
    EXPECT_TRUE(create.ok()) << create.status();
  }
  auto committed = [&] {
    return test::CommittedRecords(store, bed.topic, kWorkersPartitions);
  };
  for (int round = 1; round <= kills; ++round) {
    const int64_t before = committed();
    std::vector<std::string> args = {bed.cluster->bootstrap_servers(),
                                     bed.topic,
                                     "g",
                                     store,
                                     "--workers=8",
                                     "--ordering=key"};
    if (store_record_offsets) args.push_back("--store_record_offsets");
    args.push_back(absl::StrCat("--die_after=", 80 + 20 * round));
    absl::StatusOr<pid_t> child = test::SpawnKafkaChild(IDEM_KAFKA_CHILD, args);
    EXPECT_TRUE(child.ok()) << child.status();
    if (!child.ok()) return {"no child"};
    int wstatus = 0;
    EXPECT_EQ(waitpid(*child, &wstatus, 0), *child);
    EXPECT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
        << "the child ended on its own";
    const int64_t after = committed();
    EXPECT_LT(after, kRecords) << "killed too late to be mid-stream";
    EXPECT_GT(after, before) << "no progress before the kill";
  }
  auto engine = Engine::Open(store, Options());
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {"no engine"};
  auto consumer =
      Consumer::Create(engine->get(), TestConsumerOptions(bed, "g"));
  EXPECT_TRUE(consumer.ok()) << consumer.status();
  if (!consumer.ok()) return {"no consumer"};
  absl::Status s = PollUntil(**consumer, ApplyRecord, [&] {
    return Committed(**engine, bed.topic) >= kRecords;
  });
  EXPECT_TRUE(s.ok()) << s;
  return EffectErrors(stream.unique_ids, AppliedCounts(**engine));
}

TEST_F(KafkaWorkersTest,
       KeyOrderingWorkersKilledMidStreamLoseAndDoubleNothing) {
  EXPECT_THAT(KillKeyOrderingWorkers(bed_, dir_, /*kills=*/5, false),
              IsEmpty());
}

// The broken variant: records commit their own offsets, not the watermark.
// A kill then leaves the engine's offset above records of other keys that
// never committed, and the restart skips them.
TEST_F(KafkaWorkersTest, KeyOrderingKillCheckCatchesRecordOffsetsStored) {
  EXPECT_THAT(KillKeyOrderingWorkers(bed_, dir_, /*kills=*/5, true),
              Not(IsEmpty()));
}

}  // namespace
}  // namespace idem::kafka
