// EngineImpl's inspection and maintenance calls: GetStats, CompactExpired,
// Checkpoint and Dump.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/engine_impl.h"
#include "engine/expiry_buckets.h"
#include "engine/outbox_store.h"
#include "engine/record.h"
#include "engine/state_value.h"
#include "engine/status_util.h"
#include "rocksdb/utilities/checkpoint.h"

namespace idem {
namespace {

absl::StatusOr<DumpEntry> DedupeEntry(bool partition_scope,
                                      std::string_view key,
                                      std::string_view value,
                                      int64_t now_micros) {
  std::optional<DedupeRecord> record = DecodeDedupeRecord(value);
  std::optional<PartitionRecordKey> scoped;
  if (partition_scope) scoped = DecodePartitionRecordKey(key);
  if (!record.has_value() || (partition_scope && !scoped.has_value())) {
    return absl::DataLossError(absl::StrCat(
        "undecodable dedupe record for key ", DedupeKeyToHex(key)));
  }
  DumpEntry entry;
  entry.kind = DumpEntry::Kind::kDedupe;
  entry.key = DedupeKeyToHex(scoped.has_value() ? scoped->hash : key);
  if (scoped.has_value()) {
    entry.source = std::string(scoped->source);
    entry.partition = scoped->partition;
  }
  entry.value = std::string(record->result);
  entry.expires_at = absl::FromUnixMicros(record->expiry_micros);
  entry.expired = IsExpired(*record, now_micros);
  entry.record_version = record->version;
  if (const int64_t first = FirstProcessedMicros(*record);
      first != kUnknownFirstProcessed) {
    entry.first_processed_at = absl::FromUnixMicros(first);
  }
  entry.fingerprint = record->fingerprint;
  if (record->failure != absl::StatusCode::kOk) {
    entry.failure = absl::Status(record->failure, AbslView(record->result));
    entry.value.clear();
  }
  return entry;
}

absl::StatusOr<DumpEntry> StateEntry(std::string_view key,
                                     std::string_view stored,
                                     const StateReadTime& time) {
  const StateValue decoded = DecodeStateValue(stored, time.enveloped);
  DumpEntry entry;
  entry.kind = DumpEntry::Kind::kState;
  entry.key = std::string(key);
  entry.value = std::string(decoded.value);
  if (decoded.expires_micros != kNeverExpires) {
    entry.expires_at = absl::FromUnixMicros(decoded.expires_micros);
    entry.expired = decoded.expires_micros <= time.now_micros;
  } else {
    entry.expires_at = absl::InfiniteFuture();
  }
  return entry;
}

absl::StatusOr<DumpEntry> OffsetEntry(std::string_view key,
                                      std::string_view value) {
  std::optional<OffsetKey> offset_key = DecodeOffsetKey(key);
  std::optional<int64_t> offset = DecodeOffsetValue(value);
  if (!offset_key.has_value() || !offset.has_value()) {
    return UndecodableOffsetError(key);
  }
  DumpEntry entry;
  entry.kind = DumpEntry::Kind::kOffset;
  entry.key = std::string(offset_key->source);
  entry.source = entry.key;
  entry.partition = offset_key->partition;
  entry.offset = *offset;
  return entry;
}

// Visits every entry of `cf` as read through `read`.
template <typename ToEntry>
absl::Status ScanColumnFamily(
    rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
    const rocksdb::ReadOptions& read, ToEntry to_entry,
    absl::FunctionRef<absl::Status(const DumpEntry&)> visit) {
  // The hashed dedupe memtable iterates in key order only when asked to.
  rocksdb::ReadOptions total_order = read;
  total_order.total_order_seek = true;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(total_order, cf));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    absl::StatusOr<DumpEntry> entry =
        to_entry(it->key().ToStringView(), it->value().ToStringView());
    if (!entry.ok()) return entry.status();
    if (absl::Status s = visit(*entry); !s.ok()) return s;
  }
  return FromRocksStatus(it->status(), "scanning the store");
}

// Visits the unacknowledged outbox entries, by position, a page at a time.
absl::Status DumpOutbox(
    const Store& store, const rocksdb::ReadOptions& read,
    absl::FunctionRef<absl::Status(const DumpEntry&)> visit) {
  constexpr size_t kPage = 1024;
  uint64_t after = 0;
  while (true) {
    absl::StatusOr<std::vector<OutboxEntry>> page =
        ReadOutboxEntries(store.db, store.outbox, read, after, kPage);
    if (!page.ok()) return page.status();
    for (OutboxEntry& outbox : *page) {
      DumpEntry entry;
      entry.kind = DumpEntry::Kind::kOutbox;
      entry.key = std::move(outbox.key);
      entry.value = std::move(outbox.value);
      entry.position = outbox.position;
      entry.message_id = std::move(outbox.message_id);
      entry.destination = std::move(outbox.destination);
      entry.partition = outbox.partition;
      entry.headers = std::move(outbox.headers);
      if (absl::Status s = visit(entry); !s.ok()) return s;
    }
    if (page->size() < kPage) return absl::OkStatus();
    after = page->back().position;
  }
}

