// idem::PrometheusCollector: the required names and types in the
// application's registry, counters that follow the engine and never go
// back, the commit histogram, labels per collector, the refresh thread, and
// series that go with their collector.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/prometheus/collector.h"
#include "prometheus/collector_series.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/metric_values.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using test::AddOne;
using test::CounterValue;
using test::Find;
using test::HasSeries;
using test::Series;
using ::testing::IsEmpty;

class PrometheusCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto engine = Engine::Open(dir_.Sub("db"), Options());
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }

  util::TempDir dir_;
  std::unique_ptr<Engine> engine_;
  prometheus::Registry registry_;
};

TEST_F(PrometheusCollectorTest, RegistersTheRequiredNamesAndTypes) {
  auto collector = PrometheusCollector::Create(engine_.get(), registry_);
  ASSERT_TRUE(collector.ok()) << collector.status();
  const std::vector<prometheus::MetricFamily> families = registry_.Collect();
  const std::map<std::string, prometheus::MetricType> expected = {
      {"idem_messages_total", prometheus::MetricType::Counter},
      {"idem_expired_dropped_total", prometheus::MetricType::Counter},
      {"idem_handler_reruns_total", prometheus::MetricType::Counter},
      {"idem_timers_fired_total", prometheus::MetricType::Counter},
      {"idem_timers_dead_lettered_total", prometheus::MetricType::Counter},
      {"idem_write_amplification", prometheus::MetricType::Gauge},
      {"idem_live_sst_bytes", prometheus::MetricType::Gauge},
      {"idem_memtable_bytes", prometheus::MetricType::Gauge},
      {"idem_outbox_pending", prometheus::MetricType::Gauge},
      {"idem_commit_duration_seconds", prometheus::MetricType::Histogram}};
  for (const auto& [name, type] : expected) {
    const prometheus::MetricFamily* f = Find(families, name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(f->type, type) << name;
    // One series each; idem_messages_total has one per outcome.
    EXPECT_EQ(f->metric.size(), name == "idem_messages_total" ? 4u : 1u)
        << name;
  }
  for (const char* outcome : {"processed", "duplicate", "failed", "conflict"}) {
    EXPECT_EQ(
        CounterValue(registry_, "idem_messages_total", {{"outcome", outcome}}),
        0)
        << outcome;
  }
}

TEST_F(PrometheusCollectorTest, CountersFollowTheEngineAndNeverGoBack) {
  auto collector = PrometheusCollector::Create(engine_.get(), registry_);
  ASSERT_TRUE(collector.ok()) << collector.status();
  auto handler = [](const Message& m, Txn& txn) -> absl::Status {
    if (m.payload == "fail") return absl::UnavailableError("no");
    return AddOne(m, txn);
  };
  const std::vector<Message> batch = {
      {.id = "a"}, {.id = "b"}, {.id = "a"}, {.id = "c", .payload = "fail"}};
  ASSERT_TRUE(engine_->ProcessBatch(batch, handler).ok());
  ASSERT_TRUE(engine_->Process({.id = "d"}, handler).ok());
  ASSERT_TRUE((*collector)->Update().ok());
  ASSERT_TRUE((*collector)->Update().ok());  // no growth: no change
  EXPECT_EQ(CounterValue(registry_, "idem_messages_total",
                         {{"outcome", "processed"}}),
            3);
  EXPECT_EQ(CounterValue(registry_, "idem_messages_total",
                         {{"outcome", "duplicate"}}),
            1);
  EXPECT_EQ(
      CounterValue(registry_, "idem_messages_total", {{"outcome", "failed"}}),
      1);

  const std::vector<prometheus::MetricFamily> families = registry_.Collect();
  const prometheus::ClientMetric* commits =
      Series(families, "idem_commit_duration_seconds", {});
  ASSERT_NE(commits, nullptr);
  EXPECT_EQ(commits->histogram.sample_count, 2u);  // one per commit call
  EXPECT_GT(commits->histogram.sample_sum, 0);
  ASSERT_EQ(commits->histogram.bucket.size(), kCommitDurationBounds.size() + 1);
  EXPECT_EQ(commits->histogram.bucket.back().cumulative_count, 2u);
  const prometheus::ClientMetric* sst =
      Series(families, "idem_live_sst_bytes", {});
  ASSERT_NE(sst, nullptr);
  EXPECT_GE(sst->gauge.value, 0);
  const prometheus::ClientMetric* memtable =
      Series(families, "idem_memtable_bytes", {});
  ASSERT_NE(memtable, nullptr);
  EXPECT_GT(memtable->gauge.value, 0);

  // Destroying the collector removes its series.
  collector->reset();
  EXPECT_FALSE(HasSeries(registry_, "idem_memtable_bytes", {}));
}

TEST_F(PrometheusCollectorTest, ConflictsAreCounted) {
  util::TempDir dir;
  Options options;
  options.detect_conflicts = true;
  auto engine = Engine::Open(dir.Sub("db"), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto collector = PrometheusCollector::Create(engine->get(), registry_);
  ASSERT_TRUE(collector.ok()) << collector.status();
  ASSERT_TRUE((*engine)->Process({.id = "k", .payload = "1"}, AddOne).ok());
  absl::StatusOr<Result> other =
      (*engine)->Process({.id = "k", .payload = "2"}, AddOne);
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_EQ(other->outcome, Outcome::kConflict);
  ASSERT_TRUE((*collector)->Update().ok());
  EXPECT_EQ(
      CounterValue(registry_, "idem_messages_total", {{"outcome", "conflict"}}),
      1);
}

TEST_F(PrometheusCollectorTest, CollectorsOfOneRegistryNeedTheirOwnLabels) {
  util::TempDir other_dir;
  auto other = Engine::Open(other_dir.Sub("db"), Options());
  ASSERT_TRUE(other.ok()) << other.status();
  auto a = PrometheusCollector::Create(engine_.get(), registry_,
                                       {.labels = {{"store", "a"}}});
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = PrometheusCollector::Create(other->get(), registry_,
                                       {.labels = {{"store", "b"}}});
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(engine_->Process({.id = "x"}, AddOne).ok());
  ASSERT_TRUE((*a)->Update().ok());
  ASSERT_TRUE((*b)->Update().ok());
  EXPECT_EQ(CounterValue(registry_, "idem_messages_total",
                         {{"outcome", "processed"}, {"store", "a"}}),
            1);
  EXPECT_EQ(CounterValue(registry_, "idem_messages_total",
                         {{"outcome", "processed"}, {"store", "b"}}),
            0);

  auto same = PrometheusCollector::Create(other->get(), registry_,
                                          {.labels = {{"store", "a"}}});
  EXPECT_EQ(same.status().code(), absl::StatusCode::kAlreadyExists)
      << same.status();
  // The refused collector took nothing of a's away.
  EXPECT_EQ(CounterValue(registry_, "idem_messages_total",
                         {{"outcome", "processed"}, {"store", "a"}}),
            1);
  // Destroying b removes its series only.
  b->reset();
  EXPECT_FALSE(HasSeries(registry_, "idem_live_sst_bytes", {{"store", "b"}}));
  EXPECT_TRUE(HasSeries(registry_, "idem_live_sst_bytes", {{"store", "a"}}));
}

TEST_F(PrometheusCollectorTest, RejectsBadOptions) {
  for (const char* name : {"outcome", "le", "1bad", "has space"}) {
    auto c = PrometheusCollector::Create(engine_.get(), registry_,
                                         {.labels = {{name, "x"}}});
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << name;
  }
  auto negative = PrometheusCollector::Create(
      engine_.get(), registry_, {.refresh_period = absl::Seconds(-1)});
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  auto null = PrometheusCollector::Create(nullptr, registry_);
  EXPECT_EQ(null.status().code(), absl::StatusCode::kInvalidArgument);
  // A family of one of its names with another type.
  prometheus::Registry taken;
  prometheus::BuildGauge().Name("idem_messages_total").Register(taken);
  auto clash = PrometheusCollector::Create(engine_.get(), taken);
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kInvalidArgument)
      << clash.status();
  EXPECT_THAT(registry_.Collect(), IsEmpty());
}

TEST(RunningTotalTest, MovesByGrowthAndTakesAShrinkingTotalAsARestart) {
  metrics::RunningTotal total;
  EXPECT_EQ(total.Advance(5), 5);
  EXPECT_EQ(total.Advance(5), 0);
  EXPECT_EQ(total.Advance(8), 3);
  EXPECT_EQ(total.Advance(2), 2);  // a new source counting from zero
  EXPECT_EQ(total.Advance(4), 2);
}

TEST_F(PrometheusCollectorTest, RefreshPeriodUpdatesWithoutBeingAsked) {
  auto collector = PrometheusCollector::Create(
      engine_.get(), registry_, {.refresh_period = absl::Milliseconds(20)});
  ASSERT_TRUE(collector.ok()) << collector.status();
  ASSERT_TRUE(engine_->Process({.id = "x"}, AddOne).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (CounterValue(registry_, "idem_messages_total",
                      {{"outcome", "processed"}}) < 1 &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(CounterValue(registry_, "idem_messages_total",
                         {{"outcome", "processed"}}),
            1);
}

}  // namespace
}  // namespace idem
