// The parts idem-ctl's subcommands share (cli/idemctl.cc, which holds the
// subcommand table and the store-inspecting subcommands, and
// cli/idemctl_partition.cc, the subcommands that read or move one
// partition's position and state, cli/idemctl_dump.cc, cli/idemctl_scan.cc
// and cli/idemctl_metrics.cc): the parsed request, which shards it covers
// (cli/idemctl_shards.cc) and the error and parsing helpers. Internal to
// idem-ctl.

#ifndef IDEM_CLI_IDEMCTL_REQUEST_H_
#define IDEM_CLI_IDEMCTL_REQUEST_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cli/idemctl.h"
#include "idem/engine.h"
#include "idem/partition_snapshot.h"

namespace idem::cli::idemctl {

// Which shards of a store (Options::shards; an unsharded store has one,
// shard 0) a subcommand runs on.
enum class ShardScope {
  kWhole,  // the whole store, each partition in its own shard (a sharded
           // engine routes it); takes no --shard
  kEach,   // every shard, in total (figures summed, entries listed shard
           // after shard), or --shard=N alone
  kOne,    // one shard: --shard=N, or the shard of the partition that
           // --source/--partition name; a sharded store needs one of them
};

// A partition: --source and --partition, or set-offset's SOURCE PARTITION.
struct Position {
  std::string source;
  int32_t partition = 0;
};

// What the command line asks for, checked and parsed before the store is
// opened.
struct Request {
  explicit Request(const IdemctlArgs& a) : args(a) {}

  const IdemctlArgs& args;
  std::optional<Position> position;
  std::optional<int> shard;    // --shard
  int shard_count = 1;         // the store's, once it is open
  int64_t offset = -1;         // set-offset's OFFSET
  size_t limit = 0;            // scan's --limit
  PartitionSnapshot snapshot;  // import's FILE
};

// Writes "idem-ctl: <what>: <status>" to `err`; returns kExitStoreFailure.
int Fail(std::ostream& err, std::string_view what, const absl::Status& s);

// Writes "idem-ctl: <message>" and the --help hint; returns kExitUsage.
int UsageError(std::ostream& err, std::string_view message);

// "SOURCE:P", as --partition takes it and the text output names it.
std::string PositionName(absl::string_view source, int32_t partition);

// A partition number (0..INT32_MAX) or an offset (0..INT64_MAX) written in
// decimal; nullopt otherwise.
std::optional<int64_t> ParseNonNegative(absl::string_view text, int64_t max);
std::optional<int32_t> ParsePartition(absl::string_view text);

// The subcommands of cli/idemctl_partition.cc, as the table in
// cli/idemctl.cc runs them: Prepare* check and parse the arguments before
// the store is opened (nullopt to go on, or the exit code); Run* run on the
// open store and return the exit code.
int RunOffsets(Engine& engine, const Request& r, std::ostream& out,
               std::ostream& err);
std::optional<int> PrepareSetOffset(Request& request, std::ostream& err);
int RunSetOffset(Engine& engine, const Request& r, std::ostream& out,
                 std::ostream& err);
int RunExport(Engine& engine, const Request& r, std::ostream& out,
              std::ostream& err);
std::optional<int> PrepareImport(Request& request, std::ostream& err);
int RunImport(Engine& engine, const Request& r, std::ostream& out,
              std::ostream& err);

// Shards (cli/idemctl_shards.cc). PrepareShard parses --shard before the
// store is opened: a usage error if it is malformed or `scope` is kWhole.
std::optional<int> PrepareShard(Request& request, const std::string& command,
                                ShardScope scope, std::ostream& err);
// The shard count of the store at `path`: its SHARDS file's, 1 without one
// (an unsharded store, or none: opening it then says what is wrong).
absl::StatusOr<int> StoreShardCount(const std::string& path);
// Once the store is open: notes its shard count in `request`; a usage error
// if --shard is out of range, or if `scope` is kOne on a sharded store and
// neither --shard nor a partition was given.
std::optional<int> CheckShard(Engine& engine, const std::string& command,
                              ShardScope scope, Request& request,
                              std::ostream& err);
// The engine a kEach or kOne subcommand reads: shard --shard=N, else the
// shard of the partition --source/--partition name, else the whole store.
Engine& Target(Engine& engine, const Request& r);
// The index of the shard Target reads on a sharded store; nullopt when it
// reads the whole store (or the store has one shard).
std::optional<int> TargetShard(Engine& engine, const Request& r);
// Calls `visit` with each shard the request covers, in order: --shard=N's,
// or every shard (an unsharded store: itself, as shard 0); stops at the
// first error.
absl::Status ForEachShard(
    Engine& engine, const Request& r,
    absl::FunctionRef<absl::Status(int shard, Engine& e)> visit);

// dump and verify (cli/idemctl_dump.cc).
int RunDump(Engine& engine, const Request& r, std::ostream& out,
            std::ostream& err);
int RunVerify(Engine& engine, const Request& r, std::ostream& out,
              std::ostream& err);

// scan (cli/idemctl_scan.cc): PrepareScan parses --limit.
std::optional<int> PrepareScan(Request& request, std::ostream& err);
int RunScan(Engine& engine, const Request& r, std::ostream& out,
            std::ostream& err);

// metrics (cli/idemctl_metrics.cc): PrepareMetrics fails (exit 3) when
// idem-ctl was built without prometheus-cpp.
std::optional<int> PrepareMetrics(Request& request, std::ostream& err);
int RunMetrics(Engine& engine, const Request& r, std::ostream& out,
               std::ostream& err);

}  // namespace idem::cli::idemctl

#endif  // IDEM_CLI_IDEMCTL_REQUEST_H_
