// TransactionalProducer: a librdkafka producer with a transactional.id, for
// the outbox relay's exactly-once rounds (OutboxRelayOptions::
// transactional_id). Each round is one transaction: Begin, Produce, perhaps
// SendOffsets, then Commit, or Abort after an error. Records of a
// transaction that is aborted, or that a crash leaves open (the brokers
// abort it when the next instance of the transactional.id starts), are
// never seen by readers with isolation.level=read_committed.
//
// Not thread-safe: one thread at a time.

#ifndef IDEM_KAFKA_TRANSACTIONAL_PRODUCER_H_
#define IDEM_KAFKA_TRANSACTIONAL_PRODUCER_H_

#include <librdkafka/rdkafka.h>

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "idem/kafka/producer.h"
#include "idem/logger.h"
#include "kafka/rdkafka_util.h"

namespace idem::kafka {

struct GroupMetadataDeleter {
  void operator()(rd_kafka_consumer_group_metadata_t* group) const {
    rd_kafka_consumer_group_metadata_destroy(group);
  }
};
using GroupMetadataPtr =
    std::unique_ptr<rd_kafka_consumer_group_metadata_t, GroupMetadataDeleter>;

// Offsets to commit in a transaction for a consumer group, with the group's
// metadata (its generation and member ID: KIP-447), so that the brokers
// refuse the transaction of a member that is no longer in the group.
struct GroupOffsets {
  GroupMetadataPtr group;
  PartitionListPtr offsets;
};

class TransactionalProducer {
 public:
  // Creates the producer and registers its transactional.id with the
  // brokers (init_transactions), which fences every older instance of it
  // and aborts what one left open. Its transactions time out on the
  // brokers after `transaction_timeout` (transaction.timeout.ms; deliveries
  // too). kInvalidArgument for a bad property, kUnavailable or
  // kDeadlineExceeded if the brokers did not answer within `timeout`.
  static absl::StatusOr<std::unique_ptr<TransactionalProducer>> Create(
      const std::string& brokers, const ConfigList& config,
      const std::string& transactional_id, Logger* logger,
      absl::Duration transaction_timeout, absl::Duration timeout);

  // The librdkafka properties Create sets: `config` after the producer's
  // own (bootstrap.servers, transactional.id, transaction.timeout.ms,
  // delivery.timeout.ms, linger.ms).
  static ConfigList Properties(const std::string& brokers,
                               const ConfigList& config,
                               const std::string& transactional_id,
                               absl::Duration transaction_timeout);

  absl::Status Begin();
  // As ProduceAndWait (kafka/delivery.h), inside the transaction.
  absl::Status Produce(absl::Span<const OutgoingRecord> records,
                       size_t* delivered);
  // Commits `offsets` with the transaction.
  absl::Status SendOffsets(const GroupOffsets& offsets);
  absl::Status Commit();
  absl::Status Abort();

  // Whether an error so far was fatal (kAborted: a newer instance of the
  // transactional.id fenced this one, or the brokers refused it for good):
  // this producer can do nothing more and must be created again.
  bool fatal() const { return fatal_; }
  // Whether the last error left the transaction to be aborted and the
  // work retried with this producer: librdkafka called it retriable or
  // abortable (e.g. REBALANCE_IN_PROGRESS, a coordinator that moved), and
  // it was neither fatal nor a refusal of the group's offsets.
  bool last_error_retriable() const { return last_error_retriable_; }

 private:
  TransactionalProducer(HandlePtr rk, absl::Duration timeout)
      : rk_(std::move(rk)), timeout_(timeout) {}

  // OK for null; otherwise the error as a status, noting a fatal one:
  // kAborted when fatal (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH) or when
  // the group refused its offsets (a stale generation or member: the group
  // moved on without this member), kDeadlineExceeded for a timeout,
  // kUnavailable for the rest (retriable, or the transaction must be
  // aborted; REBALANCE_IN_PROGRESS is one: the member may still be in the
  // group).
  absl::Status Check(rd_kafka_error_t* error, std::string_view context);

  HandlePtr rk_;
  const absl::Duration timeout_;
  bool fatal_ = false;
  bool last_error_retriable_ = false;
};

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_TRANSACTIONAL_PRODUCER_H_
