#include "engine/engine_impl.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/batch_txn.h"
#include "engine/coding.h"
#include "engine/expiry_buckets.h"
#include "engine/handler_scope.h"
#include "engine/info_log.h"
#include "engine/merged_scan.h"
#include "engine/outbox_store.h"
#include "engine/shard_layout.h"
#include "engine/sharded_engine.h"
#include "engine/status_util.h"
#include "engine/store_directory.h"
#include "engine/user_code.h"
#include "engine/validate.h"

namespace idem {

EngineImpl::EngineImpl(std::string path, const Options& options,
                       std::shared_ptr<EngineClock> time,
                       const EngineHooks& hooks,
                       std::shared_ptr<TtlFilterFactory> ttl_filter,
                       StoreParts parts, std::unique_ptr<Store> store,
                       const OutboxCursor& outbox)
    : path_(std::move(path)),
      options_(options),
      clock_(std::move(time)),
      hooks_(hooks),
      ttl_filter_(std::move(ttl_filter)),
      parts_(std::move(parts)),
      watermark_(clock_.get(), hooks.watermark_ignores_in_flight),
      queue_(options.durability == Durability::kSync && !hooks.skip_wal_sync),
      store_(std::move(store)) {
  syncer_.set_skip_sync_for_testing(hooks_.skip_wal_sync);
  versions_.set_quiet_reads_ignore_in_flight(
      hooks_.quiet_reads_ignore_in_flight);
  issued_sequence_.store(store_->db->GetLatestSequenceNumber());
  outbox_issued_.store(outbox.issued);
  outbox_acked_.store(outbox.acked);
}

EngineImpl::~EngineImpl() {
  absl::MutexLock lock(&store_mu_);
  if (store_ != nullptr && !options_.read_only &&
      options_.durability == Durability::kBuffered && !hooks_.skip_wal_sync &&
      !needs_reopen_.load()) {
    // Best effort: a clean close leaves nothing unsynced. On failure the
    // unsynced tail is what a power loss would take anyway.
    WriteSyncBarrier(store_->db).PermitUncheckedError();
  }
  store_.reset();
}

absl::StatusOr<Store*> EngineImpl::CurrentStore() {
  if (store_ == nullptr) return store_error_;
  return store_.get();
}

void EngineImpl::LogEvent(LogSeverity severity,
                          std::string_view message) const {
  const std::string line = absl::StrCat("idem: ", AbslView(message));
  if (options_.logger != nullptr) {
    // A logger that throws loses the line, as RocksDB's do.
    CallUserCode("the logger", [&] {
      options_.logger->Log(severity, line);
      return absl::OkStatus();
    }).IgnoreError();
  } else if (!options_.read_only) {
    StoreLogFile(CanonicalStorePath(path_) + "/LOG", options_.clock,
                 /*rotate=*/false)
        .Log(severity, line);
  }
}

absl::Status EngineImpl::RecoverIfNeeded() {
  if (!needs_reopen_.load()) return absl::OkStatus();
  // The broken order (EngineHooks::reset_queue_before_store_lock): no
  // writer is queued now, but commits may be in flight.
  if (hooks_.reset_queue_before_store_lock) queue_.Reset();
  absl::MutexLock lock(&store_mu_);
  if (commits_lost_) return store_error_;
  LogEvent(LogSeverity::kWarning,
           "reopening the store after a failed write or sync");
  store_.reset();
  absl::StatusOr<std::unique_ptr<Store>> reopened =
      OpenStore(path_, options_, parts_);
  if (reopened.ok()) {
    const uint64_t recovered = (*reopened)->db->GetLatestSequenceNumber();
    const uint64_t issued = issued_sequence_.load();
    if (recovered < issued) {
      commits_lost_ = true;
      store_error_ = absl::DataLossError(absl::StrCat(
          "commits ", recovered + 1, "..", issued,
          " were lost by the file system after an I/O error; close the "
          "engine, reopen it and redeliver from the committed offsets"));
      LogEvent(LogSeverity::kError, store_error_.ToString());
      return store_error_;
    }
    // A failed commit may still have reached the log: the cursor is what
    // the store says, never what the engine last wrote.
    absl::StatusOr<OutboxCursor> outbox =
        LoadOutboxCursor((*reopened)->db, (*reopened)->outbox);
    if (!outbox.ok()) {
      store_ = std::move(*reopened);
      store_error_ = outbox.status();
      LogEvent(LogSeverity::kError, store_error_.ToString());
      return store_error_;
    }
    outbox_issued_.store(outbox->issued);
    outbox_acked_.store(outbox->acked);
    {
      // No commit is in flight (the store lock is held exclusively): what
      // was queued on top of the failed write never landed.
      PlainMutexLock order(&order_mu_);
      queued_offsets_.clear();
      stream_times_.Clear();
      timer_cursors_.Clear();
    }
    rocksdb::Status s = WriteSyncBarrier((*reopened)->db);
    store_ = std::move(*reopened);
    if (s.ok()) {
      syncer_.MarkDurable(recovered);
      // The invariant that makes a dirty read impossible: the queue's
      // failure is cleared only with the store lock held exclusively, so no
      // commit is in flight. Every commit that read a value of a failed one
      // (in flight, StateVersions) was queued behind it and has failed too;
      // none can land on the reopened store.
      store_mu_.AssertHeld();
      queue_.Reset();
      store_error_ = absl::OkStatus();
      needs_reopen_.store(false);
      LogEvent(LogSeverity::kInfo, "reopened the store; commits go on");
      return absl::OkStatus();
    }
    // Readable as it is; the next commit tries again.
    absl::Status synced = FromRocksStatus(s, "syncing the reopened store");
    LogEvent(LogSeverity::kError,
             absl::StrCat(synced.ToString(), "; the next commit tries again"));
    return synced;
  }
  // Keep answering reads from the committed data while the cause lasts.
  absl::StatusOr<std::unique_ptr<Store>> readable =
      OpenStore(path_, options_, parts_, /*read_only=*/true);
  if (readable.ok()) store_ = std::move(*readable);
  store_error_ = absl::Status(reopened.status().code(),
                              absl::StrCat("reopening after an I/O error: ",
                                           reopened.status().message()));
  LogEvent(LogSeverity::kError,
           absl::StrCat(store_error_.ToString(),
                        readable.ok() ? "; reads are answered from a "
                                        "read-only open until a later commit "
                                        "reopens the store"
                                      : "; the store stays closed until a "
                                        "later commit reopens it"));
  return store_error_;
}

bool EngineImpl::InsideOwnHandler() const {
  return HandlerScope::Running(this);
}

// Conditional locking hides from the analysis; the annotations on the
// declarations state what holds for the calling thread.
EngineImpl::ReadLock::ReadLock(EngineImpl* engine)
    ABSL_NO_THREAD_SAFETY_ANALYSIS : engine_(engine),
                                     locked_(!engine->InsideOwnHandler()) {
  if (locked_) engine_->store_mu_.ReaderLock();
}

EngineImpl::ReadLock::~ReadLock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (locked_) engine_->store_mu_.ReaderUnlock();
}

