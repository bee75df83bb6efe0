// A consumer process for the Kafka tests to SIGKILL: consumes <topic> as
// group <group> from <brokers> into the store at <store> with
// test::ApplyRecord (slowed down, so a kill lands inside a batch) until it is
// killed; with <downstream>, with test::ApplyAndForward to that topic (stage
// one of a pipeline; the consumer's relay publishes the outbox).
// Usage: kafka_consumer_child <brokers> <topic> <group> <store> [<downstream>]

#include <cstdio>

#include "absl/time/clock.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "tests/testing/kafka_test_util.h"

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    std::fprintf(stderr,
                 "usage: %s <brokers> <topic> <group> <store> [<downstream>]\n",
                 argv[0]);
    return 2;
  }
  const std::string downstream = argc == 6 ? argv[5] : "";
  auto engine = idem::Engine::Open(argv[4], idem::Options());
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 1;
  }
  idem::kafka::ConsumerOptions options;
  options.brokers = argv[1];
  options.topics = {argv[2]};
  options.group_id = argv[3];
  options.max_batch = 25;
  options.kafka_config = {{"session.timeout.ms", "3000"},
                          {"heartbeat.interval.ms", "100"},
                          {"log_level", "3"}};
  auto consumer = idem::kafka::Consumer::Create(engine->get(), options);
  if (!consumer.ok()) {
    std::fprintf(stderr, "%s\n", consumer.status().ToString().c_str());
    return 1;
  }
  absl::Status status =
      (*consumer)->Run([&](const idem::kafka::Record& record, idem::Txn& txn) {
        absl::SleepFor(absl::Milliseconds(2));
        if (!downstream.empty()) {
          return idem::test::ApplyAndForward(record, txn, downstream);
        }
        return idem::test::ApplyRecord(record, txn);
      });
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return 1;
}
