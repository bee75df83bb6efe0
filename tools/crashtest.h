// The logic of the idem-crashtest tool: turns its arguments into
// crash::CrashTestOptions, runs the harness with progress on `err`, and
// prints the report (text or JSON) on `out`. Not thread-safe; forks (see
// idem/crash_harness.h), so call it from a single-threaded process.

#ifndef IDEM_TOOLS_CRASHTEST_H_
#define IDEM_TOOLS_CRASHTEST_H_

#include <cstdint>
#include <ostream>
#include <string>

namespace idem::tools {

struct CrashtestArgs {
  std::string workload = "ledger";  // ledger | inventory
  int cycles = 20;
  std::string mode = "kill";        // kill | powerloss | killpoint | mixed
  std::string durability = "sync";  // sync | buffered
  uint64_t seed = 1;
  int threads = 2;
  // Scratch directory; empty: a new temporary directory, removed afterwards
  // unless `keep` is set or a violation was found.
  std::string dir;
  bool keep = false;
  bool json = false;
  size_t messages = 0;              // per epoch; 0: min(20000, 500 per cycle)
  int partitions = 4;
  int max_batch = 32;
  int expiry_buckets = 0;
  double recovery_crash_rate = 0.2;
  std::string self_test = "none";   // none | ack_before_durable | split_commit
};

// Exit codes: 0 every invariant held; 1 a violation was found; 2 bad
// arguments or the harness could not run.
int RunCrashtest(const CrashtestArgs& args, std::ostream& out,
                 std::ostream& err);

}  // namespace idem::tools

#endif  // IDEM_TOOLS_CRASHTEST_H_
