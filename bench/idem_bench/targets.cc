// The targets of each layout (bench/idem_bench/targets.h): the engine, and
// RocksDB opened directly with the engine's schema.

#include "bench/idem_bench/targets.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "bench/idem_bench/layout_options.h"
#include "engine/record.h"
#include "engine/store.h"
#include "idem/engine.h"
#include "rocksdb/db.h"
#include "rocksdb/write_batch.h"

namespace idem::bench {
namespace {

std::string_view View(const rocksdb::Slice& s) {
  return std::string_view(s.data(), s.size());
}

// The state key a message's handler writes: one of `state_keys` keys, chosen
// by the ID's hash, so every layout writes the same keys.
std::string StateKey(std::string_view id, int64_t state_keys) {
  const DedupeKey key = HashMessageId(id);
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) {
    h = (h << 8) | static_cast<unsigned char>(key[i]);
  }
  return absl::StrCat("state/", h % static_cast<uint64_t>(state_keys));
}

// ---- kEngine ----

class EngineTarget : public Target {
 public:
  EngineTarget(std::unique_ptr<Engine> engine, const TargetOptions& options)
      : options_(options),
        engine_(std::move(engine)),
        state_value_(static_cast<size_t>(options.state_bytes), 's') {}

  absl::StatusOr<BatchOutcome> ProcessBatch(
      absl::Span<const Delivery> batch) override {
    std::vector<Message> messages;
    messages.reserve(batch.size());
    for (const Delivery& d : batch) {
      Message m{.id = d.id};
      if (d.offset >= 0) {
        m.source = kBenchTopic;
        m.partition = d.partition;
        m.offset = d.offset;
      }
      messages.push_back(m);
    }
    auto handler = [this](const Message& m, Txn& txn) {
      if (options_.state_bytes > 0) {
        txn.Put(StateKey(m.id, options_.state_keys), state_value_);
      }
      return absl::OkStatus();
    };
    absl::StatusOr<std::vector<Result>> results =
        engine_->ProcessBatch(messages, handler);
    if (!results.ok()) return results.status();
    BatchOutcome outcome;
    uint64_t sequence = 0;
    for (size_t i = 0; i < results->size(); ++i) {
      const Result& r = (*results)[i];
      if (r.outcome == Outcome::kFailed) {
        return absl::InternalError(
            absl::StrCat("a message failed: ", r.error.ToString()));
      }
      const bool duplicate = r.outcome == Outcome::kDuplicate;
      (duplicate ? outcome.duplicates : outcome.processed)++;
      if (duplicate && !batch[i].expect_duplicate) ++outcome.false_duplicates;
      if (!duplicate && batch[i].expect_duplicate) ++outcome.missed_duplicates;
      sequence = std::max(sequence, r.sequence);
    }
    if (options_.durability == Durability::kBuffered &&
        options_.ack_durable && sequence > 0) {
      if (absl::Status s = engine_->WaitDurable(sequence); !s.ok()) return s;
    }
    return outcome;
  }

  absl::StatusOr<TargetCounters> Counters() override {
    absl::StatusOr<Stats> stats = engine_->GetStats();
    if (!stats.ok()) return stats.status();
    TargetCounters c;
    c.user_bytes = stats->user_bytes;
    c.wal_bytes = stats->wal_bytes;
    c.flush_bytes = stats->flush_bytes;
    c.compaction_bytes = stats->compaction_bytes;
    c.expired_dropped = stats->expired_dropped;
    c.expired_dropped_whole = stats->expiry_bucket_records_dropped;
    c.live_sst_bytes = stats->live_sst_bytes;
    c.estimated_records = stats->estimated_live_records;
    return c;
  }

  // From idem::Stats: the engine's own RocksDB figures, no replica needed.
  std::optional<InternalFigures> Internals() override {
    absl::StatusOr<Stats> stats = engine_->GetStats();
    if (!stats.ok()) return std::nullopt;
    InternalFigures f;
    if (stats->dedupe_compaction_write_amplification > 0) {
      f.rocksdb_sum_wamp = stats->dedupe_compaction_write_amplification;
    }
    f.memtable_bytes = stats->memtable_bytes;
    f.table_readers_bytes = stats->table_reader_bytes;
    f.block_cache_usage = stats->block_cache_bytes;
    return f;
  }

