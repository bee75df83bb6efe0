// idem-kafka-demo --failover: state that follows its partitions from a
// killed member to a survivor through changelog topics
// (ConsumerOptions::changelog_topic, docs/scale-out.md). Against librdkafka's
// in-process mock cluster by default, or a real cluster (--brokers), it
//  1. produces a stream of ledger payments (examples/ledger.h) to <topic>,
//     keyed by account so that each account's payments are on one partition,
//     each with a message-id header, some re-published (producer
//     duplicates);
//  2. runs member A as a separate process (this same binary, with
//     --failover_member) and a store of its own: a changelog-mode consumer
//     (changelog <topic>.changelog, group <topic>-failover) whose handler
//     applies each payment to its account's balance through
//     PartitionTxn(topic, partition);
//  3. SIGKILLs member A once it has committed about a third of the stream;
//  4. runs member B in this process, in the same group, with a new, empty
//     store: it gets the partitions once A's session has ended, restores
//     each from the changelog (state, dedupe records, offset) and consumes
//     to the end;
//  5. re-publishes a payment member A had processed (same message-id) and
//     shows member B suppresses it as a duplicate;
//  6. checks that member B's balances, read under the partitions' prefixes
//     (examples::CheckPartitionBalances), are exactly the payments'.
//
// On a real cluster, <topic> must be new and have KafkaDemoOptions::partitions
// partitions (payments go to partition account % partitions); the consumers
// create the changelog topics. On the mock cluster the demo creates all
// three.
//
// Thread-compatible. Works in a new scratch directory under $TMPDIR (or
// /tmp), removed at the end unless KafkaDemoOptions::keep.

#ifndef IDEM_CLI_KAFKA_FAILOVER_DEMO_H_
#define IDEM_CLI_KAFKA_FAILOVER_DEMO_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/kafka_demo.h"
#include "examples/ledger.h"
#include "idem/kafka/consumer.h"

namespace idem::cli {

// Deliberate breakage, for the tests that show the demo's checks can fail.
struct FailoverDemoVariant {
  // Member B consumes without changelog mode: nothing is restored, it
  // resumes from the group's committed offsets with none of member A's
  // state or dedupe records, so its balances must not add up.
  bool member_b_without_changelog = false;
};

// What a run did and found: a plain value, filled by RunKafkaFailoverDemo.
struct FailoverDemoReport {
  std::string brokers;  // "mock" or the bootstrap servers
  std::string topic;
  std::string changelog_topic;
  std::string scratch;  // gone unless kept
  int partitions = 0;
  int64_t unique_payments = 0;
  int64_t injected_duplicates = 0;
  // Records member A had committed when it was killed.
  int64_t committed_at_kill = 0;
  // Member B: each assigned partition's restore (none without changelog
  // mode), how many were restored, and its consumer's totals (the late
  // duplicate included).
  std::vector<kafka::RestoreReport> restores;
  int64_t restored_partitions = 0;
  int64_t member_b_records = 0;
  int64_t member_b_processed = 0;
  int64_t member_b_duplicates = 0;
  // The payment member A processed that was re-published after its kill,
  // and whether member B suppressed it as a duplicate.
  std::string late_duplicate_id;
  int32_t late_duplicate_partition = 0;
  bool late_duplicate_caught = false;
  // Member B's balances against the payments'.
  examples::BalanceCheck balances;
  double seconds = 0;
  // Partitions were restored, the late duplicate was caught and the
  // balances are exact.
  bool passed = false;
};

// Runs the demo; `self` is the path of this binary (member A runs as `self
// --failover_member ...`); `progress` gets a line per step. kInvalidArgument
// for bad options (a --store among them: both stores live in the scratch
// directory); other errors if Kafka, the engine or member A's process
// failed. A failed check shows in the report.
absl::StatusOr<FailoverDemoReport> RunKafkaFailoverDemo(
    const KafkaDemoOptions& options, const std::string& self,
    const FailoverDemoVariant& variant, std::ostream& progress);

// Writes `report` for people, or as one JSON object when `json`.
void PrintFailoverDemoReport(const FailoverDemoReport& report, bool json,
                             std::ostream& out);

// RunKafkaFailoverDemo plus printing: 0 if every check passed, 1 if a
// check, Kafka, the engine or member A failed, 2 for bad options.
int RunKafkaFailoverDemoTool(const KafkaDemoOptions& options,
                             const std::string& self,
                             const FailoverDemoVariant& variant, bool json,
                             std::ostream& out, std::ostream& err);

// Member A, the process the demo starts: consumes options.topic (group
// "<topic>-failover", changelog "<topic>.changelog") from options.brokers
// into the partition-scoped store at options.store until it is killed or an
// error (exits 1, the error on `err`).
int RunFailoverMember(const KafkaDemoOptions& options, std::ostream& err);

}  // namespace idem::cli

#endif  // IDEM_CLI_KAFKA_FAILOVER_DEMO_H_
