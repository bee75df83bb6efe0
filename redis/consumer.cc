#include "idem/redis/consumer.h"

#include <string>
#include <utility>

#include "brokers/loop_consumer.h"
#include "brokers/option_checks.h"
#include "brokers/tls_files.h"
#include "redis/consumer_hooks.h"
#include "redis/stream_broker.h"

namespace idem::redis {
namespace {

absl::Status ValidateOptions(const ConsumerOptions& options) {
  auto invalid = [](std::string_view what) {
    return brokers::InvalidOption("redis", what);
  };
  if (const std::string problem =
          brokers::AddressProblem(options.host, options.port);
      !problem.empty()) {
    return invalid(problem);
  }
  if (const std::string problem = brokers::TlsFilesProblem(
          options.tls, options.tls_ca_file, options.tls_cert_file,
          options.tls_key_file, /*ca_required=*/false);
      !problem.empty()) {
    return invalid(problem);
  }
  if (options.stream.empty()) return invalid("stream is required");
  if (options.group.empty()) return invalid("group is required");
  if (options.consumer_name.empty()) {
    return invalid("consumer_name is required");
  }
  if (options.payload_field.empty()) {
    return invalid("payload_field must not be empty");
  }
  if (options.output_max_len < 0) return invalid("output_max_len must be >= 0");
  if (options.output_max_age < absl::ZeroDuration() ||
      options.output_max_age == absl::InfiniteDuration()) {
    return invalid("output_max_age must be >= 0 and finite");
  }
  if (options.output_max_age > absl::ZeroDuration() &&
      options.output_max_len > 0) {
    return invalid("output_max_len and output_max_age are exclusive");
  }
  if (options.claim_idle < absl::ZeroDuration() ||
      options.claim_idle == absl::InfiniteDuration()) {
    return invalid("claim_idle must be >= 0 and finite");
  }
  if (options.claim_interval <= absl::ZeroDuration() ||
      options.claim_interval == absl::InfiniteDuration()) {
    return invalid("claim_interval must be > 0 and finite");
  }
  if (const std::string problem = brokers::ConnectionTimesProblem(options);
      !problem.empty()) {
    return invalid(problem);
  }
  return absl::OkStatus();
}

class ConsumerImpl
    : public brokers::LoopConsumer<Consumer, StreamBroker, ConsumerOptions> {
 public:
  using LoopConsumer::LoopConsumer;

  absl::Status Start() {
    if (!options_.create_group) return broker_.CheckGroup();
    return broker_.CreateGroup();
  }

  void set_hooks(const RedisHooks& hooks) {
    broker_.set_let_sigpipe_through(hooks.let_sigpipe_through);
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Consumer>> CreateConsumerWithHooks(
    Engine* engine, const ConsumerOptions& options,
    const brokers::LoopHooks& hooks, const RedisHooks& redis_hooks) {
  return brokers::CreateLoopConsumer<Consumer, ConsumerImpl>(
      engine, options, hooks, redis_hooks, ValidateOptions);
}

absl::StatusOr<std::unique_ptr<Consumer>> Consumer::Create(
    Engine* engine, const ConsumerOptions& options) {
  return CreateConsumerWithHooks(engine, options, {});
}

}  // namespace idem::redis
