#include "idem/rabbitmq/consumer.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "brokers/loop_consumer.h"
#include "brokers/option_checks.h"
#include "brokers/tls_files.h"
#include "rabbitmq/consumer_hooks.h"
#include "rabbitmq/queue_broker.h"

namespace idem::rabbitmq {
namespace {

absl::Status ValidateOptions(const ConsumerOptions& options) {
  auto invalid = [](std::string_view what) {
    return brokers::InvalidOption("rabbitmq", what);
  };
  if (const std::string problem =
          brokers::AddressProblem(options.host, options.port);
      !problem.empty()) {
    return invalid(problem);
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
  if (const std::string problem = brokers::ConnectionTimesProblem(options);
      !problem.empty()) {
    return invalid(problem);
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
};

}  // namespace

absl::StatusOr<std::unique_ptr<Consumer>> CreateConsumerWithHooks(
    Engine* engine, const ConsumerOptions& options,
    const brokers::LoopHooks& hooks, const RabbitMqHooks& rabbitmq_hooks) {
  return brokers::CreateLoopConsumer<Consumer, ConsumerImpl>(
      engine, options, hooks, rabbitmq_hooks, ValidateOptions);
}

absl::StatusOr<std::unique_ptr<Consumer>> Consumer::Create(
    Engine* engine, const ConsumerOptions& options) {
  return CreateConsumerWithHooks(engine, options, {});
}

}  // namespace idem::rabbitmq
