// The invariant checks run against a recovered store after each crash-test
// cycle (in a forked child, so the harness process never opens RocksDB).

#ifndef IDEM_CRASH_VERIFIER_H_
#define IDEM_CRASH_VERIFIER_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "crash/event_log.h"
#include "crash/stream.h"
#include "idem/crash/harness.h"

namespace idem::crash {

// Invariant names, in report order.
inline constexpr const char* kInvariantNames[] = {
    "recovery_opens",       // Open never fails after a crash
    "no_lost_ack",          // every acknowledged ID is present
    "no_phantom",           // every present ID was delivered
    "atomicity",            // an ID is present exactly when its effect is
    "exactly_once_effect",  // state = effects of the present IDs, once each
    "offsets_not_ahead",    // every entry at or below a committed offset is
                            // present
    "bounded_in_flight",    // present but unacknowledged IDs were in flight
    "commit_prefix",        // the surviving commits of a cycle are a prefix
                            // of its commit order (each shard's of that
                            // shard's)
    "worker_errors",        // no worker saw a storage or handler error
    "final_complete",       // after the final crash-free run, every unique ID
                            // is present (and, with a Downstream, the
                            // outbox is empty)
};

// With a Downstream, also these, in report order.
inline constexpr const char* kOutboxInvariantNames[] = {
    "no_lost_emit",             // every emit of a committed message is in the
                                // outbox or applied downstream (after a
                                // crash-free run: applied)
    "one_content_per_id",       // a message ID never carries two contents
    "downstream_exactly_once",  // every downstream effect is an emit of a
                                // committed message, applied once
};

// With CrashTestOptions::detect_conflicts, also this, in report order.
inline constexpr const char* kConflictInvariantNames[] = {
    "conflicts_rejected",  // every conflicting redelivery was kConflict
};

// Message ID -> the content (EntryContent) first published under it.
using PublishedContents = absl::flat_hash_map<std::string, std::string>;

struct VerifyInput {
  const Stream* stream = nullptr;
  const Workload* workload = nullptr;
  // The worker's Options::dedupe_scope: under kPartition a message's record
  // is looked up on the partition the stream put it in.
  DedupeScope dedupe_scope = DedupeScope::kStore;
  // The worker's Options::shards: with more than one, a message's state is
  // read in its partition's shard, and each shard's state is checked
  // against the messages of its partitions.
  int shards = 1;
  // Over all cycles so far.
  const absl::flat_hash_set<std::string>* delivered = nullptr;
  const absl::flat_hash_set<std::string>* acked = nullptr;
  const absl::flat_hash_set<std::string>* in_flight = nullptr;
  // The commits of the cycle just crashed.
  const std::vector<CycleEvents::Commit>* commits = nullptr;
  bool final_check = false;
  // With a Downstream (Workload::downstream()): the downstream store, and
  // the content first published under each message ID over the epoch's
  // runs.
  std::string downstream_path;
  const PublishedContents* published = nullptr;
};

struct VerifyOutput {
  // Whether a store existed to open, and how long Open (recovery) took.
  bool opened = false;
  absl::Duration open_time;
  // Failed checks only, by invariant name; each with its first counterexample.
  std::vector<InvariantResult> violations;
  // Names of the invariants evaluated.
  std::vector<std::string> evaluated;
};

// Collects one VerifyOutput: which invariants were evaluated, and the first
// counterexample of each that failed. Not thread-safe.
class Checker {
 public:
  explicit Checker(VerifyOutput* out) : out_(out) {}

  void Evaluated(const char* name) { out_->evaluated.push_back(name); }

  // Records the first counterexample of `name`.
  void Violation(const char* name, const std::string& counterexample);

 private:
  VerifyOutput* const out_;
};

// Opens the store at `store_path` and checks every invariant.
VerifyOutput VerifyStore(const std::string& store_path,
                         const VerifyInput& input);

// Runs VerifyStore in a forked child and returns its output.
absl::StatusOr<VerifyOutput> VerifyStoreInChild(const std::string& store_path,
                                                const VerifyInput& input);

}  // namespace idem::crash

#endif  // IDEM_CRASH_VERIFIER_H_
