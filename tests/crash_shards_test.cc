// The crash harness on a sharded engine (CrashTestOptions::shards): the
// ledger and transfers workloads keep every invariant, shard by shard,
// through kills, power losses and mixed crashes, and an engine that writes
// a partition's messages to another shard is caught. Labelled "crash".

#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "crash/stream.h"
#include "engine/sharded_engine.h"  // kShardLocalMask
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/crash/file_system.h"
#include "idem/crash/harness.h"
#include "idem/engine.h"
#include "rocksdb/env.h"
#include "tests/testing/crash_report.h"
#include "util/temp_dir.h"

namespace idem::crash {
namespace {

using ::testing::HasSubstr;

constexpr int kShards = 4;

// Eight partitions over four shards, delivered by three threads: every
// shard gets two partitions' messages, from more than one thread.
CrashTestOptions ShardedRun(const util::TempDir& dir, CrashMode mode) {
  CrashTestOptions options;
  options.dir = dir.Sub("run");
  options.cycles = 6;
  options.mode = mode;
  options.durability = Durability::kBuffered;
  options.messages = 2000;
  options.partitions = 8;
  options.threads = 3;
  options.dedupe_scope = DedupeScope::kPartition;
  options.shards = kShards;
  options.seed = 41;
  return options;
}

// The crashes of `mode`'s kind in `report` (mixed: all of them).
int CrashesOfMode(const CrashTestReport& report, CrashMode mode) {
  switch (mode) {
    case CrashMode::kKill:
      return report.kills;
    case CrashMode::kPowerLoss:
      return report.power_losses;
    case CrashMode::kKillPoint:
      return report.kill_points;
    case CrashMode::kMixed:
      break;
  }
  return report.kills + report.power_losses + report.kill_points;
}

// Reopens the last epoch's store that `options` left and expects every
// partition's offset to be committed in its own shard: each shard got
// traffic, and the verifier's per-shard checks had something to check.
void ExpectEveryShardCommitted(const CrashTestOptions& options) {
  Options engine_options;
  engine_options.create_if_missing = false;
  engine_options.dedupe_scope = DedupeScope::kPartition;
  engine_options.shards = options.shards;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(options.dir + "/store", engine_options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_EQ((*engine)->shard_count(), options.shards);
  for (int32_t p = 0; p < options.partitions; ++p) {
    Engine* shard = (*engine)->shard((*engine)->ShardOf(p));
    absl::StatusOr<std::optional<int64_t>> offset =
        shard->CommittedOffset(kStreamSource, p);
    ASSERT_TRUE(offset.ok()) << offset.status();
    EXPECT_TRUE(offset->has_value()) << "partition " << p;
  }
}

using WorkloadAndMode = std::tuple<std::string, CrashMode>;

class CrashShardsTest : public ::testing::TestWithParam<WorkloadAndMode> {};

TEST_P(CrashShardsTest, EveryShardKeepsEveryInvariantAcrossCrashes) {
  const auto& [name, mode] = GetParam();
  util::TempDir dir;
  absl::StatusOr<std::unique_ptr<Workload>> workload = NewBuiltinWorkload(name);
  ASSERT_TRUE(workload.ok()) << workload.status();
  const CrashTestOptions options = ShardedRun(dir, mode);
  absl::StatusOr<CrashTestReport> report = RunCrashTest(options, **workload);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->passed()) << test::FailedInvariants(*report);
  EXPECT_EQ(report->shards, kShards);
  EXPECT_GT(report->acknowledged, 0u);
  EXPECT_GT(report->duplicates_suppressed, 0u);
  EXPECT_GT(CrashesOfMode(*report, mode), 0);
  if (mode == CrashMode::kPowerLoss) {
    EXPECT_GT(report->unsynced_bytes_dropped, 0u);
  }
  ExpectEveryShardCommitted(options);
}

INSTANTIATE_TEST_SUITE_P(
    LedgerAndTransfers, CrashShardsTest,
    ::testing::Combine(::testing::Values("ledger", "transfers"),
                       ::testing::Values(CrashMode::kKill,
                                         CrashMode::kPowerLoss,
                                         CrashMode::kMixed)),
    [](const ::testing::TestParamInfo<WorkloadAndMode>& info) {
      const CrashMode mode = std::get<1>(info.param);
      return absl::StrCat(std::get<0>(info.param),
                          mode == CrashMode::kKill        ? "Kill"
                          : mode == CrashMode::kPowerLoss ? "PowerLoss"
                                                          : "Mixed");
    });

// The broken variant: partitions routed to another shard, a new one at each
// open, so a message's dedupe record, state and offset land where its
// partition's are not read. Kill points, timings and the routing salt vary,
// so seeds from 1 on are tried, up to four, until one run reports it.
TEST(CrashShardsBrokenVariantTest, ReportsMessagesWrittenToAnotherShard) {
  constexpr uint64_t kSeeds = 4;
  auto workload = NewLedgerWorkload();
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    util::TempDir dir;
    CrashTestOptions options = ShardedRun(dir, CrashMode::kKill);
    options.self_test = SelfTest::kWrongShard;
    options.cycles = 3;
    options.seed = seed;
    absl::StatusOr<CrashTestReport> report = RunCrashTest(options, *workload);
    ASSERT_TRUE(report.ok()) << report.status();
    if (report->passed()) continue;
    EXPECT_THAT(test::FailedInvariants(*report),
                HasSubstr("was acknowledged but is absent"));
    return;
  }
  ADD_FAILURE() << "wrong_shard passed every invariant for seeds 1 to "
                << kSeeds;
}

// In a child process: opens a two-shard store at `store` under kBuffered
// through a CrashFileSystem journaling to `journal`, commits a0 (partition
// 0, shard 0) and b1 (partition 1, shard 1) and makes them durable, then
// commits c0 and d1 and syncs shard 1 alone, and exits without closing the
// store (closing would sync every shard). Exit code 0, or 1 on an error.
[[noreturn]] void CommitWithOnlyShardOneSynced(const std::string& store,
                                               const std::string& journal) {
  CrashFsOptions fs_options;
  fs_options.journal_path = journal;
  auto fs = std::make_shared<CrashFileSystem>(rocksdb::FileSystem::Default(),
                                              fs_options);
  std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
  Options options;
  options.durability = Durability::kBuffered;
  options.dedupe_scope = DedupeScope::kPartition;
  options.shards = 2;
  options.env = env.get();
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Open(store, options);
  if (!engine.ok()) ::_exit(1);
  auto commit = [&](const char* id, int32_t partition) -> uint64_t {
    absl::StatusOr<Result> r = (*engine)->Process(
        Message{.id = id, .source = kStreamSource, .partition = partition},
        [](const Message&, Txn& txn) {
          txn.Put("k", "v");
          return absl::OkStatus();
        });
    if (!r.ok() || r->outcome != Outcome::kProcessed) ::_exit(1);
    return r->sequence;
  };
  commit("a0", 0);
  if (!(*engine)->WaitDurable(commit("b1", 1)).ok()) ::_exit(1);
  commit("c0", 0);
  const uint64_t d1 = commit("d1", 1);
  if (!(*engine)->shard(1)->WaitDurable(d1 & kShardLocalMask).ok()) {
    ::_exit(1);
  }
  ::_exit(0);
}

// A power loss cuts each shard's write-ahead log back to what that shard
// synced, whatever the others synced: the crash file system journals the
// files of every shard directory.
TEST(CrashShardsPowerLossTest, DropsEachShardsUnsyncedCommitsOnTheirOwn) {
  util::TempDir dir;
  const std::string store = dir.Sub("store");
  const std::string journal = dir.Sub("journal");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) CommitWithOnlyShardOneSynced(store, journal);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  absl::StatusOr<PowerLossReport> cut = ApplyPowerLoss(journal);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_GT(cut->bytes_dropped, 0u);

