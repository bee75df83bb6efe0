// Shared start-up of the command-line tools' mains: makes --help list the
// flags defined in the tool's main file (Abseil matches flag files against
// the binary's name by default, which differs from the file name here) and
// sets the usage message. Call once, first thing in main(); not thread-safe.

#ifndef IDEM_CLI_TOOL_USAGE_H_
#define IDEM_CLI_TOOL_USAGE_H_

#include "absl/strings/string_view.h"

namespace idem::cli {

// `main_file`: the suffix of the main's path, e.g. "crashtest_main.cc".
void InitToolUsage(absl::string_view main_file, absl::string_view usage);

// Parses the command line into the flags (absl::ParseCommandLine, which
// exits 0 on --help). Returns false (the caller exits with 2) after a message
// on stderr naming the flag for an unknown flag or a value the flag's type
// cannot hold (e.g. "--threads=1e3"; range checks are the tool's), and for
// a positional argument ("<tool>: unexpected argument ..."): the tools take
// none.
bool ParseToolFlags(int argc, char* argv[], absl::string_view tool);

}  // namespace idem::cli

#endif  // IDEM_CLI_TOOL_USAGE_H_
