// A consumer process for the Kafka tests to SIGKILL: consumes <topic> as
// group <group> from <brokers> into the store at <store> with
// test::ApplyRecord (slowed down, so a kill lands inside a batch) until it is
// killed; with <downstream>, with test::ApplyAndForward to that topic (stage
// one of a pipeline; the consumer's relay publishes the outbox), and with
// --transactional in Kafka transactions (ConsumerOptions::
// transactional_output; --ignore_progress runs the broken relay that does
// not read its progress, ConsumerHooks::relay_ignores_progress); with
// --changelog=<changelog>, in changelog mode (a partition-scoped store,
// test::ApplyInPartition; --unfenced runs the broken member without the
// changelog's fence and keeps the outbox it starts with,
// ConsumerHooks::changelog_unfenced and keep_outbox_on_start; --emit=<topic>
// also forwards each record to <topic>, test::ApplyInPartitionAndForward;
// --split_commits runs the broken member whose relay rounds split commits
// and which keeps the outbox it starts with, ConsumerHooks::
// rounds_split_commits and keep_outbox_on_start).
// With --die_at=<step>[:<n>] it SIGKILLs itself the n-th time it reaches
// that step (test::KillPoint): a step of a restore (ConsumerHooks::
// restore_step; for "chunk" the restore applies every 5 records, so that it
// has chunks) or of a transactional relay round (ConsumerHooks::relay_step:
// "commit", "ack", "acked").
// With --workers=<n> (and --ordering=key) it runs handlers on n workers.
// With --die_after=<n> it SIGKILLs itself as its n-th handler call starts
// (counted over all workers): a kill that lands mid-stream however loaded
// the machine is, with the other workers' records in flight.
// With --stall_at=<prefix> (changelog mode) it is a zombie: batches of 6,
// max.poll.interval.ms 4000, and at its first record whose message ID
// starts with <prefix> it creates the file <store>.stalled and waits (at
// most 75 s) until the file <store>.wake exists; once that record's batch
// has ended it exits, 0 if it learned it is out of the group
// (ConsumerStats::membership_lost), 3 if not. --skip_membership_check runs
// the broken member that publishes all the same (ConsumerHooks::
// changelog_skip_membership_check).
// Usage: kafka_consumer_child <brokers> <topic> <group> <store>
//            [<downstream> | --changelog=<changelog>] [--die_at=<step>[:<n>]]
//            [--transactional [--ignore_progress]] [--unfenced]
//            [--emit=<topic>] [--split_commits]
//            [--workers=<n>] [--ordering=key] [--store_record_offsets]
//            [--die_after=<n>]
//            [--stall_at=<prefix> [--skip_membership_check]]

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/time/clock.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "kafka/consumer_hooks.h"
#include "tests/testing/kafka_test_util.h"
#include "tests/testing/kill_point.h"

namespace {

// The flags, which may come anywhere.
struct ChildFlags {
  int workers = 1;
  bool key_ordering = false;
  bool store_record_offsets = false;
  bool transactional = false;
  bool ignore_progress = false;
  bool unfenced = false;
  std::string emit_to;  // changelog mode: forward each record there
  bool split_commits = false;
  std::string stall_at;
  bool skip_membership_check = false;
  idem::test::KillPoint kill_point;
  int die_after = 0;  // handler calls; 0: never
};

// Moves the flags of argv into `flags`, leaving the positional arguments;
// false (having said why) for a bad --die_at.
bool TakeFlags(int& argc, char** argv, ChildFlags& flags) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.starts_with("--workers=")) {
      flags.workers = std::atoi(arg.c_str() + 10);
    } else if (arg == "--ordering=key") {
      flags.key_ordering = true;
    } else if (arg == "--store_record_offsets") {
      flags.store_record_offsets = true;
    } else if (arg == "--transactional") {
      flags.transactional = true;
    } else if (arg == "--ignore_progress") {
      flags.ignore_progress = true;
    } else if (arg == "--unfenced") {
      flags.unfenced = true;
    } else if (arg.starts_with("--emit=")) {
      flags.emit_to = arg.substr(7);
    } else if (arg == "--split_commits") {
      flags.split_commits = true;
    } else if (arg.starts_with("--stall_at=")) {
      flags.stall_at = arg.substr(11);
    } else if (arg.starts_with("--die_after=")) {
      flags.die_after = std::atoi(arg.c_str() + 12);
    } else if (arg == "--skip_membership_check") {
      flags.skip_membership_check = true;
    } else if (arg.starts_with("--die_at=")) {
      absl::StatusOr<idem::test::KillPoint> parsed =
          idem::test::KillPoint::Parse(arg.substr(9));
      if (!parsed.ok()) {
        std::fprintf(stderr, "%s\n", parsed.status().ToString().c_str());
        return false;
      }
      flags.kill_point = *parsed;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return true;
}

