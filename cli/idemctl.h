// idem-ctl inspects and maintains an idem store from the command line:
//
//   idem-ctl --store=PATH [--json] stats | seen ID | forget ID | get KEY
//       | offsets | set-offset SOURCE PARTITION OFFSET | compact
//       | checkpoint DIR | dump | verify | metrics
//       | export --partition=SOURCE:P FILE | import FILE
//       | scan [--prefix=P] [--limit=N] [--reverse]
//
// seen and forget take --source=S --partition=P (or --partition=S:P) for a
// partition-scoped store (DedupeScope::kPartition), whose records are kept per
// partition; export names its partition the same way.
//
// A sharded store (Options::shards > 1; its directory holds SHARDS and
// shard-000, shard-001, ...) is opened with its shard count. seen, forget,
// set-offset, export and import find each partition's shard themselves and
// checkpoint copies every shard: they take no --shard. stats, offsets,
// compact, dump, verify and metrics cover every shard (stats and metrics
// summed, dump's lines each with a "shard" member), or with --shard=N that
// shard alone. get and scan read one shard's state: --shard=N, or the
// shard of the partition --source/--partition name; on a sharded store
// without either they fail with a usage error naming both. On an unsharded
// store --shard=0 is the store itself.
//
// RunIdemctl is the whole tool minus flag parsing (tools/idemctl_main.cc), so
// tests drive it directly. It opens the store with create_if_missing = false
// and Durability::kSync, runs one subcommand, writes results to `out` and
// errors (one line each, prefixed "idem-ctl: ") to `err`, and returns an exit
// code. stats, seen, get, offsets, dump, verify, metrics and export open the
// store read-only, so they work while a consumer holds it; forget, set-offset,
// compact, checkpoint and import open it writable, which fails with
// kFailedPrecondition while it is open in any other engine. The writable
// open takes the store's own dedupe scope (from its column families).
//
// `dump` always writes JSON lines, one object per stored item:
//   {"kind":"dedupe","key":"<32 hex digits of the ID's XXH3-128 hash>",
//    "result":"...","expires_at":"<RFC 3339, UTC>",
//    "expires_at_unix_micros":N,"expired":false}
//   {"kind":"state","key":"...","value":"..."}
//   {"kind":"offset","source":"...","partition":N,"offset":N}
// (a partition-scoped store's dedupe lines also carry "source" and
// "partition"; unacknowledged outbox entries follow as "kind":"outbox"; a
// sharded store's lines start with "shard":N, shard after shard).
//
// `export` writes one partition (Engine::ExportPartition) to FILE as JSON
// lines, which `import` reads back (Engine::ImportPartition):
//   {"kind":"partition","source":"...","partition":N,"offset":N|null}
//   {"kind":"state","key":"...","value":"..."}           one per state entry
//   {"kind":"dedupe","id_hash":"<32 hex digits>",
//    "expires_at_unix_micros":N,"result":"..."}          one per live record
//   {"kind":"stream_time","unix_micros":N}               if it has one
//   {"kind":"timer","domain":"event"|"processing","timer_key":"...",
//    "fire_at_unix_micros":N,"payload":"..."}            one per timer
//   {"kind":"end","state_entries":N,"dedupe_records":N}
// The first line names the partition and the last one counts the lines
// between, so a truncated file is refused. State keys are as the handler
// wrote them through PartitionTxn; dedupe records come from partition-scoped
// stores only. import refuses, importing nothing, a file with any other
// line, member or kind, a member given twice in one line, a line longer
// than 64 MiB (cli/partition_file.h: a state value or result of about 10
// MiB; export refuses to write such a line), an offset outside
// [0, INT64_MAX) or a state key or record given twice (the message names
// the line, or the repeated item).
//
// `scan` lists the committed state keys that start with --prefix (all keys
// without it) in key order (Engine::ScanState), reversed with --reverse,
// at most --limit of them: one line per key, its key and value C-escaped
// and separated by a tab, then the count; with --json
//   {"prefix":"...","reverse":false,"limit":N,"count":N,
//    "entries":[{"key":"...","value":"..."}]}
//
// `metrics` prints the store's figures as idem::PrometheusCollector
// registers them (idem/prometheus/collector.h), in Prometheus' text
// exposition format, or with --json as
//   {"metrics":[{"name":"...","type":"counter|gauge|histogram","help":"...",
//     "samples":[{"labels":{...},"value":N}]}]}
// (a histogram's samples carry "count", "sum" and cumulative "buckets",
// [{"le":N|null,"count":N}], null for +Inf). Its counters count from this
// open, so they read 0. A build without prometheus-cpp fails it with exit 3.
//
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

#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/exit_codes.h"

namespace idem::cli {

// idem-ctl's exit codes: kExitOk (0) on success; kExitUsage (2, cli/
// exit_codes.h) when the command line was wrong (missing --store, unknown
// subcommand, wrong number of arguments, an ID, partition or offset out of
// range, --shard out of range, or neither --shard nor a partition where a
// sharded store needs one; flag syntax errors are reported by ParseToolFlags
// before RunIdemctl runs); and kExitNotFound (1) when what was asked about is
// absent: `seen ID` when the ID was not seen, `get KEY` when the key has no
// value.
inline constexpr int kExitNotFound = 1;
inline constexpr int kExitNotSeen = kExitNotFound;
// The command was understood but failed (store missing or open elsewhere,
// I/O error, a damaged store found by `verify`, a malformed import file).
inline constexpr int kExitStoreFailure = 3;

struct IdemctlArgs {
  // --store: path of an existing store. Required.
  std::string store;
  // --json: machine-readable output (one JSON object) for every subcommand;
  // `dump` writes JSON lines either way.
  bool json = false;
  // --source and --partition (seen, forget, export): the partition a record
  // or export belongs to. `partition` is "P" or "SOURCE:P" (split at its
  // last ':'), P a number >= 0; nullopt when the flag was not given.
  std::optional<std::string> source;
  std::optional<std::string> partition;
  // --shard (stats, get, scan, offsets, compact, dump, verify, metrics): the
  // shard of a sharded store to run on, a number below its shard count;
  // nullopt when the flag was not given.
  std::optional<std::string> shard;
  // --prefix, --limit and --reverse (scan only): the keys to visit, at most
  // how many (a whole number; 0 or unset: all), and in reverse order.
  std::optional<std::string> prefix;
  std::optional<std::string> limit;
  bool reverse = false;
  // The positional arguments: the subcommand, then its arguments.
  std::vector<std::string> command;
};

// One subcommand as --help lists it: its name, the names of its positional
// arguments in order, and a one-line description.
struct IdemctlSubcommand {
  std::string_view name;
  std::vector<std::string_view> args;
  std::string_view help;
};

// Every subcommand RunIdemctl runs, in the order --help lists them.
const std::vector<IdemctlSubcommand>& IdemctlSubcommands();

// The description --help prints before the flags and subcommands.
std::string IdemctlUsage();

// Runs the subcommand in `args`. Returns kExitOk, kExitNotFound (seen, get),
// kExitUsage (nothing opened) or kExitStoreFailure (message on `err`).
int RunIdemctl(const IdemctlArgs& args, std::ostream& out, std::ostream& err);

}  // namespace idem::cli

#endif  // IDEM_CLI_IDEMCTL_H_
