// BatchTxn is the Txn a handler receives: it writes into the batch being
// built for the current commit and reads through it to the store. Not
// thread-safe; it lives for one handler call.

#ifndef IDEM_ENGINE_BATCH_TXN_H_
#define IDEM_ENGINE_BATCH_TXN_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "idem/txn.h"
#include "rocksdb/db.h"
#include "rocksdb/utilities/write_batch_with_index.h"

namespace idem {

class BatchTxn : public Txn {
 public:
  // All pointers are borrowed and must outlive the BatchTxn.
  BatchTxn(rocksdb::WriteBatchWithIndex* batch, rocksdb::DB* db,
           rocksdb::ColumnFamilyHandle* state);

  absl::StatusOr<std::optional<std::string>> Get(std::string_view key) override;
  void Put(std::string_view key, std::string_view value) override;
  void Delete(std::string_view key) override;
  void SetResult(std::string_view result) override;

  const std::string& result() const { return result_; }
  // The first error a Get hit reading the store (a storage error: the whole
  // commit fails even if the handler swallowed it).
  const absl::Status& read_error() const { return read_error_; }
  // The first error a Put or Delete hit (e.g. a key too large for RocksDB):
  // the message fails with it.
  const absl::Status& write_error() const { return write_error_; }

 private:
  rocksdb::WriteBatchWithIndex* const batch_;
  rocksdb::DB* const db_;
  rocksdb::ColumnFamilyHandle* const state_;
  std::string result_;
  absl::Status read_error_;
  absl::Status write_error_;
};

}  // namespace idem

#endif  // IDEM_ENGINE_BATCH_TXN_H_
