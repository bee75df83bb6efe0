// The command-line tools' one way of reading flags (CLI11): every tool's
// main() builds its app with MakeToolApp, declares its flags on it (durations
// with AddDurationFlag), and calls ParseToolFlags, which gives all of them the
// same vocabulary and exit codes (cli/exit_codes.h):
//   --help, -h   usage on stdout, exit 0
//   --version    IDEM_VERSION on stdout, exit 0
//   a bad flag (unknown, malformed, out of range, missing value, unexpected
//   positional argument): one message naming it on stderr, exit 2.
// Thread-compatible: one app per thread.

#ifndef IDEM_CLI_TOOL_USAGE_H_
#define IDEM_CLI_TOOL_USAGE_H_

#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cli/exit_codes.h"

namespace idem::cli {

// The version --version prints ("MAJOR.MINOR.PATCH").
const char* ToolVersion();

// An app named `tool` (e.g. "idem-bench") whose --help prints `description`
// then the flags, with --help/-h and --version.
std::unique_ptr<CLI::App> MakeToolApp(const std::string& tool,
                                      const std::string& description);

// Adds --`name` taking an Abseil duration ("30s", "5m", "1h30m", "0"; parsed
// with absl::ParseDuration) into *value, whose current value is the default.
// A value that is not a duration is a bad flag.
CLI::Option* AddDurationFlag(CLI::App& app, const std::string& name,
                             absl::Duration* value, const std::string& help);

// Writes "<tool>: <message>" then "Run '<tool> --help' for usage." on
// `err`, what every tool prints for a bad flag or a value out of range, and
// returns kExitUsage.
int ReportUsageError(absl::string_view tool, absl::string_view message,
                     std::ostream& err);

// The path of the running binary (/proc/self/exe), or `argv0` if it cannot
// be read: what a tool starts to run a worker process of itself.
std::string SelfPath(const char* argv0);

// Parses argv into the app's flags. Returns std::nullopt when the tool should
// run, or the exit code to return now: kExitOk after --help or --version
// (printed on `out`), kExitUsage after a message on `err` naming the bad
// flag ("<tool>: ...", then "Run '<tool> --help' for usage.").
std::optional<int> ParseToolFlags(CLI::App& app, int argc,
                                  const char* const* argv, std::ostream& out,
                                  std::ostream& err);

}  // namespace idem::cli

#endif  // IDEM_CLI_TOOL_USAGE_H_
