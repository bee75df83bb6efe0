// The worker process of a crash-test cycle: opens the store through a
// CrashFileSystem and consumes the stream from the broker's acknowledged
// positions with several threads, logging every delivery, commit and
// acknowledgement, until it is killed or the stream ends. With a workload's
// Downstream it also opens the downstream store through the same file
// system, and relays the outbox to it (crash/relay.h): each consumer thread
// after each batch, and once more until the outbox is empty before the
// worker is done.

#ifndef IDEM_CRASH_WORKER_H_
#define IDEM_CRASH_WORKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "crash/stream.h"
#include "idem/crash/file_system.h"
#include "idem/crash/harness.h"

namespace idem::crash {

struct WorkerConfig {
  std::string store_path;
  // The downstream store; used when the workload has a Downstream.
  std::string downstream_path;
  std::string log_path;
  Durability durability = Durability::kSync;
  SelfTest self_test = SelfTest::kNone;
  int threads = 1;
  int max_batch = 32;
  int expiry_buckets = 0;                          // Options::expiry_buckets
  DedupeScope dedupe_scope = DedupeScope::kStore;  // Options::dedupe_scope
  bool detect_conflicts = false;                   // Options::detect_conflicts
  bool refresh_on_duplicate = false;  // Options::refresh_on_duplicate
  int shards = 1;                     // Options::shards
  double concurrent_duplicate_rate = 0;
  uint64_t seed = 0;
  // Per partition, the first offset to deliver (the broker's acknowledged
  // position + 1).
  std::vector<int64_t> start_offsets;
  // journal_path and any kill point.
  CrashFsOptions crash_fs;
  // If >= 0, one byte is written here once the store is open.
  int ready_fd = -1;
};

// Runs the worker and exits the process: 0 when the stream was consumed,
// 3 if the store could not be opened, 4 on any other error (logged as E).
[[noreturn]] void RunWorker(const WorkerConfig& config, const Stream& stream,
                            const Workload& workload);

// Opens the store (and, unless `config.downstream_path` is empty, the
// downstream store) as a worker of `config` would, without its self-test,
// through a CrashFileSystem configured by `config.crash_fs`, then closes
// them and exits the process (0, or 3 if an Open failed): a recovery that
// the harness may kill part-way. Only the store fields of `config` are used.
[[noreturn]] void RunRecovery(const WorkerConfig& config);

}  // namespace idem::crash

#endif  // IDEM_CRASH_WORKER_H_
