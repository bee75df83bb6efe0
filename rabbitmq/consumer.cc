#include "idem/rabbitmq/consumer.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "brokers/loop_consumer.h"
#include "brokers/tls_files.h"
#include "rabbitmq/consumer_hooks.h"
#include "rabbitmq/queue_broker.h"

namespace idem::rabbitmq {
namespace {

absl::Status ValidateOptions(const ConsumerOptions& options) {
  auto invalid = [](std::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("rabbitmq::ConsumerOptions::",
                     absl::string_view(what.data(), what.size())));
  };
  if (options.host.empty()) return invalid("host is required");
  if (options.port < 1 || options.port > 65535) {
    return invalid("port must be in [1, 65535]");
  }
  if (options.queue.empty()) return invalid("queue is required");
  // A TLS consumer names the CA it trusts (ConsumerOptions::tls).
  if (const std::string problem = brokers::TlsFilesProblem(
          options.tls, options.tls_ca_file, options.tls_cert_file,
          options.tls_key_file, /*ca_required=*/true);
      !problem.empty()) {
    return invalid(problem);
  }
  if (absl::Status s = CheckQueueName(options.queue); !s.ok()) {
    return invalid(absl::StrCat("queue: ", s.message()));
  }
  if (!options.delivery.dead_letter_destination.empty()) {
    if (absl::Status s =
            CheckQueueName(options.delivery.dead_letter_destination);
        !s.ok()) {
      return invalid(
          absl::StrCat("delivery.dead_letter_destination: ", s.message()));
    }
  }
  if (options.prefetch != 0 && (options.prefetch < options.delivery.max_batch ||
                                options.prefetch > kMaxPrefetch)) {
    return invalid("prefetch must be 0 or in [delivery.max_batch, 65535]");
  }
  if (options.heartbeat < absl::ZeroDuration() ||
      options.heartbeat >= absl::Seconds(65536)) {
    return invalid("heartbeat must be in [0, 65536 s)");
  }
  if (options.queue_arguments.message_ttl_ms < 0) {
    return invalid("queue_arguments.message_ttl_ms must be >= 0");
  }
  if (options.io_timeout <= absl::ZeroDuration() ||
      options.io_timeout == absl::InfiniteDuration()) {
    return invalid("io_timeout must be > 0 and finite");
  }
  if (options.reconnect_backoff < absl::ZeroDuration() ||
      options.reconnect_backoff == absl::InfiniteDuration()) {
    return invalid("reconnect_backoff must be >= 0 and finite");
  }
  return absl::OkStatus();
}

class ConsumerImpl
    : public brokers::LoopConsumer<Consumer, QueueBroker, ConsumerOptions> {
 public:
  using LoopConsumer::LoopConsumer;

  absl::Status Start() { return broker_.Subscribe(); }

  // Drops the consuming connection for the hooks to apply to the next
  // one (nothing is held between batches).
  void set_hooks(const RabbitMqHooks& hooks) {
    if (!hooks.no_cancel_notify) return;
    broker_.set_ask_cancel_notify(false);
    broker_.CloseConsuming();
  }

  ConsumerStats stats() const override {
    ConsumerStats stats = LoopStatsAs<ConsumerStats>();
    stats.redelivered = broker_.redelivered();
    stats.connects = broker_.connects();
    stats.cancelled = broker_.cancelled();
    return stats;
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Consumer>> CreateConsumerWithHooks(
    Engine* engine, const ConsumerOptions& options,
    const brokers::LoopHooks& hooks, const RabbitMqHooks& rabbitmq_hooks) {
  absl::StatusOr<std::unique_ptr<Consumer>> consumer =
      brokers::CreateLoopConsumer<Consumer, ConsumerImpl>(
          engine, options, hooks, ValidateOptions);
  if (consumer.ok()) {
    static_cast<ConsumerImpl&>(**consumer).set_hooks(rabbitmq_hooks);
  }
  return consumer;
}

absl::StatusOr<std::unique_ptr<Consumer>> Consumer::Create(
    Engine* engine, const ConsumerOptions& options) {
  return CreateConsumerWithHooks(engine, options, {});
}

}  // namespace idem::rabbitmq
