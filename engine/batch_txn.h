// The Txn a handler receives, and the state overlay of the batch being built.
//
// A BatchTxn buffers one message's state writes in its own map, and its
// emits in order. Reads look at that map, then at the writes of earlier
// messages of the batch (the BatchOverlay), then at the store. If the
// handler succeeds, Apply moves the writes into the overlay, which becomes
// the commit's state writes, and the caller takes the emits; if it fails,
// the BatchTxn is simply dropped, so nothing of it reaches the commit.
// Each read past the overlay is noted in a StateReads with the version of
// engine/state_versions.h current at the read, so that the commit can tell
// whether a concurrent commit changed the key since; a key that a commit in
// flight writes reads that commit's value rather than the store's.
//
// Neither class is thread-safe; both live for one commit.

#ifndef IDEM_ENGINE_BATCH_TXN_H_
#define IDEM_ENGINE_BATCH_TXN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/txn.h"
#include "rocksdb/db.h"

namespace idem {

// State key -> value written by earlier messages of the batch (nullopt: a
// deletion).
using BatchOverlay =
    absl::flat_hash_map<std::string, std::optional<std::string>>;

// One Txn::Emit call.
struct Emitted {
  std::string destination;
  int32_t partition = -1;
  std::string key;
  std::string value;
  bool tombstone = false;
  std::vector<std::pair<std::string, std::string>> headers;
};

class StateVersions;

// The store reads of one commit's handlers: each key with the version noted
// before it was read (engine/state_versions.h validates them).
class StateReads {
 public:
  void Add(std::string_view key, uint64_t version) {
    reads_.emplace_back(std::string(key), version);
  }
  bool empty() const { return reads_.empty(); }
  const std::vector<std::pair<std::string, uint64_t>>& reads() const {
    return reads_;
  }

 private:
  std::vector<std::pair<std::string, uint64_t>> reads_;
};

class BatchTxn : public Txn {
 public:
  // All pointers are borrowed and must outlive the BatchTxn. With `versions`
  // and `reads`, each store read is noted in `reads`.
  BatchTxn(const BatchOverlay* overlay, rocksdb::DB* db,
           rocksdb::ColumnFamilyHandle* state,
           const StateVersions* versions = nullptr,
           StateReads* reads = nullptr);

  absl::StatusOr<std::optional<std::string>> Get(std::string_view key) override;
  void Put(std::string_view key, std::string_view value) override;
  void Delete(std::string_view key) override;
  void SetResult(std::string_view result) override;
  void Emit(std::string_view destination, std::string_view key,
            std::string_view value) override;
  void EmitWithHeaders(std::string_view destination, std::string_view key,
                       std::string_view value,
                       absl::Span<const Header> headers) override;
  void EmitWithOptions(std::string_view destination, std::string_view key,
                       std::string_view value,
                       const EmitOptions& options) override;

  const std::string& result() const { return result_; }

  // The emits, in call order (valid ones only if Apply succeeded).
  std::vector<Emitted>& emitted() { return emitted_; }

  // The first error a Get hit reading the store (a storage error: the whole
  // commit fails even if the handler swallowed it).
  const absl::Status& read_error() const { return read_error_; }

  // What record_expires_at returns: the expiry the engine placed the
  // message's record at.
  void set_record_expires_at(absl::Time expires_at) {
    record_expires_at_ = expires_at;
  }
  absl::Time record_expires_at() const override { return record_expires_at_; }

  // Moves this message's writes into `overlay`. kInvalidArgument (and
  // `overlay` unchanged) if a key or value is too large for RocksDB (4 GiB)
  // or an emit was invalid (its destination empty or over kMaxSourceBytes):
  // the message must fail.
  absl::Status Apply(BatchOverlay* overlay);

 private:
  absl::Time record_expires_at_ = absl::InfiniteFuture();
  const BatchOverlay* const overlay_;
  rocksdb::DB* const db_;
  rocksdb::ColumnFamilyHandle* const state_;
  const StateVersions* const versions_;
  StateReads* const reads_;
  BatchOverlay writes_;
  std::string result_;
  std::vector<Emitted> emitted_;
  // The first invalid Emit, reported by Apply.
  absl::Status emit_error_;
  absl::Status read_error_;
};

}  // namespace idem

#endif  // IDEM_ENGINE_BATCH_TXN_H_
