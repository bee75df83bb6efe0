#include "idem/partition_state.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/merged_scan.h"
#include "engine/record.h"

namespace idem {

namespace {

constexpr std::string_view kPrefix = "partition/";

}  // namespace

std::string PartitionStatePrefix(std::string_view source, int32_t partition) {
  return absl::StrCat(AbslView(kPrefix), source.size(), ":", AbslView(source),
                      "/", partition, "/");
}

std::optional<PartitionStateKey> ParsePartitionStateKey(
    std::string_view state_key) {
  if (!state_key.starts_with(kPrefix)) return std::nullopt;
  std::string_view rest = state_key.substr(kPrefix.size());
  const size_t colon = rest.find(':');
  size_t length = 0;
  if (colon == std::string_view::npos ||
      !absl::SimpleAtoi(AbslView(rest.substr(0, colon)), &length) ||
      rest.size() - colon - 1 < length) {
    return std::nullopt;
  }
  PartitionStateKey parsed;
  parsed.source = std::string(rest.substr(colon + 1, length));
  rest = rest.substr(colon + 1 + length);
  if (!rest.starts_with('/')) return std::nullopt;
  rest.remove_prefix(1);
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos ||
      !absl::SimpleAtoi(AbslView(rest.substr(0, slash)), &parsed.partition) ||
      parsed.partition < 0) {
    return std::nullopt;
  }
  parsed.key = std::string(rest.substr(slash + 1));
  // Only the spelling PartitionStatePrefix writes: SimpleAtoi also takes a
  // sign, leading zeros and spaces ("partition/01:t/0/k"), which no
  // PartitionTxn wrote and Engine::ExportPartition would not move.
  if (!state_key.starts_with(
          PartitionStatePrefix(parsed.source, parsed.partition))) {
    return std::nullopt;
  }
  return parsed;
}

std::string PartitionTxn::Scoped(std::string_view key) const {
  return absl::StrCat(prefix_, AbslView(key));
}

absl::StatusOr<std::optional<std::string>> PartitionTxn::Get(
    std::string_view key) {
  return target().Get(Scoped(key));
}

void PartitionTxn::Put(std::string_view key, std::string_view value) {
  target().Put(Scoped(key), value);
}

absl::Status PartitionTxn::Put(std::string_view key, std::string_view value,
                               const PutOptions& options) {
  return target().Put(Scoped(key), value, options);
}

void PartitionTxn::Delete(std::string_view key) {
  target().Delete(Scoped(key));
}

std::string PartitionTxn::ScopedEnd(std::string_view end) const {
  return end.empty() ? KeyRangeEnd(prefix_) : Scoped(end);
}

absl::Status PartitionTxn::Scan(std::string_view begin, std::string_view end,
                                ScanVisitor visit, const ScanOptions& options) {
  // Checked unscoped: an end below begin stays below it once both are
  // scoped, but the empty end (no bound) would not.
  if (absl::Status s = ValidateScanRange(begin, end); !s.ok()) return s;
  return target().Scan(
      Scoped(begin), ScopedEnd(end),
      [&](std::string_view key, std::string_view value) {
        return visit(key.substr(prefix_.size()), value);
      },
      options);
}

absl::Status PartitionTxn::Merge(std::string_view key, MergeOp op,
                                 std::string_view operand) {
  return target().Merge(Scoped(key), op, operand);
}

absl::Status PartitionTxn::DeleteRange(std::string_view begin,
                                       std::string_view end) {
  if (end.empty()) {
    // The scoped end would be the partition's: refuse as every Txn does.
    return target().DeleteRange(begin, end);
  }
  if (absl::Status s = ValidateScanRange(begin, end); !s.ok()) {
    return target().DeleteRange(begin, end);  // fails the message with it
  }
  return target().DeleteRange(Scoped(begin), Scoped(end));
}

}  // namespace idem
