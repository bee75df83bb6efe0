#include "cli/broker_demo_brokers.h"

#include <utility>

#include "absl/strings/str_cat.h"

#ifdef IDEM_HAVE_REDIS
#include "idem/redis/consumer.h"
#include "redis/connection.h"
#include "redis/consumer_hooks.h"
#include "servers/redis_server.h"
#endif
#ifdef IDEM_HAVE_NATS
#include "idem/nats/consumer.h"
#include "nats/consumer_hooks.h"
#include "servers/nats_server.h"
#endif
#ifdef IDEM_HAVE_RABBITMQ
#include "idem/rabbitmq/consumer.h"
#include "rabbitmq/consumer_hooks.h"
#include "servers/rabbitmq_server.h"
#endif

namespace idem::cli {
namespace {

// The header, field or property every message carries its ID in.
constexpr char kIdName[] = "message-id";

// The delivery loop's options of every demo consumer.
brokers::LoopOptions DemoDelivery(int batch) {
  brokers::LoopOptions options;
  options.max_batch = batch;
  options.receive_timeout = absl::Milliseconds(50);
  options.retry_backoff = absl::Milliseconds(10);
  return options;
}

// An adapter's Consumer as a DemoConsumer; `redelivered` reads its
// redeliveries from its stats.
template <typename Consumer, typename Redelivered>
class AdaptedConsumer : public DemoConsumer {
 public:
  AdaptedConsumer(std::unique_ptr<Consumer> consumer, Redelivered redelivered)
      : consumer_(std::move(consumer)), redelivered_(redelivered) {}

  absl::StatusOr<brokers::BatchReport> PollBatch(
      brokers::Handler handler) override {
    return consumer_->PollBatch(handler);
  }
  absl::Status Run(brokers::Handler handler) override {
    return consumer_->Run(handler);
  }
  DemoConsumerStats stats() const override {
    const auto stats = consumer_->stats();
    DemoConsumerStats out;
    out.loop = stats;
    out.redelivered = redelivered_(stats);
    return out;
  }

 private:
  std::unique_ptr<Consumer> consumer_;
  Redelivered redelivered_;
};

template <typename Consumer, typename Redelivered>
absl::StatusOr<std::unique_ptr<DemoConsumer>> Adapt(
    absl::StatusOr<std::unique_ptr<Consumer>> consumer,
    Redelivered redelivered) {
  if (!consumer.ok()) return consumer.status();
  return std::unique_ptr<DemoConsumer>(
      new AdaptedConsumer<Consumer, Redelivered>(*std::move(consumer),
                                                 redelivered));
}

#ifdef IDEM_HAVE_REDIS
// A stream read by group "demo"; a consumer of another name takes a dead
// one's pending entries over (XAUTOCLAIM) once they are idle for 300 ms.
class RedisDemoBroker : public DemoBroker {
 public:
  explicit RedisDemoBroker(DemoEndpoint endpoint)
      : DemoBroker(std::move(endpoint)) {}

  absl::StatusOr<std::unique_ptr<servers::ServerProcess>> LaunchServer()
      override {
    return servers::StartRedisServer();
  }

  absl::Status Publish(const DemoRecord& record) override {
    if (producer_ == nullptr) {
      producer_ = std::make_unique<redis::Connection>(
          endpoint_.host, endpoint_.port, absl::Seconds(5));
    }
    return producer_
        ->Command({"XADD", endpoint_.source, "*", kIdName, record.id, "payload",
                   record.payload})
        .status();
  }

  absl::StatusOr<std::unique_ptr<DemoConsumer>> Consume(
      Engine* engine, const std::string& consumer_name, int batch,
      const brokers::LoopHooks& hooks) override {
    redis::ConsumerOptions options;
    options.host = endpoint_.host;
    options.port = endpoint_.port;
    options.stream = endpoint_.source;
    options.group = "demo";
    options.consumer_name = consumer_name;
    options.id_field = kIdName;
    options.claim_idle = RedeliveryDelay();
    options.claim_interval = absl::Milliseconds(100);
    options.delivery = DemoDelivery(batch);
    return Adapt(
        redis::CreateConsumerWithHooks(engine, options, hooks),
        [](const redis::ConsumerStats& s) { return s.claimed + s.reclaimed; });
  }

  absl::Duration RedeliveryDelay() const override {
    return absl::Milliseconds(300);
  }

 private:
  std::unique_ptr<redis::Connection> producer_;
};
#endif  // IDEM_HAVE_REDIS

#ifdef IDEM_HAVE_NATS
// A JetStream stream capturing "<source>.payments", read by the durable
// pull consumer "demo" with AckWait 1 s. IDs travel in the message-id
// header, not Nats-Msg-Id, so the stream's duplicate window leaves the
// producer's duplicates for idem to catch.
class NatsDemoBroker : public DemoBroker {
 public:
  explicit NatsDemoBroker(DemoEndpoint endpoint)
      : DemoBroker(std::move(endpoint)) {}

