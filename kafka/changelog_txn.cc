#include "kafka/changelog_txn.h"

#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "engine/absl_view.h"
#include "engine/batch_txn.h"
#include "engine/handler_scope.h"
#include "engine/record.h"
#include "engine/state_value.h"
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

std::optional<int64_t> ChangelogTxn::ExpiryOf(absl::Duration ttl) const {
  const auto* engine_txn = dynamic_cast<const BatchTxn*>(&target());
  if (engine_txn == nullptr) return std::nullopt;
  return engine_txn->ExpiryOf(ttl);
}

void ChangelogTxn::NoteWrite(std::string_view relative,
                             std::optional<std::string_view> value,
                             int64_t expiry) {
  std::string key(relative);
  if (value.has_value() && expiry != kNeverExpires) {
    expiries_.insert_or_assign(key, expiry);
  } else {
    expiries_.erase(key);
  }
  std::optional<std::string> copy;
  if (value.has_value()) copy = std::string(*value);
  writes_.insert_or_assign(std::move(key), std::move(copy));
}

void ChangelogTxn::Put(std::string_view key, std::string_view value) {
  std::optional<std::string_view> relative = Relative(key);
  if (!relative.has_value()) return;
  target().Put(key, value);
  // Under Options::state_ttl a plain Put expires too.
  NoteWrite(*relative, value,
            ExpiryOf(absl::InfiniteDuration()).value_or(kNeverExpires));
}

absl::Status ChangelogTxn::Put(std::string_view key, std::string_view value,
                               const PutOptions& options) {
  if (options.ttl <= absl::ZeroDuration()) {
    // The engine's Txn fails the message with kInvalidArgument.
    return target().Put(key, value, options);
  }
  std::optional<int64_t> expiry = ExpiryOf(options.ttl);
  if (!expiry.has_value() && options.ttl != absl::InfiniteDuration()) {
    absl::Status s = absl::UnimplementedError(
        "changelog mode: a Put with a ttl through a Txn that is not the "
        "engine's (its expiry is unknown, so a restored copy would never "
        "expire)");
    if (refused_.ok()) refused_ = s;
    return s;
  }
  std::optional<std::string_view> relative = Relative(key);
  if (!relative.has_value()) return absl::OkStatus();
  if (absl::Status s = target().Put(key, value, options); !s.ok()) return s;
  NoteWrite(*relative, value, expiry.value_or(kNeverExpires));
  return absl::OkStatus();
}

void ChangelogTxn::Delete(std::string_view key) {
  std::optional<std::string_view> relative = Relative(key);
  if (!relative.has_value()) return;
  target().Delete(key);
  NoteWrite(*relative, std::nullopt, kNeverExpires);
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

absl::Status ChangelogTxn::SetTimer(std::string_view timer_key,
                                    TimeDomain domain, absl::Time fire_at,
                                    std::string_view payload) {
  absl::Status s = target().SetTimer(timer_key, domain, fire_at, payload);
  if (s.ok()) {
    timers_.insert_or_assign(
        std::string(timer_key),
        ChangelogTimer{domain, fire_at, std::string(payload)});
  }
  return s;
}

absl::Status ChangelogTxn::CancelTimer(std::string_view timer_key) {
  absl::Status s = target().CancelTimer(timer_key);
  if (s.ok()) timers_.insert_or_assign(std::string(timer_key), std::nullopt);
  return s;
}

void ChangelogTxn::ForFire(const TimerFire& fire) {
  fire_ = true;
  timers_.insert_or_assign(fire.timer_key, std::nullopt);
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
  // A fire's records say so (kChangelogFireHeader) after the usual two.
  const Header all_headers[] = {
      {kChangelogMarkHeader, mark},
      {kChangelogVersionHeader, kChangelogFormatVersionText},
      {kChangelogFireHeader, "1"}};
  const absl::Span<const Header> headers =
      absl::MakeConstSpan(all_headers, fire_ ? 3 : 2);
  const int32_t p = record_.partition;
  // The dedupe record first: its topic is published before the changelog
  // (OutboxRelayOptions::publish_first), so a complete commit's record is
  // never missing.
  if (!fire_) {
    out.EmitWithOptions(
        target_.dedupe_topic, DedupeKeyHex(),
        EncodeDedupeValue(
            expiry_override_.value_or(target().record_expires_at()), result_),
        {.partition = p, .headers = headers});
  }
  for (const auto& [key, value] : writes_) {
    auto expiry = expiries_.find(key);
    std::string expires_text;
    if (expiry != expiries_.end()) {
      expires_text = EncodeTimeHeader(absl::FromUnixMicros(expiry->second));
    }
    std::vector<Header> expiring(headers.begin(), headers.end());
    expiring.emplace_back(kChangelogExpiresHeader, expires_text);
    out.EmitWithOptions(
        target_.changelog_topic, StateRecordKey(key), value.value_or(""),
        {.partition = p,
         .tombstone = !value.has_value(),
         .headers =
             expires_text.empty() ? headers : absl::MakeConstSpan(expiring)});
  }
  for (const auto& [key, timer] : timers_) {
    out.EmitWithOptions(
        target_.changelog_topic, TimerRecordKey(key),
        timer.has_value() ? EncodeTimerValue(*timer) : std::string(),
        {.partition = p, .tombstone = !timer.has_value(), .headers = headers});
  }
  // The offset record carries the partition's stream time after the commit.
  const absl::Time stream_time = target().stream_time();
  std::string stream_text;
  if (stream_time != absl::InfinitePast()) {
    stream_text = EncodeTimeHeader(stream_time);
  }
  std::vector<Header> mark_headers(headers.begin(), headers.end());
  if (!stream_text.empty()) {
    mark_headers.emplace_back(kChangelogStreamTimeHeader, stream_text);
  }
  out.EmitWithOptions(target_.changelog_topic, OffsetRecordKey(epoch_),
                      absl::StrCat(record_.offset),
                      {.partition = p, .headers = mark_headers});
  return absl::OkStatus();
}

}  // namespace idem::kafka