absl::Status EngineImpl::RejectInsideHandler(const char* call) const {
  if (!InsideOwnHandler()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      call,
      " called from inside a handler of the same engine, directly or through "
      "handlers of other engines (it could wait for the commit the handler is "
      "part of)"));
}

absl::Status EngineImpl::RejectIfReadOnly(const char* call) const {
  if (!options_.read_only) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(call,
                   " needs a writable engine; this one was opened with "
                   "Options::read_only"));
}

absl::Status EngineImpl::PrepareOutsideCommit(const char* call) {
  if (absl::Status s = RejectInsideHandler(call); !s.ok()) return s;
  if (!needs_reopen_.load()) return absl::OkStatus();
  PlainMutexLock commit_lock(&commit_mu_);
  return RecoverIfNeeded();
}

absl::StatusOr<Result> EngineImpl::Process(const Message& message,
                                           Handler handler) {
  absl::StatusOr<std::vector<Result>> results =
      ProcessBatch(absl::MakeConstSpan(&message, 1), handler);
  if (!results.ok()) return results.status();
  return std::move(results->front());
}

absl::Status EngineImpl::MarkFormat(int version) {
  absl::MutexLock lock(&store_mu_);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  if (absl::Status s =
          version >= kStateTtlFormatVersion
              ? MarkStateTtlFormat(**store, options_, parts_)
              : MarkStoreFormat(**store, options_, parts_, version);
      !s.ok()) {
    needs_reopen_.store(true);
    return s;
  }
  return absl::OkStatus();
}

