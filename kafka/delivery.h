// Producing a call's records with librdkafka and waiting for every one's
// delivery report: what idem's Producer and the outbox relay's transactional
// producer share. Thread-safe: each call keeps its own reports.

#ifndef IDEM_KAFKA_DELIVERY_H_
#define IDEM_KAFKA_DELIVERY_H_

#include <librdkafka/rdkafka.h>

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "idem/kafka/producer.h"

namespace idem::kafka {

// A delivery or enqueue error of `rk` as a status: as FromKafkaError, but
// kAborted naming librdkafka's underlying error when the producer has failed
// for good (rd_kafka_fatal_error, e.g. its idempotence broke): only a new
// producer can go on.
absl::Status DeliveryError(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                           std::string_view context);

// Routes the delivery reports of the handle made from `conf` to
// ProduceAndWait's calls.
void EnableDeliveryReports(rd_kafka_conf_t* conf);

// Produces `records` in order on `rk` (made from a conf passed to
// EnableDeliveryReports) and waits until librdkafka reported each one;
// `*delivered` is the length of the longest prefix acknowledged. Errors as
// Producer::Produce.
absl::Status ProduceAndWait(rd_kafka_t* rk,
                            absl::Span<const OutgoingRecord> records,
                            size_t* delivered);

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_DELIVERY_H_
