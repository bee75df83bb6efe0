// Kafka under failure: every broker of the mock cluster down for 60 s in the
// middle of a stream (MockCluster::SetBrokerDown). Consumer::Run rides the
// outage out, in plain mode (with outputs the relay must publish) and in
// changelog mode; afterwards every record has its one effect, the outbox
// drains, and a member that restores from the changelog has exact totals.
// A changelog read that fails during an assignment is tried again at a
// later call. Causes that cannot pass stop Run once, with a status naming
// them: a topic or group authorization refused (injected errors,
// MockCluster::FailNextRequests and SetTopicError), a subscribed topic
// unknown for longer than ConsumerOptions::unknown_topic_timeout (one
// created within it is consumed), a static member fenced.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "kafka/consumer_hooks.h"
#include "tests/testing/changelog_test_base.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/kafka_test_util.h"
#include "tests/testing/recording_logger.h"

namespace idem::kafka {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// How long every broker stays down.
constexpr absl::Duration kOutage = absl::Seconds(60);

// Runs `consumer` with `handler` on a thread of its own until stopped, and
// keeps Run's result. Owns the handler: a Handler (absl::FunctionRef) kept
// past the constructor's call would refer to a destroyed lambda, which a
// lambda without captures survives and one with captures does not.
class RunThread {
 public:
  RunThread(Consumer& consumer,
            std::function<absl::Status(const Record&, Txn&)> handler)
      : consumer_(consumer), handler_(std::move(handler)), thread_([this] {
          result_ = consumer_.Run(handler_);
          returned_.store(true);
        }) {}
  ~RunThread() { Stop().IgnoreError(); }
  absl::Status Stop() {
    consumer_.Stop();
    if (thread_.joinable()) thread_.join();
    return result_;
  }
  // Whether Run returned (by itself, before Stop).
  bool returned() const { return returned_.load(); }

