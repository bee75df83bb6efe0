// A transactional outbox relay process for the Kafka tests to kill: drains
// the outbox of the store at <store> to <brokers> with
// OutboxRelayOptions::transactional_id <id> (progress topic
// "idem.relay.progress"), rounds of 10 entries, and exits 0 once the outbox
// is empty. With --die_at=<step>:<round> it SIGKILLs itself at that step of
// that round (counted from 1): "commit" (the round's records produced, its
// transaction not committed), "ack" (committed, not acknowledged) or
// "acked" (acknowledged, before the next round). --ignore_progress runs the
// broken variant that does not read its progress (OutboxRelayHooks::
// ignore_progress).
// Usage: kafka_relay_child <brokers> <store> <id>
//            [--die_at=<step>:<round>] [--ignore_progress]

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "idem/engine.h"
#include "idem/kafka/outbox_relay.h"
#include "kafka/outbox_relay_hooks.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: %s <brokers> <store> <id> [--die_at=<step>:<round>] "
                 "[--ignore_progress]\n",
                 argv[0]);
    return 2;
  }
  std::string die_step;
  int die_round = 0;
  idem::kafka::OutboxRelayHooks hooks;
  for (int i = 4; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.starts_with("--die_at=")) {
      std::vector<std::string> parts = absl::StrSplit(arg.substr(9), ':');
      if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &die_round)) {
        std::fprintf(stderr, "bad %s\n", arg.c_str());
        return 2;
      }
      die_step = parts[0];
    } else if (arg == "--ignore_progress") {
      hooks.ignore_progress = true;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", arg.c_str());
      return 2;
    }
  }
  int round = 0;
  auto die_at = [&](const char* step) {
    if (round == die_round && die_step == step) raise(SIGKILL);
  };
  hooks.before_transaction_commit = [&] {
    ++round;
    die_at("commit");
    return absl::OkStatus();
  };
  hooks.between_publish_and_ack = [&] {
    die_at("ack");
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
    die_at("acked");
  }
}