// RocksDB's "Sum" W-Amp over the dedupe families: for one family its own
// figure; for several, everything they wrote (flush and compaction) over what
// their flushes wrote, from each family's written bytes and W-Amp. 0 when
// RocksDB reports nothing (before the first flush).
double DedupeCompactionWriteAmp(
    rocksdb::DB* db,
    const std::vector<rocksdb::ColumnFamilyHandle*>& families) {
  double written = 0;
  double flushed = 0;
  double only_write_amp = 0;
  for (rocksdb::ColumnFamilyHandle* family : families) {
    std::map<std::string, std::string> cf_stats;
    if (!db->GetMapProperty(family, rocksdb::DB::Properties::kCFStats,
                            &cf_stats)) {
      continue;
    }
    double write_amp = 0;
    double write_gb = 0;
    auto amp = cf_stats.find("compaction.Sum.WriteAmp");
    auto gb = cf_stats.find("compaction.Sum.WriteGB");
    if (amp == cf_stats.end() || !absl::SimpleAtod(amp->second, &write_amp) ||
        write_amp <= 0) {
      continue;
    }
    if (families.size() == 1) only_write_amp = write_amp;
    if (gb == cf_stats.end() || !absl::SimpleAtod(gb->second, &write_gb)) {
      continue;
    }
    written += write_gb;
    flushed += write_gb / write_amp;
  }
  if (families.size() == 1) return only_write_amp;
  return flushed > 0 ? written / flushed : 0;
}

}  // namespace

Options EngineImpl::options() {
  Options options = options_;
  ReadLock lock(this);  // also from inside a handler, whose commit holds it
  if (store_ != nullptr) {
    options.dedupe_scope =
        store_->partition_scope ? DedupeScope::kPartition : DedupeScope::kStore;
  }
  return options;
}

absl::StatusOr<Stats> EngineImpl::GetStats() {
  Stats stats;
  {
    PlainMutexLock lock(&durations_mu_);
    const LatencyHistogram& h = commit_micros_;
    CommitDurations& d = stats.commit_durations;
    int64_t below = 0;
    for (size_t i = 0; i < kCommitDurationBounds.size(); ++i) {
      const int64_t at_most = h.CountAtMost(kCommitDurationBounds[i] * 1e6);
      d.counts[i] = static_cast<uint64_t>(at_most - below);
      below = at_most;
    }
    d.counts.back() = static_cast<uint64_t>(h.count() - below);
    d.count = static_cast<uint64_t>(h.count());
    d.sum_seconds = h.sum() / 1e6;
  }
  stats.processed = processed_.load(std::memory_order_relaxed);
  stats.duplicates = duplicates_.load(std::memory_order_relaxed);
  stats.failed = failed_.load(std::memory_order_relaxed);
  stats.conflicts = conflicts_.load(std::memory_order_relaxed);
  stats.handler_reruns = handler_reruns_.load(std::memory_order_relaxed);
  stats.late_duplicates = late_duplicates_.load(std::memory_order_relaxed);
  const RedeliveryAges::Summary ages = redelivery_ages_.Get();
  stats.redelivery_age_p50 = ages.p50;
  stats.redelivery_age_p99 = ages.p99;
  stats.redelivery_age_max = ages.max;
  stats.expired_dropped = ttl_filter_->dropped();
  stats.user_bytes = user_bytes_.load(std::memory_order_relaxed);
  const OutboxCursor outbox = CurrentOutboxCursor();
  stats.outbox_pending = outbox.issued - outbox.acked;
  stats.outbox_emitted = outbox_emitted_.load(std::memory_order_relaxed);
  stats.outbox_acknowledged =
      outbox_acknowledged_.load(std::memory_order_relaxed);
  stats.timers_fired = timers_fired_.load(std::memory_order_relaxed);
  stats.timers_dead_lettered =
      timers_dead_lettered_.load(std::memory_order_relaxed);
  stats.timer_failures = timer_failures_.load(std::memory_order_relaxed);
  // The store's statistics count only kReportedTickers
  // (engine/reported_statistics.h): a ticker read here must be listed there.
  const rocksdb::Statistics& tickers = *parts_.statistics;
  stats.wal_bytes = tickers.getTickerCount(rocksdb::WAL_FILE_BYTES);
  stats.flush_bytes = tickers.getTickerCount(rocksdb::FLUSH_WRITE_BYTES);
  stats.compaction_bytes = tickers.getTickerCount(rocksdb::COMPACT_WRITE_BYTES);
  stats.bloom_filter_useful =
      tickers.getTickerCount(rocksdb::BLOOM_FILTER_USEFUL);
  stats.bloom_filter_positive =
      tickers.getTickerCount(rocksdb::BLOOM_FILTER_FULL_POSITIVE);
  stats.data_blocks_read =
      tickers.getTickerCount(rocksdb::BLOCK_CACHE_DATA_MISS);
  if (stats.user_bytes > 0) {
    stats.write_amplification =
        static_cast<double>(stats.wal_bytes + stats.flush_bytes +
                            stats.compaction_bytes) /
        static_cast<double>(stats.user_bytes);
  }
  ReadLock lock(this);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  rocksdb::DB* db = (*store)->db;
  const std::vector<rocksdb::ColumnFamilyHandle*> dedupe_families =
      AllDedupeFamilies(**store);
  if (!db->GetAggregatedIntProperty(rocksdb::DB::Properties::kLiveSstFilesSize,
                                    &stats.live_sst_bytes)) {
    return absl::InternalError("RocksDB did not report its size properties");
  }
  for (rocksdb::ColumnFamilyHandle* family : dedupe_families) {
    uint64_t records = 0;
    if (!db->GetIntProperty(family, rocksdb::DB::Properties::kEstimateNumKeys,
                            &records)) {
      return absl::InternalError("RocksDB did not report its size properties");
    }
    stats.estimated_live_records += records;
  }
  stats.expiry_buckets = (*store)->buckets.size();
  stats.expiry_buckets_dropped =
      buckets_dropped_.load(std::memory_order_relaxed);
  stats.expiry_bucket_records_dropped =
      bucket_records_dropped_.load(std::memory_order_relaxed);
  // Memory figures are best effort: a property RocksDB does not report
  // leaves its field at 0.
  db->GetAggregatedIntProperty(rocksdb::DB::Properties::kCurSizeAllMemTables,
                               &stats.memtable_bytes);
  db->GetAggregatedIntProperty(
      rocksdb::DB::Properties::kEstimateTableReadersMem,
      &stats.table_reader_bytes);
  db->GetIntProperty(rocksdb::DB::Properties::kBlockCacheUsage,
                     &stats.block_cache_bytes);
  stats.dedupe_compaction_write_amplification =
      DedupeCompactionWriteAmp(db, dedupe_families);
  return stats;
}

