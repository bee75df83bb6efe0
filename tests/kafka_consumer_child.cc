// A consumer process for tests/kafka_consumer_test.cc to SIGKILL: consumes
// <topic> as group <group> from <brokers> into the store at <store> with
// test::ApplyRecord (slowed down, so a kill lands inside a batch) until
// it is killed.
// Usage: kafka_consumer_child <brokers> <topic> <group> <store>

#include <cstdio>

#include "absl/time/clock.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "tests/testing/kafka_test_util.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s <brokers> <topic> <group> <store>\n",
                 argv[0]);
    return 2;
  }
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
      (*consumer)->Run([](const idem::kafka::Record& record, idem::Txn& txn) {
        absl::SleepFor(absl::Milliseconds(2));
        return idem::test::ApplyRecord(record, txn);
      });
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return 1;
}
