// idem::PrometheusConsumerCollector puts a Kafka consumer's figures
// (idem::kafka::Consumer::stats()) into the application's own
// prometheus::Registry, beside an engine's (idem/prometheus/collector.h):
//
//   idem_kafka_records_total            counter: records polled and handled
//   idem_kafka_dead_lettered_total      counter: records given up on
//   idem_kafka_retries_total            counter: extra attempts of failures
//   idem_kafka_errors_total             counter: errors librdkafka recovers
//                                       from by itself
//   idem_kafka_restore_records_total    counter: records restored into the
//                                       store (ConsumerStats::restored_records)
//   idem_kafka_partitions_restoring     gauge: assigned partitions paused
//                                       while their restore goes on
//                                       (ConsumerStats::partitions_restoring)
//   idem_kafka_lag{topic,partition}     gauge: records between the engine's
//                                       offset and the log's end, per
//                                       assigned partition whose end is known
//
// A Consumer is used from one thread, so the collector does not poll it:
// the application passes consumer->stats() to Update on the thread that
// polls (after each PollBatch, or every few seconds). Counters move by the
// growth of the totals since the previous Update; a total that shrank (a new
// consumer behind the same collector) counts as a restart from zero. Lag
// series follow the assignment: a partition no longer assigned loses its
// series at the next Update. Several collectors may share one registry when
// their labels differ; destroying a collector removes its series.
//
// Requires the optional idem::kafka_prometheus library (built when both
// librdkafka and prometheus-cpp are found). Safe for concurrent access from
// multiple threads without external synchronization. The registry is
// borrowed and must outlive the collector.

#ifndef IDEM_PROMETHEUS_CONSUMER_COLLECTOR_H_
#define IDEM_PROMETHEUS_CONSUMER_COLLECTOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "idem/kafka/consumer.h"
#include "prometheus/labels.h"
#include "prometheus/registry.h"

namespace idem {

class PrometheusConsumerCollector {
 public:
  // Registers the families and this collector's series (at zero) in
  // `registry`, each series with `labels` (valid Prometheus label names
  // other than topic, partition and le). kInvalidArgument for a bad label
  // or a family of one of these names but another type in the registry;
  // kAlreadyExists if another collector there has the same labels.
  static absl::StatusOr<std::unique_ptr<PrometheusConsumerCollector>> Create(
      prometheus::Registry& registry, const prometheus::Labels& labels = {});

  PrometheusConsumerCollector(const PrometheusConsumerCollector&) = delete;
  PrometheusConsumerCollector& operator=(const PrometheusConsumerCollector&) =
      delete;
  virtual ~PrometheusConsumerCollector() = default;

  // Copies `stats` (Consumer::stats()) into the registry.
  virtual void Update(const kafka::ConsumerStats& stats) = 0;

 protected:
  PrometheusConsumerCollector() = default;
};

}  // namespace idem

#endif  // IDEM_PROMETHEUS_CONSUMER_COLLECTOR_H_
