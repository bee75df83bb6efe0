// idem::PrometheusBrokerCollector puts a broker delivery loop's figures
// (idem::brokers::DeliveryLoop::stats(), or the stats() of a Redis, NATS or
// RabbitMQ Consumer, whose ConsumerStats extend brokers::LoopStats) into
// the application's own prometheus::Registry, beside an engine's
// (idem/prometheus/collector.h). Every series carries the label
// broker="<name>" the application gives (e.g. "redis", "nats",
// "rabbitmq"), besides its own labels:
//
//   idem_broker_batches_total               counter: PollBatch calls
//   idem_broker_deliveries_total            counter: deliveries received
//   idem_broker_processed_total             counter: the handler ran and
//                                           committed
//   idem_broker_duplicates_total            counter: suppressed, the ID was
//                                           seen
//   idem_broker_dead_lettered_total         counter: given up on, dead
//                                           letter committed
//   idem_broker_non_retriable_total         counter: of those, given up on
//                                           at once
//   idem_broker_retries_total               counter: extra attempts of
//                                           failed deliveries
//   idem_broker_acks_total                  counter: deliveries acknowledged
//   idem_broker_nacks_total                 counter: deliveries given back
//   idem_broker_outbox_published_total      counter: outbox entries
//                                           published to their destination
//   idem_broker_outbox_dead_lettered_total  counter: outbox entries the
//                                           broker refused for good,
//                                           published to the dead-letter
//                                           destination instead
//   idem_broker_errors_total                counter: broker calls that
//                                           failed (Receive, Ack, Nack,
//                                           Publish)
//   idem_broker_engine_seconds_total        counter: wall time in engine
//                                           calls and retry backoff
//   idem_broker_calls_seconds_total         counter: wall time in broker
//                                           calls
//   idem_broker_fetches_total               counter: receive calls that
//                                           brought deliveries
//   idem_broker_fetch_seconds_total         counter: their wall time (over
//                                           fetches: the mean fetch
//                                           latency)
//   idem_broker_reconnects_total            counter: connections made
//                                           again after one was lost
//   idem_broker_competing_consumers_total   counter: times the broker told
//                                           of other consumers on this
//                                           one's queue or durable
//   idem_broker_backpressure_pauses_total   counter: times fetching stopped
//                                           while the outbox was over
//                                           LoopOptions::max_outbox_pending
//   idem_broker_paused_polls_total          counter: PollBatch calls that
//                                           fetched nothing for it
//   idem_broker_paused_seconds_total        counter: their wall time
//
// An adapter's own figures beyond LoopStats (e.g.
// nats::ConsumerStats::in_progress_sent) are not exported.
//
// A loop is used from one thread, so the collector does not poll it: the
// application passes loop.stats() (or consumer->stats()) to Update, after
// each PollBatch or every few seconds. Counters move by the growth of the
// totals since the previous Update; a total that shrank (a new loop behind
// the same collector) counts as a restart from zero. Several collectors may
// share one registry when their labels (broker included) differ;
// destroying a collector removes its series.
//
// Requires the optional idem::brokers_prometheus library (built when
// prometheus-cpp is found). Safe for concurrent access from multiple
// threads without external synchronization. The registry is borrowed and
// must outlive the collector.

#ifndef IDEM_PROMETHEUS_BROKER_COLLECTOR_H_
#define IDEM_PROMETHEUS_BROKER_COLLECTOR_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "idem/brokers/delivery_loop.h"
#include "prometheus/labels.h"
#include "prometheus/registry.h"

namespace idem {

class PrometheusBrokerCollector {
 public:
  // Registers the families and this collector's series (at zero) in
  // `registry`, each series with `labels` (valid Prometheus label names
  // other than broker and le) plus broker=`broker` (not empty).
  // kInvalidArgument for an empty `broker`, a bad label or a family of one
  // of these names but another type in the registry; kAlreadyExists if
  // another collector there has the same labels and broker. On an error
  // nothing of this collector stays in the registry (families it created
  // stay, without series).
  static absl::StatusOr<std::unique_ptr<PrometheusBrokerCollector>> Create(
      prometheus::Registry& registry, std::string_view broker,
      const prometheus::Labels& labels = {});

  PrometheusBrokerCollector(const PrometheusBrokerCollector&) = delete;
  PrometheusBrokerCollector& operator=(const PrometheusBrokerCollector&) =
      delete;
  virtual ~PrometheusBrokerCollector() = default;

  // Copies `stats` (DeliveryLoop::stats(), or an adapter Consumer's
  // stats()) into the registry.
  virtual void Update(const brokers::LoopStats& stats) = 0;

 protected:
  PrometheusBrokerCollector() = default;
};

}  // namespace idem

#endif  // IDEM_PROMETHEUS_BROKER_COLLECTOR_H_
