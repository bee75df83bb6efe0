// A consumer process for the Kafka tests to SIGKILL: consumes <topic> as
// group <group> from <brokers> into the store at <store> with
// test::ApplyRecord (slowed down, so a kill lands inside a batch) until it is
// killed; with <downstream>, with test::ApplyAndForward to that topic (stage
// one of a pipeline; the consumer's relay publishes the outbox); with
// --changelog=<changelog>, in changelog mode (a partition-scoped store,
// test::ApplyInPartition), and with --die_at=<step> it SIGKILLs itself at
// that step of a restore (ConsumerHooks::restore_step; for "chunk" the
// restore applies every 5 records, so that it has chunks).
// With --workers=<n> (and --ordering=key) it runs handlers on n workers.
// Usage: kafka_consumer_child <brokers> <topic> <group> <store>
//            [<downstream> | --changelog=<changelog> [--die_at=<step>]]
//            [--workers=<n>] [--ordering=key] [--store_record_offsets]

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/time/clock.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "kafka/consumer_hooks.h"
#include "tests/testing/kafka_test_util.h"

int main(int argc, char** argv) {
  // Worker flags, anywhere: --workers=<n>, --ordering=key and the broken
  // variant --store_record_offsets (ConsumerHooks::store_record_offsets).
  int workers = 1;
  bool key_ordering = false;
  bool store_record_offsets = false;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.starts_with("--workers=")) {
      workers = std::atoi(arg.c_str() + 10);
    } else if (arg == "--ordering=key") {
      key_ordering = true;
    } else if (arg == "--store_record_offsets") {
      store_record_offsets = true;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  if (argc < 5 || argc > 7) {
    std::fprintf(stderr,
                 "usage: %s <brokers> <topic> <group> <store> "
                 "[<downstream> | --changelog=<changelog> [--die_at=<step>]]\n",
                 argv[0]);
    return 2;
  }
  std::string downstream = argc >= 6 ? argv[5] : "";
  std::string changelog;
  std::string die_at = argc == 7 ? argv[6] : "";
  idem::Options engine_options;
  if (downstream.starts_with("--changelog=")) {
    changelog = downstream.substr(12);
    downstream.clear();
    engine_options.dedupe_scope = idem::DedupeScope::kPartition;
  }
  if (!die_at.starts_with("--die_at=")) die_at.clear();
  if (!die_at.empty()) die_at = die_at.substr(9);
  idem::kafka::ConsumerHooks hooks;
  hooks.restore_step = [&die_at](const char* step) {
    if (die_at == step) raise(SIGKILL);
  };
  if (die_at == "chunk") hooks.restore_chunk_records = 5;
  hooks.store_record_offsets = store_record_offsets;
  auto engine = idem::Engine::Open(argv[4], engine_options);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 1;
  }
  idem::kafka::ConsumerOptions options;
  options.brokers = argv[1];
  options.topics = {argv[2]};
  options.group_id = argv[3];
  options.max_batch = 25;
  options.changelog_topic = changelog;
  options.workers = workers;
  if (key_ordering) options.ordering = idem::kafka::Ordering::kKey;
  options.kafka_config = {{"session.timeout.ms", "3000"},
                          {"heartbeat.interval.ms", "100"},
                          {"log_level", "3"}};
  auto consumer =
      idem::kafka::CreateConsumerWithHooks(engine->get(), options, hooks);
  if (!consumer.ok()) {
    std::fprintf(stderr, "%s\n", consumer.status().ToString().c_str());
    return 1;
  }
  absl::Status status = (*consumer)->Run([&](const idem::kafka::Record& record,
                                             idem::Txn& txn) {
    // With workers, records wait 1 to 4 ms, so that they finish (and
    // commit) out of offset order.
    absl::SleepFor(absl::Milliseconds(workers > 1 ? 1 + record.offset % 4 : 2));
    if (!changelog.empty()) {
      return idem::test::ApplyInPartition(record, txn);
    }
    if (!downstream.empty()) {
      return idem::test::ApplyAndForward(record, txn, downstream);
    }
    return idem::test::ApplyRecord(record, txn);
  });
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return 1;
}
