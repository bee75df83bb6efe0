// idem-demo, the README quick-start: a ledger consumer fed an at-least-once
// stream. It delivers messages with injected redeliveries (some of them
// reordered) to a fresh store through Engine::ProcessBatch under
// Durability::kBuffered, waits for durability before "acknowledging" each
// batch, then checks every account balance against the sum computed
// independently from the unique messages. The messages, the handler and the
// check are the ledger's (examples/ledger.h).
//
// RunDemo is the whole demo minus flag parsing (tools/demo_main.cc), so tests
// drive it directly. Without DemoOptions::store it creates its store in a
// fresh directory under $TMPDIR (or /tmp) and removes that directory before
// returning, whatever the outcome, unless DemoOptions::keep. A store given in
// DemoOptions::store is created if missing and never removed. Thread-
// compatible: concurrent runs with distinct stores are independent.

#ifndef IDEM_CLI_DEMO_H_
#define IDEM_CLI_DEMO_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "idem/stats.h"

namespace idem::cli {

// The largest values ValidateDemoOptions accepts: the demo holds its whole
// stream, and the expected balances, in memory.
inline constexpr int64_t kMaxDemoMessages = 10'000'000;
inline constexpr int kMaxDemoBatch = 100'000;
inline constexpr int kMaxDemoAccounts = 1'000'000;

struct DemoOptions {
  // Deliveries in total, duplicates included. Must be in
  // [1, kMaxDemoMessages].
  int64_t messages = 20000;
  // Fraction of deliveries that are redeliveries of an earlier ID.
  // Must be in [0, 1).
  double duplicate_rate = 0.10;
  // Messages per ProcessBatch call. Must be in [1, kMaxDemoBatch].
  int batch = 500;
  // Seed of the stream and the amounts: equal seeds give equal streams.
  uint64_t seed = 1;
  // Ledger accounts the amounts are spread over. Must be in
  // [1, kMaxDemoAccounts].
  int accounts = 100;
  // Directory of the store; it should be new (a store already holding a
  // demo's messages fails the checks). Empty: a temporary directory.
  std::string store;
  // Keep the temporary directory (ignored with `store`, which is kept).
  bool keep = false;
};

struct DemoReport {
  // Where the store was (a temporary directory is gone unless kept).
  std::string store;
  // The stream.
  int64_t delivered = 0;            // messages handed to the engine
  int64_t unique_messages = 0;      // distinct IDs among them
  int64_t injected_duplicates = 0;  // delivered - unique_messages
  int64_t reordered = 0;            // deliveries moved out of stream order
  int64_t batches = 0;
  // Outcomes as the engine returned them (counted from the Results).
  int64_t processed = 0;
  int64_t duplicates = 0;
  int64_t failed = 0;
  // Duplicates whose returned result differs from their first delivery's.
  int64_t result_mismatches = 0;
  int64_t acknowledged = 0;  // messages acknowledged after WaitDurable
  // Engine::CommittedOffset of the stream's partition; -1 if none.
  int64_t committed_offset = -1;
  // The state check.
  int64_t expected_total = 0;  // sum of the unique messages' amounts
  int64_t actual_total = 0;    // sum of the stored balances
  int mismatched_accounts = 0;
  bool state_ok = false;  // every balance equals its expected sum
  // counts_ok: processed == unique_messages, duplicates ==
  // injected_duplicates, failed == 0, no result mismatch, every message
  // acknowledged and committed_offset == delivered - 1.
  bool counts_ok = false;
  // Engine::GetStats after the run.
  Stats stats;
  // Wall time of the delivery loop (ProcessBatch + WaitDurable).
  double elapsed_seconds = 0;
  double messages_per_second = 0;

  bool passed() const { return state_ok && counts_ok; }
};

// Returns kInvalidArgument, naming the field, if `options` is out of range.
absl::Status ValidateDemoOptions(const DemoOptions& options);

// Runs the demo. Returns kInvalidArgument for bad options, or the engine's
// error if opening, processing or syncing the store failed. A failed check
// is not an error: it shows in the report.
absl::StatusOr<DemoReport> RunDemo(const DemoOptions& options);

// Writes `report` for people, or as one JSON object when `json`.
void PrintDemoReport(const DemoReport& report, bool json, std::ostream& out);

// RunDemo plus printing: returns 0 if the run passed its checks, 1 if it ran
// but a check failed or the engine failed, 2 for bad options (message on
// `err`).
int RunDemoTool(const DemoOptions& options, bool json, std::ostream& out,
                std::ostream& err);

}  // namespace idem::cli

#endif  // IDEM_CLI_DEMO_H_
