// Producer: an idempotent librdkafka producer whose Produce calls wait for
// their records' delivery reports (kafka/delivery.h).

#include "idem/kafka/producer.h"

#include <librdkafka/rdkafka.h>

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "kafka/delivery.h"
#include "kafka/rdkafka_util.h"

namespace idem::kafka {
namespace {

class ProducerImpl final : public Producer {
 public:
  explicit ProducerImpl(HandlePtr rk) : rk_(std::move(rk)) {}
  ~ProducerImpl() override { rd_kafka_flush(rk_.get(), 10000); }

  absl::Status Produce(absl::Span<const OutgoingRecord> records) override {
    size_t delivered = 0;
    return ProduceAndWait(rk_.get(), records, &delivered);
  }

  absl::Status ProduceCounted(absl::Span<const OutgoingRecord> records,
                              size_t* delivered) override {
    return ProduceAndWait(rk_.get(), records, delivered);
  }

 private:
  const HandlePtr rk_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Producer>> Producer::Create(
    const std::string& brokers, const ConfigList& kafka_config,
    Logger* logger) {
  if (brokers.empty()) {
    return absl::InvalidArgumentError("Producer: brokers must not be empty");
  }
  ConfPtr conf(rd_kafka_conf_new());
  ConfigList config = {{"bootstrap.servers", brokers},
                       {"enable.idempotence", "true"},
                       {"delivery.timeout.ms", "30000"},
                       {"linger.ms", "1"}};
  config.insert(config.end(), kafka_config.begin(), kafka_config.end());
  if (absl::Status s = SetConfig(conf.get(), config); !s.ok()) return s;
  EnableDeliveryReports(conf.get());
  if (logger != nullptr) SetLogger(conf.get(), logger);
  absl::StatusOr<HandlePtr> rk = NewHandle(RD_KAFKA_PRODUCER, std::move(conf));
  if (!rk.ok()) return rk.status();
  return std::make_unique<ProducerImpl>(*std::move(rk));
}

}  // namespace idem::kafka
