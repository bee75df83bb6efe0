// idemctl: inspect and maintain an idem store. Parses flags and hands over to
// idem::cli::RunIdemctl (cli/idemctl.h), which holds the logic.

#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "cli/idemctl.h"
#include "cli/tool_usage.h"

ABSL_FLAG(std::string, db, "", "Path of an existing idem store (required).");
ABSL_FLAG(bool, json, false,
          "Machine-readable output: one JSON object per result. dump always "
          "writes JSON lines.");

int main(int argc, char** argv) {
  idem::cli::InitToolUsage(
      "idemctl_main.cc",
      idem::cli::IdemctlUsage());
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  idem::cli::IdemctlArgs args;
  args.db = absl::GetFlag(FLAGS_db);
  args.json = absl::GetFlag(FLAGS_json);
  args.command.assign(positional.begin() + 1, positional.end());
  return idem::cli::RunIdemctl(args, std::cout, std::cerr);
}