 private:
  Consumer& consumer_;
  const std::function<absl::Status(const Record&, Txn&)> handler_;
  absl::Status result_;
  std::atomic<bool> returned_{false};
  std::thread thread_;  // last: starts once the rest exists
};

// Waits until `done()` or `timeout`; returns whether it became true.
bool WaitFor(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

// Holds a stream's handler calls from the `first_held`-th on (counting
// from 0) until the brokers are down, so that the batch holding that call
// commits, and publishes, during the outage however fast or slow the
// machine is (a timing guess lost that race on a loaded machine: the
// batches published before the brokers went down, and no failure was seen).
class OutageGate {
 public:
  explicit OutageGate(int first_held) : first_held_(first_held) {}
  // Called by the handler before each record. Waits at most two outages.
  void Pass() {
    if (calls_.fetch_add(1) < first_held_) return;
    WaitFor([this] { return down_.load(); }, 2 * kOutage);
  }
  // Whether a call is held (the stream reached the gate).
  bool Reached() const { return calls_.load() > first_held_; }
  void BrokersDown() { down_.store(true); }

 private:
  const int first_held_;
  std::atomic<int> calls_{0};
  std::atomic<bool> down_{false};
};

// Once a handler call waits at `gate`, takes every broker down for kOutage,
// opens the gate, then brings the brokers back.
void Outage(MockCluster& cluster, OutageGate& gate) {
  ASSERT_TRUE(WaitFor([&] { return gate.Reached(); }, absl::Seconds(60)));
  ASSERT_TRUE(cluster.SetBrokerDown(-1, true).ok());
  gate.BrokersDown();
  absl::SleepFor(kOutage);
  ASSERT_TRUE(cluster.SetBrokerDown(-1, false).ok());
}

// What a consumer did, for a failure's message: where a stuck run stopped.
std::string Progress(const ConsumerStats& stats) {
  return absl::StrCat(
      "records ", stats.records, ", batches ", stats.batches, ", assignments ",
      stats.assignments, ", revocations ", stats.revocations,
      ", restore checks ", stats.restore_checks, ", restores ", stats.restores,
      ", restore steps ", stats.restore_steps, ", partitions restoring ",
      stats.partitions_restoring, ", run retries ", stats.run_retries,
      ", membership lost ", stats.membership_lost, ", Kafka errors ",
      stats.kafka_errors, ", last: ", stats.last_kafka_error);
}

constexpr int kOutagePartitions = 3;
constexpr char kOutageDownstream[] = "orders.out";

TEST(KafkaOutageTest, BrokerDownPlainConsumerRidesItOut) {
  test::KafkaTestBed bed;
  ASSERT_NO_FATAL_FAILURE(test::StartKafka("orders", kOutagePartitions, bed));
  ASSERT_TRUE(
      bed.cluster->CreateTopic(kOutageDownstream, kOutagePartitions).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(bed.cluster->SetBrokerDown(7, true)));
  const test::ProducedStream stream = test::MakeStream(
      bed.topic, kOutagePartitions, 300, /*duplicate_every=*/10, 9);
  const std::vector<OutgoingRecord> first(stream.records.begin(),
                                          stream.records.begin() + 150);
  const std::vector<OutgoingRecord> second(stream.records.begin() + 150,
                                           stream.records.end());
  ASSERT_TRUE(bed.producer->Produce(first).ok());
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("store"), Options());
  ConsumerOptions options = test::TestConsumerOptions(bed, "g");
  options.max_batch = 20;
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  auto handled = [&] {
    return test::CommittedRecords(*engine, bed.topic, kOutagePartitions);
  };
  {
    OutageGate gate(/*first_held=*/60);
    RunThread run(**consumer, [&gate](const Record& record, Txn& txn) {
      gate.Pass();
      absl::SleepFor(absl::Milliseconds(2));
      return test::ApplyAndForward(record, txn, kOutageDownstream);
    });
    ASSERT_NO_FATAL_FAILURE(Outage(*bed.cluster, gate));
    ASSERT_TRUE(bed.producer->Produce(second).ok());
    EXPECT_TRUE(WaitFor([&] { return handled() >= 300; }, absl::Seconds(120)))
        << handled() << " of 300 handled";
    // The relay resumed: the outbox drains.
    EXPECT_TRUE(WaitFor(
        [&] {
          auto pending = engine->ReadOutbox(1);
          return pending.ok() && pending->empty();
        },
        absl::Seconds(60)));
    EXPECT_TRUE(run.Stop().ok()) << "Run must ride the outage out";
  }
  EXPECT_THAT(
      test::EffectErrors(stream.unique_ids, test::AppliedCounts(*engine)),
      IsEmpty());
  const ConsumerStats stats = (*consumer)->stats();
  EXPECT_GE(stats.run_retries, 1) << "the relay never failed: no outage seen";
  for (const PartitionLag& lag : stats.lag) {
    EXPECT_EQ(lag.lag, 0) << lag.topic << "/" << lag.partition;
  }
}

class KafkaOutageChangelogTest : public test::ChangelogTestBase {};

TEST_F(KafkaOutageChangelogTest, BrokerDownChangelogConsumerRidesItOut) {
  test::Stream all = test::MakeStream("first", 120);
  Produce(all);
  std::unique_ptr<Engine> a = OpenStore("a");
  ASSERT_NE(a, nullptr);
  std::vector<RestoreReport> a_reports;
  auto consumer = Consumer::Create(a.get(), MemberOptions(&a_reports));
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  {
    OutageGate gate(/*first_held=*/40);
    RunThread run(**consumer, [&gate](const Record& record, Txn& txn) {
      gate.Pass();
      absl::SleepFor(absl::Milliseconds(2));
      return test::ApplyInPartition(record, txn);
    });
    ASSERT_NO_FATAL_FAILURE(Outage(*bed_.cluster, gate));
    test::Stream second = test::MakeStream("second", 60);
    Produce(second);
    Append(all, second);
    const bool handled = WaitFor([&] { return Handled(*a) >= Handled(all); },
                                 absl::Seconds(120));
    EXPECT_TRUE(handled) << Handled(*a) << " of " << Handled(all) << " handled";
    EXPECT_TRUE(WaitFor(
        [&] {
          auto pending = a->ReadOutbox(1);
          return pending.ok() && pending->empty();
        },
        absl::Seconds(60)));
    const absl::Status ran = run.Stop();
    EXPECT_TRUE(ran.ok()) << "Run must ride the outage out: " << ran;
    if (!handled) {
      std::string log;
      for (const auto& [severity, line] : logger_.lines()) {
        if (severity >= LogSeverity::kWarning)
          absl::StrAppend(&log, line, "\n");
      }
      ADD_FAILURE() << Progress((*consumer)->stats()) << "\n" << log;
    }
  }
  EXPECT_GE((*consumer)->stats().run_retries, 1)
      << "publishing never failed: no outage seen";
  ASSERT_TRUE((*consumer)->Close().ok());
  ExpectExact(*a, all);
  EXPECT_THAT(MarksGoingBack(), IsEmpty());
  // The changelog holds exactly what A did: a member with an empty store
  // restores every partition with exact totals.
  std::unique_ptr<Engine> c = OpenStore("c");
  ASSERT_NE(c, nullptr);
  std::vector<RestoreReport> c_reports;
  ASSERT_NO_FATAL_FAILURE(ConsumeUntil(*c, Handled(all), &c_reports));
  ExpectExact(*c, all);
}

// The only broker down for 20 s mid-stream: a changelog-mode consumer, with
// and without transactional output, handles the rest of the stream and
// publishes its outbox once the broker accepts connections again, with
// exact totals. Returns that time and prints it: the 5 s target
// (docs/operations.md, "Broker outages") is read from these runs on a quiet
// machine, not asserted, since a timed assertion fails on a loaded one; the
// test bounds it at kResumeBound, which only a consumer that stopped
// misses.
class KafkaOutageResumeTest : public test::ChangelogTestBase {
 protected:
  static constexpr absl::Duration kResumeBound = absl::Seconds(30);

