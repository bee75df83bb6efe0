#include "crash/worker.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "crash/event_log.h"
#include "crash/fire_timers.h"
#include "crash/relay.h"
#include "engine/engine_hooks.h"
#include "engine/sharded_engine.h"  // kShardShift
#include "rocksdb/env.h"

namespace idem::crash {
namespace {

EngineHooks HooksFor(SelfTest self_test) {
  EngineHooks hooks;
  hooks.skip_wal_sync = self_test == SelfTest::kAckBeforeDurable;
  hooks.split_commit = self_test == SelfTest::kSplitCommit;
  hooks.ignore_conflicts = self_test == SelfTest::kIgnoreConflicts;
  hooks.skip_read_validation = self_test == SelfTest::kLostUpdates;
  hooks.skip_range_validation = self_test == SelfTest::kSkipRangeValidation;
  hooks.fire_outside_commit = self_test == SelfTest::kFireOutsideCommit;
  hooks.wrong_shard = self_test == SelfTest::kWrongShard;
  return hooks;
}

// The engines are declared after the env they use, so they close first.
struct OpenedStores {
  std::unique_ptr<rocksdb::Env> env;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Engine> downstream;  // null without a downstream path
};

// Opens the store with `config`'s self-test hooks, and the downstream store
// (if `downstream_path` is not empty) without, through one CrashFileSystem
// configured by `config.crash_fs`: one journal, and kill points counted over
// both (and over every shard of a sharded store).
absl::StatusOr<OpenedStores> OpenThroughCrashFs(
    const WorkerConfig& config, const std::string& downstream_path) {
  auto fs = std::make_shared<CrashFileSystem>(rocksdb::FileSystem::Default(),
                                              config.crash_fs);
  if (!fs->status().ok()) return fs->status();
  OpenedStores opened;
  opened.env = rocksdb::NewCompositeEnv(fs);
  Options options;
  options.durability = config.durability;
  options.expiry_buckets = config.expiry_buckets;
  options.dedupe_scope = config.dedupe_scope;
  options.detect_conflicts = config.detect_conflicts;
  options.refresh_on_duplicate = config.refresh_on_duplicate;
  options.shards = config.shards;
  options.env = opened.env.get();
  // Small memtables: flushes and compactions happen within a short cycle,
  // so crashes land in them too.
  options.write_buffer_bytes = size_t{256} << 10;
  absl::StatusOr<std::unique_ptr<Engine>> engine = OpenEngineWithHooks(
      config.store_path, options, HooksFor(config.self_test));
  if (!engine.ok()) return engine.status();
  opened.engine = std::move(*engine);
  if (!downstream_path.empty()) {
    // The downstream dedupes by the entries' message IDs, whatever the
    // upstream's scope, in one store.
    options.dedupe_scope = DedupeScope::kStore;
    options.shards = 1;
    absl::StatusOr<std::unique_ptr<Engine>> downstream =
        Engine::Open(downstream_path, options);
    if (!downstream.ok()) {
      return absl::Status(downstream.status().code(),
                          absl::StrCat("the downstream store: ",
                                       downstream.status().message()));
    }
    opened.downstream = std::move(*downstream);
  }
  return opened;
}

// One delivery of a worker thread: the messages, their IDs and whether each
// is a conflicting redelivery (sent with kConflictFingerprint).
struct Batch {
  std::vector<Message> messages;
  std::vector<std::string> ids;
  std::vector<bool> conflicting;

  void Clear() {
    messages.clear();
    ids.clear();
    conflicting.clear();
  }

  void Add(Message message, bool is_conflicting) {
    if (is_conflicting) message.fingerprint = kConflictFingerprint;
    ids.emplace_back(message.id);
    conflicting.push_back(is_conflicting);
    messages.push_back(std::move(message));
  }
};

class Worker {
 public:
  // `relay` (null without a downstream) must outlive the worker.
  Worker(const WorkerConfig& config, const Stream& stream,
         const Workload& workload, Engine& engine, EventLogWriter& log,
         Relay* relay)
      : config_(config),
        stream_(stream),
        workload_(workload),
        engine_(engine),
        log_(log),
        relay_(relay),
        publish_at_once_(relay != nullptr &&
                         config.self_test == SelfTest::kEmitOutsideCommit),
        cursors_(stream.partitions.size()) {
    for (size_t p = 0; p < cursors_.size(); ++p) {
      cursors_[p].store(config.start_offsets[p]);
    }
  }

  // Consumes every partition to its end, then relays what is left in the
  // outbox; false if a thread hit an error.
  bool Run() {
    std::vector<std::thread> threads;
    for (int t = 0; t < config_.threads; ++t) {
      threads.emplace_back([this, t] { Consume(t); });
    }
    for (std::thread& t : threads) t.join();
    for (int p = 0; p < static_cast<int>(cursors_.size()); ++p) {
      if (failed_.load() || !FireDueTimers(p, /*last=*/true)) break;
    }
    while (relay_ != nullptr && !failed_.load()) {
      absl::StatusOr<size_t> relayed = RelayOnce();
      if (!relayed.ok() || *relayed == 0) break;
    }
    return !failed_.load();
  }