bool EngineImpl::BucketsChange(const Store& store,
                               absl::Span<const RecordPlacement> placements,
                               int64_t now_micros) const {
  if (HasExpiredBuckets(store, BucketDropHorizon(now_micros))) return true;
  for (const RecordPlacement& placement : placements) {
    if (placement.bucket_end.has_value() &&
        store.buckets.count(*placement.bucket_end) == 0) {
      return true;
    }
  }
  return false;
}

absl::Status EngineImpl::MaintainBuckets(
    absl::Span<const RecordPlacement> placements, int64_t now_micros) {
  // The buckets this batch may write to (none when buckets are off; ended
  // buckets of an earlier setting are still dropped).
  std::vector<int64_t> needed;
  for (const RecordPlacement& placement : placements) {
    if (placement.bucket_end.has_value()) {
      needed.push_back(*placement.bucket_end);
    }
  }
  std::sort(needed.begin(), needed.end());
  needed.erase(std::unique(needed.begin(), needed.end()), needed.end());
  absl::MutexLock lock(&store_mu_);
  absl::StatusOr<Store*> store = CurrentStore();
  // A closed or read-only store fails the commit itself.
  if (!store.ok() || (*store)->read_only) return absl::OkStatus();
  if (absl::Status s = DropEndedBuckets(**store, now_micros); !s.ok()) {
    return s;
  }
  for (int64_t end : needed) {
    if (absl::Status s = CreateBucket(**store, options_, parts_, end);
        !s.ok()) {
      needs_reopen_.store(true);
      return s;
    }
  }
  return absl::OkStatus();
}

int64_t EngineImpl::BucketDropHorizon(int64_t now_micros) const {
  // Deliberately broken variant: drops buckets a width early.
  if (hooks_.drop_buckets_at_start && options_.expiry_buckets > 0) {
    return now_micros + BucketWidthMicros(options_);
  }
  return now_micros;
}

