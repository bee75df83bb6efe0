// idem-kafka-demo: a ledger consumer on Kafka with exactly-once effects.
// Against librdkafka's in-process mock cluster by default, or a real cluster
// (--brokers), it
//  1. produces the first half of a stream of payments, each with a
//     message-id header, some of them re-published (producer duplicates)
//     and one poison record whose payload cannot be parsed;
//  2. consumes it with an idem::kafka::Consumer whose handler adds each
//     payment to its partition's balance (PartitionTxn), then closes it;
//  3. produces the second half, with more re-published IDs of both halves;
//  4. starts a new consumer in the same group, which resumes each partition
//     from the engine's offsets, and consumes the rest;
//  5. checks that every payment was applied exactly once, that the balances
//     add up and that the poison record reached the dead-letter topic.
//
// The payments are the ledger's (examples/ledger.h), applied by its handler.
// RunKafkaDemo is the whole demo minus flag parsing (tools/
// kafka_demo_main.cc). It works in a new scratch directory under $TMPDIR (or
// /tmp), removed before returning, whatever the outcome, unless
// KafkaDemoOptions::keep. Thread-compatible.

#ifndef IDEM_CLI_KAFKA_DEMO_H_
#define IDEM_CLI_KAFKA_DEMO_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace idem::cli {

struct KafkaDemoOptions {
  // Bootstrap servers of a real cluster; empty: an in-process mock cluster.
  std::string brokers;
  // Topic to produce to and consume; its dead-letter topic is
  // "<topic>.dlq". With a real cluster use a new (empty) topic: the checks
  // count every record in it. Empty: "idem-demo-<unix seconds>".
  std::string topic;
  // Partitions of the topic (mock cluster only; --failover also places each
  // payment on partition account % partitions, on any cluster). Must be >= 1.
  int partitions = 4;
  // Records produced in all, duplicates and the poison record included.
  // Must be >= 10.
  int64_t messages = 20000;
  // Every n-th record re-publishes an earlier ID (0: none). Must be >= 0.
  int duplicate_every = 10;
  // Most records per ProcessBatch call. Must be >= 1.
  int batch = 500;
  // Directory of the engine's store, created if missing and never removed.
  // Empty: "store" in the scratch directory.
  std::string store;
  // Keep the scratch directory (a new directory under $TMPDIR or /tmp that
  // holds the store unless `store` is set, and the dead-letter reader's
  // store) instead of removing it at the end.
  bool keep = false;
  // How long a consumer may see nothing before the demo gives up.
  absl::Duration idle_timeout = absl::Seconds(30);
  uint64_t seed = 1;
  // >= 0: serve /metrics in Prometheus' text format on 127.0.0.1 at this
  // port (0: any free port; the port is named in the progress lines) while
  // the demo runs: the engine's figures (idem::PrometheusCollector,
  // refreshed every second) and the running consumer's
  // (idem::PrometheusConsumerCollector, after each batch). Needs a build
  // with prometheus-cpp. -1: no endpoint. Must be in [-1, 65535].
  int metrics_port = -1;
  // How long /metrics stays up after the checks, with the final figures.
  // Must be >= 0.
  absl::Duration metrics_linger = absl::ZeroDuration();
};

// What one consumer phase did.
struct KafkaDemoPhase {
  int64_t produced = 0;
  int64_t records = 0;
  int64_t processed = 0;
  int64_t duplicates = 0;
  int64_t dead_lettered = 0;
  int64_t batches = 0;
  // "partition: start" lines of the assignment, e.g. "0: engine offset 41,
  // resuming at 42".
  std::vector<std::string> starts;
  double seconds = 0;  // from the first record polled to the last
  // ConsumerStats::engine_time and kafka_time of the phase's consumer, over
  // its whole life (joining the group included).
  double engine_seconds = 0;
  double kafka_seconds = 0;
};

struct KafkaDemoReport {
  std::string brokers;  // "mock" or the bootstrap servers
  std::string topic;
  // Where the store and the scratch directory were (the scratch directory
  // is gone unless kept).
  std::string store;
  std::string scratch;
  int64_t unique_payments = 0;
  int64_t injected_duplicates = 0;
  KafkaDemoPhase first;
  KafkaDemoPhase second;
  // Checks.
  int64_t applied_once = 0;         // payments applied exactly once
  int64_t applied_wrongly = 0;      // payments applied 0 or >= 2 times
  int64_t expected_total = 0;       // sum of the payments' amounts
  int64_t actual_total = 0;         // sum of the partitions' balances
  int64_t dead_letter_records = 0;  // records read back from <topic>.dlq
  bool passed = false;
};

// kInvalidArgument naming the field if `options` is out of range.
absl::Status ValidateKafkaDemoOptions(const KafkaDemoOptions& options);

// Runs the demo; `progress` gets a line per step. Returns an error if Kafka
// or the engine failed; a failed check shows in the report.
absl::StatusOr<KafkaDemoReport> RunKafkaDemo(const KafkaDemoOptions& options,
                                             std::ostream& progress);

// Writes `report` for people, or as one JSON object when `json`.
void PrintKafkaDemoReport(const KafkaDemoReport& report, bool json,
                          std::ostream& out);

// RunKafkaDemo plus printing: 0 if every check passed, 1 if a check or
// Kafka or the engine failed, 2 for bad options (message on `err`). Names on
// `err` the store when it is kept (`store` or `keep`) and the scratch
// directory when `keep`.
int RunKafkaDemoTool(const KafkaDemoOptions& options, bool json,
                     std::ostream& out, std::ostream& err);

}  // namespace idem::cli

#endif  // IDEM_CLI_KAFKA_DEMO_H_