 private:
  // One relay pass (each consumer thread runs one after each batch, as the
  // Kafka consumer does, so with one thread the kill points stay seeded).
  absl::StatusOr<size_t> RelayOnce() {
    absl::StatusOr<size_t> relayed = relay_->RelayOnce();
    if (!relayed.ok()) {
      Fail(absl::StrCat("relay: ", relayed.status().ToString()));
    }
    return relayed;
  }

  absl::Status Handle(const Message& m, Txn& txn) {
    if (publish_at_once_) {
      return relay_->HandlePublishingAtOnce(
          m, txn, [this](const Message& message, Txn& handler_txn) {
            return workload_.Handle(message, handler_txn);
          });
    }
    return workload_.Handle(m, txn);
  }

  // One thread's deliveries: batches of 1 to max_batch entries from its
  // partitions in turn, now and then with a concurrent duplicate, each
  // acknowledged once durable and followed by a relay pass; until its
  // partitions are consumed or a thread fails.
  void Consume(int thread) {
    std::mt19937_64 rng(config_.seed * 1000003 + thread);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    const int partitions = static_cast<int>(stream_.partitions.size());
    const std::vector<int> own = OwnPartitions(thread);
    Batch batch;
    size_t next = 0;
    while (!failed_.load()) {
      const int p = NextPartition(own, next);
      if (p < 0) return;
      const int64_t begin = cursors_[p].load();
      const int64_t end = std::min<int64_t>(
          static_cast<int64_t>(stream_.partitions[p].size()),
          begin + 1 + static_cast<int64_t>(rng() % config_.max_batch));
      batch.Clear();
      AddEntries(p, begin, end, batch);
      if (unit(rng) < config_.concurrent_duplicate_rate) {
        AddConcurrentDuplicate(static_cast<int>(rng() % partitions), batch);
      }
      if (!Deliver(p, end - 1, batch)) return;
      cursors_[p].store(end);
      if (!FireDueTimers(p)) return;
      if (relay_ != nullptr && !RelayOnce().ok()) return;
    }
  }

  // The partitions thread `thread` delivers: every threads-th from its own
  // number.
  std::vector<int> OwnPartitions(int thread) const {
    std::vector<int> own;
    const int partitions = static_cast<int>(stream_.partitions.size());
    for (int p = thread; p < partitions; p += config_.threads) own.push_back(p);
    return own;
  }

  // Round-robin over `own`, from `next`: the first partition with entries
  // left (and `next` moves past it), or -1 if none has.
  int NextPartition(const std::vector<int>& own, size_t& next) const {
    for (size_t k = 0; k < own.size(); ++k) {
      const int q = own[(next + k) % own.size()];
      if (cursors_[q].load() <
          static_cast<int64_t>(stream_.partitions[q].size())) {
        next = (next + k + 1) % own.size();
        return q;
      }
    }
    return -1;
  }

  // For a workload whose handler sets timers: fires the due event-time
  // timers of `partition` (crash/fire_timers.h); `last`, once every thread
  // has stopped: and checks that none is left due.
  bool FireDueTimers(int partition, bool last = false) {
    if (!workload_.fires_timers()) return true;
    absl::Status s = FireDue(engine_, workload_, partition);
    if (s.ok() && last) s = CheckNoneDue(engine_, partition);
    return s.ok() || Fail(s.ToString());
  }

  // Adds the entries at offsets [begin, end) of `partition` to `batch`.
  void AddEntries(int partition, int64_t begin, int64_t end,
                  Batch& batch) const {
    const auto& entries = stream_.partitions[partition];
    for (int64_t o = begin; o < end; ++o) {
      const StreamMessage& m = stream_.messages[entries[o]];
      batch.Add(Message{.id = m.id,
                        .payload = m.payload,
                        .source = kStreamSource,
                        .partition = partition,
                        .offset = o,
                        .event_time = m.event_time},
                Conflicting(partition, o));
    }
  }

  // Adds to `batch` the entry `partition` is about to deliver, delivered
  // concurrently with its owner (as after a rebalance), without its offset;
  // under partition scope with its partition, which names the message there
  // (a delivery without it would be another message), and with an event
  // time with its partition too, whose stream time it moves.
  void AddConcurrentDuplicate(int partition, Batch& batch) const {
    const int64_t at = std::min<int64_t>(
        cursors_[partition].load(),
        static_cast<int64_t>(stream_.partitions[partition].size()) - 1);
    if (at < 0) return;
    const StreamMessage& m =
        stream_.messages[stream_.partitions[partition][at]];
    Message duplicate;
    duplicate.id = m.id;
    duplicate.payload = m.payload;
    duplicate.event_time = m.event_time;
    if (config_.dedupe_scope == DedupeScope::kPartition ||
        m.event_time != absl::InfinitePast()) {
      duplicate.source = kStreamSource;
      duplicate.partition = partition;
    }
    batch.Add(std::move(duplicate), Conflicting(partition, at));
  }

