// idem-kafka-demo: parses flags and hands over to
// idem::cli::RunKafkaDemoTool (cli/kafka_demo.h), with --pipeline to
// RunKafkaPipelineDemoTool (cli/kafka_pipeline_demo.h), or with --failover to
// RunKafkaFailoverDemoTool (cli/kafka_failover_demo.h), which hold the logic.
// --pipeline_worker and --failover_member (hidden) are the pipeline's stage
// one and the failover's member A, which those modes start as a separate
// process of this binary.

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli/kafka_demo.h"
#include "cli/kafka_failover_demo.h"
#include "cli/kafka_pipeline_demo.h"
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
      "is given. With --pipeline, runs a two-stage pipeline instead\n(payments "
      "-> ledger entries -> balances) whose first stage, a separate process,\n"
      "is killed mid-stream and restarted, and checks both stages' totals "
      "exactly.\nWith --failover, runs two members of a changelog-mode "
      "group instead: the\nfirst, a separate process, is killed mid-stream; "
      "the second, with an empty\nstore, restores the partitions' state "
      "from the changelog and finishes, and\nits balances are checked "
      "exactly.\nProgress goes to stderr. Exit code 0 only if every check "
      "passes (1: a\ncheck, Kafka or the engine failed; 2: bad flags).");
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
                  "Partitions of the topic (mock cluster; with --failover "
                  "also a real cluster's topic, which must have as many).");
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
  app->add_option("--metrics_port", options.metrics_port,
                  "Serve /metrics (Prometheus text format: the engine's and "
                  "the consumer's figures) on 127.0.0.1 at this port while "
                  "the demo runs; 0: any free port (named on stderr); -1: "
                  "none. Needs a build with prometheus-cpp.");
  idem::cli::AddDurationFlag(*app, "metrics_linger", &options.metrics_linger,
                             "How long /metrics stays up after the checks, "
                             "e.g. 30s.");
  app->add_flag("--json", json, "Print the report as one JSON object.");
  bool pipeline = false;
  bool pipeline_worker = false;
  app->add_flag(
      "--pipeline", pipeline,
      "Run the two-stage pipeline (docs/outbox.md): stage one "
      "applies payments and emits ledger entries through the "
      "outbox, is SIGKILLed mid-stream and restarted; stage two "
      "applies the entries. Refuses --store (each stage has its own).");
  app->add_flag("--pipeline_worker", pipeline_worker,
                "Internal: the pipeline's stage one (needs --brokers, "
                "--topic and --store).")
      ->group("");
  bool failover = false;
  bool failover_member = false;
  idem::cli::FailoverDemoVariant variant;
  app->add_flag("--failover", failover,
                "Run the failover demo (docs/scale-out.md): member A, a "
                "changelog-mode consumer in a separate process, is SIGKILLed "
                "mid-stream; member B, with an empty store, restores each "
                "partition from <topic>.changelog, consumes the rest and "
                "suppresses a late producer duplicate. Refuses --store (each "
                "member has its own).");
  app->add_flag("--failover_member", failover_member,
                "Internal: the failover's member A (needs --brokers, --topic "
                "and --store).")
      ->group("");
  app->add_flag("--failover_without_changelog",
                variant.member_b_without_changelog,
                "Internal: a deliberately broken --failover whose member B "
                "runs without changelog mode (its checks must fail).")
      ->group("");
  if (std::optional<int> code =
          idem::cli::ParseToolFlags(*app, argc, argv, std::cout, std::cerr)) {
    return *code;
  }
  if (pipeline_worker) {
    return idem::cli::RunPipelineStage1(options, std::cerr);
  }
  if (failover_member) {
    return idem::cli::RunFailoverMember(options, std::cerr);
  }
  if (failover) {
    return idem::cli::RunKafkaFailoverDemoTool(
        options, idem::cli::SelfPath(argv[0]), variant, json, std::cout,
        std::cerr);
  }
  if (pipeline) {
    return idem::cli::RunKafkaPipelineDemoTool(
        options, idem::cli::SelfPath(argv[0]), json, std::cout, std::cerr);
  }
  return idem::cli::RunKafkaDemoTool(options, json, std::cout, std::cerr);
}
