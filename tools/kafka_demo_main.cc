// idem-kafka-demo: parses flags and hands over to
// idem::cli::RunKafkaDemoTool (cli/kafka_demo.h), which holds the logic.

#include <cstdint>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "cli/kafka_demo.h"
#include "cli/tool_usage.h"

ABSL_FLAG(std::string, brokers, "",
          "Bootstrap servers of a Kafka cluster; empty: an in-process mock "
          "cluster.");
ABSL_FLAG(std::string, topic, "",
          "Topic to use (a new, empty one on a real cluster; its dead-letter "
          "topic is <topic>.dlq). Empty: idem-demo-<unix seconds>.");
ABSL_FLAG(int32_t, partitions, 4, "Partitions of the topic (mock cluster).");
ABSL_FLAG(int64_t, messages, 20000,
          "Records produced in all, duplicates and the poison record included.");
ABSL_FLAG(int32_t, duplicate_every, 10,
          "Every n-th record re-publishes an earlier message ID (0: none).");
ABSL_FLAG(int32_t, max_batch, 500, "Most records per ProcessBatch call.");
ABSL_FLAG(std::string, store, "",
          "Directory of the engine's store; empty: a temporary one.");
ABSL_FLAG(int32_t, idle_timeout_s, 30,
          "Seconds without a record before the demo gives up.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the generated stream.");
ABSL_FLAG(bool, json, false, "Print the report as one JSON object.");

int main(int argc, char** argv) {
  idem::cli::InitToolUsage(
      "kafka_demo_main.cc",
      "A ledger consumer on Kafka with exactly-once effects. Produces "
      "payments\n"
      "(with message-id headers, producer duplicates and one poison record), "
      "consumes\n"
      "half of them, restarts the consumer (which resumes from the engine's "
      "offsets),\n"
      "consumes the rest, then checks every payment was applied exactly once "
      "and the\n"
      "poison record reached <topic>.dlq. Runs against an in-process mock "
      "cluster\n"
      "unless --brokers is given. Progress goes to stderr. Exit code 0 only "
      "if every\n"
      "check passes (1: a check, Kafka or the engine failed; 2: bad flags).\n"
      "\n"
      "Usage: idem-kafka-demo [--brokers=HOST:PORT] [--topic=T] "
      "[--messages=N] [--json]");
  if (!idem::cli::ParseToolFlags(argc, argv, "idem-kafka-demo")) return 2;
  idem::cli::KafkaDemoOptions options;
  options.brokers = absl::GetFlag(FLAGS_brokers);
  options.topic = absl::GetFlag(FLAGS_topic);
  options.partitions = absl::GetFlag(FLAGS_partitions);
  options.messages = absl::GetFlag(FLAGS_messages);
  options.duplicate_every = absl::GetFlag(FLAGS_duplicate_every);
  options.max_batch = absl::GetFlag(FLAGS_max_batch);
  options.store = absl::GetFlag(FLAGS_store);
  options.idle_timeout = absl::Seconds(absl::GetFlag(FLAGS_idle_timeout_s));
  options.seed = absl::GetFlag(FLAGS_seed);
  return idem::cli::RunKafkaDemoTool(options, absl::GetFlag(FLAGS_json),
                                       std::cout, std::cerr);
}