  absl::Status Close() override {
    engine_.reset();
    return absl::OkStatus();
  }

 private:
  const TargetOptions options_;
  std::unique_ptr<Engine> engine_;
  const std::string state_value_;
};

// ---- RocksDB layouts ----

class RawTarget : public Target {
 public:
  RawTarget(const TargetOptions& options, RawParts parts)
      : options_(options),
        parts_(std::move(parts)),
        window_us_(absl::ToInt64Microseconds(options.window)),
        bucket_us_(std::max<int64_t>(1, window_us_ / kBucketsPerWindow)),
        fifo_slack_us_(FifoSlackSeconds(options.window) * 1000000),
        state_value_(static_cast<size_t>(options.state_bytes), 's') {}

  ~RawTarget() override { Close().IgnoreError(); }

  absl::Status Open(const std::string& path) {
    rocksdb::DBOptions db_options =
        RawDbOptions(options_, options_.env, parts_);
    db_options.create_if_missing = true;
    db_options.create_missing_column_families = true;
    std::vector<std::string> names = {rocksdb::kDefaultColumnFamilyName,
                                      kStateColumnFamily,
                                      kOffsetsColumnFamily};
    if (options_.layout != Layout::kBuckets) {
      names.push_back(kDedupeColumnFamily);
    }
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (const std::string& name : names) {
      descriptors.emplace_back(name, RawOptionsFor(name, options_, parts_));
    }
    rocksdb::Status s = rocksdb::DB::Open(db_options, path, descriptors,
                                          &handles_, &db_);
    if (!s.ok()) return FromRocks(s, "opening " + path);
    state_ = handles_[1];
    offsets_ = handles_[2];
    if (options_.layout != Layout::kBuckets) dedupe_ = handles_[3];
    last_flush_us_ = TimeToMicros(options_.clock->Now());
    return absl::OkStatus();
  }

  absl::StatusOr<BatchOutcome> ProcessBatch(
      absl::Span<const Delivery> batch) override {
    BatchOutcome outcome;
    {
      absl::MutexLock lock(&mu_);
      if (db_ == nullptr) return absl::FailedPreconditionError("closed");
      const int64_t now_us = TimeToMicros(options_.clock->Now());
      if (absl::Status s = MaintainLocked(now_us); !s.ok()) return s;

      const size_t n = batch.size();
      std::vector<DedupeKey> keys(n);
      for (size_t i = 0; i < n; ++i) keys[i] = HashMessageId(batch[i].id);
      std::vector<bool> live(n, false);
      if (absl::Status s = LookupLocked(keys, now_us, &live); !s.ok()) {
        return s;
      }

      absl::flat_hash_set<std::string_view> in_batch;
      std::map<std::string, std::string_view> state;
      std::vector<std::string_view> records;
      std::map<int32_t, int64_t> offsets;
      for (size_t i = 0; i < n; ++i) {
        const std::string_view key = KeyView(keys[i]);
        const bool duplicate = live[i] || in_batch.contains(key);
        if (duplicate) {
          ++outcome.duplicates;
          if (!batch[i].expect_duplicate) ++outcome.false_duplicates;
        } else {
          ++outcome.processed;
          if (batch[i].expect_duplicate) ++outcome.missed_duplicates;
          in_batch.insert(key);
          records.push_back(key);
          if (options_.state_bytes > 0) {
            state[StateKey(batch[i].id, options_.state_keys)] = state_value_;
          }
        }
        if (batch[i].offset >= 0) {
          int64_t& o = offsets.try_emplace(batch[i].partition, -1).first->second;
          o = std::max(o, batch[i].offset);
        }
      }
      std::sort(records.begin(), records.end());

      rocksdb::WriteBatch wb;
      for (const auto& [key, value] : state) {
        rocksdb::Status s = wb.Put(state_, key, rocksdb::Slice(value.data(),
                                                               value.size()));
        if (!s.ok()) return FromRocks(s, "building the batch");
      }
      const int64_t expiry_us = now_us + window_us_;
      const std::string value = EncodeDedupeRecord(expiry_us, "");
      rocksdb::ColumnFamilyHandle* cf = dedupe_;
      if (options_.layout == Layout::kBuckets && !records.empty()) {
        absl::StatusOr<rocksdb::ColumnFamilyHandle*> bucket =
            BucketLocked(expiry_us / bucket_us_);
        if (!bucket.ok()) return bucket.status();
        cf = *bucket;
      }
      for (std::string_view key : records) {
        rocksdb::Status s = wb.Put(cf, rocksdb::Slice(key.data(), key.size()),
                                   value);
        if (!s.ok()) return FromRocks(s, "building the batch");
      }
      for (const auto& [partition, offset] : offsets) {
        rocksdb::Status s =
            wb.Put(offsets_, EncodeOffsetKey(kBenchTopic, partition),
                   EncodeOffsetValue(offset));
        if (!s.ok()) return FromRocks(s, "building the batch");
      }
      rocksdb::WriteOptions write;
      write.sync = options_.durability == Durability::kSync;
      rocksdb::Status s = db_->Write(write, &wb);
      if (!s.ok()) return FromRocks(s, "committing");
      user_bytes_.fetch_add(wb.GetDataSize(), std::memory_order_relaxed);
    }
    if (options_.durability == Durability::kBuffered && options_.ack_durable) {
      rocksdb::Status s = db_->SyncWAL();
      if (!s.ok()) return FromRocks(s, "syncing the WAL");
    }
    return outcome;
  }

