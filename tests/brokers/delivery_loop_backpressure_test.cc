// Backpressure of the delivery loop (LoopOptions::max_outbox_pending): it
// stops fetching while the engine's outbox holds more than the bound, and
// resumes once a relay (its own, or another) drains it.

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/engine.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/fake_broker.h"

namespace idem::brokers {
namespace {

using test::FakeBroker;
using ::testing::HasSubstr;

// Each delivery emits two outputs.
absl::Status EmitTwoOutputs(const Delivery& delivery, Txn& txn) {
  txn.Emit("out", delivery.id, "first");
  txn.Emit("out", delivery.id, "second");
  return absl::OkStatus();
}

LoopOptions BoundedOptions(int64_t bound) {
  LoopOptions options;
  options.max_batch = 2;
  options.receive_timeout = absl::Milliseconds(10);
  options.retry_backoff = absl::ZeroDuration();
  options.max_outbox_pending = bound;
  return options;
}

uint64_t Pending(Engine& engine) {
  absl::StatusOr<uint64_t> pending = engine.OutboxPending();
  EXPECT_TRUE(pending.ok()) << pending.status();
  return pending.ok() ? *pending : 0;
}

class DeliveryLoopBackpressureTest : public ::testing::Test {
 protected:
  DeliveryLoopBackpressureTest() {
    EXPECT_TRUE(harness_.Open().ok());
    for (int i = 0; i < 10; ++i) broker_.Add(absl::StrCat("m", i), "x");
  }
  Engine& engine() { return harness_.engine(); }
  test::EngineHarness harness_;
  FakeBroker broker_;
};

TEST_F(DeliveryLoopBackpressureTest, RejectsANegativeBound) {
  LoopOptions options;
  options.max_outbox_pending = -1;
  absl::Status s = DeliveryLoop::Validate(options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("max_outbox_pending"));
}

TEST_F(DeliveryLoopBackpressureTest, OutboxPendingMatchesTheStats) {
  DeliveryLoop loop(&engine(), &broker_, BoundedOptions(0));
  broker_.publish_budget = 0;  // nothing leaves the outbox
  ASSERT_TRUE(loop.PollBatch(EmitTwoOutputs).ok());
  absl::StatusOr<Stats> stats = engine().GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->outbox_pending, 4u);
  EXPECT_EQ(Pending(engine()), 4u);
}

// The broker refuses publishing for a while: the loop stops fetching once
// the outbox is over the bound (the broker keeps the messages), and
// fetches again once its relay could drain the outbox. Off (bound 0), the
// same run keeps fetching and the outbox grows past the bound: the check
// catches a loop without backpressure.
class BackpressureBoundTest : public DeliveryLoopBackpressureTest,
                              public ::testing::WithParamInterface<bool> {};

TEST_P(BackpressureBoundTest, FetchesPauseAboveTheBoundAndResumeAfterTheRelay) {
  const bool bounded = GetParam();
  constexpr int64_t kBound = 3;
  DeliveryLoop loop(&engine(), &broker_, BoundedOptions(bounded ? kBound : 0));
  broker_.publish_budget = 0;
  int64_t received = 0;
  for (int poll = 0; poll < 4; ++poll) {
    absl::StatusOr<BatchReport> report = loop.PollBatch(EmitTwoOutputs);
    ASSERT_TRUE(report.ok()) << report.status();
    received += report->received;
  }
  if (!bounded) {
    EXPECT_GT(Pending(engine()), static_cast<uint64_t>(kBound))
        << "without a bound the loop fetches on";
    EXPECT_EQ(received, 8);
    EXPECT_EQ(loop.stats().backpressure_pauses, 0);
    return;
  }
  // One batch (2 deliveries, 4 emits) took the outbox past the bound; the
  // three polls after it fetched nothing.
  EXPECT_EQ(received, 2);
  EXPECT_EQ(Pending(engine()), 4u);
  LoopStats stats = loop.stats();
  EXPECT_EQ(stats.backpressure_pauses, 1);  // one pause, three polls long
  EXPECT_EQ(stats.paused_polls, 3);
  EXPECT_GE(stats.paused_time, 3 * absl::Milliseconds(10));
  EXPECT_EQ(stats.fetches, 1);

  broker_.publish_budget = -1;  // the broker takes messages again
  absl::StatusOr<BatchReport> resumed = loop.PollBatch(EmitTwoOutputs);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_FALSE(resumed->paused);
  EXPECT_EQ(resumed->received, 2);
  while (received + resumed->received < 10) {
    received += resumed->received;
    resumed = loop.PollBatch(EmitTwoOutputs);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
  }
  EXPECT_EQ(broker_.acked.size(), 10u);
  EXPECT_EQ(broker_.PublishedTo("out").size(), 20u);
  EXPECT_EQ(Pending(engine()), 0u);
  EXPECT_EQ(loop.stats().backpressure_pauses, 1);
}

INSTANTIATE_TEST_SUITE_P(BoundedAndOff, BackpressureBoundTest,
                         ::testing::Values(true, false), [](const auto& info) {
                           return info.param ? "Bounded" : "Off";
                         });

// Without relay_outbox another relay drains the engine: a paused PollBatch
// waits for it (up to receive_timeout) and fetches in the same call once
// the outbox is back under the bound.
TEST_F(DeliveryLoopBackpressureTest,
       ResumesWithinTheCallWhenAnotherRelayDrains) {
  LoopOptions options = BoundedOptions(1);
  options.relay_outbox = false;
  options.receive_timeout = absl::Seconds(30);
  DeliveryLoop loop(&engine(), &broker_, options);
  ASSERT_TRUE(loop.PollBatch(EmitTwoOutputs).ok());
  ASSERT_EQ(Pending(engine()), 4u);

  std::thread other_relay([&] {
    absl::SleepFor(absl::Milliseconds(50));
    absl::StatusOr<std::vector<OutboxEntry>> entries = engine().ReadOutbox(10);
    ASSERT_TRUE(entries.ok() && !entries->empty());
    ASSERT_TRUE(engine().AckOutbox(entries->back().position).ok());
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<BatchReport> report = loop.PollBatch(EmitTwoOutputs);
  const absl::Duration took = absl::Now() - start;
  other_relay.join();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->paused);
  EXPECT_EQ(report->received, 2);
  EXPECT_GE(took, absl::Milliseconds(50));
  EXPECT_LT(took, absl::Seconds(10)) << "it waited out receive_timeout";
  EXPECT_EQ(loop.stats().backpressure_pauses, 1);
  EXPECT_EQ(loop.stats().paused_polls, 0);  // that call did fetch
}

}  // namespace
}  // namespace idem::brokers
