// A Redis consumer process for the kill -9 test to SIGKILL: consumes
// <stream> as <consumer> of <group> on 127.0.0.1:<port> into the store at
// <store> with the ledger's handler (slowed down, so a kill lands inside a
// batch) until it is killed. --ack_on_receive: the broken variant that
// acknowledges entries before processing them.
// Usage: redis_consumer_child <port> <stream> <group> <consumer> <store>
//            [--ack_on_receive]

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/time/clock.h"
#include "examples/ledger.h"
#include "idem/engine.h"
#include "idem/redis/consumer.h"
#include "redis/consumer_hooks.h"

int main(int argc, char** argv) {
  if (argc != 6 && argc != 7) {
    std::fprintf(stderr,
                 "usage: %s <port> <stream> <group> <consumer> <store> "
                 "[--ack_on_receive]\n",
                 argv[0]);
    return 2;
  }
  idem::brokers::LoopHooks hooks;
  hooks.ack_on_receive =
      argc == 7 && std::string(argv[6]) == "--ack_on_receive";
  auto engine = idem::Engine::Open(argv[5], idem::Options());
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 1;
  }
  idem::redis::ConsumerOptions options;
  options.port = std::atoi(argv[1]);
  options.stream = argv[2];
  options.group = argv[3];
  options.consumer_name = argv[4];
  options.claim_idle = absl::Milliseconds(300);
  options.claim_interval = absl::Milliseconds(100);
  options.delivery.max_batch = 25;
  options.delivery.receive_timeout = absl::Milliseconds(50);
  options.delivery.dead_letter_destination = "dead";
  auto consumer =
      idem::redis::CreateConsumerWithHooks(engine->get(), options, hooks);
  if (!consumer.ok()) {
    std::fprintf(stderr, "%s\n", consumer.status().ToString().c_str());
    return 1;
  }
  absl::Status status = (*consumer)->Run(
      [](const idem::redis::Delivery& delivery, idem::Txn& txn) {
        absl::SleepFor(absl::Milliseconds(2));
        return idem::examples::ApplyPayment(delivery.payload, txn);
      });
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return 1;
}
