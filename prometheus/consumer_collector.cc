#include "idem/prometheus/consumer_collector.h"

#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/collector_series.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"

namespace idem {
namespace {

using metrics::AddSeries;
using metrics::FollowedCounter;
using metrics::RegisterFamily;
using metrics::Series;
using prometheus::Gauge;

class ConsumerCollectorImpl final : public PrometheusConsumerCollector {
 public:
  absl::Status Init(prometheus::Registry& registry,
                    const prometheus::Labels& labels) {
    if (absl::Status s =
            metrics::CheckOwnLabels(labels, {"topic", "partition", "le"},
                                    "PrometheusConsumerCollector");
        !s.ok()) {
      return s;
    }
    absl::MutexLock lock(&mu_);
    labels_ = labels;
    const std::pair<const char*, const char*> counters[] = {
        {"idem_kafka_records_total",
         "Kafka records the consumer polled and handled"},
        {"idem_kafka_dead_lettered_total",
         "Kafka records given up on and passed to the dead-letter path"},
        {"idem_kafka_retries_total", "Extra attempts of failed Kafka records"},
        {"idem_kafka_errors_total",
         "Errors librdkafka reported and recovers from by itself"},
        {"idem_kafka_restore_records_total",
         "Records restored into the store from a changelog"},
        {"idem_kafka_standby_records_read_total",
         "Changelog records read to keep standby copies warm"},
        {"idem_kafka_outbox_dead_lettered_total",
         "Outbox entries the brokers refused for good, published to the "
         "dead-letter topic"},
        {"idem_kafka_timers_fired_total",
         "Durable timers the consumer fired (ConsumerOptions::timer_handler)"},
        {"idem_kafka_timer_failures_total",
         "Timer fires that failed; their timers fire again later"}};
    FollowedCounter* const series[] = {&records_,
                                       &dead_lettered_,
                                       &retries_,
                                       &errors_,
                                       &restored_,
                                       &standby_,
                                       &outbox_dead_lettered_,
                                       &timers_fired_,
                                       &timer_failures_};
    for (size_t i = 0; i < std::size(counters); ++i) {
      auto family =
          RegisterFamily(prometheus::BuildCounter(), counters[i].first,
                         counters[i].second, registry);
      if (!family.ok()) return family.status();
      auto added = AddSeries(**family, labels);
      if (!added.ok()) return added.status();
      series[i]->series = *std::move(added);
    }
    auto lag = RegisterFamily(
        prometheus::BuildGauge(), "idem_kafka_lag",
        "Records between the engine's committed offset and the end of the "
        "partition's log",
        registry);
    if (!lag.ok()) return lag.status();
    lag_family_ = *lag;
    auto restoring = RegisterFamily(
        prometheus::BuildGauge(), "idem_kafka_partitions_restoring",
        "Assigned partitions paused while their changelog restore goes on "
        "between polls",
        registry);
    if (!restoring.ok()) return restoring.status();
    auto restoring_series = AddSeries(**restoring, labels);
    if (!restoring_series.ok()) return restoring_series.status();
    restoring_ = *std::move(restoring_series);
    auto timer_lag = RegisterFamily(
        prometheus::BuildGauge(), "idem_kafka_timer_lag_seconds",
        "The largest lag of a timer fired by the last call that fired one: "
        "its domain's time when it fired minus its fire_at",
        registry);
    if (!timer_lag.ok()) return timer_lag.status();
    auto timer_lag_series = AddSeries(**timer_lag, labels);
    if (!timer_lag_series.ok()) return timer_lag_series.status();
    timer_lag_ = *std::move(timer_lag_series);
    return absl::OkStatus();
  }

  void Update(const kafka::ConsumerStats& stats) override {
    absl::MutexLock lock(&mu_);
    records_.Follow(static_cast<double>(stats.records));
    dead_lettered_.Follow(static_cast<double>(stats.dead_lettered));
    retries_.Follow(static_cast<double>(stats.retries));
    errors_.Follow(static_cast<double>(stats.kafka_errors));
    restored_.Follow(static_cast<double>(stats.restored_records));
    standby_.Follow(static_cast<double>(stats.standby_records_read));
    outbox_dead_lettered_.Follow(
        static_cast<double>(stats.outbox_dead_lettered));
    restoring_->Set(static_cast<double>(stats.partitions_restoring));
    timers_fired_.Follow(static_cast<double>(stats.timers_fired));
    timer_failures_.Follow(static_cast<double>(stats.timer_failures));
    timer_lag_->Set(absl::ToDoubleSeconds(stats.timer_lag));
    // Partitions not in this update's lag lose their series.
    std::map<std::pair<std::string, int32_t>, Series<Gauge>> lag;
    for (const kafka::PartitionLag& p : stats.lag) {
      if (p.lag < 0) continue;  // the log's end is not known yet
      const auto key = std::make_pair(p.topic, p.partition);
      auto it = lag_.find(key);
      if (it != lag_.end()) {
        lag[key] = std::move(it->second);
        lag_.erase(it);
      } else {
        prometheus::Labels labels = labels_;
        labels["topic"] = p.topic;
        labels["partition"] = std::to_string(p.partition);
        auto added = AddSeries(*lag_family_, labels);
        if (!added.ok()) continue;  // another collector's labels
        lag[key] = *std::move(added);
      }
      lag[key]->Set(static_cast<double>(p.lag));
    }
    lag_ = std::move(lag);
  }

 private:
  absl::Mutex mu_;
  prometheus::Labels labels_ ABSL_GUARDED_BY(mu_);
  FollowedCounter records_ ABSL_GUARDED_BY(mu_);
  FollowedCounter dead_lettered_ ABSL_GUARDED_BY(mu_);
  FollowedCounter retries_ ABSL_GUARDED_BY(mu_);
  FollowedCounter errors_ ABSL_GUARDED_BY(mu_);
  FollowedCounter restored_ ABSL_GUARDED_BY(mu_);
  FollowedCounter standby_ ABSL_GUARDED_BY(mu_);
  FollowedCounter outbox_dead_lettered_ ABSL_GUARDED_BY(mu_);
  FollowedCounter timers_fired_ ABSL_GUARDED_BY(mu_);
  FollowedCounter timer_failures_ ABSL_GUARDED_BY(mu_);
  Series<Gauge> restoring_ ABSL_GUARDED_BY(mu_);
  Series<Gauge> timer_lag_ ABSL_GUARDED_BY(mu_);
  prometheus::Family<Gauge>* lag_family_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::map<std::pair<std::string, int32_t>, Series<Gauge>> lag_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<PrometheusConsumerCollector>>
PrometheusConsumerCollector::Create(prometheus::Registry& registry,
                                    const prometheus::Labels& labels) {
  auto collector = std::make_unique<ConsumerCollectorImpl>();
  if (absl::Status s = collector->Init(registry, labels); !s.ok()) return s;
  return collector;
}

}  // namespace idem
