#include "engine/engine_impl.h"

#include <exception>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "engine/batch_txn.h"
#include "engine/offset_tracker.h"
#include "engine/status_util.h"
#include "engine/validate.h"
#include "rocksdb/utilities/write_batch_with_index.h"

namespace idem {
namespace {

// The engine whose handler is running on this thread, to reject re-entrant
// Process calls (they would deadlock on the commit lock).
thread_local const Engine* running_handler_of = nullptr;

class HandlerScope {
 public:
  explicit HandlerScope(const Engine* engine) : previous_(running_handler_of) {
    running_handler_of = engine;
  }
  ~HandlerScope() { running_handler_of = previous_; }

 private:
  const Engine* const previous_;
};

absl::Status CallHandler(Handler handler, const Message& message, Txn& txn) {
  try {
    return handler(message, txn);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("handler threw: ", e.what()));
  } catch (...) {
    return absl::InternalError("handler threw a non-standard exception");
  }
}

int64_t ExpiryMicros(int64_t now_micros, absl::Duration ttl) {
  // Round up: a positive ttl must outlive the instant of its commit.
  const int64_t ttl_micros =
      absl::ToInt64Microseconds(absl::Ceil(ttl, absl::Microseconds(1)));
  if (now_micros > std::numeric_limits<int64_t>::max() - ttl_micros) {
    return std::numeric_limits<int64_t>::max();
  }
  return now_micros + ttl_micros;
}

rocksdb::Slice ToSlice(std::string_view s) {
  return rocksdb::Slice(s.data(), s.size());
}

}  // namespace

EngineImpl::EngineImpl(std::string path, const Options& options, Clock* clock,
                       const EngineHooks& hooks,
                       std::shared_ptr<TtlFilterFactory> ttl_filter,
                       StoreParts parts, std::unique_ptr<Store> store)
    : path_(std::move(path)),
      options_(options),
      clock_(clock),
      hooks_(hooks),
      ttl_filter_(std::move(ttl_filter)),
      parts_(std::move(parts)),
      store_(std::move(store)) {
  syncer_.set_skip_sync_for_testing(hooks_.skip_wal_sync);
}