absl::Status EngineImpl::DropEndedBuckets(Store& store, int64_t now_micros) {
  absl::StatusOr<DroppedBuckets> dropped =
      DropExpiredBuckets(store, BucketDropHorizon(now_micros));
  if (!dropped.ok()) {
    needs_reopen_.store(true);
    LogEvent(
        LogSeverity::kError,
        absl::StrCat("dropping expired buckets: ", dropped.status().ToString(),
                     "; the store is reopened before the next commit"));
    return dropped.status();
  }
  if (dropped->families > 0) {
    LogEvent(LogSeverity::kInfo,
             absl::StrCat("dropped ", dropped->families,
                          " expiry bucket(s) whose records had all expired "
                          "(about ",
                          dropped->records, " records)"));
  }
  buckets_dropped_.fetch_add(dropped->families, std::memory_order_relaxed);
  bucket_records_dropped_.fetch_add(dropped->records,
                                    std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::StatusOr<rocksdb::ColumnFamilyHandle*> EngineImpl::FamilyFor(
    const Store& store, const RecordPlacement& placement) const {
  if (!placement.bucket_end.has_value()) return store.dedupe;
  auto bucket = store.buckets.find(*placement.bucket_end);
  if (bucket == store.buckets.end()) {
    return absl::InternalError("expiry bucket missing at commit");
  }
  return bucket->second;
}

absl::StatusOr<LiveLookup> EngineImpl::LookupLiveRecords(
    Store& store, absl::Span<const RecordKey> keys, int64_t now_micros) {
  return LookupLive(store.db, LiveDedupeFamilies(store, now_micros), keys,
                    now_micros);
}

absl::StatusOr<std::vector<OutboxEntry>> EngineImpl::ReadOutbox(
    size_t max_entries) {
  return ReadOutboxFrom("ReadOutbox", 0, max_entries);
}

absl::StatusOr<std::vector<OutboxEntry>> EngineImpl::ReadOutboxAfter(
    uint64_t position, size_t max_entries) {
  return ReadOutboxFrom("ReadOutboxAfter", position, max_entries);
}

absl::StatusOr<std::vector<OutboxEntry>> EngineImpl::ReadOutboxFrom(
    const char* call, uint64_t position, size_t max_entries) {
  if (max_entries == 0) {
    return absl::InvalidArgumentError(absl::StrCat(call, ": max_entries is 0"));
  }
  if (absl::Status s = PrepareOutsideCommit(call); !s.ok()) return s;
  ReadLock lock(this);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  rocksdb::DB* db = (*store)->db;
  const rocksdb::Snapshot* snapshot = db->GetSnapshot();
  rocksdb::ReadOptions read;
  read.snapshot = snapshot;
  absl::StatusOr<std::vector<OutboxEntry>> entries =
      ReadOutboxEntries(db, (*store)->outbox, read,
                        std::max(outbox_acked_.load(), position), max_entries);
  const uint64_t sequence = snapshot->GetSequenceNumber();
  db->ReleaseSnapshot(snapshot);
  if (!entries.ok() || entries->empty()) return entries;
  // Every entry read was committed at or before the snapshot.
  if (absl::Status s = MakeDurable(**store, sequence); !s.ok()) return s;
  return entries;
}

absl::Status EngineImpl::WaitLatestDurable() {
  if (absl::Status s = PrepareOutsideCommit("WaitDurable"); !s.ok()) return s;
  ReadLock lock(this);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  return MakeDurable(**store, (*store)->db->GetLatestSequenceNumber());
}

absl::StatusOr<std::unique_ptr<Engine>> OpenEngineWithHooks(
    const std::string& path, const Options& options, const EngineHooks& hooks) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  if (options.shards > 1) return OpenShardedEngine(path, options, hooks);
  {
    // An ordinary open of a sharded store is refused before RocksDB looks.
    rocksdb::Env* env =
        options.env != nullptr ? options.env : rocksdb::Env::Default();
    if (absl::StatusOr<bool> fresh = CheckShardLayout(env, path, options);
        !fresh.ok()) {
      return fresh.status();
    }
  }
  auto time = std::make_shared<EngineClock>(
      options.clock != nullptr ? options.clock : SystemClock(),
      /*monotonic=*/!hooks.engine_time_follows_clock);
  auto ttl_filter = std::make_shared<TtlFilterFactory>(time);
  StoreParts parts = MakeStoreParts(options, ttl_filter);
  if (hooks.dedupe_filter != nullptr) parts.dedupe_filter = hooks.dedupe_filter;
  absl::StatusOr<std::unique_ptr<Store>> store =
      OpenStore(path, options, parts, options.read_only);
  if (!store.ok()) return store.status();
  absl::StatusOr<OutboxCursor> outbox =
      LoadOutboxCursor((*store)->db, (*store)->outbox);
  if (!outbox.ok()) return outbox.status();
  return std::unique_ptr<Engine>(new EngineImpl(
      path, options, std::move(time), hooks, std::move(ttl_filter),
      std::move(parts), std::move(*store), *outbox));
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Open(const std::string& path,
                                                     const Options& options) {
  return OpenEngineWithHooks(path, options, EngineHooks());
}

}  // namespace idem
