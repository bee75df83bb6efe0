// EngineImpl's writes outside the handler path (Forget, AckOutbox, imports,
// offsets): through the commit queue, in the order of the commits'
// (engine/engine_commit.cc), with the bookkeeping that keeps those commits'
// validation true.

#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "engine/engine_impl.h"
#include "engine/outbox_store.h"
#include "engine/record.h"

namespace idem {

absl::Status EngineImpl::Write(Store& store, rocksdb::WriteBatch* batch) {
  if (batch->Count() == 0) return absl::OkStatus();
  CommitQueue::Writer writer(batch);
  const uint64_t failed_syncs = parts_.wal_watch->failed_syncs();
  bool writes_state = false;
  for (;;) {
    {
      PlainMutexLock order(&order_mu_);
      // Its keys unknown, it waits while a commit's handlers run with
      // priority.
      if (!priority_) {
        writes_state = NoteQueuedWrites(store, *batch);
        if (writes_state) versions_.PendAll();
        queue_.Add(&writer);
        break;
      }
    }
    RerunTurn(this).AwaitPriority();
  }
  // Published whatever ends the wait.
  absl::Cleanup publish = [&] {
    if (writes_state) versions_.PublishAll();
  };
  return Landed(store, queue_.Wait(store.db, &writer), *batch, failed_syncs);
}

absl::Status EngineImpl::AckOutbox(uint64_t position) {
  if (absl::Status s = RejectInsideHandler("AckOutbox"); !s.ok()) return s;
  if (absl::Status s = RejectIfReadOnly("AckOutbox"); !s.ok()) return s;
  PlainMutexLock commit_lock(&commit_mu_);
  if (absl::Status s = RecoverIfNeeded(); !s.ok()) return s;
  absl::ReaderMutexLock store_lock(&store_mu_);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  rocksdb::WriteBatch batch;
  CommitQueue::Writer writer(&batch);
  const uint64_t failed_syncs = parts_.wal_watch->failed_syncs();
  uint64_t acked_before = 0;
  {
    // The cursor record holds the issued position too: built in the order
    // of the commits that advance it.
    PlainMutexLock order(&order_mu_);
    const OutboxCursor cursor = CurrentOutboxCursor();
    if (position == 0 || position > cursor.issued) {
      return absl::InvalidArgumentError(absl::StrCat(
          "AckOutbox: position ", position,
          " was never issued (the last issued is ", cursor.issued, ")"));
    }
    if (position <= cursor.acked) return absl::OkStatus();
    if (absl::Status s =
            BuildOutboxAck((*store)->outbox, cursor, position, batch);
        !s.ok()) {
      return s;
    }
    acked_before = cursor.acked;
    outbox_acked_.store(position);
    queue_.Add(&writer);
  }
  if (absl::Status s = Landed(**store, queue_.Wait((*store)->db, &writer),
                              batch, failed_syncs);
      !s.ok()) {
    return s;
  }
  outbox_acknowledged_.fetch_add(position - acked_before,
                                 std::memory_order_relaxed);
  return absl::OkStatus();
}

namespace {

// Notes what a batch outside the handler path writes: its offsets, and
// whether it touches state.
class QueuedWrites : public rocksdb::WriteBatch::Handler {
 public:
  QueuedWrites(uint32_t state, uint32_t offsets,
               absl::flat_hash_map<std::string, int64_t>& queued)
      : state_(state), offsets_(offsets), queued_(queued) {}

  bool writes_state() const { return writes_state_; }

  rocksdb::Status PutCF(uint32_t family, const rocksdb::Slice& key,
                        const rocksdb::Slice& value) override {
    if (family == offsets_) {
      std::optional<int64_t> offset =
          DecodeOffsetValue(std::string_view(value.data(), value.size()));
      queued_[key.ToString()] = offset.value_or(-1);
    }
    Touch(family);
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteCF(uint32_t family,
                           const rocksdb::Slice& key) override {
    if (family == offsets_) queued_[key.ToString()] = -1;
    Touch(family);
    return rocksdb::Status::OK();
  }
  rocksdb::Status SingleDeleteCF(uint32_t family,
                                 const rocksdb::Slice& key) override {
    return DeleteCF(family, key);
  }
  rocksdb::Status DeleteRangeCF(uint32_t family, const rocksdb::Slice& begin,
                                const rocksdb::Slice& end) override {
    if (family == offsets_) {
      // Whole partitions go: every offset in the range is absent.
      for (auto& [key, offset] : queued_) {
        if (key >= begin.ToString() && key < end.ToString()) offset = -1;
      }
    }
    Touch(family);
    return rocksdb::Status::OK();
  }
  rocksdb::Status MergeCF(uint32_t family, const rocksdb::Slice&,
                          const rocksdb::Slice&) override {
    Touch(family);
    return rocksdb::Status::OK();
  }
  void LogData(const rocksdb::Slice&) override {}

 private:
  void Touch(uint32_t family) { writes_state_ |= family == state_; }

  const uint32_t state_;
  const uint32_t offsets_;
  absl::flat_hash_map<std::string, int64_t>& queued_;
  bool writes_state_ = false;
};

}  // namespace

bool EngineImpl::NoteQueuedWrites(const Store& store,
                                  const rocksdb::WriteBatch& batch) {
  QueuedWrites writes(store.state->GetID(), store.offsets->GetID(),
                      queued_offsets_);
  // Iterate fails only on a malformed batch, which the write would refuse:
  // then count it as writing state (every read in flight stale).
  if (!batch.Iterate(&writes).ok()) return true;
  return writes.writes_state();
}

}  // namespace idem