  Options options;
  options.create_if_missing = false;
  options.dedupe_scope = DedupeScope::kPartition;
  options.shards = 2;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Open(store, options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  for (const auto& [id, partition, kept] :
       {std::tuple("a0", 0, true), std::tuple("b1", 1, true),
        std::tuple("c0", 0, false), std::tuple("d1", 1, true)}) {
    absl::StatusOr<bool> seen = (*engine)->Seen(id, kStreamSource, partition);
    ASSERT_TRUE(seen.ok()) << seen.status();
    EXPECT_EQ(*seen, kept) << id;
  }
}

TEST(CrashShardsOptionsTest, RefusesShardsOutOfBoundsOrWithoutPartitionScope) {
  util::TempDir dir;
  auto ledger = NewLedgerWorkload();
  CrashTestOptions options = ShardedRun(dir, CrashMode::kKill);
  options.shards = 0;
  EXPECT_EQ(ValidateCrashTestOptions(options).message(),
            "shards must be in [1, 256], got 0");
  options.shards = 257;
  EXPECT_EQ(ValidateCrashTestOptions(options).code(),
            absl::StatusCode::kInvalidArgument);
  options.shards = kShards;
  options.dedupe_scope = DedupeScope::kStore;
  absl::Status s = RunCrashTest(options, *ledger).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("needs dedupe_scope = partition"));
  options.dedupe_scope = DedupeScope::kPartition;
  EXPECT_TRUE(ValidateCrashTestOptions(options, *ledger).ok());
}

// Workloads whose state is not partition-local, or that relay one outbox,
// cannot run sharded; the broken variant needs shards to route between.
TEST(CrashShardsOptionsTest, RefusesWorkloadsWithoutPartitionLocalState) {
  util::TempDir dir;
  CrashTestOptions options = ShardedRun(dir, CrashMode::kKill);
  for (const char* name : {"pipeline", "inventory", "orders"}) {
    absl::StatusOr<std::unique_ptr<Workload>> workload =
        NewBuiltinWorkload(name);
    ASSERT_TRUE(workload.ok()) << workload.status();
    absl::Status s = RunCrashTest(options, **workload).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("got ", name)));
  }
  auto transfers = NewTransfersWorkload();
  EXPECT_TRUE(ValidateCrashTestOptions(options, *transfers).ok());
  options.shards = 1;
  options.self_test = SelfTest::kWrongShard;
  EXPECT_EQ(RunCrashTest(options, *transfers).status().message(),
            "self_test=wrong_shard needs shards >= 2");
}

TEST(CrashShardsOptionsTest, ReportJsonNamesTheShardCount) {
  CrashTestReport report;
  report.shards = kShards;
  EXPECT_THAT(CrashTestReportToJson(report),
              HasSubstr(absl::StrCat("\"shards\":", kShards)));
}

}  // namespace
}  // namespace idem::crash
