// The RocksDB options of an engine's store (engine/store.h).

#include "engine/store.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "idem/options.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/memtablerep.h"
#include "rocksdb/write_batch.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

constexpr size_t kOneMiB = size_t{1} << 20;

// A database with one dedupe family of `cf`, in a fresh directory.
class DedupeFamily {
 public:
  explicit DedupeFamily(const rocksdb::ColumnFamilyOptions& cf) {
    rocksdb::DBOptions db_options =
        MakeDbOptions(Options(), rocksdb::Env::Default(), nullptr);
    db_options.create_if_missing = true;
    db_options.create_missing_column_families = true;
    std::vector<rocksdb::ColumnFamilyDescriptor> families = {
        {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
        {kDedupeColumnFamily, cf}};
    rocksdb::Status s =
        rocksdb::DB::Open(db_options, dir_.path(), families, &handles_, &db_);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  ~DedupeFamily() {
    for (rocksdb::ColumnFamilyHandle* h : handles_) {
      db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    }
    delete db_;
  }

  // Puts `count` records shaped like the engine's (16-byte random hash keys,
  // 13-byte values), 100 per write, without a WAL.
  void PutRecords(int count) {
    std::mt19937_64 random(7);
    rocksdb::WriteOptions write;
    write.disableWAL = true;
    const std::string value(13, 'v');
    for (int done = 0; done < count;) {
      rocksdb::WriteBatch batch;
      for (int i = 0; i < 100 && done < count; ++i, ++done) {
        char key[16];
        const uint64_t high = random();
        const uint64_t low = random();
        std::memcpy(key, &high, 8);
        std::memcpy(key + 8, &low, 8);
        ASSERT_TRUE(
            batch.Put(handles_[1], rocksdb::Slice(key, 16), value).ok());
      }
      ASSERT_TRUE(db_->Write(write, &batch).ok());
    }
  }

  // The records in the family's active memtable: all of them until the
  // memtable is judged full and switched for a new one.
  uint64_t ActiveMemtableRecords() {
    uint64_t n = 0;
    EXPECT_TRUE(db_->GetIntProperty(
        handles_[1], rocksdb::DB::Properties::kNumEntriesActiveMemTable, &n));
    return n;
  }

 private:
  util::TempDir dir_;
  rocksdb::DB* db_ = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

rocksdb::ColumnFamilyOptions DedupeOptions(size_t write_buffer_bytes,
                                           bool partition_scope) {
  Options options;
  options.write_buffer_bytes = write_buffer_bytes;
  return MakeDedupeOptions(options, rocksdb::NewLRUCache(kOneMiB), nullptr,
                           partition_scope);
}

// About 60 bytes of memtable per record: 10,000 records fill some 60% of a
// 1 MiB memtable, whatever the memtable's layout, if its fixed costs are
// small.
constexpr int kRecordsInOneMiB = 10000;

TEST(StoreOptionsTest, HashedDedupeMemtableHoldsWhatItsBudgetAllows) {
  DedupeFamily family(DedupeOptions(kOneMiB, /*partition_scope=*/false));
  family.PutRecords(kRecordsInOneMiB);
  EXPECT_EQ(family.ActiveMemtableRecords(), kRecordsInOneMiB);
}

// The broken variant: the bucket count first tried (one bucket per 128
// bytes of budget). Each bucket in use costs its skiplist head out of the
// memtable's budget, so the buckets alone fill it and it is switched (and
// later flushed) long before its records do: the check above catches it.
TEST(StoreOptionsTest, BucketPerHundredTwentyEightBytesFillsTheMemtable) {
  rocksdb::ColumnFamilyOptions cf =
      DedupeOptions(kOneMiB, /*partition_scope=*/false);
  cf.memtable_factory.reset(rocksdb::NewHashSkipListRepFactory(kOneMiB / 128));
  DedupeFamily family(cf);
  family.PutRecords(kRecordsInOneMiB);
  EXPECT_LT(family.ActiveMemtableRecords(), kRecordsInOneMiB);
}

TEST(StoreOptionsTest, SortedMemtableHoldsWhatItsBudgetAllows) {
  DedupeFamily family(DedupeOptions(kOneMiB, /*partition_scope=*/true));
  family.PutRecords(kRecordsInOneMiB);
  EXPECT_EQ(family.ActiveMemtableRecords(), kRecordsInOneMiB);
}

TEST(StoreOptionsTest, StoreScopedDedupeFamiliesUseTheHashedMemtable) {
  const rocksdb::ColumnFamilyOptions cf =
      DedupeOptions(kOneMiB, /*partition_scope=*/false);
  ASSERT_NE(cf.prefix_extractor, nullptr);
  EXPECT_STREQ(cf.memtable_factory->Name(), "HashSkipListRepFactory");
}

TEST(StoreOptionsTest, PartitionScopedDedupeFamiliesKeepTheSkiplist) {
  // Their keys start with the partition: hashing a 2-byte prefix would put
  // every record of a store in one bucket.
  const rocksdb::ColumnFamilyOptions cf =
      DedupeOptions(kOneMiB, /*partition_scope=*/true);
  EXPECT_EQ(cf.prefix_extractor, nullptr);
  EXPECT_STREQ(cf.memtable_factory->Name(), "SkipListFactory");
}

TEST(StoreOptionsTest, HashedMemtableBucketsStayUnderTwoPercentOfTheBudget) {
  // About 150 bytes per bucket in use (its skiplist's head) and 8 bytes of
  // array per bucket.
  for (size_t bytes :
       {size_t{64} << 10, kOneMiB, size_t{64} << 20, size_t{4} << 30}) {
    EXPECT_LE(HashedMemtableBuckets(bytes) * 160, bytes / 50 + 16 * 160)
        << bytes;
  }
}

}  // namespace
}  // namespace idem
