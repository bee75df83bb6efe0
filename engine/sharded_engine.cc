#include "engine/sharded_engine.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/shard_layout.h"
#include "engine/stats_sum.h"
#include "engine/validate.h"

namespace idem {
namespace {

absl::Status NotPerShard(const char* call, const char* instead) {
  return absl::FailedPreconditionError(absl::StrCat(
      call, " on a sharded engine (Options::shards > 1): ", instead));
}

rocksdb::Env* EnvOf(const Options& options) {
  return options.env != nullptr ? options.env : rocksdb::Env::Default();
}

}  // namespace

absl::StatusOr<std::optional<std::string>> Engine::GetState(
    std::string_view source, int32_t partition, std::string_view key) {
  if (absl::Status s = ValidatePosition(source, partition); !s.ok()) return s;
  return shard(ShardOf(partition))->GetState(key);
}

absl::StatusOr<std::unique_ptr<Engine>> OpenShardedEngine(
    const std::string& path, const Options& options, const EngineHooks& hooks) {
  rocksdb::Env* env = EnvOf(options);
  absl::StatusOr<bool> fresh = CheckShardLayout(env, path, options);
  if (!fresh.ok()) return fresh.status();
  Options shard_options = options;
  shard_options.shards = 1;
  std::vector<std::unique_ptr<Engine>> shards;
  for (int i = 0; i < options.shards; ++i) {
    absl::StatusOr<std::unique_ptr<Engine>> shard =
        OpenEngineWithHooks(ShardDirectory(path, i), shard_options, hooks);
    if (!shard.ok()) {
      return absl::Status(shard.status().code(),
                          absl::StrCat("shard ", i, " of ", path, ": ",
                                       shard.status().message()));
    }
    shards.push_back(*std::move(shard));
  }
  if (*fresh) {
    if (absl::Status s = WriteShardCount(env, path, options.shards); !s.ok()) {
      return s;
    }
  }
  return std::unique_ptr<Engine>(
      new ShardedEngine(options, std::move(shards), hooks.wrong_shard));
}

ShardedEngine::ShardedEngine(Options options,
                             std::vector<std::unique_ptr<Engine>> shards,
                             bool unstable_routing)
    : options_(std::move(options)),
      shards_(std::move(shards)),
      // Never a multiple of the count: the broken routing always moves
      // partitions.
      routing_salt_(unstable_routing
                        ? 1 + static_cast<int>(std::random_device()() %
                                               (shards_.size() - 1))
                        : 0) {}

Engine* ShardedEngine::shard(int index) {
  if (index < 0 || index >= shard_count()) return nullptr;
  return shards_[index].get();
}

int ShardedEngine::Route(int32_t partition) const {
  return static_cast<int>((static_cast<int64_t>(partition) + routing_salt_) %
                          shard_count());
}

Result ShardedEngine::MarkShard(Result result, int shard) {
  if (result.sequence != 0) {
    result.sequence |= static_cast<uint64_t>(shard) << kShardShift;
  }
  return result;
}

absl::StatusOr<Result> ShardedEngine::Process(const Message& message,
                                              Handler handler) {
  if (message.partition < 0) {  // validated by the shard; route somewhere
    return shards_[0]->Process(message, handler);
  }
  const int index = Route(message.partition);
  absl::StatusOr<Result> result = shards_[index]->Process(message, handler);
  if (!result.ok()) return result;
  return MarkShard(*std::move(result), index);
}

absl::StatusOr<std::vector<Result>> ShardedEngine::ProcessBatch(
    absl::Span<const Message> messages, Handler handler) {
  // Any invalid message rejects the whole batch before any shard runs.
  for (const Message& message : messages) {
    if (absl::Status s = ValidateMessage(message); !s.ok()) return s;
  }
  // Each shard's messages, in batch order, and where their results go.
  std::vector<std::vector<Message>> per_shard(shards_.size());
  std::vector<std::vector<size_t>> slots(shards_.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const int index =
        messages[i].partition < 0 ? 0 : Route(messages[i].partition);
    per_shard[index].push_back(messages[i]);
    slots[index].push_back(i);
  }
  std::vector<Result> results(messages.size());
  for (size_t index = 0; index < shards_.size(); ++index) {
    if (per_shard[index].empty()) continue;
    // The handler sees the caller's messages, not the shard's copies (a
    // caller may find a message's place in its batch by its address).
    const std::vector<Message>& copies = per_shard[index];
    const std::vector<size_t>& slot = slots[index];
    auto callers = [&](const Message& copy, Txn& txn) {
      return handler(messages[slot[&copy - copies.data()]], txn);
    };
    absl::StatusOr<std::vector<Result>> part =
        shards_[index]->ProcessBatch(copies, callers);
    if (!part.ok()) return part.status();
    for (size_t j = 0; j < part->size(); ++j) {
      results[slots[index][j]] =
          MarkShard(std::move((*part)[j]), static_cast<int>(index));
    }
  }
  return results;
}

absl::StatusOr<std::optional<std::string>> ShardedEngine::GetState(
    std::string_view) {
  return NotPerShard("GetState(key)",
                     "state is per shard; use GetState(source, partition, "
                     "key) or shard(i)->GetState(key)");
}

absl::Status ShardedEngine::ScanState(std::string_view, std::string_view,
                                      ScanVisitor, const ScanOptions&) {
  return NotPerShard("ScanState",
                     "state is per shard; scan shard(ShardOf(partition))");
}

absl::StatusOr<bool> ShardedEngine::Seen(std::string_view id) {
  return shards_[0]->Seen(id);  // kFailedPrecondition: partition-scoped
}

absl::StatusOr<bool> ShardedEngine::Seen(std::string_view id,
                                         std::string_view source,
                                         int32_t partition) {
  if (partition < 0) return shards_[0]->Seen(id, source, partition);
  return shards_[Route(partition)]->Seen(id, source, partition);
}

absl::Status ShardedEngine::Forget(std::string_view id) {
  return shards_[0]->Forget(id);  // kFailedPrecondition: partition-scoped
}

absl::Status ShardedEngine::Forget(std::string_view id, std::string_view source,
                                   int32_t partition) {
  if (partition < 0) return shards_[0]->Forget(id, source, partition);
  return shards_[Route(partition)]->Forget(id, source, partition);
}

absl::StatusOr<std::optional<int64_t>> ShardedEngine::CommittedOffset(
    std::string_view source, int32_t partition) {
  if (partition < 0) return shards_[0]->CommittedOffset(source, partition);
  return shards_[Route(partition)]->CommittedOffset(source, partition);
}

absl::Status ShardedEngine::SetCommittedOffset(std::string_view source,
                                               int32_t partition,
                                               int64_t offset) {
  if (partition < 0) {
    return shards_[0]->SetCommittedOffset(source, partition, offset);
  }
  return shards_[Route(partition)]->SetCommittedOffset(source, partition,
                                                       offset);
}

absl::Status ShardedEngine::WaitDurable(uint64_t sequence) {
  if (sequence == 0) return absl::OkStatus();
  const uint64_t index = sequence >> kShardShift;
  if (index >= shards_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sequence ", sequence, " names shard ", index, " of ", shards_.size()));
  }
  if (absl::Status s = shards_[index]->WaitDurable(sequence & kShardLocalMask);
      !s.ok()) {
    return s;
  }
  // The caller may hold sequences of other shards below this one (a
  // batch's largest): make those shards durable up to their latest commit.
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (i == index) continue;
    if (absl::Status s =
            static_cast<EngineImpl&>(*shards_[i]).WaitLatestDurable();
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Stats> ShardedEngine::GetStats() {
  Stats total;
  for (const std::unique_ptr<Engine>& shard : shards_) {
    absl::StatusOr<Stats> stats = shard->GetStats();
    if (!stats.ok()) return stats.status();
    AddStats(*stats, total);
  }
  FinishStatsSum(total);
  return total;
}

absl::Status ShardedEngine::CompactExpired() {
  for (const std::unique_ptr<Engine>& shard : shards_) {
    if (absl::Status s = shard->CompactExpired(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<OutboxEntry>> ShardedEngine::ReadOutbox(size_t) {
  return NotPerShard("ReadOutbox",
                     "each shard has its own outbox; relay shard(i)'s");
}

absl::StatusOr<std::vector<OutboxEntry>> ShardedEngine::ReadOutboxAfter(
    uint64_t, size_t) {
  return NotPerShard("ReadOutboxAfter",
                     "each shard has its own outbox; relay shard(i)'s");
}

absl::Status ShardedEngine::AckOutbox(uint64_t) {
  return NotPerShard("AckOutbox",
                     "each shard has its own outbox; relay shard(i)'s");
}

absl::StatusOr<PartitionSnapshot> ShardedEngine::ExportPartition(
    std::string_view source, int32_t partition) {
  if (partition < 0) return shards_[0]->ExportPartition(source, partition);
  return shards_[Route(partition)]->ExportPartition(source, partition);
}

absl::Status ShardedEngine::ImportPartition(const PartitionSnapshot& snapshot) {
  return ImportPartition(snapshot, ImportOptions());
}

absl::Status ShardedEngine::ImportPartition(const PartitionSnapshot& snapshot,
                                            const ImportOptions& options) {
  const int index = snapshot.partition < 0 ? 0 : Route(snapshot.partition);
  return shards_[index]->ImportPartition(snapshot, options);
}

absl::Status ShardedEngine::ApplyPartitionChanges(
    const PartitionChanges& changes, const ImportOptions& options) {
  const int index = changes.partition < 0 ? 0 : Route(changes.partition);
  return shards_[index]->ApplyPartitionChanges(changes, options);
}

absl::StatusOr<absl::Time> ShardedEngine::StreamTime(std::string_view source,
                                                     int32_t partition) {
  const int index = partition < 0 ? 0 : Route(partition);
  return shards_[index]->StreamTime(source, partition);
}

absl::StatusOr<size_t> ShardedEngine::FireTimers(std::string_view source,
                                                 int32_t partition,
                                                 TimeDomain domain,
                                                 absl::Time up_to, size_t max,
                                                 TimerHandler handler) {
  const int index = partition < 0 ? 0 : Route(partition);
  return shards_[index]->FireTimers(source, partition, domain, up_to, max,
                                    handler);
}

absl::StatusOr<std::optional<TimerFire>> ShardedEngine::NextTimer(
    std::string_view source, int32_t partition, TimeDomain domain) {
  const int index = partition < 0 ? 0 : Route(partition);
  return shards_[index]->NextTimer(source, partition, domain);
}

absl::Status ShardedEngine::Checkpoint(const std::string& dir) {
  rocksdb::Env* env = EnvOf(options_);
  if (env->FileExists(dir).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Checkpoint: ", dir, " exists"));
  }
  if (rocksdb::Status s = env->CreateDir(dir); !s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("Checkpoint: creating ", dir, ": ", s.ToString()));
  }
  for (int i = 0; i < shard_count(); ++i) {
    if (absl::Status s = shards_[i]->Checkpoint(ShardDirectory(dir, i));
        !s.ok()) {
      return s;
    }
  }
  return WriteShardCount(env, dir, shard_count());
}

absl::Status ShardedEngine::Dump(
    absl::FunctionRef<absl::Status(const DumpEntry&)> visit) {
  for (const std::unique_ptr<Engine>& shard : shards_) {
    if (absl::Status s = shard->Dump(visit); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace idem
