#include "engine/batch_txn.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/coding.h"
#include "engine/state_versions.h"
#include "engine/status_util.h"

namespace idem {
namespace {}  // namespace

BatchTxn::BatchTxn(const BatchOverlay* overlay, rocksdb::DB* db,
                   rocksdb::ColumnFamilyHandle* state,
                   const StateVersions* versions, StateReads* reads)
    : overlay_(overlay),
      db_(db),
      state_(state),
      versions_(versions),
      reads_(reads) {}

absl::StatusOr<std::optional<std::string>> BatchTxn::Get(std::string_view key) {
  // Heterogeneous lookups: no copy of the key.
  const absl::string_view k = AbslView(key);
  if (auto it = writes_.find(k); it != writes_.end()) return it->second;
  if (auto it = overlay_->find(k); it != overlay_->end()) return it->second;
  // A commit in flight that writes the key gives its value; otherwise the
  // store has the latest. Either way a commit registered later is a change.
  if (reads_ != nullptr) {
    StateVersions::Read read = versions_->ReadKey(key);
    reads_->Add(key, read.version);
    if (read.in_flight.has_value()) return *std::move(read.in_flight);
  }
  std::string value;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), state_, ToSlice(key), &value);
  if (s.IsNotFound()) return std::nullopt;
  if (!s.ok()) {
    absl::Status error = FromRocksStatus(s, "reading state");
    if (read_error_.ok()) read_error_ = error;
    return error;
  }
  return value;
}

void BatchTxn::Put(std::string_view key, std::string_view value) {
  writes_.insert_or_assign(std::string(key), std::string(value));
}

void BatchTxn::Delete(std::string_view key) {
  writes_.insert_or_assign(std::string(key), std::nullopt);
}

void BatchTxn::SetResult(std::string_view result) { result_ = result; }

void BatchTxn::Emit(std::string_view destination, std::string_view key,
                    std::string_view value) {
  EmitWithHeaders(destination, key, value, {});
}

void BatchTxn::EmitWithHeaders(std::string_view destination,
                               std::string_view key, std::string_view value,
                               absl::Span<const Header> headers) {
  EmitWithOptions(destination, key, value, EmitOptions{.headers = headers});
}

void BatchTxn::EmitWithOptions(std::string_view destination,
                               std::string_view key, std::string_view value,
                               const EmitOptions& options) {
  constexpr size_t kMaxBytes = std::numeric_limits<uint32_t>::max();
  const absl::Span<const Header> headers = options.headers;
  if (!emit_error_.ok()) return;
  if (destination.empty() || destination.size() > kMaxSourceBytes) {
    emit_error_ = absl::InvalidArgumentError(absl::StrCat(
        "emit ", emitted_.size(), ": destination is ", destination.size(),
        " bytes; it must be 1 to ", kMaxSourceBytes));
    return;
  }
  if (destination.find('\0') != std::string_view::npos) {
    // A broker client takes the name as a C string: it would publish to
    // the name cut at the NUL.
    emit_error_ = absl::InvalidArgumentError(absl::StrCat(
        "emit ", emitted_.size(), ": destination contains a NUL byte"));
    return;
  }
  if (options.partition < -1) {
    emit_error_ = absl::InvalidArgumentError(
        absl::StrCat("emit ", emitted_.size(), ": partition ",
                     options.partition, " is below -1"));
    return;
  }
  if (options.tombstone && !value.empty()) {
    emit_error_ = absl::InvalidArgumentError(
        absl::StrCat("emit ", emitted_.size(), ": a tombstone with a ",
                     value.size(), "-byte value; it must be empty"));
    return;
  }
  // The entry is stored as one RocksDB value: its parts together, with
  // their length prefixes and the message ID, must stay under 4 GiB.
  // Summed in 64 bits, each part at most 4 GiB so that nothing wraps.
  constexpr uint64_t kEntryOverheadBytes = 128;  // lengths, ID, version
  uint64_t entry_bytes =
      kEntryOverheadBytes + destination.size() + key.size() + value.size();
  bool part_too_large = key.size() > kMaxBytes || value.size() > kMaxBytes ||
                        headers.size() > kMaxBytes;
  for (const auto& [name, header_value] : headers) {
    part_too_large = part_too_large || name.size() > kMaxBytes ||
                     header_value.size() > kMaxBytes;
    entry_bytes += 8 + name.size() + header_value.size();
  }
  if (part_too_large || entry_bytes > kMaxBytes) {
    emit_error_ = absl::InvalidArgumentError(absl::StrCat(
        "emit ", emitted_.size(),
        ": its key, value and headers together are larger than 4 GiB"));
    return;
  }
  Emitted& emitted = emitted_.emplace_back();
  emitted.destination = destination;
  emitted.partition = options.partition;
  emitted.key = key;
  emitted.value = value;
  emitted.tombstone = options.tombstone;
  for (const auto& [name, header_value] : headers) {
    emitted.headers.emplace_back(name, header_value);
  }
}

absl::Status BatchTxn::Apply(BatchOverlay* overlay) {
  constexpr size_t kMaxBytes = std::numeric_limits<uint32_t>::max();
  if (!emit_error_.ok()) return emit_error_;
  for (const auto& [key, value] : writes_) {
    if (key.size() > kMaxBytes ||
        (value.has_value() && value->size() > kMaxBytes)) {
      return absl::InvalidArgumentError(
          "a state key or value is larger than 4 GiB");
    }
  }
  if (overlay->empty()) {
    // The first writes of the batch: the map moves, no entry is copied.
    overlay->swap(writes_);
  } else {
    for (auto& [key, value] : writes_) {
      overlay->insert_or_assign(key, std::move(value));
    }
  }
  writes_.clear();
  return absl::OkStatus();
}

}  // namespace idem
