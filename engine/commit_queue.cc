#include "engine/commit_queue.h"

#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "engine/coding.h"
#include "engine/tsan_scope.h"

namespace idem {
namespace {

// The WriteBatch header: the sequence (8 bytes), then the count (4 bytes,
// little-endian).
constexpr size_t kHeaderBytes = 12;
constexpr size_t kCountOffset = 8;

}  // namespace

uint64_t CommitQueue::LastSequenceOf(const rocksdb::WriteBatch& written) {
  // RocksDB 7.8 has no public getter for a batch's sequence
  // (WriteBatchInternal::Sequence is internal), and DB::
  // GetLatestSequenceNumber read after the write is not this write's: a
  // later group may land before it is read. But DB::Write stamps the
  // sequence of the batch's first record into the header of the very batch
  // it was given (WriteBatchInternal::InsertInto calls SetSequence on each
  // writer's batch, whether RocksDB inserts its write group serially or with
  // concurrent memtable writes), and with the options idem opens with (no
  // seq_per_batch, which only the write-prepared transaction DBs use; no
  // two_write_queues or unordered_write) each of the batch's Count() records
  // takes the next sequence number. So the batch's records hold
  // first .. first + Count() - 1. CommitQueueTest checks it against
  // GetLatestSequenceNumber.
  const uint64_t first = GetFixed64LE(written.Data().data());
  return first + written.Count() - 1;
}

rocksdb::WriteBatch MergeBatches(const rocksdb::WriteBatch* const* batches,
                                 size_t n) {
  size_t bytes = kHeaderBytes;
  for (size_t i = 0; i < n; ++i) bytes += batches[i]->GetDataSize();
  std::string rep;
  rep.reserve(bytes);
  rep.append(batches[0]->Data());
  uint32_t count = batches[0]->Count();
  for (size_t i = 1; i < n; ++i) {
    rep.append(batches[i]->Data(), kHeaderBytes, std::string::npos);
    count += batches[i]->Count();
  }
  EncodeFixed32LE(&rep[kCountOffset], count);
  return rocksdb::WriteBatch(std::move(rep));
}

void CommitQueue::Add(Writer* writer) {
  PlainMutexLock lock(&mu_);
  queue_.push_back(writer);
  front_hint_.store(queue_.front(), std::memory_order_release);
}

void CommitQueue::SpinBriefly(const Writer* writer) const {
  const auto end = std::chrono::steady_clock::now() + kSpin;
  while (!writer->done_hint_.load(std::memory_order_acquire) &&
         front_hint_.load(std::memory_order_acquire) != writer &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::yield();
  }
}

rocksdb::Status CommitQueue::WriteGroup(rocksdb::DB* db,
                                        const std::vector<Writer*>& group) {
  rocksdb::WriteOptions options;
  options.sync = sync_;
  try {
    // Barriers (empty batches) write nothing: a group of only barriers
    // lands at once, in its turn.
    absl::InlinedVector<rocksdb::WriteBatch*, 8> batches;
    for (Writer* w : group) {
      if (w->batch_->Count() > 0) batches.push_back(w->batch_);
    }
    if (batches.empty()) return rocksdb::Status::OK();
    rocksdb::Status s;
    uint64_t last = 0;
    {
      RocksWriteScope rocks_write;
      if (batches.size() == 1) {
        s = db->Write(options, batches[0]);
        if (s.ok()) last = LastSequenceOf(*batches[0]);
      } else {
        rocksdb::WriteBatch merged =
            MergeBatches(batches.data(), batches.size());
        s = db->Write(options, &merged);
        if (s.ok()) last = LastSequenceOf(merged);
      }
    }
    if (!s.ok()) return s;
    // The group's records are its writers' batches in order (MergeBatches).
    uint64_t total = 0;
    for (const rocksdb::WriteBatch* b : batches) total += b->Count();
    uint64_t next = last + 1 - total;
    for (Writer* w : group) {
      const uint32_t n = w->batch_->Count();
      if (n == 0) continue;  // a barrier: nothing of its own
      next += n;
      w->last_sequence_ = next - 1;
    }
    return s;
  } catch (const std::exception& e) {
    // An allocation failed (or the database threw): the group fails as a
    // failed write does, so no writer is left waiting.
    return rocksdb::Status::Aborted("the group write threw", e.what());
  } catch (...) {
    return rocksdb::Status::Aborted("the group write threw");
  }
}

rocksdb::Status CommitQueue::Wait(rocksdb::DB* db, Writer* writer) {
  // A group write takes microseconds: looking again for a while costs less
  // than going to sleep and being woken, which Await below does.
  SpinBriefly(writer);
  std::vector<Writer*> group;
  rocksdb::Status failed;
  {
    PlainMutexLock lock(&mu_);
    mu_.Await(changed_, [this, writer]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      // Runs with mu_ held (PlainMutex::Await).
      return writer->done_ || queue_.front() == writer;
    });
    if (writer->done_) return writer->status_;
    // This writer leads: it and those behind it, up to the byte limit.
    size_t bytes = 0;
    for (Writer* w : queue_) {
      if (!group.empty() && bytes + w->batch_->GetDataSize() > kMaxGroupBytes) {
        break;
      }
      bytes += w->batch_->GetDataSize();
      group.push_back(w);
    }
    failed = failed_;
  }
  // The queue is open meanwhile: commits decided now queue behind the group
  // and form the next one.
  rocksdb::Status s = failed;
  if (s.ok()) s = WriteGroup(db, group);
  PlainMutexLock lock(&mu_);
  if (!s.ok() && failed_.ok()) failed_ = s;
  if (failed.ok()) {
    ++groups_;
    writes_ += group.size();
  }
  for (Writer* w : group) {
    w->status_ = s;
    w->done_ = true;
    w->done_hint_.store(true, std::memory_order_release);
    queue_.pop_front();
  }
  front_hint_.store(queue_.empty() ? nullptr : queue_.front(),
                    std::memory_order_release);
  changed_.notify_all();  // the writers done, and the next leader
  return s;
}

void CommitQueue::Reset() {
  PlainMutexLock lock(&mu_);
  failed_ = rocksdb::Status::OK();
}

uint64_t CommitQueue::groups() const {
  PlainMutexLock lock(&mu_);
  return groups_;
}

uint64_t CommitQueue::writes() const {
  PlainMutexLock lock(&mu_);
  return writes_;
}

}  // namespace idem
