// ShardedEngine is the Engine behind Engine::Open when Options::shards > 1:
// one EngineImpl per shard, each its own store (engine/shard_layout.h), and
// every call routed to the shard of its partition (Engine::ShardOf). A
// commit is one shard's: a batch whose messages span shards commits one
// write per shard, each atomic (its messages' dedupe records, state, outputs
// and offsets together), so a crash may keep one shard's part and not
// another's, never part of one message.
//
// What has no partition is refused or spread: GetState(key) and
// ScanState(...) are kFailedPrecondition (state is per shard: read it with
// GetState(source, partition, key) or through shard(i)); the outbox is per
// shard, and its positions too, so ReadOutbox, ReadOutboxAfter and
// AckOutbox are kFailedPrecondition (relay each shard's outbox through
// shard(i), as idem::kafka::OutboxRelay does); CompactExpired, Dump and
// GetStats cover every shard (stats summed), Checkpoint writes every
// shard's checkpoint under one directory.
// WaitDurable of any sequence a shard returned makes every shard durable up
// to its latest commit, so the largest sequence of a batch covers the whole
// batch. Thread-safety as idem::Engine.

#ifndef IDEM_ENGINE_SHARDED_ENGINE_H_
#define IDEM_ENGINE_SHARDED_ENGINE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine_hooks.h"
#include "engine/engine_impl.h"
#include "idem/engine.h"

namespace idem {

// Opens (or creates) the sharded store at `path`. REQUIRES: options.shards
// > 1 and ValidateOptions(options) is OK.
absl::StatusOr<std::unique_ptr<Engine>> OpenShardedEngine(
    const std::string& path, const Options& options, const EngineHooks& hooks);

// The shard bits of a sequence or position a ShardedEngine hands out: the
// shard index in the top 8 bits, the shard's own number below (RocksDB
// sequence numbers have 56 bits).
inline constexpr int kShardShift = 56;
inline constexpr uint64_t kShardLocalMask = (uint64_t{1} << kShardShift) - 1;

class ShardedEngine final : public Engine {
 public:
  ShardedEngine(Options options, std::vector<std::unique_ptr<Engine>> shards,
                bool unstable_routing);

  absl::StatusOr<Result> Process(const Message& message,
                                 Handler handler) override;
  absl::StatusOr<std::vector<Result>> ProcessBatch(
      absl::Span<const Message> messages, Handler handler) override;
  using Engine::GetState;
  absl::StatusOr<std::optional<std::string>> GetState(
      std::string_view key) override;
  absl::Status ScanState(std::string_view begin, std::string_view end,
                         ScanVisitor visit,
                         const ScanOptions& options) override;
  absl::StatusOr<bool> Seen(std::string_view id) override;
  absl::StatusOr<bool> Seen(std::string_view id, std::string_view source,
                            int32_t partition) override;
  absl::Status Forget(std::string_view id) override;
  absl::Status Forget(std::string_view id, std::string_view source,
                      int32_t partition) override;
  absl::StatusOr<std::optional<int64_t>> CommittedOffset(
      std::string_view source, int32_t partition) override;
  absl::Status SetCommittedOffset(std::string_view source, int32_t partition,
                                  int64_t offset) override;
  absl::Status WaitDurable(uint64_t sequence) override;
  absl::StatusOr<Stats> GetStats() override;
  Options options() override { return options_; }
  absl::Status CompactExpired() override;
  absl::StatusOr<std::vector<OutboxEntry>> ReadOutbox(
      size_t max_entries) override;
  absl::StatusOr<std::vector<OutboxEntry>> ReadOutboxAfter(
      uint64_t position, size_t max_entries) override;
  absl::Status AckOutbox(uint64_t position) override;
  absl::StatusOr<PartitionSnapshot> ExportPartition(std::string_view source,
                                                    int32_t partition) override;
  absl::Status ImportPartition(const PartitionSnapshot& snapshot) override;
  absl::Status ImportPartition(const PartitionSnapshot& snapshot,
                               const ImportOptions& options) override;
  absl::Status ApplyPartitionChanges(const PartitionChanges& changes,
                                     const ImportOptions& options) override;
  absl::StatusOr<absl::Time> StreamTime(std::string_view source,
                                        int32_t partition) override;
  absl::StatusOr<size_t> FireTimers(std::string_view source, int32_t partition,
                                    TimeDomain domain, absl::Time up_to,
                                    size_t max, TimerHandler handler) override;
  absl::StatusOr<std::optional<TimerFire>> NextTimer(
      std::string_view source, int32_t partition, TimeDomain domain) override;
  absl::Status Checkpoint(const std::string& dir) override;
  absl::Status Dump(
      absl::FunctionRef<absl::Status(const DumpEntry&)> visit) override;

  int shard_count() const override { return static_cast<int>(shards_.size()); }
  Engine* shard(int index) override;

 private:
  // The shard a message of `partition` commits in (with the broken routing
  // of EngineHooks::wrong_shard, salted per open).
  int Route(int32_t partition) const;
  // `result`'s sequence marked with its shard.
  static Result MarkShard(Result result, int shard);

  const Options options_;
  const std::vector<std::unique_ptr<Engine>> shards_;
  const int routing_salt_;  // 0 unless EngineHooks::wrong_shard
};

}  // namespace idem

#endif  // IDEM_ENGINE_SHARDED_ENGINE_H_
