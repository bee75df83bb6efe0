// idem-kafka-demo --pipeline: a two-stage exactly-once pipeline on Kafka.
// Against librdkafka's in-process mock cluster by default, or a real cluster
// (--brokers), it
//  1. produces a stream of ledger payments (examples/ledger.h) to <topic>,
//     each with a message-id header, some re-published (producer
//     duplicates);
//  2. runs stage one as a separate process (this same binary, with
//     --pipeline_worker): an idem::kafka::Consumer that applies each payment
//     to its account's balance and emits it, in the same commit, as a ledger
//     entry to <topic>.ledger (Txn::Emit; the consumer's outbox relay
//     publishes it under a stable message-id);
//  3. SIGKILLs stage one once it has committed about a third of the stream,
//     starts it again, and waits until it has committed everything and its
//     outbox is empty, then stops it (SIGTERM);
//  4. runs stage two in this process: a consumer of <topic>.ledger, with a
//     store of its own, that applies every ledger entry to its own balances;
//  5. checks that both stages' balances are exactly the payments' (every
//     payment applied once upstream, every entry once downstream, whatever
//     the kill repeated or re-published).
//
// Thread-compatible. Works in a new scratch directory under $TMPDIR (or
// /tmp), removed at the end unless KafkaDemoOptions::keep.

#ifndef IDEM_CLI_KAFKA_PIPELINE_DEMO_H_
#define IDEM_CLI_KAFKA_PIPELINE_DEMO_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "cli/kafka_demo.h"
#include "examples/ledger.h"

namespace idem::cli {

struct PipelineDemoReport {
  std::string brokers;  // "mock" or the bootstrap servers
  std::string topic;
  std::string ledger_topic;
  std::string scratch;  // gone unless kept
  int64_t unique_payments = 0;
  int64_t injected_duplicates = 0;
  // Stage one: records it had committed when it was killed, and the outbox
  // entries it had published by the end.
  int64_t committed_at_kill = 0;
  int64_t stage1_outbox_emitted = 0;
  // Stage two: ledger records consumed, applied and suppressed as
  // duplicates (re-published entries).
  int64_t stage2_records = 0;
  int64_t stage2_processed = 0;
  int64_t stage2_duplicates = 0;
  // Each stage's balances against the payments'.
  examples::BalanceCheck stage1;
  examples::BalanceCheck stage2;
  double seconds = 0;
  bool passed = false;
};

// Runs the pipeline; `self` is the path of this binary (stage one runs as
// `self --pipeline_worker ...`); `progress` gets a line per step. Returns an
// error if Kafka, the engine or stage one's process failed; a failed check
// shows in the report.
absl::StatusOr<PipelineDemoReport> RunKafkaPipelineDemo(
    const KafkaDemoOptions& options, const std::string& self,
    std::ostream& progress);

// Writes `report` for people, or as one JSON object when `json`.
void PrintPipelineDemoReport(const PipelineDemoReport& report, bool json,
                             std::ostream& out);

// RunKafkaPipelineDemo plus printing: 0 if every check passed, 1 if a check,
// Kafka, the engine or stage one failed, 2 for bad options.
int RunKafkaPipelineDemoTool(const KafkaDemoOptions& options,
                             const std::string& self, bool json,
                             std::ostream& out, std::ostream& err);

// Stage one, the process the pipeline starts: consumes options.topic (group
// "<topic>-stage1") from options.brokers into the store at options.store,
// emitting each payment to "<topic>.ledger", until SIGTERM (then exits 0)
// or an error (exits 1, the error on `err`).
int RunPipelineStage1(const KafkaDemoOptions& options, std::ostream& err);

}  // namespace idem::cli

#endif  // IDEM_CLI_KAFKA_PIPELINE_DEMO_H_
