// Kafka under failure: every broker of the mock cluster down for 60 s in the
// middle of a stream (MockCluster::SetBrokerDown). Consumer::Run rides the
// outage out, in plain mode (with outputs the relay must publish) and in
// changelog mode; afterwards every record has its one effect, the outbox
// drains, and a member that restores from the changelog has exact totals.

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "kafka/consumer_hooks.h"
#include "tests/testing/changelog_test_base.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/kafka_test_util.h"

namespace idem::kafka {
namespace {

using ::testing::IsEmpty;

// How long every broker stays down.
constexpr absl::Duration kOutage = absl::Seconds(60);

// Runs `consumer` with `handler` on a thread of its own until stopped, and
// keeps Run's result.
class RunThread {
 public:
  RunThread(Consumer& consumer, Handler handler)
      : consumer_(consumer),
        thread_([this, handler] { result_ = consumer_.Run(handler); }) {}
  ~RunThread() { Stop().IgnoreError(); }
  absl::Status Stop() {
    consumer_.Stop();
    if (thread_.joinable()) thread_.join();
    return result_;
  }

 private:
  Consumer& consumer_;
  absl::Status result_;
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

// Takes every broker down for kOutage, then brings them back.
void Outage(MockCluster& cluster) {
  ASSERT_TRUE(cluster.SetBrokerDown(-1, true).ok());
  absl::SleepFor(kOutage);
  ASSERT_TRUE(cluster.SetBrokerDown(-1, false).ok());
}

constexpr int kPartitions = 3;
constexpr char kDownstream[] = "orders.out";

TEST(KafkaOutageTest, BrokerDownPlainConsumerRidesItOut) {
  test::KafkaTestBed bed;
  ASSERT_NO_FATAL_FAILURE(test::StartKafka("orders", kPartitions, bed));
  ASSERT_TRUE(bed.cluster->CreateTopic(kDownstream, kPartitions).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(bed.cluster->SetBrokerDown(7, true)));
  const test::ProducedStream stream =
      test::MakeStream(bed.topic, kPartitions, 300, /*duplicate_every=*/10, 9);
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
    return test::CommittedRecords(*engine, bed.topic, kPartitions);
  };
  {
    RunThread run(**consumer, [](const Record& record, Txn& txn) {
      absl::SleepFor(absl::Milliseconds(2));
      return test::ApplyAndForward(record, txn, kDownstream);
    });
    ASSERT_TRUE(WaitFor([&] { return handled() >= 60; }, absl::Seconds(60)));
    ASSERT_NO_FATAL_FAILURE(Outage(*bed.cluster));
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
    RunThread run(**consumer, [](const Record& record, Txn& txn) {
      absl::SleepFor(absl::Milliseconds(2));
      return test::ApplyInPartition(record, txn);
    });
    ASSERT_TRUE(WaitFor([&] { return Handled(*a) >= 40; }, absl::Seconds(60)));
    ASSERT_NO_FATAL_FAILURE(Outage(*bed_.cluster));
    test::Stream second = test::MakeStream("second", 60);
    Produce(second);
    Append(all, second);
    EXPECT_TRUE(WaitFor([&] { return Handled(*a) >= Handled(all); },
                        absl::Seconds(120)))
        << Handled(*a) << " of " << Handled(all) << " handled";
    EXPECT_TRUE(WaitFor(
        [&] {
          auto pending = a->ReadOutbox(1);
          return pending.ok() && pending->empty();
        },
        absl::Seconds(60)));
    EXPECT_TRUE(run.Stop().ok()) << "Run must ride the outage out";
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

}  // namespace
}  // namespace idem::kafka
