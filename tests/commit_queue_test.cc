// engine/commit_queue.h: merged batches keep every record in order; writes
// land in the order they were added, whichever thread leads; a failed write
// fails every later one until Reset; an empty batch is a barrier that
// writes nothing; a group write that throws fails its group instead of
// leaving its writers asleep; each writer learns its own batch's last
// sequence.

#include "engine/commit_queue.h"

#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "rocksdb/utilities/stackable_db.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

// Collects a batch's puts as "key=value".
class Puts : public rocksdb::WriteBatch::Handler {
 public:
  rocksdb::Status PutCF(uint32_t, const rocksdb::Slice& key,
                        const rocksdb::Slice& value) override {
    seen.push_back(key.ToString() + "=" + value.ToString());
    return rocksdb::Status::OK();
  }
  std::vector<std::string> seen;
};

std::unique_ptr<rocksdb::DB> OpenDb(const std::string& path) {
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* db = nullptr;
  EXPECT_TRUE(rocksdb::DB::Open(options, path, &db).ok());
  return std::unique_ptr<rocksdb::DB>(db);
}

TEST(CommitQueueTest, MergedBatchHoldsEveryRecordInOrder) {
  rocksdb::WriteBatch a, b, c;
  ASSERT_TRUE(a.Put("a1", "1").ok());
  ASSERT_TRUE(a.Put("a2", "2").ok());
  ASSERT_TRUE(b.Put("b1", "3").ok());
  ASSERT_TRUE(c.Put("c1", "4").ok());
  ASSERT_TRUE(c.Delete("a1").ok());
  const rocksdb::WriteBatch* batches[] = {&a, &b, &c};
  rocksdb::WriteBatch merged = MergeBatches(batches, 3);
  EXPECT_EQ(merged.Count(), 5u);
  Puts puts;
  ASSERT_TRUE(merged.Iterate(&puts).ok());
  EXPECT_EQ(puts.seen,
            (std::vector<std::string>{"a1=1", "a2=2", "b1=3", "c1=4"}));
}

TEST(CommitQueueTest, WritesLandInTheOrderTheyWereAdded) {
  util::TempDir dir;
  std::unique_ptr<rocksdb::DB> db = OpenDb(dir.Sub("db"));
  ASSERT_NE(db, nullptr);
  CommitQueue queue(/*sync=*/false);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  std::mutex order;  // the caller's ordered critical section
  int next = 0;      // guarded by order
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        rocksdb::WriteBatch batch;
        CommitQueue::Writer writer(&batch);
        {
          std::lock_guard<std::mutex> lock(order);
          // Each write records its place; the last one must win.
          ASSERT_TRUE(batch.Put("last", absl::StrCat(++next)).ok());
          ASSERT_TRUE(batch.Put(absl::StrCat("n", next), "x").ok());
          queue.Add(&writer);
        }
        ASSERT_TRUE(queue.Wait(db.get(), &writer).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::string last;
  ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), "last", &last).ok());
  EXPECT_EQ(last, absl::StrCat(kThreads * kPerThread));
  EXPECT_EQ(queue.writes(), uint64_t{kThreads} * kPerThread);
  EXPECT_LE(queue.groups(), queue.writes());
  EXPECT_GE(queue.groups(), 1u);
}

TEST(CommitQueueTest, AFailedWriteFailsEveryLaterOneUntilReset) {
  util::TempDir dir;
  { ASSERT_NE(OpenDb(dir.Sub("db")), nullptr); }
  rocksdb::DB* read_only = nullptr;
  ASSERT_TRUE(rocksdb::DB::OpenForReadOnly(rocksdb::Options(), dir.Sub("db"),
                                           &read_only)
                  .ok());
  std::unique_ptr<rocksdb::DB> ro(read_only);
  CommitQueue queue(/*sync=*/false);
  rocksdb::WriteBatch batch;
  ASSERT_TRUE(batch.Put("k", "v").ok());
  CommitQueue::Writer first(&batch);
  queue.Add(&first);
  const rocksdb::Status failed = queue.Wait(ro.get(), &first);
  ASSERT_FALSE(failed.ok());
  // A writable DB now: the queue still refuses, with the first failure.
  ro.reset();
  std::unique_ptr<rocksdb::DB> db = OpenDb(dir.Sub("db"));
  CommitQueue::Writer second(&batch);
  queue.Add(&second);
  EXPECT_EQ(queue.Wait(db.get(), &second).ToString(), failed.ToString());
  queue.Reset();
  CommitQueue::Writer third(&batch);
  queue.Add(&third);
  EXPECT_TRUE(queue.Wait(db.get(), &third).ok());
}

