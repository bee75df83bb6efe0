// idem-ctl: inspect and maintain an idem store. Parses flags and hands over
// to idem::cli::RunIdemctl (cli/idemctl.h), which holds the logic.

#include <iostream>
#include <string>

#include "cli/idemctl.h"
#include "cli/tool_usage.h"

int main(int argc, char** argv) {
  std::unique_ptr<CLI::App> app =
      idem::cli::MakeToolApp("idem-ctl", idem::cli::IdemctlUsage());
  idem::cli::IdemctlArgs args;
  app->add_option("--store", args.store,
                  "Path of an existing idem store (required).");
  app->add_flag("--json", args.json,
                "Machine-readable output: one JSON object per result. dump "
                "always writes JSON lines.");
  app->require_subcommand(1);
  std::string arg;
  struct Subcommand {
    const char* name;
    const char* arg_name;  // nullptr: takes no argument
    const char* help;
  };
  for (const Subcommand& s : {
           Subcommand{"stats", nullptr, "Store size figures and counters."},
           Subcommand{"seen", "ID",
                      "Whether a live dedupe record exists for ID (exit 0: "
                      "seen, 1: not seen)."},
           Subcommand{"forget", "ID",
                      "Remove ID's dedupe record so its next delivery runs "
                      "again."},
           Subcommand{"compact", nullptr,
                      "Flush and compact, dropping expired dedupe records."},
           Subcommand{"checkpoint", "DIR",
                      "Write a consistent copy of the store to DIR (must not "
                      "exist)."},
           Subcommand{"dump", nullptr,
                      "Every dedupe record, state entry and offset as JSON "
                      "lines."},
       }) {
    CLI::App* sub = app->add_subcommand(s.name, s.help);
    sub->fallthrough();  // --store and --json may follow the subcommand
    if (s.arg_name != nullptr) {
      sub->add_option(s.arg_name, arg, s.help)->required();
    }
  }
  if (std::optional<int> code =
          idem::cli::ParseToolFlags(*app, argc, argv, std::cout, std::cerr)) {
    return *code;
  }
  CLI::App* sub = app->get_subcommands().front();
  args.command.push_back(sub->get_name());
  if (!sub->get_options(
              [](const CLI::Option* o) { return o->get_positional(); })
           .empty()) {
    args.command.push_back(arg);
  }
  return idem::cli::RunIdemctl(args, std::cout, std::cerr);
}
