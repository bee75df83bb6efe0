// A consumer process for the kill -9 tests to SIGKILL: consumes from the
// server on 127.0.0.1:<port> into the store at <store> with the ledger's
// handler (slowed down, so a kill lands inside a batch) until it is killed.
//   redis: stream <source>, group <group>, consumer <consumer>; entries
//          pending on a killed consumer are claimed after 300 ms.
//   nats:  stream <source> capturing subject <source>.in, durable <group>
//          (<consumer> unused), AckWait 1 s; IDs from header "message-id".
//   rabbitmq: queue <source> (<group> and <consumer> unused).
// --ack_on_receive: the broken variant that acknowledges before processing.
// Usage: broker_consumer_child <redis|nats|rabbitmq> <port> <source> <group>
//            <consumer> <store> [--ack_on_receive]

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "examples/ledger.h"
#include "idem/engine.h"
#ifdef IDEM_HAVE_REDIS
#include "redis/consumer_hooks.h"
#endif
#ifdef IDEM_HAVE_NATS
#include "nats/consumer_hooks.h"
#endif
#ifdef IDEM_HAVE_RABBITMQ
#include "rabbitmq/consumer_hooks.h"
#endif

namespace {

absl::Status SlowLedger(const idem::brokers::Delivery& delivery,
                        idem::Txn& txn) {
  absl::SleepFor(absl::Milliseconds(2));
  return idem::examples::ApplyPayment(delivery.payload, txn);
}

idem::brokers::LoopOptions Delivery() {
  idem::brokers::LoopOptions options;
  options.max_batch = 25;
  options.receive_timeout = absl::Milliseconds(50);
  options.dead_letter_destination = "dead";
  return options;
}

template <typename Created>
int RunConsumer(Created consumer) {
  if (!consumer.ok()) {
    std::fprintf(stderr, "%s\n", consumer.status().ToString().c_str());
    return 1;
  }
  absl::Status status = (*consumer)->Run(SlowLedger);
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7 && argc != 8) {
    std::fprintf(
        stderr,
        "usage: %s <redis|nats|rabbitmq> <port> <source> <group> <consumer> "
        "<store> [--ack_on_receive]\n",
        argv[0]);
    return 2;
  }
  const std::string broker = argv[1];
  const int port = std::atoi(argv[2]);
  idem::brokers::LoopHooks hooks;
  hooks.ack_on_receive =
      argc == 8 && std::string(argv[7]) == "--ack_on_receive";
  auto engine = idem::Engine::Open(argv[6], idem::Options());
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 1;
  }
#ifdef IDEM_HAVE_REDIS
  if (broker == "redis") {
    idem::redis::ConsumerOptions options;
    options.port = port;
    options.stream = argv[3];
    options.group = argv[4];
    options.consumer_name = argv[5];
    options.claim_idle = absl::Milliseconds(300);
    options.claim_interval = absl::Milliseconds(100);
    options.delivery = Delivery();
    return RunConsumer(
        idem::redis::CreateConsumerWithHooks(engine->get(), options, hooks));
  }
#endif
#ifdef IDEM_HAVE_NATS
  if (broker == "nats") {
    idem::nats::ConsumerOptions options;
    options.url = absl::StrCat("nats://127.0.0.1:", port);
    options.stream = argv[3];
    options.subject = absl::StrCat(argv[3], ".in");
    options.durable = argv[4];
    options.id_header = "message-id";
    options.ack_wait = absl::Seconds(1);
    options.delivery = Delivery();
    return RunConsumer(
        idem::nats::CreateConsumerWithHooks(engine->get(), options, hooks));
  }
#endif
#ifdef IDEM_HAVE_RABBITMQ
  if (broker == "rabbitmq") {
    idem::rabbitmq::ConsumerOptions options;
    options.port = port;
    options.queue = argv[3];
    options.declare_queues = true;
    options.delivery = Delivery();
    return RunConsumer(
        idem::rabbitmq::CreateConsumerWithHooks(engine->get(), options, hooks));
  }
#endif
  std::fprintf(stderr, "unknown or unbuilt broker '%s'\n", broker.c_str());
  return 2;
}
