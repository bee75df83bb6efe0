// ValidateCrashTestOptions: the bounds of CrashTestOptions, and the options
// and workloads each self-test needs.

#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "engine/validate.h"  // kMaxShards, Options::shards' bound
#include "idem/crash/harness.h"

namespace idem::crash {
namespace {

// Bounds of CrashTestOptions (documented in idem/crash/harness.h and in
// idem-crashtest's flags).
constexpr int kMaxCycles = 1000000;
constexpr int kMaxThreads = 256;
// The harness keeps each message and the IDs seen in memory (a few hundred
// bytes a message, in the harness and in each verifier child): this keeps a
// run within a few GiB.
constexpr size_t kMaxMessages = 2000000;
constexpr int kMaxPartitions = 1024;
constexpr int kMaxBatch = 10000;
constexpr int kMaxExpiryBuckets = 64;
constexpr absl::Duration kMaxKillDelay = absl::Minutes(1);

absl::Status OutOfRange(absl::string_view field, int64_t lo, int64_t hi,
                        int64_t got) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, " must be in [", lo, ", ", hi, "], got ", got));
}

}  // namespace

absl::Status ValidateCrashTestOptions(const CrashTestOptions& o) {
  if (o.dir.empty()) return absl::InvalidArgumentError("dir is required");
  if (o.cycles < 0 || o.cycles > kMaxCycles) {
    return OutOfRange("cycles", 0, kMaxCycles, o.cycles);
  }
  if (o.threads < 1 || o.threads > kMaxThreads) {
    return OutOfRange("threads", 1, kMaxThreads, o.threads);
  }
  if (o.messages > kMaxMessages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "messages must be in [0, ", kMaxMessages, "], got ", o.messages));
  }
  if (o.partitions < 1 || o.partitions > kMaxPartitions) {
    return OutOfRange("partitions", 1, kMaxPartitions, o.partitions);
  }
  if (o.max_batch < 1 || o.max_batch > kMaxBatch) {
    return OutOfRange("max_batch", 1, kMaxBatch, o.max_batch);
  }
  if (o.expiry_buckets < 0 || o.expiry_buckets > kMaxExpiryBuckets) {
    return OutOfRange("expiry_buckets", 0, kMaxExpiryBuckets, o.expiry_buckets);
  }
  if (o.dedupe_scope != DedupeScope::kStore &&
      o.dedupe_scope != DedupeScope::kPartition) {
    return absl::InvalidArgumentError(
        "dedupe_scope is not a DedupeScope value");
  }
  if (o.shards < 1 || o.shards > kMaxShards) {
    return OutOfRange("shards", 1, kMaxShards, o.shards);
  }
  if (o.shards > 1 && o.dedupe_scope != DedupeScope::kPartition) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shards = ", o.shards,
        " needs dedupe_scope = partition: a sharded engine keeps each "
        "message's dedupe record in its partition's shard"));
  }
  const std::pair<const char*, double> rates[] = {
      {"producer_duplicate_rate", o.producer_duplicate_rate},
      {"concurrent_duplicate_rate", o.concurrent_duplicate_rate},
      {"recovery_crash_rate", o.recovery_crash_rate}};
  for (const auto& [name, rate] : rates) {
    if (!(rate >= 0 && rate <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " must be in [0, 1], got ", rate));
    }
  }
  if (o.self_test == SelfTest::kLostUpdates && o.threads < 2) {
    return absl::InvalidArgumentError(
        "self_test=lost_updates needs threads >= 2");
  }
  if (o.self_test == SelfTest::kSkipRangeValidation && o.threads < 2) {
    return absl::InvalidArgumentError(
        "self_test=skip_range_validation needs threads >= 2");
  }
  if (o.self_test == SelfTest::kIgnoreConflicts && !o.detect_conflicts) {
    return absl::InvalidArgumentError(
        "self_test=ignore_conflicts needs detect_conflicts");
  }
  if (o.self_test == SelfTest::kWrongShard && o.shards < 2) {
    return absl::InvalidArgumentError(
        "self_test=wrong_shard needs shards >= 2");
  }
  if (o.max_kill_delay < absl::ZeroDuration() ||
      o.max_kill_delay > kMaxKillDelay) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_kill_delay must be in [0, ", absl::FormatDuration(kMaxKillDelay),
        "], got ", absl::FormatDuration(o.max_kill_delay)));
  }
  return absl::OkStatus();
}

absl::Status ValidateCrashTestOptions(const CrashTestOptions& options,
                                      const Workload& workload) {
  if (absl::Status s = ValidateCrashTestOptions(options); !s.ok()) return s;
  const char* outbox_self_test =
      options.self_test == SelfTest::kEmitOutsideCommit  ? "emit_outside_commit"
      : options.self_test == SelfTest::kAckBeforePublish ? "ack_before_publish"
                                                         : nullptr;
  if (outbox_self_test != nullptr && workload.downstream() == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("self_test=", outbox_self_test,
                     " needs a workload whose handler emits, with a "
                     "downstream (e.g. pipeline), got ",
                     workload.name()));
  }
  if (options.self_test == SelfTest::kFireOutsideCommit &&
      !workload.fires_timers()) {
    return absl::InvalidArgumentError(
        absl::StrCat("self_test=fire_outside_commit needs a workload whose "
                     "handler sets timers (e.g. windows), got ",
                     workload.name()));
  }
  if (options.shards > 1 && !workload.supports_shards()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shards = ", options.shards,
                     " needs a workload whose state is "
                     "partition-local (ledger or transfers), got ",
                     workload.name()));
  }
  return absl::OkStatus();
}

}  // namespace idem::crash
