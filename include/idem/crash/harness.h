// The crash-recovery harness: runs cycles of "start a fresh worker process,
// let it consume an at-least-once message stream through an idem::Engine,
// kill it (SIGKILL at a random time, at a deterministic kill point, or with
// its unsynced writes dropped as by a power loss), optionally crash the
// recovery too, then reopen the store and check invariants". It proves, for
// the engine and for a user's own handler, that a crash neither loses an
// acknowledged message nor applies one twice. See docs/crash-testing.md.
//
// Workers are forked from the calling process, so RunCrashTest must be called
// from a single-threaded process that has not used RocksDB yet (forking a
// process with RocksDB threads is unsafe); it returns kFailedPrecondition
// otherwise. The calling process itself never opens the store: recovery and
// verification run in forked children too.
//
// Workload implementations must be thread-safe (their const methods are
// called from several worker threads) and deterministic.

#ifndef IDEM_CRASH_HARNESS_H_
#define IDEM_CRASH_HARNESS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "idem/engine.h"
#include "idem/timers.h"

namespace idem::crash {

// One unique logical message of a workload's stream.
struct StreamMessage {
  std::string id;
  std::string payload;
  // Delivered as Message::event_time; InfinitePast: none. A message with an
  // event time is always delivered with its partition (a concurrent
  // duplicate too), whose stream time it moves.
  absl::Time event_time = absl::InfinitePast();
};

// An outbox entry the downstream applied, as the verifier found it.
struct AppliedEntry {
  // As the downstream recorded it when it first applied it (position 0).
  OutboxEntry entry;
  // The committed upstream message whose emit number `emit_index` has this
  // entry's message ID; null if no committed message has (which the harness
  // reports under downstream_exactly_once). Points into the harness's
  // stream, valid during the Downstream::VerifyDownstream call.
  const StreamMessage* input = nullptr;
  uint32_t emit_index = 0;
};

// The downstream of a workload whose handler emits (Txn::Emit,
// EmitWithHeaders). With one, each worker thread runs a relay pass after
// each batch: it reads the upstream store's outbox (Engine::ReadOutbox),
// publishes each entry to a second engine, the downstream store, as a
// message whose ID is the entry's message_id (so the downstream applies each
// message ID once), waits until the downstream has it durably and only then
// acknowledges it (Engine::AckOutbox). With every
// entry the downstream applies, the harness records the entry in the
// downstream's state (keys starting with "idem-crash/"), and after every
// crash it checks that no committed emit is lost, that no message ID carries
// two contents and that every downstream effect happens exactly once (see
// docs/crash-testing.md).
//
// Implementations must be thread-safe and deterministic, like Workload's.
class Downstream {
 public:
  virtual ~Downstream() = default;

  // How many entries the workload's handler emits when it processes
  // `message` (emit indexes 0 to count - 1). Must depend on the message
  // only.
  virtual uint32_t EmitCount(const StreamMessage& message) const = 0;

  // The downstream's handler: applies one published entry through `txn`.
  // Runs once per message ID (a republished entry is a duplicate). Must not
  // write state keys starting with "idem-crash/".
  virtual absl::Status Apply(const OutboxEntry& entry, Txn& txn) const = 0;

  // Checks that the downstream state equals the effects of exactly the
  // `applied` entries, each once, and that each entry is what its input
  // emits. Returns a non-OK status naming the first difference.
  virtual absl::Status VerifyDownstream(
      Engine& downstream, absl::Span<const AppliedEntry> applied) const = 0;
};

// A pluggable workload: a deterministic message generator, a handler and a
// verifier over the recovered store; and, if its handler emits, its
// downstream.
class Workload {
 public:
  virtual ~Workload() = default;

  virtual std::string name() const = 0;

  // Returns `count` messages with distinct IDs; the same seed must give the
  // same messages.
  virtual std::vector<StreamMessage> Generate(uint64_t seed,
                                              size_t count) const = 0;

  // The handler the worker passes to ProcessBatch. Must be deterministic.
  virtual absl::Status Handle(const Message& message, Txn& txn) const = 0;

  // Whether `message`'s effect is in the recovered store (used to check that
  // a message's dedupe record is present exactly when its effect is).
  virtual absl::StatusOr<bool> EffectPresent(
      Engine& engine, const StreamMessage& message) const = 0;

  // Checks that the recovered state equals the effects of exactly the
  // `applied` messages (those whose dedupe record is present), each once.
  // Returns a non-OK status naming the first difference.
  virtual absl::Status Verify(
      Engine& engine, absl::Span<const StreamMessage> applied) const = 0;