TEST(CommitQueueTest, AnEmptyBatchWritesNothingAndLandsInItsTurn) {
  util::TempDir dir;
  std::unique_ptr<rocksdb::DB> db = OpenDb(dir.Sub("db"));
  ASSERT_NE(db, nullptr);
  CommitQueue queue(/*sync=*/false);
  const rocksdb::SequenceNumber before = db->GetLatestSequenceNumber();
  rocksdb::WriteBatch empty;
  CommitQueue::Writer barrier(&empty);
  queue.Add(&barrier);
  EXPECT_TRUE(queue.Wait(db.get(), &barrier).ok());
  EXPECT_EQ(db->GetLatestSequenceNumber(), before);
  EXPECT_EQ(queue.writes(), 1u);
}

// Each writer of a group learns the sequence of its own batch's last
// record, whether RocksDB inserts into its memtables serially or
// concurrently (CommitQueue::LastSequenceOf reads what DB::Write stamped).
void CheckEachWriterGetsItsOwnLastSequence(bool concurrent_memtable) {
  util::TempDir dir;
  rocksdb::Options options;
  options.create_if_missing = true;
  options.allow_concurrent_memtable_write = concurrent_memtable;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, dir.Sub("db"), &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  CommitQueue queue(/*sync=*/false);
  rocksdb::WriteBatch two, none, three, one;
  ASSERT_TRUE(two.Put("a", "1").ok());
  ASSERT_TRUE(two.Put("b", "2").ok());
  ASSERT_TRUE(three.Put("c", "3").ok());
  ASSERT_TRUE(three.Delete("a").ok());
  ASSERT_TRUE(three.Put("d", "4").ok());
  ASSERT_TRUE(one.Put("e", "5").ok());
  const uint64_t before = db->GetLatestSequenceNumber();
  CommitQueue::Writer first(&two), barrier(&none), third(&three);
  queue.Add(&first);
  queue.Add(&barrier);
  queue.Add(&third);
  // The first leads one group write of all three.
  ASSERT_TRUE(queue.Wait(db.get(), &first).ok());
  ASSERT_TRUE(queue.Wait(db.get(), &barrier).ok());
  ASSERT_TRUE(queue.Wait(db.get(), &third).ok());
  EXPECT_EQ(queue.groups(), 1u);
  EXPECT_EQ(first.last_sequence(), before + 2);
  EXPECT_EQ(barrier.last_sequence(), 0u);
  EXPECT_EQ(third.last_sequence(), before + 2 + three.Count());
  EXPECT_EQ(third.last_sequence(), db->GetLatestSequenceNumber());
  // Alone in its group: its own batch is written, not a merged copy.
  CommitQueue::Writer alone(&one);
  queue.Add(&alone);
  ASSERT_TRUE(queue.Wait(db.get(), &alone).ok());
  EXPECT_EQ(alone.last_sequence(), third.last_sequence() + 1);
  EXPECT_EQ(alone.last_sequence(), db->GetLatestSequenceNumber());
}

TEST(CommitQueueTest, EachWriterOfAGroupGetsItsOwnLastSequence) {
  CheckEachWriterGetsItsOwnLastSequence(/*concurrent_memtable=*/true);
}

TEST(CommitQueueTest, EachWriterGetsItsOwnLastSequenceWithSerialInserts) {
  CheckEachWriterGetsItsOwnLastSequence(/*concurrent_memtable=*/false);
}

// A database whose writes throw, as an allocation failing inside one would.
class ThrowingDb : public rocksdb::StackableDB {
 public:
  explicit ThrowingDb(rocksdb::DB* db) : rocksdb::StackableDB(db) {}
  using rocksdb::StackableDB::Write;
  rocksdb::Status Write(const rocksdb::WriteOptions&,
                        rocksdb::WriteBatch*) override {
    throw std::bad_alloc();
  }
};

TEST(CommitQueueTest, AGroupWriteThatThrowsFailsItsGroupAndLaterWrites) {
  util::TempDir dir;
  std::unique_ptr<rocksdb::DB> db = OpenDb(dir.Sub("db"));
  ASSERT_NE(db, nullptr);
  ThrowingDb throwing(db.release());
  CommitQueue queue(/*sync=*/false);
  rocksdb::WriteBatch batch;
  ASSERT_TRUE(batch.Put("k", "v").ok());
  CommitQueue::Writer first(&batch);
  CommitQueue::Writer second(&batch);
  queue.Add(&first);
  queue.Add(&second);
  rocksdb::Status first_status;
  EXPECT_NO_THROW(first_status = queue.Wait(&throwing, &first));
  EXPECT_TRUE(first_status.IsAborted()) << first_status.ToString();
  // Not left asleep: its group failed with the first, or it fails after.
  EXPECT_EQ(queue.Wait(&throwing, &second).ToString(), first_status.ToString());
}

}  // namespace
}  // namespace idem