  absl::StatusOr<std::unique_ptr<servers::ServerProcess>> LaunchServer()
      override {
    return servers::StartNatsServer();
  }

  absl::Status Publish(const DemoRecord& record) override {
    if (producer_ == nullptr) {
      absl::StatusOr<std::unique_ptr<servers::NatsClient>> client =
          servers::NatsClient::Connect(Url());
      if (!client.ok()) return client.status();
      producer_ = *std::move(client);
    }
    return producer_->Publish(Subject(), record.payload,
                              {{kIdName, record.id}});
  }

  absl::StatusOr<std::unique_ptr<DemoConsumer>> Consume(
      Engine* engine, const std::string& /*consumer_name*/, int batch,
      const brokers::LoopHooks& hooks) override {
    nats::ConsumerOptions options;
    options.url = Url();
    options.stream = endpoint_.source;
    options.subject = Subject();
    options.durable = "demo";
    options.id_header = kIdName;
    options.ack_wait = RedeliveryDelay();
    options.delivery = DemoDelivery(batch);
    return Adapt(nats::CreateConsumerWithHooks(engine, options, hooks),
                 [](const nats::ConsumerStats& s) { return s.redelivered; });
  }

  absl::Duration RedeliveryDelay() const override { return absl::Seconds(1); }

 private:
  std::string Url() const {
    return absl::StrCat("nats://", endpoint_.host, ":", endpoint_.port);
  }
  std::string Subject() const { return endpoint_.source + ".payments"; }

  std::unique_ptr<servers::NatsClient> producer_;
};
#endif  // IDEM_HAVE_NATS

#ifdef IDEM_HAVE_RABBITMQ
// A durable queue; what a consumer held unacknowledged is requeued when its
// connection drops.
class RabbitMqDemoBroker : public DemoBroker {
 public:
  explicit RabbitMqDemoBroker(DemoEndpoint endpoint)
      : DemoBroker(std::move(endpoint)) {}

  absl::StatusOr<std::unique_ptr<servers::ServerProcess>> LaunchServer()
      override {
    return servers::StartRabbitMqServer();
  }

  absl::Status Publish(const DemoRecord& record) override {
    if (producer_ == nullptr) {
      producer_ = std::make_unique<servers::RabbitMqClient>(endpoint_.host,
                                                            endpoint_.port);
    }
    return producer_->Publish(endpoint_.source, record.payload, record.id);
  }

  absl::StatusOr<std::unique_ptr<DemoConsumer>> Consume(
      Engine* engine, const std::string& /*consumer_name*/, int batch,
      const brokers::LoopHooks& hooks) override {
    rabbitmq::ConsumerOptions options;
    options.host = endpoint_.host;
    options.port = endpoint_.port;
    options.queue = endpoint_.source;
    options.declare_queues = true;  // the demo's own queues
    options.delivery = DemoDelivery(batch);
    return Adapt(
        rabbitmq::CreateConsumerWithHooks(engine, options, hooks),
        [](const rabbitmq::ConsumerStats& s) { return s.redelivered; });
  }

  absl::Duration RedeliveryDelay() const override {
    return absl::ZeroDuration();
  }

 private:
  std::unique_ptr<servers::RabbitMqClient> producer_;
};
#endif  // IDEM_HAVE_RABBITMQ

}  // namespace

absl::Status DemoBroker::Produce(const std::vector<DemoRecord>& records) {
  for (const DemoRecord& record : records) {
    if (absl::Status s = Publish(record); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status DemoBroker::StartServer() {
  absl::StatusOr<std::unique_ptr<servers::ServerProcess>> server =
      LaunchServer();
  if (!server.ok()) return server.status();
  server_ = *std::move(server);
  endpoint_.host = "127.0.0.1";
  endpoint_.port = server_->port();
  return absl::OkStatus();
}

std::vector<std::string> DemoBroker::Names() {
  std::vector<std::string> names;
#ifdef IDEM_HAVE_REDIS
  names.push_back("redis");
#endif
#ifdef IDEM_HAVE_NATS
  names.push_back("nats");
#endif
#ifdef IDEM_HAVE_RABBITMQ
  names.push_back("rabbitmq");
#endif
  return names;
}

int DemoBroker::DefaultPort(const std::string& name) {
  if (name == "redis") return 6379;
  if (name == "nats") return 4222;
  return 5672;
}

absl::StatusOr<std::unique_ptr<DemoBroker>> DemoBroker::Create(
    const std::string& name, const DemoEndpoint& endpoint) {
#ifdef IDEM_HAVE_REDIS
  if (name == "redis") return std::make_unique<RedisDemoBroker>(endpoint);
#endif
#ifdef IDEM_HAVE_NATS
  if (name == "nats") return std::make_unique<NatsDemoBroker>(endpoint);
#endif
#ifdef IDEM_HAVE_RABBITMQ
  if (name == "rabbitmq") return std::make_unique<RabbitMqDemoBroker>(endpoint);
#endif
  return absl::InvalidArgumentError(
      absl::StrCat("--broker: '", name, "' is not a broker this build has"));
}

}  // namespace idem::cli
