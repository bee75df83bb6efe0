// A sharded engine (engine/sharded_engine.h) under concurrent batches that
// span shards: every shard's read-modify-writes stay serializable on their
// own (each shard validates its handlers' reads), every message counts
// once in its partition's shard, and offsets end at the highest delivered;
// without read validation (EngineHooks::skip_read_validation) the counts
// come out short. The real engine's test also runs under ThreadSanitizer
// (scripts/tsan.sh).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/engine_hooks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "tests/testing/engine_test_util.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

constexpr int kConcurrentShards = 3;
constexpr int kConcurrentPartitions = 6;
constexpr int kShardThreads = 4;
constexpr int kShardBatches = 40;
constexpr int kShardBatchSize =
    4;  // partitions t .. t + 3: every batch spans shards

// test::AddOne with a pause between its read and its write, so that the
// threads' read-modify-writes of a shard's counter overlap whatever the
// machine's load: without read validation some are lost in every run.
absl::Status AddOneAfterAPause(const Message& m, Txn& txn) {
  absl::StatusOr<std::optional<std::string>> v = txn.Get("counter");
  if (!v.ok()) return v.status();
  int64_t n = 0;
  if (v->has_value() && !absl::SimpleAtoi(**v, &n)) {
    return absl::InternalError("bad counter");
  }
  absl::SleepFor(absl::Microseconds(200));
  txn.Put("counter", absl::StrCat(n + 1));
  txn.SetResult(absl::StrCat("done:", std::string(m.id)));
  return absl::OkStatus();
}

// Thread `t`'s batch `b`: messages of partitions t, t + 1, ... (modulo
// kConcurrentPartitions) at offset b, each incrementing its shard's
// "counter". Returns the number of messages that did not commit.
int DeliverShardBatches(Engine& engine, int t) {
  int errors = 0;
  for (int b = 0; b < kShardBatches; ++b) {
    std::vector<std::string> ids;
    for (int k = 0; k < kShardBatchSize; ++k) {
      ids.push_back(absl::StrCat("t", t, "-", b, "-", k));
    }
    std::vector<Message> batch;
    for (int k = 0; k < kShardBatchSize; ++k) {
      batch.push_back(Message{.id = ids[k],
                              .source = "orders",
                              .partition = (t + k) % kConcurrentPartitions,
                              .offset = b});
    }
    absl::StatusOr<std::vector<Result>> results =
        engine.ProcessBatch(batch, AddOneAfterAPause);
    if (!results.ok()) {
      errors += kShardBatchSize;
      continue;
    }
    uint64_t sequence = 0;
    for (const Result& r : *results) {
      if (r.outcome != Outcome::kProcessed) ++errors;
      sequence = std::max(sequence, r.sequence);
    }
    if (!engine.WaitDurable(sequence).ok()) ++errors;
  }
  return errors;
}

// Runs kShardThreads threads of DeliverShardBatches on a fresh sharded store
// opened with `hooks`, then returns what differs from every message counted
// once in its shard and every partition's offset at the last batch's; empty if
// nothing does.
std::string RunParallelBatches(const EngineHooks& hooks) {
  util::TempDir dir;
  Options options;
  options.shards = kConcurrentShards;
  options.dedupe_scope = DedupeScope::kPartition;
  options.durability = Durability::kBuffered;
  absl::StatusOr<std::unique_ptr<Engine>> opened =
      OpenEngineWithHooks(dir.Sub("store"), options, hooks);
  if (!opened.ok()) return opened.status().ToString();
  Engine& engine = **opened;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kShardThreads; ++t) {
    threads.emplace_back([&engine, &errors, t] {
      errors.fetch_add(DeliverShardBatches(engine, t));
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::string differences;
  if (errors.load() != 0) {
    absl::StrAppend(&differences, errors.load(), " messages did not commit; ");
  }
  std::vector<int64_t> expected(kConcurrentShards, 0);
  std::vector<bool> delivered(kConcurrentPartitions, false);
  for (int t = 0; t < kShardThreads; ++t) {
    for (int k = 0; k < kShardBatchSize; ++k) {
      const int32_t partition = (t + k) % kConcurrentPartitions;
      expected[engine.ShardOf(partition)] += kShardBatches;
      delivered[partition] = true;
    }
  }
  for (int s = 0; s < kConcurrentShards; ++s) {
    absl::StatusOr<std::optional<std::string>> counter =
        engine.shard(s)->GetState("counter");
    int64_t counted = 0;
    if (!counter.ok() || !absl::SimpleAtoi(counter->value_or("0"), &counted) ||
        counted != expected[s]) {
      absl::StrAppend(&differences, "shard ", s, " counted ", counted,
                      " messages of ", expected[s], "; ");
    }
  }
  for (int32_t p = 0; p < kConcurrentPartitions; ++p) {
    absl::StatusOr<std::optional<int64_t>> offset =
        engine.CommittedOffset("orders", p);
    const std::optional<int64_t> want =
        delivered[p] ? std::optional<int64_t>(kShardBatches - 1) : std::nullopt;
    if (!offset.ok() || *offset != want) {
      absl::StrAppend(&differences, "partition ", p, "'s offset is wrong; ");
    }
  }
  return differences;
}

TEST(ShardedEngineConcurrencyTest, ParallelBatchesCountEachMessageInItsShard) {
  EXPECT_EQ(RunParallelBatches(EngineHooks()), "");
}

// Without read validation concurrent increments of a shard's counter lose
// updates, and the check above sees it (the handlers' pauses make the
// threads overlap; five runs at most, for a machine that starves threads).
TEST(ShardedEngineConcurrencyBrokenVariantTest, LostUpdatesAreCaught) {
  EngineHooks hooks;
  hooks.skip_read_validation = true;
  std::string differences;
  for (int run = 0; run < 5 && differences.empty(); ++run) {
    differences = RunParallelBatches(hooks);
  }
  EXPECT_THAT(differences, ::testing::HasSubstr(" messages of "));
}

}  // namespace
}  // namespace idem