namespace {

// Sets a removal horizon for the state family's filters for its scope.
class RemovalHorizon {
 public:
  RemovalHorizon(StateTtlContext* context, int64_t horizon)
      : context_(context) {
    context_->removal_horizon.store(horizon);
  }
  RemovalHorizon(const RemovalHorizon&) = delete;
  RemovalHorizon& operator=(const RemovalHorizon&) = delete;
  ~RemovalHorizon() {
    context_->removal_horizon.store(StateReadTime::kNoExpiryCheck);
  }

 private:
  StateTtlContext* const context_;
};

}  // namespace

absl::Status EngineImpl::CompactExpired() {
  if (absl::Status s = RejectIfReadOnly("CompactExpired"); !s.ok()) return s;
  if (absl::Status s = PrepareOutsideCommit("CompactExpired"); !s.ok()) {
    return s;
  }
  // Expired state values up to this engine time are removed, not only cut
  // down to markers (StateTtlFilter, engine/ttl_filter.h): a time every
  // earlier commit has reached, so that each has landed before the flush.
  int64_t state_horizon = StateReadTime::kNoExpiryCheck;
  if (!options_.read_only) {
    // Buckets that have ended go whole, under the commit lock like any
    // change to the bucket set; the lock also keeps out the writes outside
    // the handler path (imports) while the horizon is read.
    PlainMutexLock commit_lock(&commit_mu_);
    // Before the store lock, as on the commit path.
    absl::StatusOr<int64_t> now_micros = clock_->NowMicros();
    if (!now_micros.ok()) return now_micros.status();
    // Taking the store lock exclusively waits for every commit in flight,
    // a slow handler's included, and holds back every commit behind it
    // meanwhile: only when a bucket has ended.
    bool exclusive = false;
    bool expiring_state = false;
    {
      absl::ReaderMutexLock store_lock(&store_mu_);
      absl::StatusOr<Store*> store = CurrentStore();
      if (!store.ok()) return store.status();
      exclusive = !(*store)->read_only &&
                  (hooks_.compact_always_locks_store ||
                   HasExpiredBuckets(**store, BucketDropHorizon(*now_micros)));
      expiring_state = !(*store)->read_only &&
                       (*store)->format_version >= kStateTtlFormatVersion;
    }
    if (exclusive) {
      absl::MutexLock store_lock(&store_mu_);
      absl::StatusOr<Store*> store = CurrentStore();
      if (!store.ok()) return store.status();
      if (absl::Status s = (*store)->read_only
                               ? absl::OkStatus()
                               : DropEndedBuckets(**store, *now_micros);
          !s.ok()) {
        return s;
      }
    }
    if (expiring_state) {
      // min(now, the oldest commit in flight): such a commit lowers the
      // horizon, and nothing waits for it (a slow handler's operand lands
      // above the marker its value was cut to; engine/
      // commit_time_watermark.h). A store marked format 6 after the commit
      // lock is released is compacted without a horizon (markers only).
      absl::StatusOr<int64_t> horizon = watermark_.Horizon();
      if (!horizon.ok()) return horizon.status();
      state_horizon = *horizon;
    }
  }
  ReadLock lock(this);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  std::vector<rocksdb::ColumnFamilyHandle*> families =
      AllDedupeFamilies(**store);
  // The state family holds values that expire only from format 6.
  std::optional<RemovalHorizon> horizon;
  if ((*store)->format_version >= kStateTtlFormatVersion) {
    families.push_back((*store)->state);
    horizon.emplace(parts_.state_ttl.get(), state_horizon);
  }
  for (rocksdb::ColumnFamilyHandle* family : families) {
    // allow_write_stall: without it, both calls first wait for a write
    // stall to clear, which never happens while a full disk holds back
    // RocksDB's flushes (the call then hung instead of failing).
    rocksdb::FlushOptions flush;
    flush.wait = true;
    flush.allow_write_stall = true;
    rocksdb::Status s = (*store)->db->Flush(flush, family);
    if (!s.ok()) return FromRocksStatus(s, "flushing dedupe records");
    rocksdb::CompactRangeOptions compact;
    compact.allow_write_stall = true;
    // Rewrite bottommost files too, so every record meets the filter.
    compact.bottommost_level_compaction =
        rocksdb::BottommostLevelCompaction::kForce;
    s = (*store)->db->CompactRange(compact, family, nullptr, nullptr);
    if (!s.ok()) return FromRocksStatus(s, "compacting dedupe records");
  }
  return absl::OkStatus();
}

