// The delivery loop fires durable timers (LoopOptions::timer_handler):
// event-time ones once a batch moved the partition's stream time (the
// deliveries' broker timestamps), processing-time ones on every call, also
// when nothing arrived; their emits are published with the batch's.

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/engine.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/fake_broker.h"

namespace idem::brokers {
namespace {

const absl::Time kWindowStart = test::kStart - absl::Hours(1);

// Sets, per delivery, the event-time timer "close" at the end of its
// minute, and emits "closed" to "windows" when it fires.
LoopOptions WindowOptions() {
  LoopOptions options;
  options.retry_backoff = absl::ZeroDuration();
  options.timer_handler = [](const TimerFire& fire, Txn& txn) {
    txn.Emit("windows", fire.timer_key, "closed");
    return absl::OkStatus();
  };
  return options;
}

absl::Status OpenWindow(const Delivery&, Txn& txn) {
  absl::Status s = txn.SetTimer("close", TimeDomain::kEvent,
                                kWindowStart + absl::Minutes(1));
  // A late event finds its window closed: not an error here.
  return absl::IsOutOfRange(s) ? absl::OkStatus() : s;
}

class DeliveryLoopTimersTest : public ::testing::Test {
 protected:
  DeliveryLoopTimersTest() { EXPECT_TRUE(harness_.Open().ok()); }
  test::EngineHarness harness_;
  test::FakeBroker broker_;
};

TEST_F(DeliveryLoopTimersTest, FiresEventTimersOnceABatchMovesStreamTime) {
  DeliveryLoop loop(&harness_.engine(), &broker_, WindowOptions());
  broker_.Add("a", "1", {}, kWindowStart + absl::Seconds(10));
  absl::StatusOr<BatchReport> report = loop.PollBatch(OpenWindow);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->timers_fired, 0);
  EXPECT_TRUE(broker_.PublishedTo("windows").empty());

  broker_.Add("b", "2", {}, kWindowStart + absl::Minutes(1));
  report = loop.PollBatch(OpenWindow);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->timers_fired, 1);
  EXPECT_EQ(report->timer_lag, absl::ZeroDuration());
  ASSERT_EQ(broker_.PublishedTo("windows").size(), 1u);
  EXPECT_EQ(loop.stats().timers_fired, 1);
  // Once: nothing fires again.
  report = loop.PollBatch(OpenWindow);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->timers_fired, 0);
}

TEST_F(DeliveryLoopTimersTest, FiresProcessingTimersWhenNothingArrives) {
  DeliveryLoop loop(&harness_.engine(), &broker_, WindowOptions());
  broker_.Add("a", "1");
  absl::StatusOr<BatchReport> report =
      loop.PollBatch([](const Delivery&, Txn& txn) {
        return txn.SetTimer("remind", TimeDomain::kProcessing,
                            test::kStart + absl::Seconds(30));
      });
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->timers_fired, 0);
  harness_.clock().Advance(absl::Minutes(1));
  report = loop.PollBatch(OpenWindow);  // nothing received
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->received, 0);
  EXPECT_EQ(report->timers_fired, 1);
  EXPECT_EQ(broker_.PublishedTo("windows").size(), 1u);
}

TEST_F(DeliveryLoopTimersTest, AFailedFireIsCountedAndFiresAgain) {
  LoopOptions options = WindowOptions();
  int failures_left = 1;
  options.timer_handler = [&](const TimerFire&, Txn&) {
    if (failures_left-- > 0) return absl::UnavailableError("later");
    return absl::OkStatus();
  };
  DeliveryLoop loop(&harness_.engine(), &broker_, options);
  broker_.Add("a", "1");
  ASSERT_TRUE(loop.PollBatch([](const Delivery&, Txn& txn) {
                    return txn.SetTimer("t", TimeDomain::kProcessing,
                                        test::kStart);
                  })
                  .ok());
  EXPECT_EQ(loop.stats().timer_failures, 1);
  EXPECT_EQ(loop.stats().timers_fired, 0);
  ASSERT_TRUE(loop.PollBatch(OpenWindow).ok());
  EXPECT_EQ(loop.stats().timers_fired, 1);
}

}  // namespace
}  // namespace idem::brokers
