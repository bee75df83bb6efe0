// The logic of the idem-crashtest tool: turns its arguments into
// crash::CrashTestOptions, runs the harness with progress on `err`, and
// prints the report (text or JSON) on `out`. Not thread-safe; forks (see
// idem/crash/harness.h), so call it from a single-threaded process.

#ifndef IDEM_CLI_CRASHTEST_H_
#define IDEM_CLI_CRASHTEST_H_

#include <cstdint>
#include <ostream>
#include <string>

namespace idem::cli {

// The numeric fields have the bounds of crash::CrashTestOptions' fields of
// the same names (idem/crash/harness.h), checked before anything runs.
struct CrashtestArgs {
  // ledger | inventory | pipeline | transfers | orders | windows
  std::string workload = "ledger";
  int cycles = 20;                  // crash cycles, in [0, 1000000]
  std::string mode = "kill";        // kill | powerloss | killpoint | mixed
  std::string durability = "sync";  // sync | buffered
  uint64_t seed = 1;
  int threads = 2;  // in [1, 256]
  // Working directory (--dir): holds each epoch's store and the workers'
  // logs; empty: a new temporary directory, removed afterwards unless `keep`
  // is set or a violation was found.
  std::string dir;
  bool keep = false;
  bool json = false;
  // Per epoch; 0: min(20000, 500 per cycle); at most 2000000.
  size_t messages = 0;
  int partitions = 4;                  // in [1, 1024]
  int batch = 32;                      // largest batch, in [1, 10000]
  int expiry_buckets = 0;              // in [0, 64]
  std::string dedupe_scope = "store";  // store | partition
  bool detect_conflicts = false;       // Options::detect_conflicts
  bool refresh_on_duplicate = false;   // Options::refresh_on_duplicate
  // Options::shards, in [1, 256]; above 1 with dedupe_scope "partition"
  // and the ledger or transfers workload.
  int shards = 1;
  double recovery_crash_rate = 0.2;  // in [0, 1]
  // none | ack_before_durable | split_commit | emit_outside_commit |
  // ack_before_publish (these two with the pipeline workload) |
  // lost_updates (with threads >= 2) | ignore_conflicts (with
  // detect_conflicts) | skip_range_validation (with threads >= 2) |
  // fire_outside_commit (with the windows workload) | wrong_shard (with
  // shards >= 2)
  std::string self_test = "none";
};

// Progress goes to `err`: one line per crash cycle ("[cycle i/N] kill: ..."),
// per run that stopped before its crash ("[no crash] ..."), per epoch closed
// before the last ("[epoch E complete] ..."), then "[final run] ...".
// Exit codes: 0 every invariant held; 1 a violation was found; 2 bad
// arguments (out of bounds: a message naming the flag, nothing run) or the
// harness could not run.
int RunCrashtest(const CrashtestArgs& args, std::ostream& out,
                 std::ostream& err);

}  // namespace idem::cli

#endif  // IDEM_CLI_CRASHTEST_H_
