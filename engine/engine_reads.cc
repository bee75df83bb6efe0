// EngineImpl's reads of committed data, and the calls on one stored record
// or offset outside the commit path: GetState and ScanState (with the
// expiry of state that expires), Seen, Forget and CommittedOffset.

#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/coding.h"
#include "engine/engine_impl.h"
#include "engine/expiry_buckets.h"
#include "engine/merged_scan.h"
#include "engine/status_util.h"
#include "engine/validate.h"

namespace idem {

absl::StatusOr<std::optional<std::string>> EngineImpl::GetState(
    std::string_view key) {
  ReadLock lock(this);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  absl::StatusOr<StateReadTime> time = StateReadTimeNow(**store);
  if (!time.ok()) return time.status();
  std::string value;
  rocksdb::Status s = (*store)->db->Get(rocksdb::ReadOptions(), (*store)->state,
                                        ToSlice(key), &value);
  if (s.IsNotFound()) return std::nullopt;
  if (!s.ok()) return FromRocksStatus(s, "reading state");
  std::optional<std::string_view> live = LiveStateValue(value, *time);
  if (!live.has_value()) return std::nullopt;
  value.resize(live->size());  // the value is a prefix of what is stored
  return value;
}

StateReadTime EngineImpl::StateReadTimeAt(const Store& store,
                                          int64_t now_micros) const {
  StateReadTime time;
  time.enveloped = store.format_version >= kStateTtlFormatVersion;
  if (!hooks_.skip_state_expiry_check) time.now_micros = now_micros;
  return time;
}

BatchTxn::StateTime EngineImpl::HandlerStateTime(const Store& store,
                                                 int64_t now_micros) const {
  return BatchTxn::StateTime{.read = StateReadTimeAt(store, now_micros),
                             .now_micros = now_micros,
                             .default_ttl = options_.state_ttl};
}

absl::StatusOr<StateReadTime> EngineImpl::StateReadTimeNow(const Store& store) {
  // A store without values that expire needs no clock.
  if (store.format_version < kStateTtlFormatVersion) return StateReadTime();
  absl::StatusOr<int64_t> now_micros = clock_->NowMicros();
  if (!now_micros.ok()) return now_micros.status();
  return StateReadTimeAt(store, *now_micros);
}

absl::Status EngineImpl::ScanState(std::string_view begin, std::string_view end,
                                   ScanVisitor visit,
                                   const ScanOptions& options) {
  if (absl::Status s = ValidateScanRange(begin, end); !s.ok()) return s;
  ReadLock lock(this);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  absl::StatusOr<StateReadTime> time = StateReadTimeNow(**store);
  if (!time.ok()) return time.status();
  rocksdb::ReadOptions read;
  const rocksdb::Slice lower = ToSlice(begin);
  const rocksdb::Slice upper = ToSlice(end);
  read.iterate_lower_bound = &lower;
  if (!end.empty()) read.iterate_upper_bound = &upper;
  // An iterator reads from the snapshot it took when it was made.
  std::unique_ptr<rocksdb::Iterator> it(
      (*store)->db->NewIterator(read, (*store)->state));
  absl::StatusOr<ScanExtent> scanned =
      MergedScan({}, it.get(), begin, end, options, visit, *time);
  return scanned.status();
}

absl::StatusOr<RecordKey> EngineImpl::CheckedRecordKey(
    const Store& store, std::string_view id,
    std::optional<SourcePartition> where) const {
  if (absl::Status s = ValidateId(id); !s.ok()) return s;
  if (where.has_value()) {
    if (absl::Status s = ValidatePosition(where->source, where->partition);
        !s.ok()) {
      return s;
    }
  } else if (store.partition_scope) {
    return absl::FailedPreconditionError(
        "the store's dedupe records are partition-scoped "
        "(DedupeScope::kPartition): name the message's source and partition");
  }
  Message message;
  message.id = id;
  if (where.has_value()) {
    message.source = where->source;
    message.partition = where->partition;
  }
  return RecordKeyFor(store.partition_scope, message, HashMessageId(id));
}

absl::StatusOr<bool> EngineImpl::Seen(std::string_view id) {
  return SeenAt(id, std::nullopt);
}

absl::StatusOr<bool> EngineImpl::Seen(std::string_view id,
                                      std::string_view source,
                                      int32_t partition) {
  return SeenAt(id, SourcePartition{source, partition});
}

absl::StatusOr<bool> EngineImpl::SeenAt(std::string_view id,
                                        std::optional<SourcePartition> where) {
  if (absl::Status s = ValidateId(id); !s.ok()) return s;
  ReadLock lock(this);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  absl::StatusOr<RecordKey> key = CheckedRecordKey(**store, id, where);
  if (!key.ok()) return key.status();
  // Read under the store lock: no bucket is dropped in between, and every
  // bucket dropped before was dropped at an engine time at most this one.
  absl::StatusOr<int64_t> now_micros = clock_->NowMicros();
  if (!now_micros.ok()) return now_micros.status();
  absl::StatusOr<LiveLookup> stored =
      LookupLiveRecords(**store, absl::MakeConstSpan(&*key, 1), *now_micros);
  if (!stored.ok()) return stored.status();
  return stored->front().has_value();
}

absl::Status EngineImpl::Forget(std::string_view id) {
  return ForgetAt(id, std::nullopt);
}

absl::Status EngineImpl::Forget(std::string_view id, std::string_view source,
                                int32_t partition) {
  return ForgetAt(id, SourcePartition{source, partition});
}

absl::Status EngineImpl::ForgetAt(std::string_view id,
                                  std::optional<SourcePartition> where) {
  if (absl::Status s = ValidateId(id); !s.ok()) return s;
  if (absl::Status s = RejectInsideHandler("Forget"); !s.ok()) return s;
  if (absl::Status s = RejectIfReadOnly("Forget"); !s.ok()) return s;
  PlainMutexLock commit_lock(&commit_mu_);
  if (absl::Status s = RecoverIfNeeded(); !s.ok()) return s;
  absl::ReaderMutexLock store_lock(&store_mu_);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  absl::StatusOr<RecordKey> key = CheckedRecordKey(**store, id, where);
  if (!key.ok()) return key.status();
  absl::StatusOr<int64_t> now_micros = clock_->NowMicros();
  if (!now_micros.ok()) return now_micros.status();
  rocksdb::WriteBatch batch;
  for (rocksdb::ColumnFamilyHandle* family :
       LiveDedupeFamilies(**store, *now_micros)) {
    rocksdb::Status s = batch.Delete(family, ToSlice(key->view()));
    if (!s.ok()) return FromRocksStatus(s, "building a forget");
  }
  return Write(**store, &batch);
}

absl::StatusOr<std::optional<int64_t>> EngineImpl::CommittedOffset(
    std::string_view source, int32_t partition) {
  if (absl::Status s = ValidateSource(source, partition); !s.ok()) return s;
  ReadLock lock(this);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  return ReadStoredOffset((*store)->db, (*store)->offsets,
                          rocksdb::ReadOptions(), source, partition);
}

}  // namespace idem
