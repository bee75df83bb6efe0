// What every broker adapter's Consumer shares (brokers/loop_consumer.h),
// on an in-memory broker: CreateLoopConsumer's steps and their order, and
// the BrokerConsumer interface (idem/brokers/consumer.h) it serves.

#include "brokers/loop_consumer.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/brokers/consumer.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/fake_broker.h"

namespace idem::brokers {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// An adapter's options as LoopConsumer reads them, and where the test
// adapter writes the steps it saw.
struct TestOptions {
  LoopOptions delivery;
  absl::Duration reconnect_backoff = absl::ZeroDuration();
  absl::Status start_status;
  std::vector<std::string>* steps = nullptr;
};

// The adapter's stats: the loop's totals and one counter of its broker.
struct TestStats : LoopStats {
  int64_t broker_counter = 0;
};

class TestBroker : public test::FakeBroker {
 public:
  explicit TestBroker(const TestOptions&) {}
  void Close() {}
  void CountInto(TestStats* stats) const { stats->broker_counter = counter; }
  int64_t counter = 0;
};

struct TestHooks {
  bool broken = false;
};

class TestConsumerImpl
    : public LoopConsumer<BrokerConsumer<TestStats>, TestBroker, TestOptions> {
 public:
  using LoopConsumer::LoopConsumer;

  absl::Status Start() {
    options_.steps->push_back("start");
    return options_.start_status;
  }
  void set_hooks(const TestHooks& hooks) {
    options_.steps->push_back(hooks.broken ? "broken hooks" : "hooks");
  }
  TestBroker& broker() { return broker_; }
};

absl::Status Accept(const TestOptions& options) {
  options.steps->push_back("validate");
  return absl::OkStatus();
}

absl::Status Count(const Delivery&, Txn& txn) {
  txn.Put("seen", "1");
  return absl::OkStatus();
}

class LoopConsumerTest : public ::testing::Test {
 protected:
  LoopConsumerTest() {
    EXPECT_TRUE(harness_.Open().ok());
    options_.steps = &steps_;
  }
  absl::StatusOr<std::unique_ptr<BrokerConsumer<TestStats>>> Create(
      absl::Status (*validate)(const TestOptions&) = Accept) {
    return CreateLoopConsumer<BrokerConsumer<TestStats>, TestConsumerImpl>(
        &harness_.engine(), options_, {}, TestHooks{.broken = true}, validate);
  }
  test::EngineHarness harness_;
  std::vector<std::string> steps_;
  TestOptions options_;
};

TEST_F(LoopConsumerTest, CreateGivesTheAdapterHooksOnceStarted) {
  ASSERT_TRUE(Create().ok());
  EXPECT_THAT(steps_, ElementsAre("validate", "start", "broken hooks"));
}

TEST_F(LoopConsumerTest, CreateReturnsAFailedStartWithoutApplyingHooks) {
  options_.start_status = absl::UnavailableError("no server");
  absl::StatusOr<std::unique_ptr<BrokerConsumer<TestStats>>> consumer =
      Create();
  EXPECT_EQ(consumer.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(steps_, ElementsAre("validate", "start"));
}

TEST_F(LoopConsumerTest, CreateReturnsRejectedOptionsBeforeStarting) {
  absl::StatusOr<std::unique_ptr<BrokerConsumer<TestStats>>> consumer =
      Create([](const TestOptions&) {
        return absl::InvalidArgumentError("test::ConsumerOptions::x");
      });
  EXPECT_EQ(consumer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(steps_, IsEmpty());
}

TEST_F(LoopConsumerTest, CreateRejectsTheLoopsOwnOptionsBeforeStarting) {
  options_.delivery.max_batch = 0;
  EXPECT_EQ(Create().status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(steps_, ElementsAre("validate"));
}

TEST_F(LoopConsumerTest, PollsThroughTheLoopAndCountsBothUntilClosed) {
  absl::StatusOr<std::unique_ptr<BrokerConsumer<TestStats>>> consumer =
      Create();
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  TestBroker& broker = static_cast<TestConsumerImpl&>(**consumer).broker();
  broker.Add("a", "1");
  broker.counter = 7;
  absl::StatusOr<BatchReport> report = (*consumer)->PollBatch(Count);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->processed, 1);
  const TestStats stats = (*consumer)->stats();
  EXPECT_EQ(stats.processed, 1);
  EXPECT_EQ(stats.broker_counter, broker.counter);
  ASSERT_TRUE((*consumer)->Close().ok());
  EXPECT_EQ((*consumer)->PollBatch(Count).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace idem::brokers
