// A transactional outbox relay process for the Kafka tests to kill: drains
// the outbox of the store at <store> to <brokers> with
// OutboxRelayOptions::transactional_id <id> (progress topic
// "idem.relay.progress"), rounds of 10 entries, and exits 0 once the outbox
// is empty. With --die_at=<step>:<round> it SIGKILLs itself at that step of
// that round (counted from 1, test::KillPoint): "commit" (the round's
// records produced, its transaction not committed), "ack" (committed, not
// acknowledged) or "acked" (acknowledged, before the next round).
// --ignore_progress runs the broken variant that does not read its progress
// (OutboxRelayHooks::ignore_progress).
// Usage: kafka_relay_child <brokers> <store> <id>
//            [--die_at=<step>:<round>] [--ignore_progress]

#include <cstdio>
#include <cstdlib>
#include <string>

#include "idem/engine.h"
#include "idem/kafka/outbox_relay.h"
#include "kafka/outbox_relay_hooks.h"
#include "tests/testing/kill_point.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: %s <brokers> <store> <id> [--die_at=<step>:<round>] "
                 "[--ignore_progress]\n",
                 argv[0]);
    return 2;
  }
  idem::test::KillPoint kill_point;
  idem::kafka::OutboxRelayHooks hooks;
  for (int i = 4; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.starts_with("--die_at=")) {
      absl::StatusOr<idem::test::KillPoint> parsed =
          idem::test::KillPoint::Parse(arg.substr(9));
      if (!parsed.ok()) {
        std::fprintf(stderr, "%s\n", parsed.status().ToString().c_str());
        return 2;
      }
      kill_point = *parsed;
    } else if (arg == "--ignore_progress") {
      hooks.ignore_progress = true;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", arg.c_str());
      return 2;
    }
  }
  hooks.before_transaction_commit = [&] {
    kill_point.Reach("commit");
    return absl::OkStatus();
  };
  hooks.between_publish_and_ack = [&] {
    kill_point.Reach("ack");
    return absl::OkStatus();
  };
  auto engine = idem::Engine::Open(argv[2], idem::Options());
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 1;
  }
  idem::kafka::OutboxRelayOptions options;
  options.brokers = argv[1];
  options.transactional_id = argv[3];
  options.max_batch = 10;
  options.kafka_config = {{"log_level", "3"}};
  auto relay =
      idem::kafka::CreateOutboxRelayWithHooks(engine->get(), options, hooks);
  if (!relay.ok()) {
    std::fprintf(stderr, "%s\n", relay.status().ToString().c_str());
    return 1;
  }
  while (true) {
    absl::StatusOr<idem::kafka::RelayReport> done = (*relay)->RelayOnce();
    if (!done.ok()) {
      std::fprintf(stderr, "%s\n", done.status().ToString().c_str());
      return 1;
    }
    if (done->acknowledged == 0) return 0;
    if (done->published > 0) kill_point.Reach("acked");  // a committed round
  }
}