  absl::StatusOr<TargetCounters> Counters() override {
    absl::MutexLock lock(&mu_);
    if (db_ == nullptr) return absl::FailedPreconditionError("closed");
    TargetCounters c;
    const rocksdb::Statistics& t = *parts_.statistics;
    c.user_bytes = user_bytes_.load(std::memory_order_relaxed);
    c.wal_bytes = t.getTickerCount(rocksdb::WAL_FILE_BYTES);
    c.flush_bytes = t.getTickerCount(rocksdb::FLUSH_WRITE_BYTES);
    c.compaction_bytes = t.getTickerCount(rocksdb::COMPACT_WRITE_BYTES);
    c.expired_dropped = parts_.filter->dropped();
    c.expired_dropped_whole = dropped_whole_;
    if (parts_.fifo_drops != nullptr) {
      c.expired_dropped_whole += parts_.fifo_drops->dropped();
    }
    db_->GetAggregatedIntProperty(rocksdb::DB::Properties::kLiveSstFilesSize,
                                  &c.live_sst_bytes);
    for (rocksdb::ColumnFamilyHandle* cf : DedupeFamiliesLocked()) {
      uint64_t keys = 0;
      db_->GetIntProperty(cf, rocksdb::DB::Properties::kEstimateNumKeys,
                          &keys);
      c.estimated_records += keys;
    }
    return c;
  }

  std::optional<InternalFigures> Internals() override {
    absl::MutexLock lock(&mu_);
    if (db_ == nullptr) return std::nullopt;
    InternalFigures f;
    const std::vector<rocksdb::ColumnFamilyHandle*> families =
        DedupeFamiliesLocked();
    if (!families.empty()) {
      db_->GetProperty(families.back(), rocksdb::DB::Properties::kStats,
                       &f.rocksdb_stats);
    }
    if (options_.layout != Layout::kBuckets) {
      f.rocksdb_sum_wamp = ParseSumWriteAmp(f.rocksdb_stats);
    } else {
      double write_gb = 0, flushed_gb = 0;
      for (rocksdb::ColumnFamilyHandle* cf : families) {
        std::map<std::string, std::string> stats;
        if (!db_->GetMapProperty(cf, rocksdb::DB::Properties::kCFStats,
                                 &stats)) {
          continue;
        }
        double w = 0, amp = 0;
        if (absl::SimpleAtod(stats["compaction.Sum.WriteGB"], &w) &&
            absl::SimpleAtod(stats["compaction.Sum.WriteAmp"], &amp) &&
            amp > 0) {
          write_gb += w;
          flushed_gb += w / amp;
        }
      }
      if (flushed_gb > 0) f.rocksdb_sum_wamp = write_gb / flushed_gb;
    }
    db_->GetAggregatedIntProperty(
        rocksdb::DB::Properties::kCurSizeAllMemTables, &f.memtable_bytes);
    db_->GetAggregatedIntProperty(
        rocksdb::DB::Properties::kEstimateTableReadersMem,
        &f.table_readers_bytes);
    db_->GetIntProperty(rocksdb::DB::Properties::kBlockCacheUsage,
                        &f.block_cache_usage);
    return f;
  }

