// The Kafka consumer against librdkafka's mock cluster (real Kafka protocol,
// in process): producer duplicates, restarts, a killed consumer process,
// rebalances between engines and poison records. Where a guarantee is
// subtle, a deliberately broken consumer (kafka/consumer_hooks.h)
// shows that the check catches its violation.

#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/partition_state.h"
#include "kafka/consumer_hooks.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/kafka_test_util.h"
#include "util/temp_dir.h"

namespace idem::kafka {
namespace {

using ::idem::test::AppliedCounts;
using ::idem::test::ApplyRecord;
using ::idem::test::EffectErrors;
using ::idem::test::KafkaTestBed;
using ::idem::test::MakeStream;
using ::idem::test::Merge;
using ::idem::test::PollUntil;
using ::idem::test::ProducedStream;
using ::idem::test::StartKafka;
using ::idem::test::TestConsumerOptions;
using ::idem::util::TempDir;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

constexpr int kConsumerPartitions = 3;

// True once every partition's committed offset in `engine` is >= `last`.
bool EngineReached(Engine& engine, const std::string& topic, int64_t last) {
  for (int p = 0; p < kConsumerPartitions; ++p) {
    auto offset = engine.CommittedOffset(topic, p);
    if (!offset.ok() || !offset->has_value() || **offset < last) return false;
  }
  return true;
}

// True once, for every partition, one of `engines` has reached `last`.
bool AnyEngineReached(const std::vector<Engine*>& engines,
                      const std::string& topic, int64_t last) {
  for (int p = 0; p < kConsumerPartitions; ++p) {
    bool reached = false;
    for (Engine* engine : engines) {
      auto offset = engine->CommittedOffset(topic, p);
      reached |= offset.ok() && offset->has_value() && **offset >= last;
    }
    if (!reached) return false;
  }
  return true;
}

// Produces the first `count` records of `stream` and returns the others.
std::vector<OutgoingRecord> ProduceFirst(KafkaTestBed& bed,
                                         const ProducedStream& stream,
                                         size_t count) {
  const std::vector<OutgoingRecord> first(stream.records.begin(),
                                          stream.records.begin() + count);
  EXPECT_TRUE(bed.producer->Produce(first).ok());
  return {stream.records.begin() + count, stream.records.end()};
}

// Polls `consumer` with ApplyRecord on a thread of its own until stopped
// (or destroyed); a failed poll fails the test and ends the thread.
class BackgroundPoller {
 public:
  explicit BackgroundPoller(Consumer& consumer)
      : thread_([this, &consumer] {
          while (!stop_.load()) {
            absl::StatusOr<BatchReport> report =
                consumer.PollBatch(ApplyRecord);
            EXPECT_TRUE(report.ok()) << report.status();
            if (!report.ok()) return;
          }
        }) {}
  ~BackgroundPoller() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: starts once stop_ exists
};

class KafkaConsumerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartKafka("orders", kConsumerPartitions, bed_));
  }

  ProducedStream Produce(int count, int duplicate_every, uint64_t seed = 1) {
    ProducedStream stream = MakeStream(bed_.topic, kConsumerPartitions, count,
                                       duplicate_every, seed);
    absl::Status s = bed_.producer->Produce(stream.records);
    EXPECT_TRUE(s.ok()) << s;
    return stream;
  }

  TempDir dir_;
  KafkaTestBed bed_;
};

// ---- Producer duplicates ----

TEST_F(KafkaConsumerTest, ProducerDuplicatesAreAppliedOnce) {
  const ProducedStream stream = Produce(300, /*duplicate_every=*/7);
  ASSERT_GT(stream.duplicates, 0);
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  auto consumer =
      Consumer::Create(engine.get(), TestConsumerOptions(bed_, "g"));
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  absl::Status s = PollUntil(**consumer, ApplyRecord, [&] {
    return (*consumer)->stats().records == 300;
  });
  ASSERT_TRUE(s.ok()) << s;

  EXPECT_THAT(EffectErrors(stream.unique_ids, AppliedCounts(*engine)),
              IsEmpty());
  const ConsumerStats stats = (*consumer)->stats();
  EXPECT_EQ(stats.processed, static_cast<int64_t>(stream.unique_ids.size()));
  EXPECT_EQ(stats.duplicates, stream.duplicates);
  EXPECT_EQ(stats.dead_lettered, 0);
  EXPECT_TRUE(
      EngineReached(*engine, bed_.topic, 300 / kConsumerPartitions - 1));
}