  absl::Duration ResumeAfterOutage(const ConsumerOptions& options) {
    test::Stream all = test::MakeStream("resume", 90);
    Produce(all);
    std::unique_ptr<Engine> store = OpenStore("resume");
    EXPECT_NE(store, nullptr);
    if (store == nullptr) return absl::InfiniteDuration();
    auto consumer = Consumer::Create(store.get(), options);
    EXPECT_TRUE(consumer.ok()) << consumer.status();
    if (!consumer.ok()) return absl::InfiniteDuration();
    absl::Duration resumed_after = absl::InfiniteDuration();
    {
      OutageGate gate(/*first_held=*/30);
      RunThread run(**consumer, [&gate](const Record& record, Txn& txn) {
        gate.Pass();
        absl::SleepFor(absl::Milliseconds(2));
        return test::ApplyInPartition(record, txn);
      });
      EXPECT_TRUE(WaitFor([&] { return gate.Reached(); }, absl::Seconds(60)));
      EXPECT_TRUE(bed_.cluster->SetBrokerDown(-1, true).ok());
      gate.BrokersDown();
      absl::SleepFor(absl::Seconds(20));
      EXPECT_TRUE(bed_.cluster->SetBrokerDown(-1, false).ok());
      const absl::Time back = absl::Now();
      const bool resumed = WaitFor(
          [&] {
            auto pending = store->ReadOutbox(1);
            return Handled(*store) >= Handled(all) && pending.ok() &&
                   pending->empty();
          },
          absl::Seconds(60));
      resumed_after = absl::Now() - back;
      EXPECT_TRUE(run.Stop().ok()) << "Run must ride the outage out";
      // Where a consumer that never resumed stopped (e.g. assignments 1 and
      // revocations 1: its group never answered its rejoin).
      EXPECT_TRUE(resumed) << Progress((*consumer)->stats());
    }
    std::fprintf(stderr, "resumed %s after the broker's return\n",
                 absl::FormatDuration(resumed_after).c_str());
    EXPECT_TRUE((*consumer)->Close().ok());
    ExpectExact(*store, all);
    return resumed_after;
  }
};

TEST_F(KafkaOutageResumeTest, ChangelogConsumerResumesAfterTheBrokersReturn) {
  std::vector<RestoreReport> reports;
  EXPECT_LE(ResumeAfterOutage(MemberOptions(&reports)), kResumeBound);
}

TEST_F(KafkaOutageResumeTest,
       TransactionalChangelogConsumerResumesAfterTheBrokersReturn) {
  ASSERT_TRUE(
      bed_.cluster->CreateTopic(ConsumerOptions().relay_progress_topic, 1)
          .ok());
  std::vector<RestoreReport> reports;
  ConsumerOptions options = MemberOptions(&reports);
  options.transactional_output = true;
  EXPECT_LE(ResumeAfterOutage(options), kResumeBound);
}

TEST_F(KafkaOutageChangelogTest,
       RestoreCheckFailingDuringAssignmentIsTriedAgainLater) {
  // The first watermark query of the changelog (the first assigned
  // partition's check, in the rebalance callback) fails as a broker whose
  // disk failed answers: a cause that can pass. The query is two requests
  // (low and high), both refused: librdkafka 2.0.2 loses the error of one
  // when it serves both answers at once.
  constexpr int16_t kListOffsets = 2;
  constexpr int32_t kKafkaStorageError = 56;
  test::Stream all = test::MakeStream("first", 60);
  Produce(all);
  ASSERT_TRUE(bed_.cluster
                  ->FailNextRequests(kListOffsets,
                                     {kKafkaStorageError, kKafkaStorageError})
                  .ok());
  std::unique_ptr<Engine> a = OpenStore("a");
  ASSERT_NE(a, nullptr);
  std::vector<RestoreReport> reports;
  auto consumer = Consumer::Create(a.get(), MemberOptions(&reports));
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  // The partition is paused and checked again by a later PollBatch: no call
  // fails, and every record is handled once.
  absl::Status polled =
      test::PollUntil(**consumer, test::ApplyInPartition,
                      [&] { return Handled(*a) >= Handled(all); });
  ASSERT_TRUE(polled.ok()) << polled;
  const ConsumerStats stats = (*consumer)->stats();
  EXPECT_GE(stats.restore_steps, 1)
      << "every check was done in the rebalance callback: none failed";
  EXPECT_GE(stats.kafka_errors, 1);
  EXPECT_EQ(reports.size(), size_t{kOutagePartitions});
  ASSERT_TRUE((*consumer)->Close().ok());
  ExpectExact(*a, all);
}

// Runs `consumer` until Run returns by itself, at most `timeout`; Run's
// status, or kDeadlineExceeded if it was still running (then stopped).
absl::Status RunUntilItReturns(Consumer& consumer, absl::Duration timeout) {
  RunThread run(consumer, test::ApplyRecord);
  if (!WaitFor([&] { return run.returned(); }, timeout)) {
    run.Stop().IgnoreError();
    return absl::DeadlineExceededError("Run did not return");
  }
  return run.Stop();
}

// A consumer that fails for a cause that cannot pass, on a mock cluster
// with topic "orders" (one partition), a store and a recording logger.
class KafkaOutageFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(test::StartKafka("orders", 1, bed_));
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(dir_.Sub("store"), Options());
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }

  // A consumer of group "g" reading `topics`, logging to logger_.
  ConsumerOptions FailureOptions(std::vector<std::string> topics) {
    ConsumerOptions options = test::TestConsumerOptions(bed_, "g");
    options.topics = std::move(topics);
    options.logger = &logger_;
    return options;
  }

  std::unique_ptr<Consumer> Create(const ConsumerOptions& options) {
    auto consumer = Consumer::Create(engine_.get(), options);
    EXPECT_TRUE(consumer.ok()) << consumer.status();
    return consumer.ok() ? *std::move(consumer) : nullptr;
  }

  // Produces 10 records to "orders" and polls until `consumer` handled
  // them: it is assigned and fetching.
  void ConsumeTen(Consumer& consumer) {
    const test::ProducedStream stream = test::MakeStream("orders", 1, 10, 0, 5);
    ASSERT_TRUE(bed_.producer->Produce(stream.records).ok());
    ASSERT_TRUE(test::PollUntil(consumer, test::ApplyRecord, [&] {
                  return test::CommittedRecords(*engine_, "orders", 1) >= 10;
                }).ok());
  }

  // ConsumeTen, then the next requests of the Kafka API `api_key` fail
  // with `errors`, one each; RunToFailure's status.
  absl::Status FailAfterTen(Consumer& consumer, int16_t api_key,
                            const std::vector<int32_t>& errors,
                            absl::StatusCode code) {
    ConsumeTen(consumer);
    if (HasFatalFailure()) return absl::InternalError("consuming failed");
    EXPECT_TRUE(bed_.cluster->FailNextRequests(api_key, errors).ok());
    return RunToFailure(consumer, code);
  }

  // Runs `consumer` until Run returns (at most 30 s) and expects it failed
  // once for good with `code`: a later call returns the same status, Run
  // retried nothing, and the log says it stopped. Run's status.
  absl::Status RunToFailure(Consumer& consumer, absl::StatusCode code) {
    const absl::Status status = RunUntilItReturns(consumer, absl::Seconds(30));
    EXPECT_EQ(status.code(), code) << status;
    EXPECT_EQ(consumer.PollBatch(test::ApplyRecord).status(), status);
    EXPECT_EQ(consumer.stats().run_retries, 0);
    EXPECT_TRUE(
        logger_.Has(LogSeverity::kError,
                    "idem: the consumer stopped: " + status.ToString()));
    return status;
  }

  test::KafkaTestBed bed_;
  util::TempDir dir_;
  std::unique_ptr<Engine> engine_;
  test::RecordingLogger logger_;
};