  // Whether entry `offset` of `partition` is a conflicting redelivery.
  bool Conflicting(int partition, int64_t offset) const {
    const auto& flags = stream_.conflicting;
    return static_cast<size_t>(partition) < flags.size() &&
           static_cast<size_t>(offset) < flags[partition].size() &&
           flags[partition][offset];
  }

  // Delivers one batch and acknowledges it once durable. A conflicting
  // redelivery (Batch::conflicting) must be kConflict; any other outcome is
  // logged for the conflicts_rejected invariant. A batch that spans shards
  // committed one write per shard: each is logged as a commit of its own.
  bool Deliver(int partition, int64_t last_offset, const Batch& batch) {
    const std::vector<std::string>& ids = batch.ids;
    log_.Invoke(ids);
    absl::StatusOr<std::vector<Result>> results = engine_.ProcessBatch(
        batch.messages,
        [this](const Message& m, Txn& txn) { return Handle(m, txn); });
    if (!results.ok()) return Fail(results.status().ToString());
    // By shard (the top bits of a sequence, kShardShift).
    std::map<uint64_t, CycleEvents::Commit> commits;
    uint64_t duplicates = 0;
    uint64_t conflicts = 0;
    uint64_t sequence = 0;
    for (size_t i = 0; i < results->size(); ++i) {
      const Result& r = (*results)[i];
      if (r.outcome == Outcome::kFailed) {
        return Fail(
            absl::StrCat("message ", ids[i], " failed: ", r.error.ToString()));
      }
      CycleEvents::Commit& commit = commits[r.sequence >> kShardShift];
      commit.sequence = std::max(commit.sequence, r.sequence);
      if (r.outcome == Outcome::kProcessed) commit.processed.push_back(ids[i]);
      if (r.outcome == Outcome::kDuplicate) ++duplicates;
      if (r.outcome == Outcome::kConflict) ++conflicts;
      if (batch.conflicting[i] && r.outcome != Outcome::kConflict) {
        log_.UnrejectedConflict(ids[i], r.outcome == Outcome::kProcessed
                                            ? "processed"
                                            : "duplicate");
      }
      sequence = std::max(sequence, r.sequence);
    }
    if (conflicts > 0) log_.Conflicts(conflicts);
    for (const auto& [shard, commit] : commits) {
      log_.Commit(commit.sequence, duplicates, commit.processed);
      duplicates = 0;  // counted once
    }
    // The largest sequence covers every shard's part (Engine::WaitDurable).
    if (absl::Status s = engine_.WaitDurable(sequence); !s.ok()) {
      return Fail(s.ToString());
    }
    log_.Ack(partition, last_offset, ids);
    return true;
  }

  bool Fail(const std::string& message) {
    log_.Error(message);
    failed_.store(true);
    return false;
  }

  const WorkerConfig& config_;
  const Stream& stream_;
  const Workload& workload_;
  Engine& engine_;
  EventLogWriter& log_;
  Relay* const relay_;
  // SelfTest::kEmitOutsideCommit: the handler publishes its emits itself.
  const bool publish_at_once_;
  // Next offset to deliver per partition.
  std::vector<std::atomic<int64_t>> cursors_;
  std::atomic<bool> failed_{false};
};

}  // namespace

void RunWorker(const WorkerConfig& config, const Stream& stream,
               const Workload& workload) {
  EventLogWriter log(config.log_path);
  const Downstream* downstream = workload.downstream();
  absl::StatusOr<OpenedStores> opened = OpenThroughCrashFs(
      config, downstream != nullptr ? config.downstream_path : "");
  if (!opened.ok()) {
    log.Error(absl::StrCat("open: ", opened.status().ToString()));
    ::_exit(3);
  }
  if (config.ready_fd >= 0) {
    const char ready = 'r';
    if (::write(config.ready_fd, &ready, 1) != 1) ::_exit(4);
    ::close(config.ready_fd);
  }
  std::optional<Relay> relay;
  if (downstream != nullptr) {
    relay.emplace(*opened->engine, *opened->downstream, *downstream,
                  config.durability, log,
                  config.self_test == SelfTest::kAckBeforePublish);
  }
  Worker worker(config, stream, workload, *opened->engine, log,
                relay.has_value() ? &*relay : nullptr);
  const bool ok = worker.Run();
  if (ok) log.Done();
  relay.reset();
  opened->downstream.reset();
  opened->engine.reset();
  ::_exit(ok ? 0 : 4);
}

void RunRecovery(const WorkerConfig& config) {
  WorkerConfig recovery = config;
  recovery.self_test = SelfTest::kNone;
  absl::StatusOr<OpenedStores> opened =
      OpenThroughCrashFs(recovery, recovery.downstream_path);
  if (!opened.ok()) ::_exit(3);
  opened->downstream.reset();
  opened->engine.reset();
  ::_exit(0);
}

}  // namespace idem::crash
