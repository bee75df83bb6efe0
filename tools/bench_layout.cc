#include "tools/bench_layout.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "engine/expiry_buckets.h"
#include "engine/record.h"
#include "engine/store.h"
#include "engine/ttl_filter.h"
#include "idem/engine.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/listener.h"
#include "rocksdb/options.h"
#include "rocksdb/statistics.h"
#include "rocksdb/system_clock.h"
#include "rocksdb/table.h"
#include "rocksdb/write_batch.h"

namespace idem::tools {
namespace {

constexpr char kBucketPrefix[] = "idem.dedupe.b";
// Memtable size of the offsets and default column families (as the engine).

absl::Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat(std::string(what), ": ", s.ToString()));
}

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

Options EngineOptions(const TargetOptions& t) {
  Options o;
  o.dedupe_window = t.window;
  o.durability = t.durability;
  o.clock = t.clock;
  o.env = t.env;
  o.block_cache_bytes = t.block_cache_bytes;
  o.write_buffer_bytes = t.write_buffer_bytes;
  o.bloom_bits_per_key = t.bloom_bits_per_key;
  o.max_background_jobs = t.max_background_jobs;
  o.expiry_buckets = t.expiry_buckets;
  return o;
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

// Counts the entries of files that FIFO compaction deletes.
class FifoDropCounter : public rocksdb::EventListener {
 public:
  const char* Name() const override { return "idem.bench.FifoDropCounter"; }
  void OnCompactionCompleted(rocksdb::DB* /*db*/,
                             const rocksdb::CompactionJobInfo& info) override {
    if (info.compaction_reason != rocksdb::CompactionReason::kFIFOTtl &&
        info.compaction_reason != rocksdb::CompactionReason::kFIFOMaxSize) {
      return;
    }
    for (const std::string& file : info.input_files) {
      auto it = info.table_properties.find(file);
      if (it != info.table_properties.end() && it->second != nullptr) {
        dropped_.fetch_add(it->second->num_entries, std::memory_order_relaxed);
      }
    }
  }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> dropped_{0};
};

struct RawParts {
  std::shared_ptr<rocksdb::Statistics> statistics;
  std::shared_ptr<rocksdb::Cache> cache;
  std::shared_ptr<TtlFilterFactory> filter;
  std::shared_ptr<FifoDropCounter> fifo_drops;
};

int64_t FifoSlackSeconds(absl::Duration window) {
  return std::max<int64_t>(1, absl::ToInt64Seconds(window) / 4);
}

// The engine's options for the same sizes (engine/store.h builds the
// RocksDB options from them, so "leveled" is the engine's configuration).
Options EngineOptionsFor(const TargetOptions& o) {
  Options options;
  options.dedupe_window = o.window;
  options.write_buffer_bytes = o.write_buffer_bytes;
  options.bloom_bits_per_key = o.bloom_bits_per_key;
  options.max_background_jobs = o.max_background_jobs;
  return options;
}

rocksdb::DBOptions RawDbOptions(const TargetOptions& o, rocksdb::Env* env,
                                const RawParts& parts) {
  rocksdb::DBOptions db = MakeDbOptions(EngineOptionsFor(o), env,
                                        parts.statistics);
  if (parts.fifo_drops != nullptr) db.listeners.push_back(parts.fifo_drops);
  return db;
}

rocksdb::ColumnFamilyOptions RawStateOptions(const TargetOptions& o,
                                             const RawParts& parts,
                                             size_t write_buffer_bytes) {
  return MakeStateOptions(EngineOptionsFor(o), parts.cache,
                          write_buffer_bytes);
}

// The engine's dedupe options, then the layout's changes.
rocksdb::ColumnFamilyOptions RawDedupeOptions(const TargetOptions& o,
                                              const RawParts& parts) {
  rocksdb::ColumnFamilyOptions cf =
      MakeDedupeOptions(EngineOptionsFor(o), parts.cache, parts.filter);
  switch (o.layout) {
    case Layout::kEngine:
    case Layout::kLeveled:
      break;
    case Layout::kUniversal:
      cf.compaction_style = rocksdb::kCompactionStyleUniversal;
      break;
    case Layout::kFifo:
      cf.compaction_style = rocksdb::kCompactionStyleFIFO;
      // Never delete files for size: that would lose live records.
      cf.compaction_options_fifo.max_table_files_size = uint64_t{1} << 50;
      cf.compaction_options_fifo.allow_compaction = false;
      // A file's creation_time is the time of its oldest record; its newest
      // is at most one slack later (the memtable is flushed at least that
      // often), so every record in it has expired once ttl has passed.
      cf.ttl = static_cast<uint64_t>(absl::ToInt64Seconds(o.window) +
                                     FifoSlackSeconds(o.window) + 1);
      cf.periodic_compaction_seconds = 0;
      break;
    case Layout::kBuckets:
      // Dropped whole: no filter, no periodic rewrite.
      cf.compaction_filter_factory = nullptr;
      cf.periodic_compaction_seconds = 0;
      cf.ttl = 0;
      break;
  }
  return cf;
}

// The dedupe families of every layout: the engine's idem.dedupe and expiry
// buckets (idem.dedupe.until.<end>), and the bucket layout's own buckets.
bool IsDedupeFamily(const std::string& name) {
  return name == kDedupeColumnFamily || name.rfind(kBucketPrefix, 0) == 0 ||
         ParseBucketFamilyName(name).has_value();
}

rocksdb::ColumnFamilyOptions RawOptionsFor(const std::string& name,
                                           const TargetOptions& o,
                                           const RawParts& parts) {
  if (IsDedupeFamily(name)) return RawDedupeOptions(o, parts);
  if (name == kStateColumnFamily) {
    return RawStateOptions(o, parts, o.write_buffer_bytes);
  }
  return RawStateOptions(o, parts, kSmallWriteBufferBytes);
}

RawParts MakeRawParts(const TargetOptions& o) {
  RawParts parts;
  parts.statistics = rocksdb::CreateDBStatistics();
  parts.statistics->set_stats_level(
      rocksdb::StatsLevel::kExceptHistogramOrTimers);
  parts.cache = rocksdb::NewLRUCache(o.block_cache_bytes);
  parts.filter = std::make_shared<TtlFilterFactory>(o.clock);
  if (o.layout == Layout::kFifo) {
    parts.fifo_drops = std::make_shared<FifoDropCounter>();
  }
  return parts;
}

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

// ---- the simulated-time Env ----

class ClockSystemClock : public rocksdb::SystemClockWrapper {
 public:
  ClockSystemClock(const std::shared_ptr<rocksdb::SystemClock>& base,
                   Clock* clock)
      : SystemClockWrapper(base), clock_(clock) {}
  const char* Name() const override { return "idem.bench.ClockSystemClock"; }
  rocksdb::Status GetCurrentTime(int64_t* unix_time) override {
    *unix_time = absl::ToUnixSeconds(clock_->Now());
    return rocksdb::Status::OK();
  }

 private:
  Clock* const clock_;
};

class ClockEnv : public rocksdb::EnvWrapper {
 public:
  ClockEnv(rocksdb::Env* base, Clock* clock)
      : EnvWrapper(base), clock_(clock) {
    system_clock_ =
        std::make_shared<ClockSystemClock>(base->GetSystemClock(), clock);
  }
  const char* Name() const override { return "idem.bench.ClockEnv"; }
  rocksdb::Status GetCurrentTime(int64_t* unix_time) override {
    *unix_time = absl::ToUnixSeconds(clock_->Now());
    return rocksdb::Status::OK();
  }

 private:
  Clock* const clock_;
};

// ---- read cost ----

// Runs Get for each ID against `families` (in order, stopping at the first
// that holds it) and averages the cost.
LookupCost MeasureLookups(rocksdb::DB* db,
                          const std::vector<rocksdb::ColumnFamilyHandle*>& families,
                          rocksdb::Statistics& stats,
                          const std::vector<std::string>& ids) {
  LookupCost cost;
  const uint64_t useful0 = stats.getTickerCount(rocksdb::BLOOM_FILTER_USEFUL);
  const uint64_t positive0 =
      stats.getTickerCount(rocksdb::BLOOM_FILTER_FULL_POSITIVE);
  const uint64_t blocks0 = stats.getTickerCount(rocksdb::BLOCK_CACHE_DATA_MISS);
  double micros = 0;
  std::string value;
  for (const std::string& id : ids) {
    const DedupeKey key = HashMessageId(id);
    const auto start = std::chrono::steady_clock::now();
    for (rocksdb::ColumnFamilyHandle* cf : families) {
      rocksdb::Status s = db->Get(rocksdb::ReadOptions(), cf,
                                  rocksdb::Slice(key.data(), key.size()),
                                  &value);
      if (s.ok()) {
        ++cost.found;
        break;
      }
    }
    micros += std::chrono::duration<double, std::micro>(
                  std::chrono::steady_clock::now() - start)
                  .count();
    ++cost.lookups;
  }
  if (cost.lookups == 0) return cost;
  const double n = static_cast<double>(cost.lookups);
  const double useful = static_cast<double>(
      stats.getTickerCount(rocksdb::BLOOM_FILTER_USEFUL) - useful0);
  const double positive = static_cast<double>(
      stats.getTickerCount(rocksdb::BLOOM_FILTER_FULL_POSITIVE) - positive0);
  cost.filter_negatives = useful / n;
  cost.filter_probes = (useful + positive) / n;
  cost.data_blocks_read =
      static_cast<double>(
          stats.getTickerCount(rocksdb::BLOCK_CACHE_DATA_MISS) - blocks0) /
      n;
  cost.micros = micros / n;
  return cost;
}

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

absl::StatusOr<ReadCost> MeasureReadCost(
    const std::string& path, const TargetOptions& options,
    const std::vector<std::string>& miss_ids,
    const std::vector<std::string>& hit_ids) {
  ReadCost cost;
  if (options.layout == Layout::kEngine) {
    Options engine_options = EngineOptions(options);
    engine_options.env = nullptr;  // no time-based work in a read-only open
    StoreParts parts = MakeStoreParts(
        engine_options, std::make_shared<TtlFilterFactory>(options.clock));
    absl::StatusOr<std::unique_ptr<Store>> store =
        OpenStore(path, engine_options, parts, /*read_only=*/true);
    if (!store.ok()) return store.status();
    rocksdb::DB* db = (*store)->db;
    // The families the engine probes: idem.dedupe and the expiry buckets
    // that have not ended.
    const std::vector<rocksdb::ColumnFamilyHandle*> families =
        LiveDedupeFamilies(**store, TimeToMicros(options.clock->Now()));
    cost.miss = MeasureLookups(db, families, *parts.statistics, miss_ids);
    cost.hit = MeasureLookups(db, families, *parts.statistics, hit_ids);
    db->GetAggregatedIntProperty(
        rocksdb::DB::Properties::kEstimateTableReadersMem,
        &cost.table_readers_bytes);
    return cost;
  }
  RawParts parts = MakeRawParts(options);
  parts.fifo_drops = nullptr;
  const rocksdb::DBOptions db_options =
      RawDbOptions(options, rocksdb::Env::Default(), parts);
  std::vector<std::string> names;
  rocksdb::Status s =
      rocksdb::DB::ListColumnFamilies(db_options, path, &names);
  if (!s.ok()) return FromRocks(s, "listing column families of " + path);
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names) {
    descriptors.emplace_back(name, RawOptionsFor(name, options, parts));
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  s = rocksdb::DB::OpenForReadOnly(db_options, path, descriptors, &handles,
                                   &db);
  if (!s.ok()) return FromRocks(s, "opening " + path + " read-only");
  // Dedupe families, newest bucket first.
  std::vector<std::pair<int64_t, rocksdb::ColumnFamilyHandle*>> dedupe;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!IsDedupeFamily(names[i])) continue;
    int64_t id = 0;
    if (std::optional<int64_t> end = ParseBucketFamilyName(names[i])) {
      id = *end;
    } else if (names[i] != kDedupeColumnFamily &&
               !absl::SimpleAtoi(names[i].substr(std::strlen(kBucketPrefix)),
                                 &id)) {
      id = 0;
    }
    dedupe.emplace_back(id, handles[i]);
  }
  std::sort(dedupe.begin(), dedupe.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<rocksdb::ColumnFamilyHandle*> families;
  for (const auto& [id, handle] : dedupe) families.push_back(handle);
  cost.miss = MeasureLookups(db, families, *parts.statistics, miss_ids);
  cost.hit = MeasureLookups(db, families, *parts.statistics, hit_ids);
  db->GetAggregatedIntProperty(
      rocksdb::DB::Properties::kEstimateTableReadersMem,
      &cost.table_readers_bytes);
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  }
  db->Close().PermitUncheckedError();
  delete db;
  return cost;
}

std::unique_ptr<rocksdb::Env> NewClockEnv(rocksdb::Env* base, Clock* clock) {
  return std::make_unique<ClockEnv>(base, clock);
}

}  // namespace idem::tools
