#include "kafka/transactional_producer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "kafka/delivery.h"

namespace idem::kafka {

absl::StatusOr<std::unique_ptr<TransactionalProducer>>
TransactionalProducer::Create(const std::string& brokers,
                              const ConfigList& config,
                              const std::string& transactional_id,
                              Logger* logger,
                              absl::Duration transaction_timeout,
                              absl::Duration timeout) {
  ConfPtr conf(rd_kafka_conf_new());
  if (absl::Status s = SetConfig(
          conf.get(),
          Properties(brokers, config, transactional_id, transaction_timeout));
      !s.ok()) {
    return s;
  }
  EnableDeliveryReports(conf.get());
  if (logger != nullptr) SetLogger(conf.get(), logger);
  absl::StatusOr<HandlePtr> rk = NewHandle(RD_KAFKA_PRODUCER, std::move(conf));
  if (!rk.ok()) return rk.status();
  std::unique_ptr<TransactionalProducer> producer(
      new TransactionalProducer(*std::move(rk), timeout));
  if (absl::Status s = producer->Check(
          rd_kafka_init_transactions(producer->rk_.get(),
                                     ToKafkaMillis(timeout)),
          absl::StrCat("registering transactional.id ", transactional_id));
      !s.ok()) {
    return s;
  }
  return producer;
}

ConfigList TransactionalProducer::Properties(
    const std::string& brokers, const ConfigList& config,
    const std::string& transactional_id, absl::Duration transaction_timeout) {
  // A delivery must not outlast the transaction it belongs to (librdkafka
  // refuses a larger delivery.timeout.ms).
  const std::string timeout_ms =
      absl::StrCat(absl::ToInt64Milliseconds(transaction_timeout));
  ConfigList all = {{"bootstrap.servers", brokers},
                    {"transactional.id", transactional_id},
                    {"transaction.timeout.ms", timeout_ms},
                    {"delivery.timeout.ms", timeout_ms},
                    {"linger.ms", "0"}};
  all.insert(all.end(), config.begin(), config.end());
  return all;
}

absl::Status TransactionalProducer::Begin() {
  return Check(rd_kafka_begin_transaction(rk_.get()),
               "beginning a transaction");
}

absl::Status TransactionalProducer::Produce(
    absl::Span<const OutgoingRecord> records, size_t* delivered) {
  return ProduceAndWait(rk_.get(), records, delivered);
}

absl::Status TransactionalProducer::SendOffsets(const GroupOffsets& offsets) {
  return Check(rd_kafka_send_offsets_to_transaction(
                   rk_.get(), offsets.offsets.get(), offsets.group.get(),
                   ToKafkaMillis(timeout_)),
               "committing the group's offsets in the transaction");
}

absl::Status TransactionalProducer::Commit() {
  return Check(rd_kafka_commit_transaction(rk_.get(), ToKafkaMillis(timeout_)),
               "committing the transaction");
}

absl::Status TransactionalProducer::Abort() {
  return Check(rd_kafka_abort_transaction(rk_.get(), ToKafkaMillis(timeout_)),
               "aborting the transaction");
}

absl::Status TransactionalProducer::Check(rd_kafka_error_t* error,
                                          std::string_view context) {
  last_error_retriable_ = false;
  if (error == nullptr) return absl::OkStatus();
  const bool fatal = rd_kafka_error_is_fatal(error);
  const bool retriable = rd_kafka_error_is_retriable(error) ||
                         rd_kafka_error_txn_requires_abort(error);
  const std::string message =
      absl::StrCat(AbslView(context), ": ", rd_kafka_error_string(error));
  const rd_kafka_resp_err_t code = rd_kafka_error_code(error);
  const bool timed_out = code == RD_KAFKA_RESP_ERR__TIMED_OUT;
  rd_kafka_error_destroy(error);
  if (fatal) {
    fatal_ = true;
    return absl::AbortedError(absl::StrCat(
        message,
        " (fatal: the producer is fenced or refused for good; a new "
        "one is created)"));
  }
  switch (code) {
    case RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION:
    case RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID:
    case RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID:
      // The group no longer counts the member whose offsets these are.
      // (REBALANCE_IN_PROGRESS is not one of these: the member may still
      // hold its partitions in the next generation, and the round is
      // retried.)
      return absl::AbortedError(
          absl::StrCat(message,
                       " (fenced: the consumer group moved on without this "
                       "member)"));
    default:
      break;
  }
  last_error_retriable_ = retriable;
  if (timed_out) return absl::DeadlineExceededError(message);
  return absl::UnavailableError(message);
}

}  // namespace idem::kafka
