// idem-kafka-demo: parses flags and hands over to
// idem::cli::RunKafkaDemoTool (cli/kafka_demo.h), which holds the logic.

#include <iostream>
#include <memory>
#include <optional>

#include "cli/kafka_demo.h"
#include "cli/tool_usage.h"

int main(int argc, char** argv) {
  std::unique_ptr<CLI::App> app = idem::cli::MakeToolApp(
      "idem-kafka-demo",
      "A ledger consumer on Kafka with exactly-once effects. Produces "
      "payments\n(with message-id headers, producer duplicates and one poison "
      "record), consumes\nhalf of them, restarts the consumer (which resumes "
      "from the engine's offsets),\nconsumes the rest, then checks every "
      "payment was applied exactly once and the\npoison record reached "
      "<topic>.dlq. Runs against an in-process mock cluster\nunless --brokers "
      "is given. Progress goes to stderr. Exit code 0 only if every\ncheck "
      "passes (1: a check, Kafka or the engine failed; 2: bad flags).");
  idem::cli::KafkaDemoOptions options;
  bool json = false;
  app->add_option("--brokers", options.brokers,
                  "Bootstrap servers of a Kafka cluster; empty: an "
                  "in-process mock cluster.");
  app->add_option("--topic", options.topic,
                  "Topic to use (a new, empty one on a real cluster; its "
                  "dead-letter topic is <topic>.dlq). Empty: "
                  "idem-demo-<unix seconds>.");
  app->add_option("--partitions", options.partitions,
                  "Partitions of the topic (mock cluster).");
  app->add_option("--messages", options.messages,
                  "Records produced in all, duplicates and the poison record "
                  "included.");
  app->add_option("--duplicate_every", options.duplicate_every,
                  "Every n-th record re-publishes an earlier message ID (0: "
                  "none).");
  app->add_option("--batch", options.batch,
                  "Most records per ProcessBatch call.");
  app->add_option("--store", options.store,
                  "Directory of the engine's store, created if missing and "
                  "kept. Empty: one in the scratch directory.");
  app->add_flag("--keep", options.keep,
                "Keep the scratch directory (the store unless --store, and "
                "the dead-letter reader's store) instead of removing it; its "
                "path is printed on stderr.");
  idem::cli::AddDurationFlag(*app, "idle_timeout", &options.idle_timeout,
                             "Time without a record before the demo gives "
                             "up, e.g. 30s or 2m.");
  app->add_option("--seed", options.seed, "Seed of the generated stream.");
  app->add_flag("--json", json, "Print the report as one JSON object.");
  if (std::optional<int> code =
          idem::cli::ParseToolFlags(*app, argc, argv, std::cout, std::cerr)) {
    return *code;
  }
  return idem::cli::RunKafkaDemoTool(options, json, std::cout, std::cerr);
}
