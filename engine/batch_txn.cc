#include "engine/batch_txn.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/coding.h"
#include "engine/merged_scan.h"
#include "engine/state_versions.h"
#include "engine/status_util.h"

namespace idem {

BatchTxn::BatchTxn(const BatchOverlay* overlay, rocksdb::DB* db,
                   rocksdb::ColumnFamilyHandle* state, StateVersions* versions,
                   StateReads* reads)
    : overlay_(overlay),
      db_(db),
      state_(state),
      versions_(versions),
      reads_(reads) {}

absl::Status BatchTxn::NoteReadError(absl::Status error) const {
  if (read_error_.ok()) read_error_ = error;
  return error;
}

absl::StatusOr<std::optional<std::string>> BatchTxn::Get(std::string_view key) {
  LayeredRead read(time_.read.now_micros);
  if (read.Take(writes_.Find(key)) || read.Take(overlay_->Find(key))) {
    return read.value();
  }
  // A commit in flight that writes the key gives its value; otherwise the
  // store has the latest. Either way a commit registered later is a change.
  if (reads_ != nullptr) {
    StateVersions::Read in_flight = versions_->ReadKey(key, *reads_);
    reads_->Add(key, in_flight.version);
    if (in_flight.in_flight.has_value()) {
      const std::optional<std::string>& value = *in_flight.in_flight;
      return value.has_value() ? read.Over(*value) : read.Over(std::nullopt);
    }
  }
  std::string value;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), state_, ToSlice(key), &value);
  if (s.IsNotFound()) return read.Over(std::nullopt);
  if (!s.ok()) return NoteReadError(FromRocksStatus(s, "reading state"));
  const std::optional<std::string_view> live =
      LiveStateValue(value, time_.read);
  if (read.has_merges()) return read.Over(live);
  // Nothing to fold over it: the value is the stored bytes, or their prefix
  // (an envelope's), returned without another copy.
  if (!live.has_value()) return std::nullopt;
  value.resize(live->size());
  return std::optional<std::string>(std::move(value));
}

int64_t BatchTxn::ExpiryOf(absl::Duration ttl) const {
  return ExpiryAfter(time_.now_micros,
                     ttl == absl::InfiniteDuration() ? time_.default_ttl : ttl);
}

void BatchTxn::Put(std::string_view key, std::string_view value) {
  writes_.Put(key, value, ExpiryOf(absl::InfiniteDuration()));
}

absl::Status BatchTxn::Put(std::string_view key, std::string_view value,
                           const PutOptions& options) {
  if (absl::Status s = ValidateTtl(options.ttl, "Put: ttl"); !s.ok()) {
    if (emit_error_.ok()) emit_error_ = s;
    return s;
  }
  writes_.Put(key, value, ExpiryOf(options.ttl));
  return absl::OkStatus();
}

void BatchTxn::Delete(std::string_view key) { writes_.Delete(key); }

absl::Status BatchTxn::Scan(std::string_view begin, std::string_view end,
                            ScanVisitor visit, const ScanOptions& options) {
  if (absl::Status s = ValidateScanRange(begin, end); !s.ok()) return s;
  // The commits in flight over the range, then the store under them.
  StateVersions::RangeRead in_flight;
  if (reads_ != nullptr) in_flight = versions_->ReadRange(begin, end, *reads_);
  rocksdb::ReadOptions read;
  const rocksdb::Slice lower = ToSlice(begin);
  const rocksdb::Slice upper = ToSlice(end);
  read.iterate_lower_bound = &lower;
  if (!end.empty()) read.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> store(db_->NewIterator(read, state_));
  const StateLayer* layers[] = {&writes_, overlay_, &in_flight.in_flight};
  absl::StatusOr<ScanExtent> extent =
      MergedScan(layers, store.get(), begin, end, options, visit, time_.read);
  if (!extent.ok()) return NoteReadError(extent.status());
  if (reads_ != nullptr) {
    reads_->AddRange(extent->begin, extent->end, in_flight.version);
  }
  return absl::OkStatus();
}

absl::Status BatchTxn::Merge(std::string_view key, MergeOp op,
                             std::string_view operand) {
  if (absl::Status s = ValidateMerge(op, operand); !s.ok()) {
    if (emit_error_.ok()) emit_error_ = s;
    return s;
  }
  // Under Options::state_ttl every write sets the expiry; otherwise a merge
  // keeps the expiry of the value it folds onto.
  std::optional<int64_t> expiry;
  if (time_.default_ttl != absl::InfiniteDuration()) {
    expiry = ExpiryOf(absl::InfiniteDuration());
  }
  writes_.Merge(key, op, operand, expiry, time_.now_micros);
  return absl::OkStatus();
}

absl::Status BatchTxn::DeleteRange(std::string_view begin,
                                   std::string_view end) {
  absl::Status s = ValidateScanRange(begin, end);
  if (s.ok() && end.empty()) {
    s = absl::InvalidArgumentError(
        "DeleteRange: end must not be empty (the keys under a prefix end at "
        "the prefix with its last byte incremented)");
  }
  if (!s.ok()) {
    if (emit_error_.ok()) emit_error_ = s;
    return s;
  }
  if (begin < end) writes_.DeleteRange(begin, end);
  return absl::OkStatus();
}

void BatchTxn::SetResult(std::string_view result) { result_ = result; }

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
  for (const auto& [key, write] : writes_.points()) {
    if (key.size() > kMaxBytes || write.value.size() > kMaxBytes) {
      return absl::InvalidArgumentError(
          "a state key or value is larger than 4 GiB");
    }
    for (const auto& [op, operand] : write.merges.operands()) {
      if (operand.size() >= kMaxBytes) {
        return absl::InvalidArgumentError(
            "a merge operand is larger than 4 GiB");
      }
    }
  }
  overlay->Absorb(std::move(writes_));
  return absl::OkStatus();
}

}  // namespace idem
