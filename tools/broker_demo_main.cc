// idem-broker-demo: parses flags and hands over to
// idem::cli::RunBrokerDemoTool (cli/broker_demo.h), which holds the logic.
// --broker_worker (hidden) is the consumer that the demo starts as a
// separate process of this binary and kills mid-stream.

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_join.h"
#include "cli/broker_demo.h"
#include "cli/broker_demo_brokers.h"
#include "cli/tool_usage.h"

int main(int argc, char** argv) {
  const std::string brokers =
      absl::StrJoin(idem::cli::DemoBroker::Names(), "|");
  std::unique_ptr<CLI::App> app = idem::cli::MakeToolApp(
      "idem-broker-demo",
      "A ledger consumer on a broker (Redis Streams, NATS JetStream or "
      "RabbitMQ) with\nexactly-once effects through a crash. Produces "
      "payments (some published twice),\nconsumes them with the broker's "
      "idem Consumer in a separate process that is\nkilled with SIGKILL "
      "mid-stream, then with a new consumer on the same store, to\nwhich the "
      "broker delivers again what the dead one held unacknowledged (Redis:\n"
      "XAUTOCLAIM; NATS: AckWait; RabbitMQ: requeued), and checks every "
      "balance exactly\nagainst the unique payments. Progress goes to stderr. "
      "Exit code 0 if the\nbalances hold (1: they do not, or the engine "
      "failed; 2: bad flags; 3: the\nserver could not be started or "
      "reached).");
  idem::cli::BrokerDemoOptions options;
  idem::cli::BrokerDemoWorker worker;
  bool json = false;
  bool broker_worker = false;
  app->add_option("--broker", options.broker,
                  "The broker: " + brokers + " (those this build has).")
      ->required();
  app->add_flag("--start_server", options.start_server,
                "Start a private server (a temporary directory, a free "
                "loopback port), stopped at the end, instead of connecting "
                "to --host/--port.");
  app->add_option("--host", options.host, "The server without --start_server.");
  app->add_option("--port", options.port,
                  "The server's port without --start_server; 0: the "
                  "broker's usual one (Redis 6379, NATS 4222, RabbitMQ 5672 "
                  "with guest/guest).");
  app->add_option("--source", options.source,
                  "The stream or queue to use, a new one. Empty: "
                  "idem-demo-<unix nanoseconds>.");
  app->add_option("--messages", options.messages,
                  "Messages produced, producer duplicates included.");
  app->add_option("--duplicate_every", options.duplicate_every,
                  "Every n-th message publishes an earlier one again (0: "
                  "none).");
  app->add_option("--batch", options.batch, "Most deliveries per batch.");
  app->add_option("--seed", options.seed, "Seed of the generated stream.");
  app->add_flag("--keep", options.keep,
                "Keep the scratch directory (the store and the killed "
                "consumer's log); its path is printed on stderr.");
  idem::cli::AddDurationFlag(*app, "idle_timeout", &options.idle_timeout,
                             "Time without progress before the demo gives "
                             "up, e.g. 30s.");
  app->add_flag("--json", json, "Print the report as one JSON object.");
  app->add_flag("--broker_worker", broker_worker,
                "Internal: the consumer the demo kills (needs --port, "
                "--source and --store).")
      ->group("");
  app->add_option("--store", worker.store, "Internal: the worker's store.")
      ->group("");
  app->add_flag("--worker_ack_on_receive", worker.ack_on_receive,
                "Internal: a deliberately broken demo whose killed consumer "
                "acknowledges on receipt (its checks must fail).")
      ->group("");
  app->add_option("--worker_hold_at", worker.hold_at,
                  "Internal: the handler call at which the worker waits to "
                  "be killed.")
      ->group("");
  app->add_option("--worker_hold_file", worker.hold_file,
                  "Internal: the file the worker creates once it waits.")
      ->group("");
  if (std::optional<int> code =
          idem::cli::ParseToolFlags(*app, argc, argv, std::cout, std::cerr)) {
    return *code;
  }
  if (broker_worker) {
    return idem::cli::RunBrokerDemoWorker(options, worker, std::cerr);
  }
  return idem::cli::RunBrokerDemoTool(options, idem::cli::SelfPath(argv[0]),
                                      worker, json, std::cout, std::cerr);
}
