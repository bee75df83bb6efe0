// idem::PrometheusBrokerCollector: each LoopStats total in its own family
// under the broker label, counters that never go back, labels per
// collector, series that go with their collector, and a real DeliveryLoop
// whose refused outbox entry shows as an outbox dead letter.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/prometheus/broker_collector.h"
#include "prometheus/registry.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/fake_broker.h"
#include "tests/testing/metric_values.h"

namespace idem {
namespace {

using brokers::DeliveryLoop;
using brokers::LoopStats;
using test::CounterValue;
using test::HasSeries;

// Each family and the LoopStats field it follows, as the header lists them.
struct Family {
  std::string name;
  std::function<void(LoopStats&, int64_t)> set;
};

std::vector<Family> CountFamilies() {
  auto field = [](int64_t LoopStats::*f) {
    return [f](LoopStats& stats, int64_t value) { stats.*f = value; };
  };
  return {
      {"idem_broker_batches_total", field(&LoopStats::batches)},
      {"idem_broker_deliveries_total", field(&LoopStats::received)},
      {"idem_broker_processed_total", field(&LoopStats::processed)},
      {"idem_broker_duplicates_total", field(&LoopStats::duplicates)},
      {"idem_broker_dead_lettered_total", field(&LoopStats::dead_lettered)},
      {"idem_broker_non_retriable_total", field(&LoopStats::non_retriable)},
      {"idem_broker_retries_total", field(&LoopStats::retries)},
      {"idem_broker_acks_total", field(&LoopStats::acked)},
      {"idem_broker_nacks_total", field(&LoopStats::nacked)},
      {"idem_broker_outbox_published_total",
       field(&LoopStats::outbox_published)},
      {"idem_broker_outbox_dead_lettered_total",
       field(&LoopStats::outbox_dead_lettered)},
      {"idem_broker_errors_total", field(&LoopStats::broker_errors)},
      {"idem_broker_fetches_total", field(&LoopStats::fetches)},
      {"idem_broker_reconnects_total", field(&LoopStats::reconnects)},
      {"idem_broker_timers_fired_total", field(&LoopStats::timers_fired)},
      {"idem_broker_timer_failures_total", field(&LoopStats::timer_failures)},
      {"idem_broker_backpressure_pauses_total",
       field(&LoopStats::backpressure_pauses)},
      {"idem_broker_paused_polls_total", field(&LoopStats::paused_polls)},
      {"idem_broker_competing_consumers_total",
       field(&LoopStats::competing_consumers)},
  };
}

// Every count field i of the stats at (i + 1) * scale, and the times at
// scale and 2 * scale milliseconds, so that a family reading another
// field's total shows.
LoopStats DistinctStats(int64_t scale) {
  LoopStats stats;
  const std::vector<Family> families = CountFamilies();
  for (size_t i = 0; i < families.size(); ++i) {
    families[i].set(stats, static_cast<int64_t>(i + 1) * scale);
  }
  stats.engine_time = absl::Milliseconds(scale);
  stats.broker_time = absl::Milliseconds(2 * scale);
  stats.fetch_time = absl::Milliseconds(3 * scale);
  stats.paused_time = absl::Milliseconds(4 * scale);
  return stats;
}

// Expects each family of broker `broker` at DistinctStats(scale)'s value.
void ExpectDistinct(prometheus::Registry& registry, const std::string& broker,
                    int64_t scale) {
  const std::vector<Family> families = CountFamilies();
  for (size_t i = 0; i < families.size(); ++i) {
    EXPECT_EQ(CounterValue(registry, families[i].name, {{"broker", broker}}),
              static_cast<double>((i + 1) * scale))
        << families[i].name;
  }
  EXPECT_DOUBLE_EQ(CounterValue(registry, "idem_broker_engine_seconds_total",
                                {{"broker", broker}}),
                   scale / 1000.0);
  EXPECT_DOUBLE_EQ(CounterValue(registry, "idem_broker_calls_seconds_total",
                                {{"broker", broker}}),
                   2 * scale / 1000.0);
  EXPECT_DOUBLE_EQ(CounterValue(registry, "idem_broker_fetch_seconds_total",
                                {{"broker", broker}}),
                   3 * scale / 1000.0);
  EXPECT_DOUBLE_EQ(CounterValue(registry, "idem_broker_paused_seconds_total",
                                {{"broker", broker}}),
                   4 * scale / 1000.0);
}

TEST(PrometheusBrokerCollectorTest, CountersFollowTheStatsAndNeverGoBack) {
  prometheus::Registry registry;
  auto collector = PrometheusBrokerCollector::Create(registry, "redis");
  ASSERT_TRUE(collector.ok()) << collector.status();
  ExpectDistinct(registry, "redis", 0);  // every series there, at zero

  (*collector)->Update(DistinctStats(5));
  (*collector)->Update(DistinctStats(5));  // no growth: no change
  ExpectDistinct(registry, "redis", 5);
  (*collector)->Update(DistinctStats(8));
  ExpectDistinct(registry, "redis", 8);
  // A new loop behind the collector counts from zero: the counters move by
  // its totals (8 + 3), never back.
  (*collector)->Update(DistinctStats(3));
  ExpectDistinct(registry, "redis", 11);
}

TEST(PrometheusBrokerCollectorTest, RejectsBadLabelsAndAnEmptyBroker) {
  prometheus::Registry registry;
  for (const char* name : {"broker", "le", "1bad", "has space"}) {
    auto c = PrometheusBrokerCollector::Create(registry, "nats", {{name, "x"}});
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << name;
  }
  auto empty = PrometheusBrokerCollector::Create(registry, "");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(registry.Collect(), ::testing::IsEmpty());

  // A family of one of its names with another type: refused, and the
  // series it had added to the families before it are gone.
  prometheus::Registry taken;
  prometheus::BuildGauge().Name("idem_broker_acks_total").Register(taken);
  auto clash = PrometheusBrokerCollector::Create(taken, "nats");
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kInvalidArgument)
      << clash.status();
  EXPECT_FALSE(HasSeries(taken, "idem_broker_deliveries_total", {}));
}

TEST(PrometheusBrokerCollectorTest, CollectorsOfOneRegistryNeedTheirOwnLabels) {
  prometheus::Registry registry;
  auto redis = PrometheusBrokerCollector::Create(registry, "redis");
  ASSERT_TRUE(redis.ok()) << redis.status();
  auto nats = PrometheusBrokerCollector::Create(registry, "nats");
  ASSERT_TRUE(nats.ok()) << nats.status();
  auto second =
      PrometheusBrokerCollector::Create(registry, "redis", {{"instance", "2"}});
  ASSERT_TRUE(second.ok()) << second.status();
  LoopStats stats;
  stats.received = 3;
  (*redis)->Update(stats);
  EXPECT_EQ(CounterValue(registry, "idem_broker_deliveries_total",
                         {{"broker", "redis"}, {"instance", "2"}}),
            0);
  EXPECT_EQ(CounterValue(registry, "idem_broker_deliveries_total",
                         {{"broker", "nats"}}),
            0);

  auto same = PrometheusBrokerCollector::Create(registry, "nats");
  EXPECT_EQ(same.status().code(), absl::StatusCode::kAlreadyExists)
      << same.status();
  // The refused collector took nothing of the first nats one's away.
  EXPECT_TRUE(HasSeries(registry, "idem_broker_deliveries_total",
                        {{"broker", "nats"}}));
  // Destroying one removes its series only.
  nats->reset();
  EXPECT_FALSE(HasSeries(registry, "idem_broker_deliveries_total",
                         {{"broker", "nats"}}));
  second->reset();
  EXPECT_EQ(CounterValue(registry, "idem_broker_deliveries_total",
                         {{"broker", "redis"}}),
            3);
}

// A real loop on an in-memory broker that refuses one destination for good
// (issue: "counted in stats and a metric"). The broken variant holds the
// refused entry instead of dead-lettering it (LoopHooks), and the metric
// stays at zero.
class RefusedEntryMetricTest : public ::testing::TestWithParam<bool> {};

TEST_P(RefusedEntryMetricTest, OutboxEntryRefusedForGoodIsCounted) {
  const bool broken = GetParam();
  test::EngineHarness harness;
  ASSERT_TRUE(harness.Open().ok());
  test::FakeBroker broker;
  broker.refuse["refused"] =
      absl::FailedPreconditionError("WRONGTYPE not a stream");
  brokers::LoopOptions options;
  options.retry_backoff = absl::ZeroDuration();
  options.dead_letter_destination = "dead";
  DeliveryLoop loop(&harness.engine(), &broker, options,
                    brokers::LoopHooks{.hold_refused_entries = broken});
  prometheus::Registry registry;
  auto collector = PrometheusBrokerCollector::Create(registry, "fake");
  ASSERT_TRUE(collector.ok()) << collector.status();

  broker.Add("a", "1");
  broker.Add("b", "2");
  absl::StatusOr<brokers::BatchReport> report =
      loop.PollBatch([](const brokers::Delivery& d, Txn& txn) {
        txn.Emit(d.id == "a" ? "refused" : "out", d.id, d.payload);
        return absl::OkStatus();
      });
  ASSERT_TRUE(report.ok()) << report.status();
  (*collector)->Update(loop.stats());

  auto value = [&](const std::string& name) {
    return CounterValue(registry, name, {{"broker", "fake"}});
  };
  EXPECT_EQ(value("idem_broker_deliveries_total"), 2);
  EXPECT_EQ(value("idem_broker_processed_total"), 2);
  EXPECT_EQ(value("idem_broker_acks_total"), 2);
  EXPECT_EQ(value("idem_broker_outbox_dead_lettered_total"), broken ? 0 : 1);
  EXPECT_EQ(value("idem_broker_outbox_published_total"), broken ? 0 : 1);
  EXPECT_EQ(value("idem_broker_engine_seconds_total"),
            absl::ToDoubleSeconds(loop.stats().engine_time));
}

INSTANTIATE_TEST_SUITE_P(RealAndBroken, RefusedEntryMetricTest,
                         ::testing::Values(false, true), [](const auto& info) {
                           return info.param ? "HoldRefusedEntries" : "Real";
                         });

}  // namespace
}  // namespace idem