absl::Status EngineImpl::Checkpoint(const std::string& dir) {
  if (dir.empty()) {
    return absl::InvalidArgumentError("checkpoint directory is empty");
  }
  if (absl::Status s = RejectIfReadOnly("Checkpoint"); !s.ok()) return s;
  if (absl::Status s = PrepareOutsideCommit("Checkpoint"); !s.ok()) return s;
  ReadLock lock(this);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  rocksdb::Status exists = (*store)->env->FileExists(dir);
  if (exists.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint directory ", dir, " already exists"));
  }
  if (!exists.IsNotFound()) {
    return FromRocksStatus(exists, "checking the checkpoint directory");
  }
  rocksdb::Checkpoint* raw = nullptr;
  rocksdb::Status s = rocksdb::Checkpoint::Create((*store)->db, &raw);
  if (!s.ok()) return FromRocksStatus(s, "starting a checkpoint");
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // log_size_for_flush = 0: flush memtables so the copy needs no WAL replay.
  s = checkpoint->CreateCheckpoint(dir, /*log_size_for_flush=*/0);
  return FromRocksStatus(s, "writing checkpoint to " + dir);
}

absl::Status EngineImpl::Dump(
    absl::FunctionRef<absl::Status(const DumpEntry&)> visit) {
  ReadLock lock(this);
  absl::StatusOr<Store*> current = CurrentStore();
  if (!current.ok()) return current.status();
  const Store& store = **current;
  absl::StatusOr<int64_t> now = clock_->NowMicros();
  if (!now.ok()) return now.status();
  const int64_t now_micros = *now;
  const rocksdb::Snapshot* snapshot = store.db->GetSnapshot();
  rocksdb::ReadOptions read;
  read.snapshot = snapshot;
  absl::Status status;
  for (rocksdb::ColumnFamilyHandle* family : AllDedupeFamilies(store)) {
    status = ScanColumnFamily(
        store.db, family, read,
        [&](std::string_view key, std::string_view value) {
          return DedupeEntry(store.partition_scope, key, value, now_micros);
        },
        visit);
    if (!status.ok()) break;
  }
  if (status.ok()) {
    const StateReadTime time = StateReadTimeAt(store, now_micros);
    status = ScanColumnFamily(
        store.db, store.state, read,
        [&](std::string_view key, std::string_view value) {
          return StateEntry(key, value, time);
        },
        visit);
  }
  if (status.ok()) {
    status =
        ScanColumnFamily(store.db, store.offsets, read, OffsetEntry, visit);
  }
  if (status.ok()) status = DumpOutbox(store, read, visit);
  store.db->ReleaseSnapshot(snapshot);
  return status;
}

}  // namespace idem
