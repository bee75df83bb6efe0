// ProduceAndWait: produces with rd_kafka_producev and counts delivery
// reports per call until every record of the call is acknowledged or
// failed.

#include "kafka/delivery.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "engine/absl_view.h"
#include "kafka/rdkafka_util.h"

namespace idem::kafka {
namespace {

// The delivery reports of one Produce call.
struct PendingDeliveries {
  explicit PendingDeliveries(size_t records) : delivered(records, false) {}
  std::atomic<int64_t> remaining{0};
  absl::Mutex mu;
  absl::Status first_error ABSL_GUARDED_BY(mu);
  // Per record of the call: acknowledged by the broker.
  std::vector<bool> delivered ABSL_GUARDED_BY(mu);
};

// One record's delivery report context (librdkafka's per-message opaque).
struct RecordDelivery {
  PendingDeliveries* pending;
  size_t index;
};

void OnDelivery(rd_kafka_t* rk, const rd_kafka_message_t* message, void*) {
  auto* record = static_cast<RecordDelivery*>(message->_private);
  PendingDeliveries* pending = record->pending;
  {
    absl::MutexLock lock(&pending->mu);
    if (message->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      pending->delivered[record->index] = true;
    } else if (pending->first_error.ok()) {
      pending->first_error = DeliveryError(
          rk, message->err,
          absl::StrCat("producing to ", rd_kafka_topic_name(message->rkt)));
    }
  }
  // Last: the Produce call may return (and free `pending`) right after.
  pending->remaining.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace

absl::Status DeliveryError(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                           std::string_view context) {
  // After a fatal error librdkafka purges what it queued (_PURGE_QUEUE)
  // before it reports _FATAL: either way the fatal error is the cause.
  const std::string fatal = FatalErrorText(rk);
  if (fatal.empty()) return FromKafkaError(err, context);
  return absl::AbortedError(
      absl::StrCat(AbslView(context), ": the producer failed for good (", fatal,
                   "); a new producer must be created"));
}

void EnableDeliveryReports(rd_kafka_conf_t* conf) {
  rd_kafka_conf_set_dr_msg_cb(conf, OnDelivery);
}

absl::Status ProduceAndWait(rd_kafka_t* rk,
                            absl::Span<const OutgoingRecord> records,
                            size_t* delivered) {
  PendingDeliveries pending(records.size());
  std::vector<RecordDelivery> contexts(records.size());
  absl::Status enqueue_error;
  for (size_t i = 0; i < records.size(); ++i) {
    const OutgoingRecord& record = records[i];
    contexts[i] = RecordDelivery{&pending, i};
    rd_kafka_headers_t* headers = rd_kafka_headers_new(record.headers.size());
    for (const auto& [name, value] : record.headers) {
      rd_kafka_header_add(headers, name.data(), name.size(), value.data(),
                          value.size());
    }
    pending.remaining.fetch_add(1, std::memory_order_acq_rel);
    rd_kafka_resp_err_t err;
    for (;;) {
      err = rd_kafka_producev(
          rk, RD_KAFKA_V_TOPIC(record.topic.c_str()),
          RD_KAFKA_V_PARTITION(record.partition == -1 ? RD_KAFKA_PARTITION_UA
                                                      : record.partition),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
          RD_KAFKA_V_KEY(record.key.data(), record.key.size()),
          RD_KAFKA_V_VALUE(record.tombstone
                               ? nullptr
                               : const_cast<char*>(record.value.data()),
                           record.tombstone ? 0 : record.value.size()),
          RD_KAFKA_V_TIMESTAMP(record.timestamp_ms),
          RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_OPAQUE(&contexts[i]),
          RD_KAFKA_V_END);
      if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) break;
      rd_kafka_poll(rk, 100);  // make room by serving deliveries
    }
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      // Not enqueued: the headers and the report are ours to drop.
      rd_kafka_headers_destroy(headers);
      pending.remaining.fetch_sub(1, std::memory_order_acq_rel);
      enqueue_error =
          DeliveryError(rk, err, absl::StrCat("producing to ", record.topic));
      break;
    }
  }
  // librdkafka reports every enqueued record within delivery.timeout.ms.
  while (pending.remaining.load(std::memory_order_acquire) > 0) {
    rd_kafka_poll(rk, 10);
  }
  absl::MutexLock lock(&pending.mu);
  *delivered = 0;
  while (*delivered < records.size() && pending.delivered[*delivered]) {
    ++*delivered;
  }
  if (!enqueue_error.ok()) return enqueue_error;
  return pending.first_error;
}

}  // namespace idem::kafka