TEST_F(KafkaOutageFailureTest, UnknownTopicFailsOnceAfterTheWait) {
  ASSERT_TRUE(bed_.cluster->HonorAllowAutoCreateTopics().ok());
  ConsumerOptions options = FailureOptions({"missing"});
  options.unknown_topic_timeout = absl::Seconds(2);
  std::unique_ptr<Consumer> consumer = Create(options);
  ASSERT_NE(consumer, nullptr);
  const absl::Time start = absl::Now();
  const absl::Status status =
      RunToFailure(*consumer, absl::StatusCode::kNotFound);
  EXPECT_GE(absl::Now() - start, absl::Seconds(2)) << "it did not wait";
  EXPECT_THAT(status.ToString(),
              AllOf(HasSubstr("subscribed topic missing does not exist"),
                    HasSubstr("unknown_topic_timeout (2s)")));
  EXPECT_THAT(consumer->stats().last_kafka_error, HasSubstr("missing"));
  EXPECT_TRUE(logger_.Has(LogSeverity::kWarning,
                          "subscribed topic missing is unknown"));
}

TEST_F(KafkaOutageFailureTest, UnknownTopicCreatedWithinTheWaitIsConsumed) {
  ASSERT_TRUE(bed_.cluster->HonorAllowAutoCreateTopics().ok());
  ConsumerOptions options = FailureOptions({"late"});
  options.unknown_topic_timeout = absl::Seconds(2);
  // librdkafka looks for the topic again only after the wait is over, so
  // the consumer's own look-up at its end is what finds it.
  options.kafka_config.push_back(
      {"topic.metadata.refresh.interval.ms", "5000"});
  std::unique_ptr<Consumer> consumer = Create(options);
  ASSERT_NE(consumer, nullptr);
  absl::Status polled = test::PollUntil(*consumer, test::ApplyRecord, [&] {
    return absl::StrContains(consumer->stats().last_kafka_error, "late");
  });
  ASSERT_TRUE(polled.ok()) << polled;
  const absl::Time unknown = absl::Now();
  ASSERT_TRUE(bed_.cluster->CreateTopic("late", 2).ok());
  const test::ProducedStream stream = test::MakeStream("late", 2, 20, 0, 3);
  ASSERT_TRUE(bed_.producer->Produce(stream.records).ok());
  polled = test::PollUntil(*consumer, test::ApplyRecord, [&] {
    return test::CommittedRecords(*engine_, "late", 2) >= 20 &&
           absl::Now() - unknown > absl::Seconds(3);
  });
  ASSERT_TRUE(polled.ok()) << polled;
  EXPECT_THAT(
      test::EffectErrors(stream.unique_ids, test::AppliedCounts(*engine_)),
      IsEmpty());
}

