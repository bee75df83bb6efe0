#include "engine/batch_txn.h"

#include "engine/status_util.h"

namespace idem {
namespace {

rocksdb::Slice ToSlice(std::string_view s) {
  return rocksdb::Slice(s.data(), s.size());
}

}  // namespace

BatchTxn::BatchTxn(rocksdb::WriteBatchWithIndex* batch, rocksdb::DB* db,
                   rocksdb::ColumnFamilyHandle* state)
    : batch_(batch), db_(db), state_(state) {}

absl::StatusOr<std::optional<std::string>> BatchTxn::Get(
    std::string_view key) {
  std::string value;
  rocksdb::Status s = batch_->GetFromBatchAndDB(db_, rocksdb::ReadOptions(),
                                                state_, ToSlice(key), &value);
  if (s.IsNotFound()) return std::nullopt;
  if (!s.ok()) {
    absl::Status error = FromRocksStatus(s, "reading state");
    if (read_error_.ok()) read_error_ = error;
    return error;
  }
  return value;
}

void BatchTxn::Put(std::string_view key, std::string_view value) {
  rocksdb::Status s = batch_->Put(state_, ToSlice(key), ToSlice(value));
  if (!s.ok() && write_error_.ok()) {
    write_error_ = FromRocksStatus(s, "buffering a state write");
  }
}

void BatchTxn::Delete(std::string_view key) {
  rocksdb::Status s = batch_->Delete(state_, ToSlice(key));
  if (!s.ok() && write_error_.ok()) {
    write_error_ = FromRocksStatus(s, "buffering a state delete");
  }
}

void BatchTxn::SetResult(std::string_view result) { result_ = result; }

}  // namespace idem
