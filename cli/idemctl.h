// idem-ctl inspects and maintains an idem store from the command line:
//
//   idem-ctl --store=PATH [--json] stats | seen ID | forget ID | compact
//                              | checkpoint DIR | dump
//
// RunIdemctl is the whole tool minus flag parsing (tools/idemctl_main.cc), so
// tests drive it directly. It opens the store with create_if_missing = false
// and Durability::kSync, runs one subcommand, writes results to `out` and
// errors (one line each, prefixed "idem-ctl: ") to `err`, and returns an exit
// code. The store is opened by a full Engine, so it must not be open in any
// other process at the time (Engine::Open fails with kFailedPrecondition).
//
// `dump` always writes JSON lines, one object per stored item:
//   {"kind":"dedupe","key":"<32 hex digits of the ID's XXH3-128 hash>",
//    "result":"...","expires_at":"<RFC 3339, UTC>",
//    "expires_at_unix_micros":N,"expired":false}
//   {"kind":"state","key":"...","value":"..."}
//   {"kind":"offset","source":"...","partition":N,"offset":N}
// Keys, values and results are arbitrary bytes. They are written as JSON
// strings in which every code point stands for one byte (Latin-1): bytes
// 0x20-0x7E appear as themselves except '"' and '\' (escaped as \" and \\),
// every other byte b appears as \u00XX with XX = b in lowercase hex. Output is
// therefore pure ASCII; to recover the bytes, parse the JSON and encode the
// string as Latin-1 (Python: s.encode("latin-1")).
//
// Functions here are thread-compatible: concurrent calls need distinct
// streams and distinct stores.

#ifndef IDEM_CLI_IDEMCTL_H_
#define IDEM_CLI_IDEMCTL_H_

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/tool_usage.h"

namespace idem::cli {

// idem-ctl's exit codes: kExitOk (0) on success; kExitUsage (2, cli/
// tool_usage.h) when the command line was wrong (missing --store, unknown
// subcommand, wrong number of arguments, an ID out of range; flag syntax
// errors are reported by ParseToolFlags before RunIdemctl runs); and
// `seen ID` exits kExitNotSeen (1) when the ID was not seen:
inline constexpr int kExitNotSeen = 1;
// The command was understood but failed (store missing, I/O error, ...).
inline constexpr int kExitStoreFailure = 3;

struct IdemctlArgs {
  // --store: path of an existing store. Required.
  std::string store;
  // --json: machine-readable output (one JSON object) for every subcommand;
  // `dump` writes JSON lines either way.
  bool json = false;
  // The positional arguments: the subcommand, then its arguments.
  std::vector<std::string> command;
};

// The description --help prints before the flags and subcommands.
std::string IdemctlUsage();

// Runs the subcommand in `args`. Returns kExitOk, kExitNotSeen (seen only),
// kExitUsage (nothing opened) or kExitStoreFailure (message on `err`).
int RunIdemctl(const IdemctlArgs& args, std::ostream& out, std::ostream& err);

}  // namespace idem::cli

#endif  // IDEM_CLI_IDEMCTL_H_