  absl::Status Close() override {
    absl::MutexLock lock(&mu_);
    if (db_ == nullptr) return absl::OkStatus();
    for (auto& [id, handle] : buckets_) handles_.push_back(handle);
    buckets_.clear();
    for (rocksdb::ColumnFamilyHandle* h : handles_) {
      db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    }
    handles_.clear();
    rocksdb::Status s = db_->Close();
    delete db_;
    db_ = nullptr;
    return FromRocks(s, "closing");
  }

 private:
  std::vector<rocksdb::ColumnFamilyHandle*> DedupeFamiliesLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (options_.layout != Layout::kBuckets) return {dedupe_};
    std::vector<rocksdb::ColumnFamilyHandle*> out;
    for (const auto& [id, handle] : buckets_) out.push_back(handle);
    return out;
  }

  // FIFO: flush at least once per slack. Buckets: drop every bucket whose
  // records have all expired.
  absl::Status MaintainLocked(int64_t now_us)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (options_.layout == Layout::kFifo &&
        now_us - last_flush_us_ >= fifo_slack_us_) {
      rocksdb::FlushOptions flush;
      flush.wait = false;
      flush.allow_write_stall = true;
      rocksdb::Status s = db_->Flush(flush, dedupe_);
      if (!s.ok()) return FromRocks(s, "flushing");
      last_flush_us_ = now_us;
    }
    while (!buckets_.empty() &&
           (buckets_.begin()->first + 1) * bucket_us_ <= now_us) {
      rocksdb::ColumnFamilyHandle* handle = buckets_.begin()->second;
      uint64_t keys = 0;
      db_->GetIntProperty(handle, rocksdb::DB::Properties::kEstimateNumKeys,
                          &keys);
      rocksdb::Status s = db_->DropColumnFamily(handle);
      if (!s.ok()) return FromRocks(s, "dropping a bucket");
      db_->DestroyColumnFamilyHandle(handle).PermitUncheckedError();
      buckets_.erase(buckets_.begin());
      dropped_whole_ += keys;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<rocksdb::ColumnFamilyHandle*> BucketLocked(int64_t id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = buckets_.find(id);
    if (it != buckets_.end()) return it->second;
    const std::string name = absl::StrCat(kBucketPrefix, id);
    rocksdb::ColumnFamilyHandle* handle = nullptr;
    rocksdb::Status s = db_->CreateColumnFamily(
        RawDedupeOptions(options_, parts_), name, &handle);
    if (!s.ok()) return FromRocks(s, "creating bucket " + name);
    buckets_[id] = handle;
    return handle;
  }

  // Sets live[i] if a non-expired record for keys[i] is stored.
  absl::Status LookupLocked(const std::vector<DedupeKey>& keys, int64_t now_us,
                            std::vector<bool>* live)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<size_t> pending(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) pending[i] = i;
    std::vector<rocksdb::ColumnFamilyHandle*> families = DedupeFamiliesLocked();
    std::reverse(families.begin(), families.end());  // newest bucket first
    for (rocksdb::ColumnFamilyHandle* cf : families) {
      if (pending.empty()) break;
      const size_t n = pending.size();
      std::vector<rocksdb::Slice> slices(n);
      for (size_t j = 0; j < n; ++j) {
        slices[j] = rocksdb::Slice(keys[pending[j]].data(), kDedupeKeyBytes);
      }
      std::vector<rocksdb::PinnableSlice> values(n);
      std::vector<rocksdb::Status> statuses(n);
      db_->MultiGet(rocksdb::ReadOptions(), cf, n, slices.data(),
                    values.data(), statuses.data());
      std::vector<size_t> still;
      for (size_t j = 0; j < n; ++j) {
        if (statuses[j].IsNotFound()) {
          still.push_back(pending[j]);
          continue;
        }
        if (!statuses[j].ok()) return FromRocks(statuses[j], "reading");
        std::optional<DedupeRecord> record = DecodeDedupeRecord(View(values[j]));
        if (!record.has_value()) {
          return absl::DataLossError("undecodable dedupe record");
        }
        if (!IsExpired(*record, now_us)) {
          (*live)[pending[j]] = true;
        } else {
          still.push_back(pending[j]);
        }
      }
      pending = std::move(still);
    }
    return absl::OkStatus();
  }

