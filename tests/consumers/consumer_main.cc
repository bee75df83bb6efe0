// A program that uses idem the way a project that depends on it does: built
// by tests/consumers/find_package/ (an installed idem) and
// tests/consumers/fetch_content/ (idem's sources through FetchContent). Opens
// an engine in a new temporary directory, processes one message twice (the
// second is a duplicate), prints idem's version and, with
// IDEM_CONSUMER_KAFKA, starts and stops librdkafka's mock cluster through
// idem::kafka, with IDEM_CONSUMER_PROMETHEUS counts the message in a
// prometheus::Registry through idem::prometheus, and a delivery loop's
// outbox dead letter through idem::brokers_prometheus, and with
// IDEM_CONSUMER_REDIS, _NATS or _RABBITMQ asks that adapter's Consumer to
// connect to a loopback port where nothing listens, which must fail with
// kUnavailable. Exits 0 on success; removes its directory.
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "idem/engine.h"
#include "idem/version.h"
#ifdef IDEM_CONSUMER_KAFKA
#include "idem/kafka/mock_cluster.h"
#endif
#ifdef IDEM_CONSUMER_REDIS
#include "idem/redis/consumer.h"
#endif
#ifdef IDEM_CONSUMER_NATS
#include "idem/nats/consumer.h"
#endif
#ifdef IDEM_CONSUMER_RABBITMQ
#include "idem/rabbitmq/consumer.h"
#endif
#ifdef IDEM_CONSUMER_PROMETHEUS
#include "idem/brokers/delivery_loop.h"
#include "idem/prometheus/broker_collector.h"
#include "idem/prometheus/collector.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#endif

namespace {

int Fail(const std::string& what, const absl::Status& status) {
  std::cerr << "consumer: " << what << ": " << status << "\n";
  return 1;
}

// A loopback port where nothing listens: connecting is refused at once.
constexpr int kClosedPort = 1;

// `created` is a Consumer::Create result against kClosedPort: it must be
// kUnavailable (the adapter tried to connect).
template <typename T>
int ExpectUnreachable(const char* adapter, const absl::StatusOr<T>& created) {
  if (created.status().code() != absl::StatusCode::kUnavailable) {
    std::cerr << "consumer: " << adapter
              << " against a closed port: " << created.status() << "\n";
    return 1;
  }
  std::cout << "consumer: " << adapter << " found nothing listening\n";
  return 0;
}

#ifdef IDEM_CONSUMER_PROMETHEUS
// 0 if `registry`'s text exposition has the line `line` (then prints
// `what`); else prints the exposition and returns 1.
int ExpectMetric(prometheus::Registry& registry, const std::string& line,
                 const char* what) {
  const std::string text =
      prometheus::TextSerializer().Serialize(registry.Collect());
  if (text.find(line + "\n") == std::string::npos) {
    std::cerr << "consumer: no '" << line << "' in the metrics:\n" << text;
    return 1;
  }
  std::cout << "consumer: " << what << "\n";
  return 0;
}
#endif

int RunBrokers([[maybe_unused]] idem::Engine* engine) {
  int failed = 0;
#ifdef IDEM_CONSUMER_REDIS
  idem::redis::ConsumerOptions redis;
  redis.port = kClosedPort;
  redis.stream = "orders";
  redis.group = "consumer";
  redis.consumer_name = "consumer-1";
  failed |= ExpectUnreachable("idem::redis",
                              idem::redis::Consumer::Create(engine, redis));
#endif
#ifdef IDEM_CONSUMER_NATS
  idem::nats::ConsumerOptions nats;
  nats.url = "nats://127.0.0.1:" + std::to_string(kClosedPort);
  nats.stream = "ORDERS";
  nats.subject = "orders";
  nats.durable = "consumer";
  failed |= ExpectUnreachable("idem::nats",
                              idem::nats::Consumer::Create(engine, nats));
#endif
#ifdef IDEM_CONSUMER_RABBITMQ
  idem::rabbitmq::ConsumerOptions rabbitmq;
  rabbitmq.port = kClosedPort;
  rabbitmq.queue = "orders";
  failed |= ExpectUnreachable(
      "idem::rabbitmq", idem::rabbitmq::Consumer::Create(engine, rabbitmq));
#endif
  return failed;
}

int Run(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<idem::Engine>> engine =
      idem::Engine::Open(dir, idem::Options());
  if (!engine.ok()) return Fail("Open", engine.status());
  auto handler = [](const idem::Message& m, idem::Txn& txn) {
    txn.Put("last", m.payload);
    return absl::OkStatus();
  };
  const idem::Message message = {.id = "msg-1", .payload = "hello"};
  absl::StatusOr<idem::Result> first = (*engine)->Process(message, handler);
  if (!first.ok()) return Fail("Process", first.status());
  absl::StatusOr<idem::Result> again = (*engine)->Process(message, handler);
  if (!again.ok()) return Fail("Process", again.status());
  if (first->outcome != idem::Outcome::kProcessed ||
      again->outcome != idem::Outcome::kDuplicate) {
    std::cerr << "consumer: unexpected outcomes\n";
    return 1;
  }
  if (RunBrokers(engine->get()) != 0) return 1;
#ifdef IDEM_CONSUMER_KAFKA
  absl::StatusOr<std::unique_ptr<idem::kafka::MockCluster>> cluster =
      idem::kafka::MockCluster::Start();
  if (!cluster.ok()) return Fail("MockCluster::Start", cluster.status());
  std::cout << "consumer: idem::kafka mock cluster at "
            << (*cluster)->bootstrap_servers() << "\n";
#endif
#ifdef IDEM_CONSUMER_PROMETHEUS
  prometheus::Registry registry;
  auto collector = idem::PrometheusCollector::Create(engine->get(), registry);
  if (!collector.ok()) return Fail("PrometheusCollector", collector.status());
  if (ExpectMetric(registry, "idem_messages_total{outcome=\"processed\"} 1",
                   "idem::prometheus counted the message") != 0) {
    return 1;
  }
  auto loop_collector =
      idem::PrometheusBrokerCollector::Create(registry, "redis");
  if (!loop_collector.ok()) {
    return Fail("PrometheusBrokerCollector", loop_collector.status());
  }
  idem::brokers::LoopStats loop_stats;
  loop_stats.outbox_dead_lettered = 1;
  (*loop_collector)->Update(loop_stats);
  if (ExpectMetric(registry,
                   "idem_broker_outbox_dead_lettered_total{broker=\"redis\"} 1",
                   "idem::brokers_prometheus counted the dead letter") != 0) {
    return 1;
  }
#endif
  std::cout << "consumer: idem " << IDEM_VERSION
            << ": processed, then duplicate\n";
  return 0;
}

}  // namespace

int main() {
  std::string dir =
      std::filesystem::temp_directory_path() / "idem-consumer-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return 1;
  const int code = Run(dir);
  std::error_code ignored;  // best effort: the result is the exit code
  std::filesystem::remove_all(dir, ignored);
  return code;
}
