// The RocksDB peer (bench/peers/rocksdb_peer.h).

#include "bench/peers/rocksdb_peer.h"

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "bench/peers/scratch.h"
#include "bench/peers/stream.h"
#include "engine/reported_statistics.h"
#include "examples/ledger.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/options.h"
#include "rocksdb/statistics.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/db_ttl.h"
#include "rocksdb/write_batch.h"
#include "util/directory.h"

namespace idem::peers {
namespace {

absl::Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  return absl::InternalError(
      absl::StrFormat("rocksdb %s: %s", what, s.ToString()));
}

// The same tuning idem gives its own column families (engine/store.cc):
// 64 MiB memtables, 10-bit Bloom filters (also on the memtable), dynamic
// level sizes, no compression, a 64 MiB block cache, 2 background jobs.
rocksdb::ColumnFamilyOptions TunedColumnFamily(
    const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions cf;
  cf.write_buffer_size = size_t{64} << 20;
  cf.level_compaction_dynamic_level_bytes = true;
  cf.compression = rocksdb::kNoCompression;
  cf.memtable_prefix_bloom_size_ratio = 0.02;
  cf.memtable_whole_key_filtering = true;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return cf;
}

class RocksClient : public Client {
 public:
  RocksClient(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* inbox,
              rocksdb::ColumnFamilyHandle* state, RocksMode mode, bool sync)
      : db_(db), inbox_(inbox), state_(state), mode_(mode) {
    write_options_.sync = sync;
  }

  absl::StatusOr<uint64_t> Run(
      absl::Span<const StreamMessage* const> batch) override {
    rocksdb::WriteBatch wb;
    uint64_t news = 0;
    if (mode_ == RocksMode::kPutOnly) {
      // The ceiling: the bytes the Get+Put loop writes, without any lookup.
      for (const StreamMessage* m : batch) {
        if (!m->first) continue;
        wb.Put(inbox_, m->id, rocksdb::Slice());
        wb.Put(state_, m->account, EncodeBalance(m->payment.amount));
        ++news;
      }
    } else {
      // IDs and balances written earlier in this poll are not in the DB yet.
      absl::flat_hash_set<std::string_view> seen;
      absl::flat_hash_map<std::string_view, int64_t> balances;
      std::string value;
      for (const StreamMessage* m : batch) {
        if (seen.contains(m->id)) continue;
        rocksdb::Status s = db_->Get(read_options_, inbox_, m->id, &value);
        if (s.ok()) continue;  // duplicate
        if (!s.IsNotFound()) return FromRocks(s, "Get");
        seen.insert(m->id);
        auto it = balances.find(m->account);
        int64_t balance = 0;
        if (it != balances.end()) {
          balance = it->second;
        } else {
          s = db_->Get(read_options_, state_, m->account, &value);
          if (s.ok()) {
            balance = DecodeBalance(value);
          } else if (!s.IsNotFound()) {
            return FromRocks(s, "Get");
          }
        }
        balance += m->payment.amount;
        balances[m->account] = balance;
        wb.Put(inbox_, m->id, rocksdb::Slice());
        wb.Put(state_, m->account, EncodeBalance(balance));
        ++news;
      }
    }
    if (wb.Count() > 0) {
      if (absl::Status s = FromRocks(db_->Write(write_options_, &wb), "Write");
          !s.ok()) {
        return s;
      }
    }
    return news;
  }

 private:
  rocksdb::DB* const db_;
  rocksdb::ColumnFamilyHandle* const inbox_;
  rocksdb::ColumnFamilyHandle* const state_;
  const RocksMode mode_;
  rocksdb::ReadOptions read_options_;
  rocksdb::WriteOptions write_options_;
};

class RocksTarget : public Target {
 public:
  RocksTarget(std::string scratch, RocksMode mode, bool sync)
      : scratch_(std::move(scratch)), mode_(mode), sync_(sync) {}
  ~RocksTarget() override { Close(); }

  absl::Status Setup() override {
    path_ = FreshPath(scratch_, "rocksdb");
    // The tickers the engine's store records (the write amplification's
    // among them) and no others, so that neither side pays for counters
    // the other skips.
    statistics_ = NewReportedStatistics();
    rocksdb::DBOptions db_options;
    db_options.create_if_missing = true;
    db_options.create_missing_column_families = true;
    db_options.max_background_jobs = 2;
    db_options.statistics = statistics_;
    db_options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
    const std::shared_ptr<rocksdb::Cache> cache =
        rocksdb::NewLRUCache(size_t{64} << 20);
    const rocksdb::ColumnFamilyOptions cf = TunedColumnFamily(cache);
    std::vector<rocksdb::ColumnFamilyDescriptor> families = {
        {rocksdb::kDefaultColumnFamilyName, cf}, {"inbox", cf}};
    rocksdb::Status s;
    if (mode_ == RocksMode::kTtl) {
      // State never expires (ttl 0); the inbox forgets IDs after 7 days.
      rocksdb::DBWithTTL* db = nullptr;
      s = rocksdb::DBWithTTL::Open(db_options, path_, families, &handles_, &db,
                                   {0, kDedupeTtlSeconds});
      db_ = db;
    } else {
      s = rocksdb::DB::Open(db_options, path_, families, &handles_, &db_);
    }
    return FromRocks(s, "Open");
  }

  absl::StatusOr<std::unique_ptr<Client>> NewClient() override {
    return std::unique_ptr<Client>(std::make_unique<RocksClient>(
        db_, handles_[1], handles_[0], mode_, sync_));
  }

  absl::StatusOr<FinalState> Finish(int accounts) override {
    FinalState final;
    if (mode_ != RocksMode::kPutOnly) {
      int64_t sum = 0;
      std::string value;
      for (int i = 0; i < accounts; ++i) {
        rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), handles_[0],
                                     examples::AccountName(i), &value);
        if (s.ok()) {
          sum += DecodeBalance(value);
        } else if (!s.IsNotFound()) {
          return FromRocks(s, "Get");
        }
      }
      final.balance_sum = sum;
    }
    uint64_t ids = 0;
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), handles_[1]));
    for (it->SeekToFirst(); it->Valid(); it->Next()) ++ids;
    if (absl::Status s = FromRocks(it->status(), "Iterator"); !s.ok()) return s;
    it.reset();
    final.stored_ids = ids;
    final.written_bytes =
        statistics_->getTickerCount(rocksdb::WAL_FILE_BYTES) +
        statistics_->getTickerCount(rocksdb::FLUSH_WRITE_BYTES) +
        statistics_->getTickerCount(rocksdb::COMPACT_WRITE_BYTES);
    final.disk_bytes = util::DirectoryBytes(path_);
    Close();
    util::RemoveTree(path_);
    return final;
  }

 private:
  void Close() {
    if (db_ == nullptr) return;
    for (rocksdb::ColumnFamilyHandle* h : handles_) {
      db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    }
    handles_.clear();
    db_->Close().PermitUncheckedError();
    delete db_;
    db_ = nullptr;
  }

  const std::string scratch_;
  const RocksMode mode_;
  const bool sync_;
  std::string path_;
  std::shared_ptr<rocksdb::Statistics> statistics_;
  rocksdb::DB* db_ = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

}  // namespace

std::unique_ptr<Target> NewRocksTarget(std::string scratch, RocksMode mode,
                                       bool sync) {
  return std::make_unique<RocksTarget>(std::move(scratch), mode, sync);
}

}  // namespace idem::peers