  const TargetOptions options_;
  const RawParts parts_;
  const int64_t window_us_;
  const int64_t bucket_us_;
  const int64_t fifo_slack_us_;
  const std::string state_value_;
  std::atomic<uint64_t> user_bytes_{0};

  absl::Mutex mu_;
  rocksdb::DB* db_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_ ABSL_GUARDED_BY(mu_);
  rocksdb::ColumnFamilyHandle* state_ ABSL_GUARDED_BY(mu_) = nullptr;
  rocksdb::ColumnFamilyHandle* offsets_ ABSL_GUARDED_BY(mu_) = nullptr;
  rocksdb::ColumnFamilyHandle* dedupe_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::map<int64_t, rocksdb::ColumnFamilyHandle*> buckets_
      ABSL_GUARDED_BY(mu_);
  int64_t last_flush_us_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_whole_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

const char* LayoutName(Layout layout) {
  switch (layout) {
    case Layout::kEngine:
      return "engine";
    case Layout::kLeveled:
      return "leveled";
    case Layout::kUniversal:
      return "universal";
    case Layout::kFifo:
      return "fifo";
    case Layout::kBuckets:
      return "buckets";
  }
  return "?";
}

absl::StatusOr<Layout> ParseLayout(std::string_view name) {
  for (Layout l : {Layout::kEngine, Layout::kLeveled, Layout::kUniversal,
                   Layout::kFifo, Layout::kBuckets}) {
    if (name == LayoutName(l)) return l;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown layout '", std::string(name),
                   "' (expected engine, leveled, universal, fifo or buckets)"));
}

absl::StatusOr<std::unique_ptr<Target>> OpenTarget(
    const std::string& path, const TargetOptions& options) {
  if (options.clock == nullptr || options.env == nullptr) {
    return absl::InvalidArgumentError("TargetOptions needs a clock and an env");
  }
  if (options.layout == Layout::kEngine) {
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(path, EngineOptions(options));
    if (!engine.ok()) return engine.status();
    return std::unique_ptr<Target>(
        new EngineTarget(std::move(*engine), options));
  }
  auto target = std::make_unique<RawTarget>(options, MakeRawParts(options));
  if (absl::Status s = target->Open(path); !s.ok()) return s;
  return std::unique_ptr<Target>(std::move(target));
}

std::optional<double> ParseSumWriteAmp(std::string_view text) {
  // Header: "Level Files Size Score Read(GB) ... W-Amp ..."; in data rows
  // the Size column is two tokens ("1.22 MB").
  int wamp_column = -1;
  int size_column = -1;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    std::vector<absl::string_view> tokens =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (tokens.empty()) continue;
    if (tokens[0] == "Level") {
      wamp_column = size_column = -1;
      for (size_t i = 0; i < tokens.size(); ++i) {
        if (tokens[i] == "W-Amp") wamp_column = static_cast<int>(i);
        if (absl::StartsWith(tokens[i], "Size")) {
          size_column = static_cast<int>(i);
        }
      }
      continue;
    }
    if (tokens[0] == "Sum" && wamp_column >= 0) {
      const size_t index = static_cast<size_t>(
          wamp_column + (size_column >= 0 && size_column < wamp_column ? 1 : 0));
      double value = 0;
      if (index < tokens.size() && absl::SimpleAtod(tokens[index], &value)) {
        return value;
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace idem::bench