EngineImpl::~EngineImpl() {
  absl::MutexLock lock(&store_mu_);
  if (store_ != nullptr && options_.durability == Durability::kBuffered &&
      !hooks_.skip_wal_sync && !needs_reopen_.load()) {
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

absl::Status EngineImpl::RecoverIfNeeded() {
  if (!needs_reopen_.load()) return absl::OkStatus();
  absl::MutexLock lock(&store_mu_);
  if (store_ == nullptr && store_error_.code() == absl::StatusCode::kDataLoss) {
    return store_error_;
  }
  uint64_t issued = 0;
  if (store_ != nullptr) {
    issued = store_->db->GetLatestSequenceNumber();
    store_.reset();
  }
  store_error_ = absl::UnavailableError(
      "the store is closed after an I/O error and could not be reopened yet");
  absl::StatusOr<std::unique_ptr<Store>> reopened =
      OpenStore(path_, options_, parts_);
  if (!reopened.ok()) {
    store_error_ = absl::Status(
        reopened.status().code(),
        absl::StrCat("reopening after an I/O error: ",
                     reopened.status().message()));
    return store_error_;
  }
  const uint64_t recovered = (*reopened)->db->GetLatestSequenceNumber();
  if (recovered < issued) {
    store_error_ = absl::DataLossError(absl::StrCat(
        "commits ", recovered + 1, "..", issued,
        " were lost by the file system after an I/O error; close the engine, "
        "reopen it and redeliver from the committed offsets"));
    return store_error_;
  }
  if (rocksdb::Status s = WriteSyncBarrier((*reopened)->db); !s.ok()) {
    store_error_ = FromRocksStatus(s, "syncing the reopened store");
    return store_error_;
  }
  syncer_.MarkDurable(recovered);
  store_ = std::move(*reopened);
  store_error_ = absl::OkStatus();
  needs_reopen_.store(false);
  return absl::OkStatus();
}

absl::StatusOr<Result> EngineImpl::Process(const Message& message,
                                           Handler handler) {
  absl::StatusOr<std::vector<Result>> results =
      ProcessBatch(absl::MakeConstSpan(&message, 1), handler);
  if (!results.ok()) return results.status();
  return std::move(results->front());
}

absl::StatusOr<std::vector<Result>> EngineImpl::ProcessBatch(
    absl::Span<const Message> messages, Handler handler) {
  for (size_t i = 0; i < messages.size(); ++i) {
    if (absl::Status s = ValidateMessage(messages[i]); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("message ", i, ": ", s.message()));
    }
  }
  if (running_handler_of == this) {
    return absl::FailedPreconditionError(
        "Process/ProcessBatch called from inside a handler of the same "
        "engine");
  }
  if (messages.empty()) return std::vector<Result>();
  // Deliberately broken variant (EngineHooks::skip_commit_lock): no mutual
  // exclusion between concurrent commits.
  std::optional<absl::MutexLock> commit_lock;
  if (!hooks_.skip_commit_lock) commit_lock.emplace(&commit_mu_);
  return [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS
         -> absl::StatusOr<std::vector<Result>> {
    if (absl::Status s = RecoverIfNeeded(); !s.ok()) return s;
    absl::ReaderMutexLock store_lock(&store_mu_);
    absl::StatusOr<Store*> store = CurrentStore();
    if (!store.ok()) return store.status();
    return CommitBatch(**store, messages, handler);
  }();
}

absl::StatusOr<std::vector<Result>> EngineImpl::CommitBatch(
    Store& store, absl::Span<const Message> messages, Handler handler) {
  const int64_t now_micros = TimeToMicros(clock_->Now());
  rocksdb::WriteBatchWithIndex batch;
  rocksdb::WriteBatch split_records;  // only with hooks_.split_commit
  // ID -> index of its first successful occurrence in this batch.
  absl::flat_hash_map<DedupeKey, size_t> committed_here;
  OffsetTracker offsets;
  std::vector<Result> results(messages.size());

  for (size_t i = 0; i < messages.size(); ++i) {
    const Message& message = messages[i];
    Result& result = results[i];
    const DedupeKey key = HashMessageId(message.id);
    if (auto it = committed_here.find(key); it != committed_here.end()) {
      result.outcome = Outcome::kDuplicate;
      result.result = results[it->second].result;
      offsets.Add(message, result.outcome);
      continue;
    }
    absl::StatusOr<std::optional<std::string>> stored =
        LookupLive(store, key, now_micros);
    if (!stored.ok()) return stored.status();
    if (stored->has_value()) {
      result.outcome = Outcome::kDuplicate;
      result.result = std::move(**stored);
      offsets.Add(message, result.outcome);
      continue;
    }

    batch.SetSavePoint();
    BatchTxn txn(&batch, store.db, store.state);
    absl::Status status;
    {
      HandlerScope scope(this);
      status = CallHandler(handler, message, txn);
    }
    if (!txn.read_error().ok()) return txn.read_error();
    if (status.ok()) status = txn.write_error();
    if (!status.ok()) {
      // Discard this message's writes only; earlier messages keep theirs.
      rocksdb::Status rollback = batch.RollbackToSavePoint();
      if (!rollback.ok()) {
        return FromRocksStatus(rollback,
                               "discarding a failed handler's writes");
      }
      result.outcome = Outcome::kFailed;
      result.error = std::move(status);
      offsets.Add(message, result.outcome);
      continue;
    }
    rocksdb::Status popped = batch.PopSavePoint();
    if (!popped.ok()) return FromRocksStatus(popped, "building the commit");
    const absl::Duration ttl = message.ttl == absl::ZeroDuration()
                                   ? options_.dedupe_window
                                   : message.ttl;
    const std::string record =
        EncodeDedupeRecord(ExpiryMicros(now_micros, ttl), txn.result());
    rocksdb::WriteBatchBase& records =
        hooks_.split_commit ? static_cast<rocksdb::WriteBatchBase&>(
                                  split_records)
                            : batch;
    rocksdb::Status put =
        records.Put(store.dedupe, ToSlice(KeyView(key)), record);
    if (!put.ok()) return FromRocksStatus(put, "building the commit");
    result.outcome = Outcome::kProcessed;
    result.result = txn.result();
    committed_here.emplace(key, i);
    offsets.Add(message, result.outcome);
  }

  if (absl::Status s = AddOffsets(store, offsets, batch); !s.ok()) return s;
  if (absl::Status s = Write(store, batch.GetWriteBatch()); !s.ok()) return s;
  if (absl::Status s = Write(store, &split_records); !s.ok()) return s;

  // Every outcome depends on at most the commits published so far.
  const uint64_t sequence = store.db->GetLatestSequenceNumber();
  for (Result& result : results) {
    switch (result.outcome) {
      case Outcome::kProcessed:
        result.sequence = sequence;
        processed_.fetch_add(1, std::memory_order_relaxed);
        break;
      case Outcome::kDuplicate:
        result.sequence = sequence;
        duplicates_.fetch_add(1, std::memory_order_relaxed);
        break;
      case Outcome::kFailed:
        failed_.fetch_add(1, std::memory_order_relaxed);
        break;
    }
  }
  return results;
}

absl::Status EngineImpl::AddOffsets(Store& store, const OffsetTracker& offsets,
                                    rocksdb::WriteBatchBase& batch) {
  absl::Status status;
  offsets.ForEach([&](const std::string& offset_key, int64_t offset) {
    if (!status.ok()) return;
    std::string value;
    rocksdb::Status s =
        store.db->Get(rocksdb::ReadOptions(), store.offsets, offset_key, &value);
    if (s.ok()) {
      std::optional<int64_t> stored = DecodeOffsetValue(value);
      if (!stored.has_value()) {
        status = absl::DataLossError("undecodable stored offset");
        return;
      }
      if (*stored >= offset) return;  // offsets only move forward
    } else if (!s.IsNotFound()) {
      status = FromRocksStatus(s, "reading a committed offset");
      return;
    }
    s = batch.Put(store.offsets, offset_key, EncodeOffsetValue(offset));
    if (!s.ok()) status = FromRocksStatus(s, "building the commit");
  });
  return status;
}

absl::StatusOr<std::optional<std::string>> EngineImpl::LookupLive(
    Store& store, const DedupeKey& key, int64_t now_micros) {
  rocksdb::PinnableSlice value;
  rocksdb::Status s = store.db->Get(rocksdb::ReadOptions(), store.dedupe,
                                    ToSlice(KeyView(key)), &value);
  if (s.IsNotFound()) return std::nullopt;
  if (!s.ok()) return FromRocksStatus(s, "reading a dedupe record");
  std::optional<DedupeRecord> record =
      DecodeDedupeRecord(std::string_view(value.data(), value.size()));
  if (!record.has_value()) {
    return absl::DataLossError(
        absl::StrCat("undecodable dedupe record for key ",
                     DedupeKeyToHex(KeyView(key))));
  }
  if (IsExpired(*record, now_micros)) return std::nullopt;
  return std::string(record->result);
}

absl::Status EngineImpl::Write(Store& store, rocksdb::WriteBatch* batch) {
  if (batch->Count() == 0) return absl::OkStatus();
  rocksdb::WriteOptions write_options;
  write_options.sync = options_.durability == Durability::kSync;
  rocksdb::Status s = store.db->Write(write_options, batch);
  if (!s.ok()) {
    needs_reopen_.store(true);
    return FromRocksStatus(s, "committing");
  }
  user_bytes_.fetch_add(batch->GetDataSize(), std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> EngineImpl::GetState(
    std::string_view key) {
  absl::ReaderMutexLock lock(&store_mu_);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  std::string value;
  rocksdb::Status s = (*store)->db->Get(rocksdb::ReadOptions(), (*store)->state,
                                        ToSlice(key), &value);
  if (s.IsNotFound()) return std::nullopt;
  if (!s.ok()) return FromRocksStatus(s, "reading state");
  return value;
}

absl::StatusOr<bool> EngineImpl::Seen(std::string_view id) {
  if (absl::Status s = ValidateId(id); !s.ok()) return s;
  absl::ReaderMutexLock lock(&store_mu_);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  absl::StatusOr<std::optional<std::string>> stored =
      LookupLive(**store, HashMessageId(id), TimeToMicros(clock_->Now()));
  if (!stored.ok()) return stored.status();
  return stored->has_value();
}

absl::Status EngineImpl::Forget(std::string_view id) {
  if (absl::Status s = ValidateId(id); !s.ok()) return s;
  const DedupeKey key = HashMessageId(id);
  absl::MutexLock commit_lock(&commit_mu_);
  if (absl::Status s = RecoverIfNeeded(); !s.ok()) return s;
  absl::ReaderMutexLock store_lock(&store_mu_);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  rocksdb::WriteBatch batch;
  rocksdb::Status s = batch.Delete((*store)->dedupe, ToSlice(KeyView(key)));
  if (!s.ok()) return FromRocksStatus(s, "building a forget");
  return Write(**store, &batch);
}

absl::StatusOr<std::optional<int64_t>> EngineImpl::CommittedOffset(
    std::string_view source, int32_t partition) {
  if (absl::Status s = ValidateSource(source, partition); !s.ok()) return s;
  absl::ReaderMutexLock lock(&store_mu_);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  std::string value;
  rocksdb::Status s =
      (*store)->db->Get(rocksdb::ReadOptions(), (*store)->offsets,
                        EncodeOffsetKey(source, partition), &value);
  if (s.IsNotFound()) return std::nullopt;
  if (!s.ok()) return FromRocksStatus(s, "reading a committed offset");
  std::optional<int64_t> offset = DecodeOffsetValue(value);
  if (!offset.has_value()) {
    return absl::DataLossError("undecodable stored offset");
  }
  return *offset;
}

absl::Status EngineImpl::WaitDurable(uint64_t sequence) {
  if (options_.durability == Durability::kBuffered && needs_reopen_.load()) {
    absl::MutexLock commit_lock(&commit_mu_);
    if (absl::Status s = RecoverIfNeeded(); !s.ok()) return s;
  }
  absl::ReaderMutexLock lock(&store_mu_);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  const uint64_t latest = (*store)->db->GetLatestSequenceNumber();
  if (sequence > latest) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence ", sequence, " was never issued (latest is ",
                     latest, ")"));
  }
  // Under kSync every commit was synced before its outcome was returned.
  if (options_.durability == Durability::kSync) return absl::OkStatus();
  absl::Status s = syncer_.WaitDurable((*store)->db, sequence);
  if (!s.ok()) needs_reopen_.store(true);
  return s;
}

absl::StatusOr<std::unique_ptr<Engine>> OpenEngineWithHooks(
    const std::string& path, const Options& options, const EngineHooks& hooks) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  Clock* clock = options.clock != nullptr ? options.clock : SystemClock();
  auto ttl_filter = std::make_shared<TtlFilterFactory>(clock);
  StoreParts parts = MakeStoreParts(options, ttl_filter);
  if (hooks.dedupe_filter != nullptr) parts.dedupe_filter = hooks.dedupe_filter;
  absl::StatusOr<std::unique_ptr<Store>> store =
      OpenStore(path, options, parts);
  if (!store.ok()) return store.status();
  return std::unique_ptr<Engine>(
      new EngineImpl(path, options, clock, hooks, std::move(ttl_filter),
                     std::move(parts), std::move(*store)));
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Open(const std::string& path,
                                                     const Options& options) {
  return OpenEngineWithHooks(path, options, EngineHooks());
}

}  // namespace idem