TEST_F(KafkaOutageFailureTest,
       TopicAuthorizationFailureFailsOnceNamingTheTopic) {
  std::unique_ptr<Consumer> consumer = Create(FailureOptions({"orders"}));
  ASSERT_NE(consumer, nullptr);
  // The brokers stop granting the consumer its topic: its next fetch is
  // refused.
  constexpr int16_t kFetch = 1;
  constexpr int32_t kTopicAuthorizationFailed = 29;
  // Refused as a broker refuses: every fetch from now on, not only the
  // next one. One refusal alone went unseen once in a full suite under
  // load (Run went on for 30 s without returning).
  const absl::Status status = FailAfterTen(
      *consumer, kFetch, std::vector<int32_t>(5, kTopicAuthorizationFailed),
      absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(status.ToString(),
              AllOf(HasSubstr("group g is not authorized to read topic orders, "
                              "partition 0 at offset 10"),
                    HasSubstr("TOPIC_AUTHORIZATION_FAILED")));
}

TEST_F(KafkaOutageFailureTest, SubscribedTopicNotAuthorizedFailsOnce) {
  constexpr int32_t kTopicAuthorizationFailed = 29;
  bed_.cluster->SetTopicError("orders", kTopicAuthorizationFailed);
  std::unique_ptr<Consumer> consumer = Create(FailureOptions({"orders"}));
  ASSERT_NE(consumer, nullptr);
  const absl::Status status =
      RunToFailure(*consumer, absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(
      status.ToString(),
      AllOf(HasSubstr("group g is not authorized to read topic orders:"),
            HasSubstr("TOPIC_AUTHORIZATION_FAILED")));
}

TEST_F(KafkaOutageFailureTest,
       GroupAuthorizationFailureFailsOnceNamingTheGroup) {
  // The consumer's first request of its group, the search for its
  // coordinator, is refused.
  constexpr int16_t kFindCoordinator = 10;
  constexpr int32_t kGroupAuthorizationFailed = 30;
  ASSERT_TRUE(
      bed_.cluster
          ->FailNextRequests(kFindCoordinator, {kGroupAuthorizationFailed})
          .ok());
  std::unique_ptr<Consumer> consumer = Create(FailureOptions({"orders"}));
  ASSERT_NE(consumer, nullptr);
  const absl::Status status =
      RunToFailure(*consumer, absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(status.ToString(),
              AllOf(HasSubstr("the consumer of group g is not authorized: "),
                    HasSubstr("GROUP_AUTHORIZATION_FAILED")));
}

TEST_F(KafkaOutageFailureTest, FencedStaticMemberFailsOnceNamingTheCause) {
  ConsumerOptions options = FailureOptions({"orders"});
  options.kafka_config.push_back({"group.instance.id", "member-1"});
  std::unique_ptr<Consumer> consumer = Create(options);
  ASSERT_NE(consumer, nullptr);
  // The coordinator answers a heartbeat as it does once another member
  // joined with the same group.instance.id: librdkafka's fatal error.
  constexpr int16_t kHeartbeat = 12;
  constexpr int32_t kFencedInstanceId = 82;
  const absl::Status status = FailAfterTen(
      *consumer, kHeartbeat, {kFencedInstanceId}, absl::StatusCode::kAborted);
  EXPECT_THAT(status.ToString(),
              AllOf(HasSubstr("fatal Kafka consumer error: FENCED_INSTANCE_ID"),
                    HasSubstr("create a new one")));
}

}  // namespace
}  // namespace idem::kafka
