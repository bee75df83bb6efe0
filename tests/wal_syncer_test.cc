#include "engine/wal_syncer.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

// How long a leader may wait for commits in flight in these tests: long
// enough that returning well before it can only mean it was woken.
constexpr absl::Duration kLongGroupWait = absl::Seconds(3);

class WalSyncerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir_.path(), &db).ok());
    db_.reset(db);
    ASSERT_TRUE(db_->Put(rocksdb::WriteOptions(), "k", "v").ok());
  }

  // How long WaitDurable takes when the one commit in flight ends about
  // 100 ms after the leader starts waiting for it.
  absl::Duration WaitWithOneCommitInFlight(WalSyncer& syncer) {
    auto scope = std::make_unique<WalSyncer::CommitScope>(&syncer);
    std::atomic<bool> started{false};
    std::thread commit([&] {
      while (!started.load()) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      scope.reset();  // the commit's write returned
    });
    const absl::Time start = absl::Now();
    started.store(true);
    EXPECT_TRUE(
        syncer.WaitDurable(db_.get(), db_->GetLatestSequenceNumber()).ok());
    const absl::Duration took = absl::Now() - start;
    commit.join();
    return took;
  }

  util::TempDir dir_;
  std::unique_ptr<rocksdb::DB> db_;
};

TEST_F(WalSyncerTest, LeaderIsWokenWhenTheLastCommitInFlightEnds) {
  WalSyncer syncer;
  syncer.set_group_wait_for_testing(kLongGroupWait);
  EXPECT_LT(WaitWithOneCommitInFlight(syncer), kLongGroupWait / 2);
  EXPECT_GE(syncer.durable_sequence(), db_->GetLatestSequenceNumber());
}

// The deliberately broken variant: without the wake-up the leader waits
// out its whole limit, which the test above would catch.
TEST_F(WalSyncerTest, BrokenVariantWithoutWakeUpWaitsOutTheLimit) {
  WalSyncer syncer;
  syncer.set_group_wait_for_testing(kLongGroupWait);
  syncer.set_skip_wakeup_for_testing(true);
  EXPECT_GE(WaitWithOneCommitInFlight(syncer), kLongGroupWait / 2);
}

}  // namespace
}  // namespace idem
