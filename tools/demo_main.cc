// idem-demo: the README quick-start. Parses flags and hands over to
// idem::cli::RunDemoTool (cli/demo.h), which holds the logic.

#include <cstdint>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "cli/demo.h"
#include "cli/tool_usage.h"

ABSL_FLAG(int64_t, messages, 20000,
          "Deliveries in total, redeliveries included.");
ABSL_FLAG(double, duplicate_rate, 0.10,
          "Fraction of deliveries that redeliver an earlier ID, in [0, 1).");
ABSL_FLAG(int32_t, batch, 500, "Messages per ProcessBatch call.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the generated stream.");
ABSL_FLAG(int32_t, accounts, 100, "Ledger accounts the amounts go to.");
ABSL_FLAG(bool, json, false, "Print the report as one JSON object.");

int main(int argc, char** argv) {
  idem::cli::InitToolUsage(
      "demo_main.cc",
      "Streams messages with injected redeliveries through an idem engine in "
      "a\n"
      "temporary store (ledger handler, ProcessBatch, Durability::kBuffered "
      "with\n"
      "WaitDurable before acknowledging), checks the balances against the "
      "unique\n"
      "messages and reports what happened. Exit code 0 only if every check "
      "passes\n"
      "(1: a check or the engine failed, 2: a flag value out of range).\n"
      "\n"
      "Usage: idem-demo [--messages=N] [--duplicate_rate=R] [--batch=N] "
      "[--seed=N] [--json]");
  if (!idem::cli::ParseToolFlags(argc, argv, "idem-demo")) return 2;
  idem::cli::DemoOptions options;
  options.messages = absl::GetFlag(FLAGS_messages);
  options.duplicate_rate = absl::GetFlag(FLAGS_duplicate_rate);
  options.batch = absl::GetFlag(FLAGS_batch);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.accounts = absl::GetFlag(FLAGS_accounts);
  return idem::cli::RunDemoTool(options, absl::GetFlag(FLAGS_json), std::cout,
                                  std::cerr);
}
