// idem-demo: the README quick-start. Parses flags and hands over to
// idem::cli::RunDemoTool (cli/demo.h), which holds the logic.

#include <iostream>
#include <memory>
#include <optional>

#include "cli/demo.h"
#include "cli/tool_usage.h"

int main(int argc, char** argv) {
  std::unique_ptr<CLI::App> app = idem::cli::MakeToolApp(
      "idem-demo",
      "Streams messages with injected redeliveries through an idem engine "
      "(ledger\nhandler, ProcessBatch, Durability::kBuffered with WaitDurable "
      "before\nacknowledging), checks the balances against the unique "
      "messages and reports\nwhat happened. Exit code 0 only if every check "
      "passes (1: a check or the\nengine failed, 2: a bad flag or a value out "
      "of range).");
  idem::cli::DemoOptions options;
  bool json = false;
  app->add_option("--messages", options.messages,
                  "Deliveries in total, redeliveries included.");
  app->add_option("--duplicate_rate", options.duplicate_rate,
                  "Fraction of deliveries that redeliver an earlier ID, in "
                  "[0, 1).");
  app->add_option("--batch", options.batch, "Messages per ProcessBatch call.");
  app->add_option("--seed", options.seed, "Seed of the generated stream.");
  app->add_option("--accounts", options.accounts,
                  "Ledger accounts the amounts go to.");
  app->add_option("--store", options.store,
                  "Directory of the store, created if missing and kept (it "
                  "should be new). Empty: a temporary directory, removed at "
                  "the end unless --keep.");
  app->add_flag("--keep", options.keep,
                "Keep the temporary store directory (its path is printed on "
                "stderr).");
  app->add_flag("--json", json, "Print the report as one JSON object.");
  if (std::optional<int> code =
          idem::cli::ParseToolFlags(*app, argc, argv, std::cout, std::cerr)) {
    return *code;
  }
  return idem::cli::RunDemoTool(options, json, std::cout, std::cerr);
}
