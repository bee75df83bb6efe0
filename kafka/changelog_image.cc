#include "kafka/changelog_image.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"

namespace idem::kafka {
namespace {

absl::Status Undecodable(std::string_view topic, const LogRecord& record,
                         std::string_view why) {
  return absl::DataLossError(absl::StrCat(
      "changelog record ", AbslView(topic), "/", record.record.partition, "@",
      record.record.offset, ": ", AbslView(why)));
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// 32 lowercase hex digits to 16 bytes; nullopt otherwise.
std::optional<std::string> IdHashFromHex(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  std::string bytes(16, '\0');
  for (size_t i = 0; i < 16; ++i) {
    const int high = HexDigit(hex[2 * i]);
    const int low = HexDigit(hex[2 * i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    bytes[i] = static_cast<char>(high * 16 + low);
  }
  return bytes;
}

// OK for a record of a format version this build reads (no version header:
// version 1); kFailedPrecondition naming the version for a newer one.
absl::Status CheckFormatVersion(const LogRecord& record) {
  const Record& r = record.record;
  std::optional<std::string_view> text = r.Header(kChangelogVersionHeader);
  if (!text.has_value()) return absl::OkStatus();
  std::optional<int64_t> version = DecodeFormatVersion(*text);
  if (!version.has_value()) {
    return Undecodable(r.topic, record, "a format version that is no number");
  }
  if (*version <= kChangelogFormatVersion) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "changelog record ", AbslView(r.topic), "/", r.partition, "@", r.offset,
      " has format version ", *version, ", newer than this build reads (up to ",
      kChangelogFormatVersion,
      "): a member of a newer build wrote it; upgrade this member before it "
      "restores (docs/operations.md, \"Upgrading a changelog-mode group\")"));
}

}  // namespace

absl::Status ChangelogImageBuilder::AddChangelogRecord(
    const LogRecord& record) {
  if (absl::Status s = CheckFormatVersion(record); !s.ok()) return s;
  const Record& r = record.record;
  ++changes_.records_read;
  changes_.bytes_read += static_cast<int64_t>(r.key.size() + r.value.size());
  std::optional<ChangelogKey> key = DecodeChangelogKey(r.key);
  if (!key.has_value()) return Undecodable(r.topic, record, "unknown key");
  if (key->kind == ChangelogKey::Kind::kOffset) {
    std::optional<int64_t> offset;
    if (!record.tombstone) offset = DecodeOffsetValue(r.value);
    if (!offset.has_value()) {
      return Undecodable(r.topic, record, "an offset record without an offset");
    }
    std::optional<absl::Time> stream_time;
    if (std::optional<std::string_view> text =
            r.Header(kChangelogStreamTimeHeader)) {
      stream_time = DecodeTimeHeader(*text);
      if (!stream_time.has_value()) {
        return Undecodable(r.topic, record, "a stream time that is no time");
      }
    }
    Mark(key->epoch, *offset, stream_time);
    return absl::OkStatus();
  }
  std::optional<std::string_view> mark_text = r.Header(kChangelogMarkHeader);
  std::optional<ChangelogMark> mark;
  if (mark_text.has_value()) mark = DecodeMark(*mark_text);
  if (!mark.has_value()) {
    return Undecodable(r.topic, record, "a state record without a mark");
  }
  // The broken variant (set_epochs_end(false)) folds every epoch as one.
  if (!epochs_end_) mark->epoch = 0;
  if (key->kind == ChangelogKey::Kind::kTimer) {
    return AddTimerRecord(record, key->state_key, *mark);
  }
  std::optional<absl::Time> expires_at;
  if (std::optional<std::string_view> text =
          r.Header(kChangelogExpiresHeader)) {
    expires_at = DecodeTimeHeader(*text);
    if (!expires_at.has_value()) {
      return Undecodable(r.topic, record, "an expiry that is no time");
    }
  }
  if (over_.contains(mark->epoch)) {
    ++changes_.stale_records;
    dropped_.insert(std::string(key->state_key));
    return absl::OkStatus();
  }
  StateWrite write;
  if (!record.tombstone && keep_state_) write.value = std::string(r.value);
  if (!record.tombstone) write.expires_at = expires_at;
  pending_[mark->epoch].state.insert_or_assign(std::string(key->state_key),
                                               std::move(write));
  return absl::OkStatus();
}

absl::Status ChangelogImageBuilder::AddTimerRecord(const LogRecord& record,
                                                   std::string_view key,
                                                   const ChangelogMark& mark) {
  std::optional<ChangelogTimer> timer;
  if (!record.tombstone) {
    timer = DecodeTimerValue(record.record.value);
    if (!timer.has_value()) {
      return Undecodable(record.record.topic, record, "not a timer record");
    }
  }
  if (over_.contains(mark.epoch)) {
    ++changes_.stale_records;
    dropped_timers_.insert(std::string(key));
    return absl::OkStatus();
  }
  if (!keep_state_ && timer.has_value()) timer->payload.clear();
  pending_[mark.epoch].timers.insert_or_assign(std::string(key),
                                               std::move(timer));
  return absl::OkStatus();
}

void ChangelogImageBuilder::Complete(Writes& writes) {
  for (auto& [state_key, write] : writes.state) {
    dropped_.erase(state_key);
    if (!keep_state_) continue;
    if (write.expires_at.has_value()) {
      changes_.expires_at.insert_or_assign(state_key, *write.expires_at);
    } else {
      changes_.expires_at.erase(state_key);
    }
    changes_.writes.insert_or_assign(state_key, std::move(write.value));
  }
  for (auto& [timer_key, timer] : writes.timers) {
    dropped_timers_.erase(timer_key);
    if (keep_state_)
      changes_.timers.insert_or_assign(timer_key, std::move(timer));
  }
}

void ChangelogImageBuilder::Mark(int64_t epoch, int64_t offset,
                                 std::optional<absl::Time> stream_time) {
  if (!epochs_end_) {
    // The broken variant: every mark completes every pending write.
    auto writes = pending_.find(0);
    if (writes != pending_.end()) {
      Complete(writes->second);
      pending_.erase(writes);
    }
  } else if (over_.contains(epoch)) {
    ++changes_.stale_records;
    DropPending(epoch);
    return;
  } else {
    if (changes_.last.has_value() && changes_.last->epoch != epoch) {
      // A new owner: the epoch before it is over, and so is its unfinished
      // commit.
      over_.insert(changes_.last->epoch);
      DropPending(changes_.last->epoch);
    }
    // A commit is complete: its changes join the state.
    auto writes = pending_.find(epoch);
    if (writes != pending_.end()) {
      Complete(writes->second);
      pending_.erase(writes);
    }
  }
  if (stream_time.has_value() && (!changes_.stream_time.has_value() ||
                                  *changes_.stream_time < *stream_time)) {
    changes_.stream_time = stream_time;
  }
  changes_.last = ChangelogMark{epoch, offset};
  last_offset_[epoch] = offset;
}

void ChangelogImageBuilder::DropPending(int64_t epoch) {
  auto writes = pending_.find(epoch);
  if (writes == pending_.end()) return;
  for (const auto& [state_key, write] : writes->second.state) {
    dropped_.insert(state_key);
  }
  for (const auto& [timer_key, timer] : writes->second.timers) {
    dropped_timers_.insert(timer_key);
  }
  pending_.erase(writes);
}

absl::Status ChangelogImageBuilder::AddDedupeRecord(const LogRecord& record) {
  if (absl::Status s = CheckFormatVersion(record); !s.ok()) return s;
  const Record& r = record.record;
  ++changes_.records_read;
  changes_.bytes_read += static_cast<int64_t>(r.key.size() + r.value.size());
  std::optional<std::string> id_hash = IdHashFromHex(r.key);
  std::optional<std::string_view> mark_text = r.Header(kChangelogMarkHeader);
  std::optional<ChangelogMark> mark;
  if (mark_text.has_value()) mark = DecodeMark(*mark_text);
  std::optional<DedupeValue> value;
  if (!record.tombstone) value = DecodeDedupeValue(r.value);
  if (!id_hash.has_value() || !mark.has_value() || !value.has_value()) {
    return Undecodable(r.topic, record, "not a dedupe record");
  }
  dedupe_.push_back(Dedupe{*mark, *std::move(id_hash), value->expires_at,
                           std::string(value->result)});
  return absl::OkStatus();
}

ChangelogChanges ChangelogImageBuilder::TakeChanges(absl::Time now) {
  ChangelogChanges taken = std::exchange(changes_, ChangelogChanges());
  changes_.last = taken.last;
  changes_.stream_time = taken.stream_time;
  // The latest complete record of each ID; the others wait.
  absl::btree_map<std::string, Dedupe*> latest;
  std::vector<Dedupe> waiting;
  for (Dedupe& d : dedupe_) {
    auto last = last_offset_.find(d.mark.epoch);
    if (last == last_offset_.end() || d.mark.offset > last->second) {
      // A commit of an epoch that is over never completes.
      if (over_.contains(d.mark.epoch)) {
        ++taken.stale_records;
      } else {
        waiting.push_back(std::move(d));
      }
      continue;
    }
    latest.insert_or_assign(d.id_hash, &d);
  }
  for (auto& [id_hash, d] : latest) {
    if (d->expires_at <= now) continue;
    taken.records.push_back(
        PartitionRecord{id_hash, d->expires_at, std::move(d->result)});
  }
  dedupe_ = std::move(waiting);
  return taken;
}

absl::btree_set<std::string> ChangelogImageBuilder::Orphans() const {
  absl::btree_set<std::string> orphans = dropped_;
  for (const auto& [epoch, writes] : pending_) {
    for (const auto& [state_key, write] : writes.state) {
      orphans.insert(state_key);
    }
  }
  return orphans;
}

absl::btree_set<std::string> ChangelogImageBuilder::TimerOrphans() const {
  absl::btree_set<std::string> orphans = dropped_timers_;
  for (const auto& [epoch, writes] : pending_) {
    for (const auto& [timer_key, timer] : writes.timers) {
      orphans.insert(timer_key);
    }
  }
  return orphans;
}

}  // namespace idem::kafka