// The check above fails when IDs are positions (what a consumer without the
// message-id header gets): producer duplicates then count as new messages.
TEST_F(KafkaConsumerTest, PositionIdsLetProducerDuplicatesThrough) {
  const ProducedStream stream = Produce(90, /*duplicate_every=*/3);
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  ConsumerOptions options = TestConsumerOptions(bed_, "g");
  options.id_function = [](const Record& r) -> absl::StatusOr<std::string> {
    return absl::StrCat(std::string(r.topic), "/", r.partition, "/", r.offset);
  };
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  absl::Status s = PollUntil(**consumer, ApplyRecord, [&] {
    return (*consumer)->stats().records == 90;
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(EffectErrors(stream.unique_ids, AppliedCounts(*engine)),
              Not(IsEmpty()));
}

// ---- Restarts ----

// A consumer processes part of the stream and dies before any Kafka commit;
// the dedupe window then passes. A new consumer in the same group must start
// from the engine's offsets: a replay would not be caught as duplicates any
// more (their records expired) and would apply twice. Returns the new
// consumer's PartitionStarts and the IDs not applied exactly once.
struct RestartOutcome {
  std::vector<PartitionStart> starts;
  std::vector<std::string> effect_errors;
  int64_t second_run_duplicates = 0;
};
RestartOutcome RestartAfterTheWindow(KafkaTestBed& bed, TempDir& dir,
                                     const ConsumerHooks& second_run_hooks) {
  RestartOutcome out;
  const ProducedStream stream =
      MakeStream(bed.topic, kConsumerPartitions, 150, 0, 2);
  EXPECT_TRUE(bed.producer->Produce(stream.records).ok());
  ManualClock clock(idem::test::kStart);
  Options engine_options;
  engine_options.clock = &clock;
  engine_options.dedupe_window = absl::Hours(1);
  auto engine = Engine::Open(dir.Sub("store"), engine_options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return out;

  ConsumerOptions options = TestConsumerOptions(bed, "g");
  options.max_batch = 30;
  options.commit_to_kafka = false;
  {
    ConsumerHooks dies_before_committing;
    dies_before_committing.skip_revoke_commit = true;
    auto first =
        CreateConsumerWithHooks(engine->get(), options, dies_before_committing);
    EXPECT_TRUE(first.ok()) << first.status();
    if (!first.ok()) return out;
    EXPECT_TRUE(PollUntil(**first, ApplyRecord, [&] {
                  return (*first)->stats().processed >= 60;
                }).ok());
  }
  clock.Advance(absl::Hours(2));

  options.on_assign = [&](const PartitionStart& s) { out.starts.push_back(s); };
  auto second =
      CreateConsumerWithHooks(engine->get(), options, second_run_hooks);
  EXPECT_TRUE(second.ok()) << second.status();
  if (!second.ok()) return out;
  EXPECT_TRUE(PollUntil(**second, ApplyRecord, [&] {
                return EngineReached(**engine, bed.topic, 49);
              }).ok());
  out.second_run_duplicates = (*second)->stats().duplicates;
  out.effect_errors = EffectErrors(stream.unique_ids, AppliedCounts(**engine));
  return out;
}

TEST_F(KafkaConsumerTest, RestartResumesFromTheEngineOffsetsNotKafkas) {
  const RestartOutcome out = RestartAfterTheWindow(bed_, dir_, {});
  EXPECT_THAT(out.effect_errors, IsEmpty());
  EXPECT_EQ(out.second_run_duplicates, 0);  // nothing was re-read
  ASSERT_THAT(out.starts, SizeIs(kConsumerPartitions));
  int resumed = 0;
  for (const PartitionStart& start : out.starts) {
    if (!start.engine_offset.has_value()) continue;
    ++resumed;
    EXPECT_EQ(start.start_offset, *start.engine_offset + 1);
  }
  EXPECT_GT(resumed, 0);
}

TEST_F(KafkaConsumerTest, IgnoringTheEngineOffsetsReappliesAfterTheWindow) {
  ConsumerHooks broken;
  broken.ignore_engine_offsets = true;
  const RestartOutcome out = RestartAfterTheWindow(bed_, dir_, broken);
  EXPECT_THAT(out.effect_errors, Not(IsEmpty()));
}

// A consumer process is SIGKILLed in the middle of its batches, twice; a
// final consumer finishes the stream. Every message's effect is applied
// exactly once.
TEST_F(KafkaConsumerTest, KilledConsumerProcessLosesAndDoublesNothing) {
  const ProducedStream stream = Produce(600, /*duplicate_every=*/10, 3);
  const std::string store = dir_.Sub("store");
  {
    ASSERT_OPEN(create, store, Options());  // so read-only opens work
  }
  auto committed = [&] {
    return test::CommittedRecords(store, bed_.topic, kConsumerPartitions);
  };
  for (int round = 1; round <= 2; ++round) {
    const int64_t before = committed();
    absl::StatusOr<pid_t> child = test::SpawnKafkaChild(
        IDEM_KAFKA_CHILD,
        {bed_.cluster->bootstrap_servers(), bed_.topic, "g", store});
    ASSERT_TRUE(child.ok()) << child.status();
    const pid_t pid = *child;
    // Kill once the child has committed a few batches beyond `before`.
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (committed() < before + 60 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    kill(pid, SIGKILL);
    int wstatus = 0;
    ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "the child ended on its own";
    ASSERT_GE(committed(), before + 60) << "kill " << round;
    ASSERT_LT(committed(), 600) << "killed too late to be mid-stream";
  }

  ASSERT_OPEN(engine, store, Options());
  auto consumer =
      Consumer::Create(engine.get(), TestConsumerOptions(bed_, "g"));
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  absl::Status s = PollUntil(**consumer, ApplyRecord, [&] {
    return EngineReached(*engine, bed_.topic, 600 / kConsumerPartitions - 1);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(EffectErrors(stream.unique_ids, AppliedCounts(*engine)),
              IsEmpty());
}

// ---- Rebalance ----

// How RebalanceMidStream runs.
struct RebalanceRun {
  bool separate_engines = true;  // B has an engine of its own
  bool commit_to_kafka = true;
  std::string strategy = "range,roundrobin";  // partition.assignment.strategy
  int workers = 1;                            // ConsumerOptions::workers
  Ordering ordering = Ordering::kPartition;   // and ::ordering
};

// Consumer A processes the first half of the stream alone; consumer B joins
// the group, which moves partitions from A to B; then the second half is
// produced and both consume it. With separate engines, a partition that
// moves starts, in B's engine, at the offset A committed to Kafka; with one
// engine, at the engine's own offset. Returns the IDs not applied exactly
// once over the engines.
std::vector<std::string> RebalanceMidStream(KafkaTestBed& bed, TempDir& dir,
                                            const RebalanceRun& run) {
  // MakeStream's producer duplicates land on any partition; dedupe is per
  // engine, so only a single engine gets them (docs/scale-out.md).
  const ProducedStream stream = MakeStream(bed.topic, kConsumerPartitions, 600,
                                           run.separate_engines ? 0 : 5, 4);
  const std::vector<OutgoingRecord> second_half =
      ProduceFirst(bed, stream, 300);
  auto engine_a = Engine::Open(dir.Sub("a"), Options());
  EXPECT_TRUE(engine_a.ok()) << engine_a.status();
  if (!engine_a.ok()) return {"engine A did not open"};
  std::vector<Engine*> engines = {engine_a->get()};
  absl::StatusOr<std::unique_ptr<Engine>> engine_b;
  if (run.separate_engines) {
    engine_b = Engine::Open(dir.Sub("b"), Options());
    EXPECT_TRUE(engine_b.ok()) << engine_b.status();
    if (!engine_b.ok()) return {"engine B did not open"};
    engines.push_back(engine_b->get());
  }
  ConsumerOptions options = TestConsumerOptions(bed, "g");
  options.commit_to_kafka = run.commit_to_kafka;
  options.max_batch = 20;
  options.workers = run.workers;
  options.ordering = run.ordering;
  options.kafka_config.push_back(
      {"partition.assignment.strategy", run.strategy});
  auto a = Consumer::Create(engines.front(), options);
  EXPECT_TRUE(a.ok()) << a.status();
  if (!a.ok()) return {"consumer A was not created"};
  EXPECT_TRUE(PollUntil(**a, ApplyRecord, [&] {
                return EngineReached(*engines.front(), bed.topic, 99);
              }).ok());

  std::atomic<int> b_assigned{0};
  options.on_assign = [&](const PartitionStart&) { ++b_assigned; };
  auto b = Consumer::Create(engines.back(), options);
  EXPECT_TRUE(b.ok()) << b.status();
  if (!b.ok()) return {"consumer B was not created"};
  BackgroundPoller poll_a(**a);
  BackgroundPoller poll_b(**b);
  absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (b_assigned.load() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_GT(b_assigned.load(), 0) << "B never got a partition";
  EXPECT_TRUE(bed.producer->Produce(second_half).ok());
  deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline &&
         !AnyEngineReached(engines, bed.topic, 600 / kConsumerPartitions - 1)) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  poll_a.Stop();
  poll_b.Stop();
  EXPECT_GE((*a)->stats().revocations, 1);
  std::vector<std::map<std::string, int>> applied;
  for (Engine* engine : engines) applied.push_back(AppliedCounts(*engine));
  return EffectErrors(stream.unique_ids, Merge(applied));
}

TEST_F(KafkaConsumerTest, RebalanceBetweenEnginesAppliesEveryMessageOnce) {
  EXPECT_THAT(RebalanceMidStream(bed_, dir_, {}), IsEmpty());
}

// Between engines, Kafka's committed offsets are what hands a partition
// over: without them the new owner re-applies what the old one did.
// With workers, a revocation waits for the revoked partitions' records (and
// under kKey brings the engine's offset to the watermark) before it commits
// their offsets: B starts exactly after what A applied.
TEST_F(KafkaConsumerTest,
       WorkersRebalanceBetweenEnginesAppliesEveryMessageOnce) {
  EXPECT_THAT(RebalanceMidStream(bed_, dir_, {.workers = 4}), IsEmpty());
}

TEST_F(KafkaConsumerTest,
       KeyOrderingWorkersRebalanceBetweenEnginesAppliesEveryMessageOnce) {
  EXPECT_THAT(RebalanceMidStream(bed_, dir_,
                                 {.workers = 4, .ordering = Ordering::kKey}),
              IsEmpty());
}

TEST_F(KafkaConsumerTest, WithoutKafkaCommitsAMovedPartitionIsReapplied) {
  EXPECT_THAT(RebalanceMidStream(bed_, dir_, {.commit_to_kafka = false}),
              Not(IsEmpty()));
}

// Two consumers sharing one engine (two threads of one process): whatever
// the rebalance does, the engine sees every offset, even without Kafka
// commits.
TEST_F(KafkaConsumerTest, ConsumersSharingAnEngineApplyEveryMessageOnce) {
  EXPECT_THAT(
      RebalanceMidStream(bed_, dir_,
                         {.separate_engines = false, .commit_to_kafka = false}),
      IsEmpty());
}

TEST_F(KafkaConsumerTest, CooperativeRebalanceOnOneEngineAppliesOnce) {
  EXPECT_THAT(RebalanceMidStream(bed_, dir_,
                                 {.separate_engines = false,
                                  .strategy = "cooperative-sticky"}),
              IsEmpty());
}

// Consumer A has records in flight (collected into a batch, not processed)
// when B's joining revokes A's partitions: A's hook lets B join, right after
// A's PollBatch collected its first record, and waits for A's heartbeat
// (every 100 ms) to learn of the rebalance. Returns the report of that
// PollBatch, and how many of the records it met A's engine applied.
struct RevocationOutcome {
  BatchReport report;
  int64_t applied_by_a = 0;  // of the records produced while A was idle
};
RevocationOutcome RevokeWithRecordsInFlight(KafkaTestBed& bed, TempDir& dir,
                                            ConsumerHooks hooks) {
  RevocationOutcome out;
  const ProducedStream stream =
      MakeStream(bed.topic, kConsumerPartitions, 330, 0, 8);
  const std::vector<OutgoingRecord> last_30 = ProduceFirst(bed, stream, 300);
  auto engine_a = Engine::Open(dir.Sub("a"), Options());
  auto engine_b = Engine::Open(dir.Sub("b"), Options());
  EXPECT_TRUE(engine_a.ok() && engine_b.ok());
  if (!engine_a.ok() || !engine_b.ok()) return out;
  const ConsumerOptions options = TestConsumerOptions(bed, "g");
  bool armed = false;
  absl::StatusOr<std::unique_ptr<Consumer>> b;
  hooks.after_first_record = [&] {
    if (!armed) return;
    armed = false;
    b = Consumer::Create(engine_b->get(), options);
    absl::SleepFor(absl::Seconds(2));
  };
  auto a = CreateConsumerWithHooks(engine_a->get(), options, hooks);
  EXPECT_TRUE(a.ok()) << a.status();
  if (!a.ok()) return out;
  EXPECT_TRUE(PollUntil(**a, ApplyRecord, [&] {
                return EngineReached(**engine_a, bed.topic, 99);
              }).ok());
  EXPECT_TRUE(bed.producer->Produce(last_30).ok());
  armed = true;
  absl::StatusOr<BatchReport> report;
  do {  // until the batch that meets the last 30 records
    report = (*a)->PollBatch(ApplyRecord);
  } while (report.ok() && report->records == 0 && !report->rebalanced);
  EXPECT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(report.ok()) << report.status();
  if (report.ok()) out.report = *report;
  const std::map<std::string, int> applied = AppliedCounts(**engine_a);
  for (const OutgoingRecord& r : last_30)
    out.applied_by_a += applied.count(r.key);
  return out;
}

// The revocation is served at the poll after the first record (librdkafka
// serves rebalances ahead of fetched records), so at least that record is in
// flight; it is processed and committed by A before A lets go.
TEST_F(KafkaConsumerTest, RevocationFinishesTheInFlightBatch) {
  const RevocationOutcome out = RevokeWithRecordsInFlight(bed_, dir_, {});
  EXPECT_TRUE(out.report.rebalanced);
  EXPECT_GE(out.report.records, 1);
  EXPECT_EQ(out.report.processed, out.report.records);
  EXPECT_EQ(out.applied_by_a, out.report.records);
}

TEST_F(KafkaConsumerTest, DroppingTheInFlightBatchOnRevocationIsCaught) {
  ConsumerHooks broken;
  broken.drop_in_flight_on_revoke = true;
  const RevocationOutcome out = RevokeWithRecordsInFlight(bed_, dir_, broken);
  EXPECT_TRUE(out.report.rebalanced);
  EXPECT_EQ(out.report.records, 0);
  EXPECT_EQ(out.applied_by_a, 0);
}

// ---- Moving a partition's state ----

// Engine A consumes the first half of the stream and closes; its partitions
// then move to engine B (same group), which consumes the second half. With
// `move_state`, A's partition state and offsets are exported and imported
// into B first. Returns the partitions whose total in B differs from the
// sum of all their records' amounts.
std::vector<int> MovePartitions(KafkaTestBed& bed, TempDir& dir,
                                bool move_state) {
  const ProducedStream stream =
      MakeStream(bed.topic, kConsumerPartitions, 600, 0, 7);
  std::map<int, int64_t> expected;
  for (const OutgoingRecord& r : stream.records) {
    expected[r.partition] += std::stoll(r.value);
  }
  const std::vector<OutgoingRecord> second_half =
      ProduceFirst(bed, stream, 300);
  auto engine_a = Engine::Open(dir.Sub("a"), Options());
  auto engine_b = Engine::Open(dir.Sub("b"), Options());
  EXPECT_TRUE(engine_a.ok() && engine_b.ok());
  if (!engine_a.ok() || !engine_b.ok()) return {-1};
  const ConsumerOptions options = TestConsumerOptions(bed, "g");
  {
    auto a = Consumer::Create(engine_a->get(), options);
    EXPECT_TRUE(a.ok()) << a.status();
    if (!a.ok()) return {-1};
    EXPECT_TRUE(PollUntil(**a, ApplyRecord, [&] {
                  return EngineReached(**engine_a, bed.topic, 99);
                }).ok());
  }
  if (move_state) {
    for (int p = 0; p < kConsumerPartitions; ++p) {
      auto snapshot = (*engine_a)->ExportPartition(bed.topic, p);
      EXPECT_TRUE(snapshot.ok()) << snapshot.status();
      if (!snapshot.ok()) return {-1};
      EXPECT_TRUE((*engine_b)->ImportPartition(*snapshot).ok());
    }
  }
  EXPECT_TRUE(bed.producer->Produce(second_half).ok());
  auto b = Consumer::Create(engine_b->get(), options);
  EXPECT_TRUE(b.ok()) << b.status();
  if (!b.ok()) return {-1};
  EXPECT_TRUE(PollUntil(**b, ApplyRecord, [&] {
                return EngineReached(**engine_b, bed.topic, 199);
              }).ok());
  std::vector<int> wrong;
  for (int p = 0; p < kConsumerPartitions; ++p) {
    auto total =
        (*engine_b)->GetState(PartitionStatePrefix(bed.topic, p) + "total");
    EXPECT_TRUE(total.ok());
    if (!total.ok() || !total->has_value() ||
        std::stoll(**total) != expected[p]) {
      wrong.push_back(p);
    }
  }
  return wrong;
}

TEST_F(KafkaConsumerTest, MovingAPartitionsStateKeepsItsTotalsExact) {
  EXPECT_THAT(MovePartitions(bed_, dir_, /*move_state=*/true), IsEmpty());
}

// Without its state, the new owner's totals miss the old owner's records.
TEST_F(KafkaConsumerTest, MovingAPartitionWithoutItsStateLosesItsTotals) {
  EXPECT_THAT(MovePartitions(bed_, dir_, /*move_state=*/false),
              SizeIs(kConsumerPartitions));
}

// ---- Poison records ----

// Fails every record whose value is "poison".
absl::Status ApplyUnlessPoison(const Record& record, Txn& txn) {
  if (record.value == "poison") return absl::InternalError("cannot parse");
  return ApplyRecord(record, txn);
}

// 30 records, round-robin over the partitions; record 10 (partition 1,
// offset 3) is poison. Returns the poison record's ID.
std::string ProducePoison(KafkaTestBed& bed, std::set<std::string>* good) {
  ProducedStream stream = MakeStream(bed.topic, kConsumerPartitions, 30, 0, 6);
  stream.records[10].value = "poison";
  const std::string poison_id = stream.records[10].key;
  stream.unique_ids.erase(poison_id);
  *good = stream.unique_ids;
  EXPECT_TRUE(bed.producer->Produce(stream.records).ok());
  return poison_id;
}

TEST_F(KafkaConsumerTest, PoisonRecordGoesToTheDeadLetterCallback) {
  std::set<std::string> good;
  const std::string poison_id = ProducePoison(bed_, &good);
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  ConsumerOptions options = TestConsumerOptions(bed_, "g");
  options.max_attempts = 3;
  std::vector<std::string> dead;
  options.dead_letter = [&](const Record& r, const absl::Status& error) {
    dead.push_back(absl::StrCat(std::string(r.topic), "/", r.partition, "/",
                                r.offset, " ", error.message()));
    return absl::OkStatus();
  };
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  absl::Status s = PollUntil(**consumer, ApplyUnlessPoison, [&] {
    return EngineReached(*engine, bed_.topic, 9);
  });
  ASSERT_TRUE(s.ok()) << s;

  EXPECT_THAT(dead, ::testing::ElementsAre("orders/1/3 cannot parse"));
  EXPECT_THAT(EffectErrors(good, AppliedCounts(*engine)), IsEmpty());
  const ConsumerStats stats = (*consumer)->stats();
  EXPECT_EQ(stats.dead_lettered, 1);
  EXPECT_EQ(stats.retries, 2);
  // The offset moved past it, but its ID is free for a corrected redelivery.
  auto seen = engine->Seen(poison_id);
  ASSERT_TRUE(seen.ok());
  EXPECT_FALSE(*seen);
}

TEST_F(KafkaConsumerTest, PoisonRecordGoesToTheDeadLetterTopic) {
  ASSERT_TRUE(bed_.cluster->CreateTopic("orders.dlq", 1).ok());
  std::set<std::string> good;
  const std::string poison_id = ProducePoison(bed_, &good);
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  ConsumerOptions options = TestConsumerOptions(bed_, "g");
  options.max_attempts = 2;
  options.dead_letter_topic = "orders.dlq";
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  absl::Status s = PollUntil(**consumer, ApplyUnlessPoison, [&] {
    return EngineReached(*engine, bed_.topic, 9);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(EffectErrors(good, AppliedCounts(*engine)), IsEmpty());

  // Read the dead-letter topic back with a consumer of its own.
  ASSERT_OPEN(dlq_engine, dir_.Sub("dlq"), Options());
  ConsumerOptions dlq_options = TestConsumerOptions(bed_, "dlq-reader");
  dlq_options.topics = {"orders.dlq"};
  auto reader = Consumer::Create(dlq_engine.get(), dlq_options);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<std::string> seen;
  s = PollUntil(
      **reader,
      [&](const Record& r, Txn&) {
        seen.push_back(absl::StrCat(
            std::string(r.Header("idem.source.id").value_or("?")), " ",
            std::string(r.value), " ",
            std::string(r.Header("idem.source.topic").value_or("?")), "/",
            std::string(r.Header("idem.source.partition").value_or("?")), "/",
            std::string(r.Header("idem.source.offset").value_or("?")), " ",
            std::string(r.Header("idem.error").value_or("?"))));
        return absl::OkStatus();
      },
      [&] { return !seen.empty(); });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(seen,
              ::testing::ElementsAre(absl::StrCat(
                  poison_id, " poison orders/1/3 INTERNAL: cannot parse")));
}

TEST_F(KafkaConsumerTest,
       WithoutADeadLetterPathAPoisonRecordStopsItsPartition) {
  std::set<std::string> good;
  ProducePoison(bed_, &good);
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  ConsumerOptions options = TestConsumerOptions(bed_, "g");
  options.max_attempts = 2;
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  int aborted = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (aborted < 2 && absl::Now() < deadline) {
    absl::StatusOr<BatchReport> report =
        (*consumer)->PollBatch(ApplyUnlessPoison);
    if (report.ok()) continue;
    EXPECT_EQ(report.status().code(), absl::StatusCode::kAborted);
    EXPECT_THAT(report.status().message(), HasSubstr("orders/1/3"));
    ++aborted;
  }
  // Given up on twice: the record was re-read, not skipped.
  EXPECT_EQ(aborted, 2);
  auto offset = engine->CommittedOffset(bed_.topic, 1);
  ASSERT_TRUE(offset.ok());
  EXPECT_EQ(offset->value_or(-1), 2);  // just before the poison record
}

// ---- Options ----

TEST_F(KafkaConsumerTest, CreateRejectsBadOptionsNamingThem) {
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  const ConsumerOptions good = TestConsumerOptions(bed_, "g");
  struct Case {
    std::string name;
    std::function<void(ConsumerOptions&)> mutate;
  };
  const std::vector<Case> cases = {
      {"brokers", [](ConsumerOptions& o) { o.brokers.clear(); }},
      {"group_id", [](ConsumerOptions& o) { o.group_id.clear(); }},
      {"topics", [](ConsumerOptions& o) { o.topics.clear(); }},
      {"topics", [](ConsumerOptions& o) { o.topics = {""}; }},
      {"unknown_topic_timeout",
       [](ConsumerOptions& o) {
         o.unknown_topic_timeout = absl::ZeroDuration();
       }},
      {"unknown_topic_timeout",
       [](ConsumerOptions& o) { o.unknown_topic_timeout = absl::Seconds(-1); }},
      {"id_header", [](ConsumerOptions& o) { o.id_header.clear(); }},
      {"ttl", [](ConsumerOptions& o) { o.ttl = absl::Seconds(-1); }},
      {"max_batch", [](ConsumerOptions& o) { o.max_batch = 0; }},
      {"poll_timeout",
       [](ConsumerOptions& o) { o.poll_timeout = absl::InfiniteDuration(); }},
      {"max_attempts", [](ConsumerOptions& o) { o.max_attempts = 0; }},
      {"retry_backoff",
       [](ConsumerOptions& o) { o.retry_backoff = absl::Seconds(-1); }},
      {"enable.auto.commit",
       [](ConsumerOptions& o) {
         o.kafka_config.push_back({"enable.auto.commit", "true"});
       }},
      {"no.such.property",
       [](ConsumerOptions& o) {
         o.kafka_config.push_back({"no.such.property", "1"});
       }},
  };
  for (const Case& c : cases) {
    ConsumerOptions options = good;
    c.mutate(options);
    auto consumer = Consumer::Create(engine.get(), options);
    ASSERT_FALSE(consumer.ok()) << c.name;
    EXPECT_EQ(consumer.status().code(), absl::StatusCode::kInvalidArgument)
        << c.name;
    EXPECT_THAT(consumer.status().message(), HasSubstr(c.name));
  }
  auto no_engine = Consumer::Create(nullptr, good);
  EXPECT_EQ(no_engine.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(KafkaConsumerTest, ClosedConsumerRefusesToPoll) {
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  auto consumer =
      Consumer::Create(engine.get(), TestConsumerOptions(bed_, "g"));
  ASSERT_TRUE(consumer.ok());
  EXPECT_TRUE((*consumer)->Close().ok());
  EXPECT_TRUE((*consumer)->Close().ok());  // idempotent
  EXPECT_EQ((*consumer)->PollBatch(ApplyRecord).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace idem::kafka
