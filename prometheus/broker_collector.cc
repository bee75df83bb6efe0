#include "idem/prometheus/broker_collector.h"

#include <array>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/collector_series.h"
#include "prometheus/counter.h"

namespace idem {
namespace {

using brokers::LoopStats;
using metrics::AddSeries;
using metrics::FollowedCounter;
using metrics::RegisterFamily;

// One counter family: its name, help and the running total it follows.
struct CounterSpec {
  const char* name;
  const char* help;
  double (*total)(const LoopStats&);
};

template <int64_t LoopStats::*field>
double Count(const LoopStats& stats) {
  return static_cast<double>(stats.*field);
}

template <absl::Duration LoopStats::*field>
double Seconds(const LoopStats& stats) {
  return absl::ToDoubleSeconds(stats.*field);
}

constexpr CounterSpec kCounters[] = {
    {"idem_broker_batches_total", "PollBatch calls of the delivery loop",
     &Count<&LoopStats::batches>},
    {"idem_broker_deliveries_total", "Deliveries the broker handed the loop",
     &Count<&LoopStats::received>},
    {"idem_broker_processed_total",
     "Deliveries whose handler ran and committed",
     &Count<&LoopStats::processed>},
    {"idem_broker_duplicates_total",
     "Deliveries suppressed because their ID was seen",
     &Count<&LoopStats::duplicates>},
    {"idem_broker_dead_lettered_total",
     "Deliveries given up on, their dead letter committed",
     &Count<&LoopStats::dead_lettered>},
    {"idem_broker_non_retriable_total",
     "Deliveries given up on at once (of idem_broker_dead_lettered_total)",
     &Count<&LoopStats::non_retriable>},
    {"idem_broker_retries_total", "Extra attempts of failed deliveries",
     &Count<&LoopStats::retries>},
    {"idem_broker_acks_total", "Deliveries acknowledged to the broker",
     &Count<&LoopStats::acked>},
    {"idem_broker_nacks_total", "Deliveries given back to the broker",
     &Count<&LoopStats::nacked>},
    {"idem_broker_outbox_published_total",
     "Outbox entries published to their own destination",
     &Count<&LoopStats::outbox_published>},
    {"idem_broker_outbox_dead_lettered_total",
     "Outbox entries the broker refused for good, published to the "
     "dead-letter destination",
     &Count<&LoopStats::outbox_dead_lettered>},
    {"idem_broker_timers_fired_total",
     "Durable timers the loop fired (LoopOptions::timer_handler)",
     &Count<&LoopStats::timers_fired>},
    {"idem_broker_timer_failures_total",
     "Timer fires that failed; their timers fire again later",
     &Count<&LoopStats::timer_failures>},
    {"idem_broker_timer_lag_seconds_total",
     "Sum, over the calls that fired a timer, of the largest lag of a timer "
     "fired (its domain's time when it fired minus its fire_at)",
     &Seconds<&LoopStats::timer_lag_sum>},
    {"idem_broker_errors_total",
     "Broker calls that failed (receive, ack, nack, publish)",
     &Count<&LoopStats::broker_errors>},
    {"idem_broker_engine_seconds_total",
     "Wall time the loop spent in engine calls and retry backoff",
     &Seconds<&LoopStats::engine_time>},
    {"idem_broker_calls_seconds_total",
     "Wall time the loop spent in broker calls",
     &Seconds<&LoopStats::broker_time>},
    {"idem_broker_fetches_total",
     "Broker receive calls that brought deliveries",
     &Count<&LoopStats::fetches>},
    {"idem_broker_fetch_seconds_total",
     "Wall time of the receive calls that brought deliveries (divided by "
     "idem_broker_fetches_total: the mean fetch latency)",
     &Seconds<&LoopStats::fetch_time>},
    {"idem_broker_reconnects_total",
     "Connections to the broker made again after one was lost",
     &Count<&LoopStats::reconnects>},
    {"idem_broker_competing_consumers_total",
     "Times the broker told of other consumers on this consumer's own queue "
     "or durable",
     &Count<&LoopStats::competing_consumers>},
    {"idem_broker_backpressure_pauses_total",
     "Times the loop stopped fetching because the outbox held more than "
     "LoopOptions::max_outbox_pending entries",
     &Count<&LoopStats::backpressure_pauses>},
    {"idem_broker_paused_polls_total",
     "PollBatch calls that fetched nothing because of backpressure",
     &Count<&LoopStats::paused_polls>},
    {"idem_broker_paused_seconds_total",
     "Wall time of the PollBatch calls paused by backpressure",
     &Seconds<&LoopStats::paused_time>},
};

class BrokerCollectorImpl final : public PrometheusBrokerCollector {
 public:
  absl::Status Init(prometheus::Registry& registry, std::string_view broker,
                    const prometheus::Labels& labels) {
    if (broker.empty()) {
      return absl::InvalidArgumentError(
          "PrometheusBrokerCollector: the broker label's value is empty");
    }
    if (absl::Status s = metrics::CheckOwnLabels(labels, {"broker", "le"},
                                                 "PrometheusBrokerCollector");
        !s.ok()) {
      return s;
    }
    const prometheus::Labels own =
        metrics::With(labels, "broker", std::string(broker));
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < std::size(kCounters); ++i) {
      auto family =
          RegisterFamily(prometheus::BuildCounter(), kCounters[i].name,
                         kCounters[i].help, registry);
      if (!family.ok()) return family.status();
      auto added = AddSeries(**family, own);
      if (!added.ok()) return added.status();
      counters_[i].series = *std::move(added);
    }
    return absl::OkStatus();
  }

  void Update(const LoopStats& stats) override {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < std::size(kCounters); ++i) {
      counters_[i].Follow(kCounters[i].total(stats));
    }
  }

 private:
  absl::Mutex mu_;
  // counters_[i] follows kCounters[i].
  std::array<FollowedCounter, std::size(kCounters)> counters_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<PrometheusBrokerCollector>>
PrometheusBrokerCollector::Create(prometheus::Registry& registry,
                                  std::string_view broker,
                                  const prometheus::Labels& labels) {
  auto collector = std::make_unique<BrokerCollectorImpl>();
  if (absl::Status s = collector->Init(registry, broker, labels); !s.ok()) {
    return s;
  }
  return collector;
}

}  // namespace idem