  // The downstream of a workload whose handler emits, owned by the workload;
  // nullptr (the default) for one whose handler does not. Without one,
  // emitted entries stay in the outbox: nothing relays them.
  virtual const Downstream* downstream() const { return nullptr; }

  // Whether the handler sets event-time timers (Txn::SetTimer). If so, the
  // worker fires the due ones (Engine::FireTimers with FireTimer) of each
  // partition after each batch it delivers there, as a consumer's TimerPump
  // does, and of every partition once its stream is consumed. Default:
  // false.
  virtual bool fires_timers() const { return false; }

  // The TimerHandler of those fires. Must be deterministic. The default
  // returns kUnimplemented.
  virtual absl::Status FireTimer(const TimerFire& fire, Txn& txn) const {
    (void)fire, (void)txn;
    return absl::UnimplementedError("Workload::FireTimer");
  }

  // Whether the workload runs on a sharded engine (CrashTestOptions::shards
  // > 1), where state is partition-local: a handler reads and writes only
  // its message's shard (Engine::ShardOf of its partition). The verifier
  // then calls EffectPresent with the shard of the message's partition and
  // Verify once per shard, with that shard's engine (Engine::shard) and the
  // applied messages of its partitions, so the workload's checks must hold
  // shard by shard. RunCrashTest refuses shards > 1 for a workload that
  // returns false (the default).
  virtual bool supports_shards() const { return false; }
};

// The built-in workloads: "ledger" (each message is a payment that adds an
// amount to one of 64 accounts; every balance, and their total, must equal
// the sum of the applied payments; the ledger idem-demo and idem-kafka-demo
// use too), "inventory" (reserve stock for an order, at most one
// reservation per order whatever the message ID) and "pipeline" (the
// ledger, whose handler also emits a ledger entry per payment, and a second
// entry for a payment above 500, to a downstream that keeps its own
// balances: they must equal the applied entries' payments), "transfers"
// (each message moves an amount between two of four shared accounts, so
// concurrent threads read and write the same keys: every balance must
// equal the committed transfers, and the total stays zero), "orders"
// (orders opened and closed under four customers, counted with prefix
// scans, and per-customer counters bumped with merges: every recorded count
// must equal a serial replay's in commit order, and every counter the sum
// of its applied bumps), "windows" (events of many keys with out-of-order
// event times, counted in tumbling windows with grace whose timers the
// worker fires: every (key, window) is emitted once with exactly its
// accepted events, and none is lost).
// The ledger and transfers run sharded too (CrashTestOptions::shards):
// each shard then holds its own accounts, which the messages of its
// partitions pay into or move amounts between, so a transfer never crosses
// shards; each shard's balances must equal its applied messages, and each
// shard's transfers total zero.
std::unique_ptr<Workload> NewLedgerWorkload();
std::unique_ptr<Workload> NewOrdersWorkload();
std::unique_ptr<Workload> NewTransfersWorkload();
std::unique_ptr<Workload> NewWindowsWorkload();
std::unique_ptr<Workload> NewInventoryWorkload();
std::unique_ptr<Workload> NewPipelineWorkload();
// By name; kInvalidArgument for an unknown name.
absl::StatusOr<std::unique_ptr<Workload>> NewBuiltinWorkload(
    const std::string& name);

enum class CrashMode {
  kKill,       // SIGKILL at a random time; the OS keeps unsynced writes
  kPowerLoss,  // SIGKILL at a random time, then unsynced writes are dropped
               // (some cycles keep a random part of them: torn writes)
  kKillPoint,  // the worker kills itself at a seeded Nth append/sync/rename,
               // then unsynced writes are dropped
  kMixed,      // each cycle picks one of the above
};

// Deliberately broken engines (and, for workloads with a Downstream, a broken
// handler or relay), to show the harness reports violations.
enum class SelfTest {
  kNone,
  kAckBeforeDurable,     // WaitDurable returns without syncing (use kBuffered
                         // with kPowerLoss or kKillPoint)
  kSplitCommit,          // state and dedupe record committed in two writes
  kEmitOutsideCommit,    // the handler's emits are published to the
                         // downstream at once, from inside the handler,
                         // instead of committing with it (needs a workload
                         // with a Downstream, e.g. "pipeline")
  kAckBeforePublish,     // the relay acknowledges outbox entries before it
                         // publishes them (needs a workload with a
                         // Downstream)
  kLostUpdates,          // the engine does not check that a handler's reads
                         // are still current when it commits, so concurrent
                         // read-modify-writes of one key lose updates (needs
                         // threads >= 2, e.g. with "transfers")
  kIgnoreConflicts,      // the engine answers a conflicting redelivery as a
                         // duplicate (needs detect_conflicts)
  kSkipRangeValidation,  // the engine validates a handler's point reads but
                         // not the ranges its scans read, so a scan misses
                         // an insert committed meanwhile (needs threads
                         // >= 2, e.g. with "orders")
  kFireOutsideCommit,    // FireTimers deletes the fired timers in a write
                         // of their own, before their effects' (needs a
                         // workload that fires timers, e.g. "windows")
  kWrongShard,           // the sharded engine routes each partition to
                         // another shard than Engine::ShardOf's, a new one
                         // at each open, so a message's state, dedupe
                         // record and offset land away from where its
                         // partition's are read (needs shards >= 2)
};

// What RunCrashTest reports after each run of a worker, for progress
// output. Every run is one of four kinds: a crash cycle (there are exactly
// CrashTestOptions::cycles of them, unless a worker stops on its own), a run
// that ended without a crash, the crash-free check that closes an epoch
// before the last, and the final run (always last, exactly once).
struct CycleProgress {
  enum class Kind {
    kCrashCycle,  // crash cycle `cycle` of `cycles`, ended by a crash
    kNoCrash,     // an attempt at crash cycle `cycle` whose worker stopped
                  // before the crash came: not a cycle (counted in
                  // CrashTestReport::cycles_without_crash). Either it
                  // consumed the rest of its epoch's stream, and the cycle
                  // runs again on a new epoch, or it failed on its own
                  // (worker_errors), and the crash cycles end there
    kEpochEnd,    // the crash-free completeness check that closes `epoch`
                  // when its stream has been consumed
    kFinalRun,    // the crash-free final run on the last epoch
  };
  Kind kind = Kind::kCrashCycle;
  int cycle = 0;   // kCrashCycle, kNoCrash: in [1, cycles]; else crash
                   // cycles done so far
  int cycles = 0;  // CrashTestOptions::cycles
  int epoch = 0;   // 1-based
  // kCrashCycle: "kill", "power loss", "power loss (torn)" or "kill point";
  // empty otherwise.
  std::string crash;
  // "<N> delivered, <N> acked, <N> duplicates; open <T>ms; ok" (or
  // "<N> VIOLATION(S)").
  std::string summary;
};

// Bounds are checked by RunCrashTest (kInvalidArgument naming the field,
// e.g. "threads must be in [1, 256], got 100000"); idem-crashtest's flags
// have the same names and bounds.
struct CrashTestOptions {
  // Scratch directory (created if missing); the store and logs go here.
  // Required.
  std::string dir;
  // Crash cycles: worker runs that each end in a crash of `mode`'s kind,
  // followed by the crash-free final run. A run whose worker consumes the
  // rest of its stream before the crash comes is not a cycle (see
  // CrashTestReport::cycles_without_crash). In [0, 1000000].
  int cycles = 20;
  CrashMode mode = CrashMode::kKill;
  Durability durability = Durability::kSync;
  uint64_t seed = 1;
  // Worker threads delivering concurrently. In [1, 256].
  int threads = 2;
  // Unique messages in the stream of one epoch. When an epoch's stream has
  // been consumed, the epoch ends with its crash-free completeness check and
  // the next cycle runs on a new epoch: a fresh store on a new stream (seeded
  // from `seed` and the epoch number), so every check stays complete and
  // cheap in long runs. The harness keeps every message and the IDs seen in
  // memory (a few hundred bytes each). 0: min(20000, 500 per cycle);
  // otherwise in [1, 2000000].
  size_t messages = 0;
  // Partitions of the simulated broker. In [1, 1024].
  int partitions = 4;
  // Fraction of stream entries that are producer duplicates (the same ID
  // again at a later offset), and of deliveries that are repeated
  // concurrently by another worker thread. Each in [0, 1].
  double producer_duplicate_rate = 0.05;
  double concurrent_duplicate_rate = 0.05;
  // Largest batch a worker passes to ProcessBatch (batches are 1..max).
  // In [1, 10000].
  int max_batch = 32;
  // Options::expiry_buckets of the worker's engine (the window stays at its
  // default, so records land in buckets, which are created under crashes,
  // but none ends during a run). In [0, 64].
  int expiry_buckets = 0;
  // Options::dedupe_scope of the worker's engine. Under kPartition the
  // stream's messages carry their partition (a producer duplicate stays in
  // its original's partition, so it is still a duplicate) and the verifier
  // looks each record up on it.
  DedupeScope dedupe_scope = DedupeScope::kStore;
  // Options::detect_conflicts and Options::refresh_on_duplicate of the
  // worker's engine. With detect_conflicts, about half the producer
  // duplicates are conflicting redeliveries (the same ID with another
  // fingerprint), which must all be kConflict (invariant
  // conflicts_rejected).
  bool detect_conflicts = false;
  bool refresh_on_duplicate = false;
  // Options::shards of the worker's engine: with more than one, each shard
  // is a store of its own (its own write-ahead log, synced and cut by a
  // power loss on its own), a batch whose messages span shards commits one
  // write per shard, and the verifier checks each shard's commits for a
  // prefix of that shard's commit order. Needs dedupe_scope kPartition and
  // a workload whose supports_shards() is true. In [1, 256].
  int shards = 1;
  // Fraction of crash cycles whose recovery is crashed once before
  // verifying. In [0, 1].
  double recovery_crash_rate = 0.2;
  SelfTest self_test = SelfTest::kNone;
  // Upper bound of the random kill delay after a worker starts. In
  // [0, 1 min].
  absl::Duration max_kill_delay = absl::Milliseconds(150);
  // Called after each run of a worker (for progress output); may be empty.
  std::function<void(const CycleProgress&)> progress;
};

// OK, or kInvalidArgument naming the first field out of bounds.
absl::Status ValidateCrashTestOptions(const CrashTestOptions& options);
// As above, and kInvalidArgument naming self_test for a self-test of the
// outbox (kEmitOutsideCommit, kAckBeforePublish) with a workload without a
// Downstream, kFireOutsideCommit with one that fires no timers, and naming
// shards for shards > 1 with a workload whose supports_shards() is false.
absl::Status ValidateCrashTestOptions(const CrashTestOptions& options,
                                      const Workload& workload);

struct InvariantResult {
  std::string name;
  bool passed = true;
  uint64_t checks = 0;               // how many times it was evaluated
  std::string first_counterexample;  // empty while passed
};

struct CrashTestReport {
  uint64_t seed = 0;
  int shards = 1;  // CrashTestOptions::shards
  // Crash cycles run, each ended by a crash (kills + power_losses +
  // kill_points). Equals CrashTestOptions::cycles, unless a worker stopped
  // on its own before the end of its stream (an error or an unexpected
  // death, reported under worker_errors): then the cycles end there.
  int cycles = 0;
  int epochs = 0;  // fresh stores; each ends with a crash-free final check
  // Crashes by kind.
  int kills = 0;
  int power_losses = 0;
  int torn_writes = 0;
  int kill_points = 0;
  int recovery_crashes = 0;
  // Worker runs of a crash cycle that stopped before the crash came; not
  // counted in `cycles`. Normally the worker consumed the rest of its
  // epoch's stream first (the timed kill came too late, the kill point was
  // never reached): the epoch ends and the cycle runs again on a new epoch.
  // Many of them mean the stream is short for the crash timing: raise
  // `messages`. (A worker that failed on its own is counted here too, and
  // ends the crash cycles.)
  int cycles_without_crash = 0;
  // Messages.
  uint64_t unique_messages = 0;        // over all epochs
  uint64_t stream_entries = 0;         // incl. producer duplicates
  uint64_t deliveries = 0;             // messages passed to the engine
  uint64_t acknowledged = 0;           // deliveries acknowledged to the broker
  uint64_t duplicates_suppressed = 0;  // kDuplicate outcomes
  uint64_t conflicts_rejected = 0;     // kConflict outcomes
  uint64_t unsynced_bytes_dropped = 0;
  // With a Downstream: outbox entries published to it, republications
  // included.
  uint64_t published = 0;
  // Time to Engine::Open (recovery) in the verifier, over the worker runs:
  // the median (nearest rank, within 1% above the exact value) and the max.
  absl::Duration open_p50;
  absl::Duration open_max;
  std::vector<InvariantResult> invariants;

  bool passed() const;
};

// Runs the crash test. Returns an error only if the harness itself could not
// run: kInvalidArgument for options out of bounds or for a self-test the
// workload cannot run (ValidateCrashTestOptions; nothing is run),
// kFailedPrecondition for a multi-threaded process, a directory the harness
// did not create, or 100 worker runs in a row that all consumed their stream
// before the crash came (raise `messages`), kUnavailable for a failed fork or
// an unusable directory. Invariant violations are reported in the
// CrashTestReport.
absl::StatusOr<CrashTestReport> RunCrashTest(const CrashTestOptions& options,
                                             const Workload& workload);

// The report as one JSON object.
std::string CrashTestReportToJson(const CrashTestReport& report);

}  // namespace idem::crash

#endif  // IDEM_CRASH_HARNESS_H_
