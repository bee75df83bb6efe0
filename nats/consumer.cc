#include "idem/nats/consumer.h"

#include <atomic>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "brokers/run_until_stopped.h"
#include "nats/consumer_hooks.h"
#include "nats/jetstream_broker.h"

namespace idem::nats {
namespace {

absl::Status ValidateOptions(const ConsumerOptions& options) {
  auto invalid = [](std::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("nats::ConsumerOptions::",
                     absl::string_view(what.data(), what.size())));
  };
  auto positive = [](absl::Duration d) {
    return d > absl::ZeroDuration() && d != absl::InfiniteDuration();
  };
  if (options.url.empty()) return invalid("url is required");
  if (options.stream.empty()) return invalid("stream is required");
  if (options.subject.empty()) return invalid("subject is required");
  if (options.durable.empty()) return invalid("durable is required");
  if (!positive(options.duplicate_window)) {
    return invalid("duplicate_window must be > 0 and finite");
  }
  if (!positive(options.ack_wait)) {
    return invalid("ack_wait must be > 0 and finite");
  }
  if (!positive(options.io_timeout)) {
    return invalid("io_timeout must be > 0 and finite");
  }
  if (options.reconnect_backoff < absl::ZeroDuration() ||
      options.reconnect_backoff == absl::InfiniteDuration()) {
    return invalid("reconnect_backoff must be >= 0 and finite");
  }
  return brokers::DeliveryLoop::Validate(options.delivery);
}

class ConsumerImpl : public Consumer {
 public:
  ConsumerImpl(Engine* engine, const ConsumerOptions& options,
               const brokers::LoopHooks& hooks)
      : engine_(engine),
        options_(options),
        broker_(options_),
        loop_(engine, &broker_, options_.delivery, hooks) {}

  // Binds the durable consumer, created from the engine's offset + 1 when
  // it has one for the stream.
  absl::Status Start() {
    absl::StatusOr<std::optional<int64_t>> offset =
        engine_->CommittedOffset(options_.stream, 0);
    if (!offset.ok()) return offset.status();
    std::optional<uint64_t> start;
    if (offset->has_value()) start = static_cast<uint64_t>(**offset) + 1;
    return broker_.Start(start);
  }

  absl::StatusOr<brokers::BatchReport> PollBatch(Handler handler) override {
    if (closed_) return absl::FailedPreconditionError("consumer is closed");
    return loop_.PollBatch(handler);
  }

  absl::Status Run(Handler handler) override {
    return brokers::RunUntilStopped([&] { return PollBatch(handler); }, stop_,
                                    options_.reconnect_backoff);
  }

  void Stop() override { stop_.store(true, std::memory_order_relaxed); }

  absl::Status Close() override {
    closed_ = true;
    broker_.Stop();
    return absl::OkStatus();
  }

  ConsumerStats stats() const override {
    ConsumerStats stats;
    static_cast<brokers::LoopStats&>(stats) = loop_.stats();
    stats.redelivered = broker_.redelivered();
    return stats;
  }

 private:
  Engine* const engine_;
  const ConsumerOptions options_;
  JetStreamBroker broker_;
  brokers::DeliveryLoop loop_;
  std::atomic<bool> stop_{false};
  bool closed_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Consumer>> CreateConsumerWithHooks(
    Engine* engine, const ConsumerOptions& options,
    const brokers::LoopHooks& hooks) {
  if (engine == nullptr) return absl::InvalidArgumentError("engine is null");
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  auto consumer = std::make_unique<ConsumerImpl>(engine, options, hooks);
  if (absl::Status s = consumer->Start(); !s.ok()) return s;
  return consumer;
}

absl::StatusOr<std::unique_ptr<Consumer>> Consumer::Create(
    Engine* engine, const ConsumerOptions& options) {
  return CreateConsumerWithHooks(engine, options, {});
}

}  // namespace idem::nats
