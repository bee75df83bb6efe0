// The RocksDB options of an engine's store (engine/store.h).

#include "engine/store.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "idem/options.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/memtablerep.h"
#include "rocksdb/perf_context.h"
#include "rocksdb/perf_level.h"
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
  rocksdb::DB* db() const { return db_; }
  rocksdb::ColumnFamilyHandle* family() const { return handles_[1]; }

  ~DedupeFamily() {
    for (rocksdb::ColumnFamilyHandle* h : handles_) {
      db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    }
    delete db_;
  }

  // Puts records shaped like the engine's (16-byte random hash keys, 13-byte
  // values), 100 per write and without a WAL, until the family's memtable
  // has been switched for a new one `switches` times (or 2 million records
  // are in, which fails the test); returns the most records one memtable
  // held before its switch.
  uint64_t MemtableCapacity(int switches) {
    std::mt19937_64 random(7);
    rocksdb::WriteOptions write;
    write.disableWAL = true;
    const std::string value(13, 'v');
    uint64_t capacity = 0;
    uint64_t before = 0;
    int seen = 0;
    for (int writes = 0; seen < switches && writes < 20000; ++writes) {
      rocksdb::WriteBatch batch;
      for (int i = 0; i < 100; ++i) {
        char key[16];
        const uint64_t high = random();
        const uint64_t low = random();
        std::memcpy(key, &high, 8);
        std::memcpy(key + 8, &low, 8);
        EXPECT_TRUE(
            batch.Put(handles_[1], rocksdb::Slice(key, 16), value).ok());
      }
      EXPECT_TRUE(db_->Write(write, &batch).ok());
      uint64_t now = 0;
      EXPECT_TRUE(db_->GetIntProperty(
          handles_[1], rocksdb::DB::Properties::kNumEntriesActiveMemTable,
          &now));
      if (now < before) {
        capacity = std::max(capacity, before);
        ++seen;
      }
      before = now;
    }
    EXPECT_EQ(seen, switches) << "the memtable was never switched";
    return capacity;
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

// Records per flush decide how many files compaction rewrites: a hashed
// dedupe memtable must hold at least as many records as the sorted one of
// the same write_buffer_bytes, or the write amplification rises.
TEST(StoreOptionsTest, HashedDedupeMemtableHoldsWhatASortedOneHolds) {
  for (size_t bytes : {size_t{256} << 10, kOneMiB, size_t{4} << 20}) {
    DedupeFamily hashed(DedupeOptions(bytes, /*partition_scope=*/false));
    DedupeFamily sorted(DedupeOptions(bytes, /*partition_scope=*/true));
    const uint64_t sorted_records = sorted.MemtableCapacity(3);
    EXPECT_GT(sorted_records, bytes / 64) << bytes;
    EXPECT_GE(hashed.MemtableCapacity(3), sorted_records) << bytes;
  }
}

// The broken variant: the hashed memtable with the sorted one's budget.
// Its records take about 64 bytes each against some 52 (the arena rounds a
// list node up to 16 bytes), so it is switched, and later flushed, after
// a fifth fewer records: the check above catches it.
TEST(StoreOptionsTest, HashedDedupeMemtableWithoutTheLargerBudgetHoldsLess) {
  rocksdb::ColumnFamilyOptions cf =
      DedupeOptions(kOneMiB, /*partition_scope=*/false);
  cf.write_buffer_size = kOneMiB;
  DedupeFamily hashed(cf);
  DedupeFamily sorted(DedupeOptions(kOneMiB, /*partition_scope=*/true));
  const uint64_t hashed_records = hashed.MemtableCapacity(3);
  const uint64_t sorted_records = sorted.MemtableCapacity(3);
  // The figures docs/performance.md quotes.
  std::cout << "1 MiB memtable: " << hashed_records << " records hashed, "
            << sorted_records << " sorted\n";
  EXPECT_LT(hashed_records, sorted_records);
}

TEST(StoreOptionsTest, StoreScopedDedupeFamiliesUseTheHashedMemtable) {
  const rocksdb::ColumnFamilyOptions cf =
      DedupeOptions(kOneMiB, /*partition_scope=*/false);
  ASSERT_NE(cf.prefix_extractor, nullptr);
  EXPECT_STREQ(cf.memtable_factory->Name(), "HashLinkListRepFactory");
  EXPECT_EQ(cf.write_buffer_size, HashedMemtableBudget(kOneMiB));
}

TEST(StoreOptionsTest, PartitionScopedDedupeFamiliesKeepTheSkiplist) {
  // Their keys start with the partition: hashing an 8-byte prefix would put
  // most records of a store in a few buckets.
  const rocksdb::ColumnFamilyOptions cf =
      DedupeOptions(kOneMiB, /*partition_scope=*/true);
  EXPECT_EQ(cf.prefix_extractor, nullptr);
  EXPECT_STREQ(cf.memtable_factory->Name(), "SkipListFactory");
}

TEST(StoreOptionsTest, HashedMemtableBucketsStayUnderFivePercentOfTheBudget) {
  // 8 bytes of array per bucket and a 16-byte header per bucket holding
  // two records or more.
  for (size_t bytes :
       {size_t{64} << 10, kOneMiB, size_t{64} << 20, size_t{4} << 30}) {
    EXPECT_LE(HashedMemtableBuckets(bytes) * 24, bytes / 20) << bytes;
  }
}

// Puts 100 keys in a state family of `options`, then reads them and 100
// keys it never held; returns how many reads the memtable's Bloom filter
// answered without searching the memtable. Every read must still find what
// was written, and nothing else.
uint64_t StateMemtableFilterMisses(const Options& options) {
  DedupeFamily state(
      MakeStateOptions(options, rocksdb::NewLRUCache(kOneMiB), kOneMiB));
  rocksdb::WriteBatch batch;
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(batch
                    .Put(state.family(), "acct-" + std::to_string(i),
                         "v" + std::to_string(i))
                    .ok());
  }
  EXPECT_TRUE(state.db()->Write(rocksdb::WriteOptions(), &batch).ok());
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
  rocksdb::get_perf_context()->Reset();
  for (int i = 0; i < 100; ++i) {
    std::string value;
    rocksdb::Status held =
        state.db()->Get(rocksdb::ReadOptions(), state.family(),
                        "acct-" + std::to_string(i), &value);
    EXPECT_TRUE(held.ok()) << held.ToString();
    EXPECT_EQ(value, "v" + std::to_string(i));
    rocksdb::Status never =
        state.db()->Get(rocksdb::ReadOptions(), state.family(),
                        "other-" + std::to_string(i), &value);
    EXPECT_TRUE(never.IsNotFound()) << never.ToString();
  }
  const uint64_t misses =
      rocksdb::get_perf_context()->bloom_memtable_miss_count;
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  return misses;
}

// A handler's read of a key the memtable lacks (the first write of a key,
// or a key only in files) skips the skiplist search, as RocksDB used
// directly does with the same tuning (bench/peers/README.md).
TEST(StoreOptionsTest, StateMemtableFilterAnswersReadsOfKeysItLacks) {
  // 100 absent keys against some 160,000 filter bits: a false positive or
  // two at most.
  EXPECT_GE(StateMemtableFilterMisses(Options()), 98u);
}

// The broken variant: without Bloom bits there is no memtable filter, and
// every read searches the skiplist; the check above would catch it.
TEST(StoreOptionsTest, StateMemtableWithoutBloomBitsHasNoFilter) {
  Options options;
  options.bloom_bits_per_key = 0;
  EXPECT_EQ(StateMemtableFilterMisses(options), 0u);
}

}  // namespace
}  // namespace idem
