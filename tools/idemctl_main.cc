// idemctl: inspect and maintain an idem store. Parses flags and hands over to
// idem::tools::RunIdemctl (tools/idemctl.h), which holds the logic.

#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "tools/idemctl.h"
#include "tools/tool_usage.h"

ABSL_FLAG(std::string, db, "", "Path of an existing idem store (required).");
ABSL_FLAG(bool, json, false,
          "Machine-readable output: one JSON object per result. dump always "
          "writes JSON lines.");

int main(int argc, char** argv) {
  idem::tools::InitToolUsage(
      "idemctl_main.cc",
      idem::tools::IdemctlUsage());
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  idem::tools::IdemctlArgs args;
  args.db = absl::GetFlag(FLAGS_db);
  args.json = absl::GetFlag(FLAGS_json);
  args.command.assign(positional.begin() + 1, positional.end());
  return idem::tools::RunIdemctl(args, std::cout, std::cerr);
}