// The zombie of --stall_at: consumes until the batch with its first record
// whose ID starts with `prefix` has ended, stalling at that record until
// <store>.wake exists; with `emit_to`, forwarding each record there. Its
// exit code.
int RunZombie(idem::kafka::Consumer& consumer, const std::string& store,
              const std::string& prefix, const std::string& emit_to) {
  bool stalled = false;
  auto stalling = [&](const idem::kafka::Record& record, idem::Txn& txn) {
    if (!stalled && record.id.starts_with(prefix)) {
      stalled = true;
      std::ofstream(store + ".stalled").close();
      idem::test::WaitUntil(
          [&] { return std::filesystem::exists(store + ".wake"); },
          absl::Seconds(75));
    }
    if (!emit_to.empty()) {
      return idem::test::ApplyInPartitionAndForward(record, txn, emit_to);
    }
    return idem::test::ApplyInPartition(record, txn);
  };
  const absl::Time deadline = absl::Now() + absl::Seconds(100);
  while (!stalled && absl::Now() < deadline) {
    // A batch that fails (the member is out of the group) is what a zombie
    // expects; it only has to end.
    consumer.PollBatch(stalling).status().IgnoreError();
  }
  const bool lost = consumer.stats().membership_lost > 0;
  consumer.Close().IgnoreError();  // out of the group: nothing to leave
  return lost ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  ChildFlags flags;
  if (!TakeFlags(argc, argv, flags)) return 2;
  if (argc < 5 || argc > 6) {
    std::fprintf(stderr,
                 "usage: %s <brokers> <topic> <group> <store> "
                 "[<downstream> | --changelog=<changelog>] "
                 "[--die_at=<step>[:<n>]] [--transactional]\n",
                 argv[0]);
    return 2;
  }
  std::string downstream = argc == 6 ? argv[5] : "";
  std::string changelog;
  idem::Options engine_options;
  if (downstream.starts_with("--changelog=")) {
    changelog = downstream.substr(12);
    downstream.clear();
    engine_options.dedupe_scope = idem::DedupeScope::kPartition;
  }
  idem::kafka::ConsumerHooks hooks;
  hooks.restore_step = [&flags](const char* step) {
    flags.kill_point.Reach(step);
  };
  hooks.relay_step = hooks.restore_step;
  if (flags.kill_point.step() == "chunk") hooks.restore_chunk_records = 5;
  hooks.store_record_offsets = flags.store_record_offsets;
  hooks.relay_ignores_progress = flags.ignore_progress;
  // Plain mode with --transactional: every run of a test's member uses one
  // store (ConsumerHooks::plain_transactional_output).
  hooks.plain_transactional_output = changelog.empty();
  hooks.changelog_skip_membership_check = flags.skip_membership_check;
  hooks.changelog_unfenced = flags.unfenced;
  hooks.rounds_split_commits = flags.split_commits;
  hooks.keep_outbox_on_start = flags.split_commits || flags.unfenced;
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
  options.transactional_output = flags.transactional;
  options.workers = flags.workers;
  if (flags.key_ordering) options.ordering = idem::kafka::Ordering::kKey;
  options.kafka_config = {
      {"session.timeout.ms", std::to_string(idem::test::kTestSessionTimeoutMs)},
      {"heartbeat.interval.ms", "100"},
      {"log_level", "3"}};
  if (!flags.stall_at.empty()) {
    options.max_batch = 6;
    options.kafka_config.emplace_back("max.poll.interval.ms", "4000");
    // Below max.poll.interval.ms, as Consumer::Create requires.
    options.transaction_timeout = absl::Seconds(2);
  }
  auto consumer =
      idem::kafka::CreateConsumerWithHooks(engine->get(), options, hooks);
  if (!consumer.ok()) {
    std::fprintf(stderr, "%s\n", consumer.status().ToString().c_str());
    return 1;
  }
  if (!flags.stall_at.empty()) {
    return RunZombie(**consumer, argv[4], flags.stall_at, flags.emit_to);
  }
  const int workers = flags.workers;
  std::atomic<int> handler_calls{0};
  absl::Status status = (*consumer)->Run([&](const idem::kafka::Record& record,
                                             idem::Txn& txn) {
    if (handler_calls.fetch_add(1) + 1 == flags.die_after) {
      kill(getpid(), SIGKILL);
    }
    // With workers, records wait 1 to 4 ms, so that they finish (and
    // commit) out of offset order.
    absl::SleepFor(absl::Milliseconds(workers > 1 ? 1 + record.offset % 4 : 2));
    if (!changelog.empty() && !flags.emit_to.empty()) {
      return idem::test::ApplyInPartitionAndForward(record, txn, flags.emit_to);
    }
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
