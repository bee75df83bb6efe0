#include "kafka/changelog_txn.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/handler_scope.h"
#include "engine/record.h"
#include "idem/partition_state.h"

namespace idem::kafka {

ChangelogTxn::ChangelogTxn(Txn& txn, const Record& record,
                           const ChangelogTarget& target, int64_t epoch,
                           std::optional<absl::Time> expiry_override)
    : ForwardingTxn(txn),
      record_(record),
      target_(target),
      epoch_(epoch),
      expiry_override_(expiry_override),
      prefix_(PartitionStatePrefix(record.topic, record.partition)) {}

std::optional<std::string_view> ChangelogTxn::Relative(std::string_view key) {
  std::string_view relative = key;
  if (relative.starts_with(prefix_)) {
    relative.remove_prefix(prefix_.size());
    if (relative != kEpochStateKey && relative != kCheckpointStateKey) {
      return relative;
    }
  }
  if (refused_.ok()) {
    refused_ = absl::FailedPreconditionError(
        absl::StrCat("changelog mode: the handler wrote key \"",
                     absl::CHexEscape(AbslView(key)),
                     "\", which is not a key of PartitionTxn(\"",
                     AbslView(record_.topic), "\", ", record_.partition,
                     ") and would not follow the partition to another member"));
  }
  return std::nullopt;
}

void ChangelogTxn::Put(std::string_view key, std::string_view value) {
  std::optional<std::string_view> relative = Relative(key);
  if (!relative.has_value()) return;
  target().Put(key, value);
  writes_.insert_or_assign(std::string(*relative), std::string(value));
}

absl::Status ChangelogTxn::Put(std::string_view key, std::string_view value,
                               const PutOptions& options) {
  if (options.ttl <= absl::ZeroDuration()) {
    // The engine's Txn fails the message with kInvalidArgument.
    return target().Put(key, value, options);
  }
  if (options.ttl != absl::InfiniteDuration()) {
    absl::Status s = absl::UnimplementedError(
        "changelog mode: a Put with a ttl (changelog records carry no "
        "expiry, so a restored copy would never expire)");
    if (refused_.ok()) refused_ = s;
    return s;
  }
  Put(key, value);
  return absl::OkStatus();
}

void ChangelogTxn::Delete(std::string_view key) {
  std::optional<std::string_view> relative = Relative(key);
  if (!relative.has_value()) return;
  target().Delete(key);
  writes_.insert_or_assign(std::string(*relative), std::nullopt);
}

absl::Status ChangelogTxn::Merge(std::string_view key, MergeOp op,
                                 std::string_view operand) {
  // An invalid merge goes to the engine's Txn, which fails the message.
  if (!ValidateMerge(op, operand).ok()) return target().Merge(key, op, operand);
  return Txn::Merge(key, op, operand);  // Get, fold, this->Put
}

absl::Status ChangelogTxn::DeleteRange(std::string_view begin,
                                       std::string_view end) {
  if (end.empty() || end < begin) return target().DeleteRange(begin, end);
  return Txn::DeleteRange(begin, end);  // Scan, then this->Delete each key
}

void ChangelogTxn::SetResult(std::string_view result) {
  result_ = result;
  target().SetResult(result);
}

std::string ChangelogTxn::DedupeKeyHex() const {
  if (std::optional<std::string_view> hash =
          HandlerScope::MessageHash(target())) {
    return DedupeKeyToHex(*hash);
  }
  return DedupeKeyToHex(KeyView(HashMessageId(record_.id)));
}

absl::Status ChangelogTxn::FinishInto(Txn& out) {
  if (!refused_.ok()) return refused_;
  const std::string mark = EncodeMark({epoch_, record_.offset});
  const Header headers[] = {
      {kChangelogMarkHeader, mark},
      {kChangelogVersionHeader, kChangelogFormatVersionText}};
  const int32_t p = record_.partition;
  // The dedupe record first: its topic is published before the changelog
  // (OutboxRelayOptions::publish_first), so a complete commit's record is
  // never missing.
  out.EmitWithOptions(
      target_.dedupe_topic, DedupeKeyHex(),
      EncodeDedupeValue(expiry_override_.value_or(target().record_expires_at()),
                        result_),
      {.partition = p, .headers = headers});
  for (const auto& [key, value] : writes_) {
    out.EmitWithOptions(
        target_.changelog_topic, StateRecordKey(key), value.value_or(""),
        {.partition = p, .tombstone = !value.has_value(), .headers = headers});
  }
  out.EmitWithOptions(target_.changelog_topic, OffsetRecordKey(epoch_),
                      absl::StrCat(record_.offset),
                      {.partition = p, .headers = headers});
  return absl::OkStatus();
}

}  // namespace idem::kafka
