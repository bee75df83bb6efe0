#include "kafka/batch_processor.h"

#include <algorithm>
#include <numeric>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/absl_view.h"
#include "engine/user_code.h"
#include "kafka/record_ids.h"

namespace idem::kafka {
namespace {

// Stored as the result of a dead-lettered record's marker.
constexpr std::string_view kDeadLetteredResult = "idem.dead-lettered";

using PartitionRef = std::pair<std::string_view, int32_t>;

PartitionRef PartitionOf(const Record& record) {
  return {record.topic, record.partition};
}

// Per partition of `records`, the highest offset + 1: once every record is
// committed, what this batch moved each partition to. Not the engine's
// recorded offset + 1 (engine/offset_tracker.h, Engine::CommittedOffset),
// which would cost a store read per partition and means something else: a
// commit records only up to its first failure (the rounds here retry
// failures until none is left), and under Ordering::kKey it records the low
// watermark (ProcessControls::stored_offset) instead of the records' offsets.
absl::btree_map<TopicPartition, int64_t> NextOffsets(
    absl::Span<const Record> records) {
  absl::btree_map<TopicPartition, int64_t> next_offsets;
  for (const Record& record : records) {
    int64_t& next = next_offsets[{std::string(record.topic), record.partition}];
    next = std::max(next, record.offset + 1);
  }
  return next_offsets;
}

// Per record of the batch.
struct Entry {
  std::string id;  // the derived ID; DeadLetterId once dead-lettered
  absl::Status id_error;
  // Why it was given up on, when it goes to dead_letter_topic through the
  // outbox (emitted in its dead-letter marker's commit), and its derived ID
  // then, if it had one.
  absl::Status dead_letter_error;
  std::string source_id;
  // Why it was given up on (the dead letter's idem.reason header): "id",
  // "attempts", "non_retriable", "permanent" or "conflict".
  std::string_view reason;
  int attempts = 0;
  // Its handler returned PermanentError (idem/message.h).
  bool permanent = false;
  bool dead_lettered = false;
  bool deferred = false;  // in this round: an earlier record of its
                          // partition failed, so it did not run
  bool counted = false;   // its outcome is in the report
};

class BatchRun {
 public:
  BatchRun(Engine& engine, absl::Span<Record> records,
           const ConsumerOptions& options,
           const DeadLetterFunction& dead_letter, Handler handler,
           const ProcessControls& controls)
      : engine_(engine),
        records_(records),
        options_(options),
        dead_letter_(dead_letter),
        handler_(handler),
        controls_(controls),
        entries_(records.size()) {}

  absl::StatusOr<ProcessedBatch> Run() {
    out_.report.records = static_cast<int64_t>(records_.size());
    DeriveIds();
    if (absl::Status s = GiveUpUnusableIds(); !s.ok()) return s;
    if (absl::Status s = RunRounds(); !s.ok()) return s;
    out_.max_sequence = max_sequence_;
    if (max_sequence_ > 0 && controls_.wait_durable) {
      if (absl::Status s = engine_.WaitDurable(max_sequence_); !s.ok()) {
        return s;
      }
    }
    out_.next_offsets = NextOffsets(records_);
    return std::move(out_);
  }

 private:
  // Each record's ID, or why it has none.
  void DeriveIds() {
    for (size_t i = 0; i < records_.size(); ++i) {
      absl::StatusOr<std::string> id = DeriveId(records_[i], options_);
      if (id.ok()) {
        entries_[i].id = *std::move(id);
      } else {
        entries_[i].id_error = id.status();
      }
    }
  }

  // Retrying cannot repair an ID: such records are given up on at once.
  absl::Status GiveUpUnusableIds() {
    for (size_t i = 0; i < records_.size(); ++i) {
      if (entries_[i].id_error.ok()) continue;
      if (absl::Status s = GiveUp(i, entries_[i].id_error, "id"); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  // Rounds until every record is committed: the first runs them all, each
  // later one what the round before left failed or deferred.
  absl::Status RunRounds() {
    std::vector<size_t> round(records_.size());
    std::iota(round.begin(), round.end(), 0);
    while (!round.empty()) {
      absl::StatusOr<std::vector<size_t>> next = RunRound(round);
      if (!next.ok()) return next.status();
      round = *std::move(next);
    }
    return absl::OkStatus();
  }

  // What one round's outcomes ask of the next round.
  struct NextRound {
    std::vector<size_t> records;  // they run again, in batch order
    absl::flat_hash_set<PartitionRef> failed_partitions;
    bool wait = false;  // a record is retried: back off first
  };

  // One ProcessBatch over the records `round` names; returns the records of
  // the next round (each failed partition from its first failure on).
  absl::StatusOr<std::vector<size_t>> RunRound(
      const std::vector<size_t>& round) {
    const std::vector<Message> messages = RoundMessages(round);
    absl::flat_hash_set<PartitionRef> blocked;  // a record of it failed
    auto run_one = [&](const Message& message, Txn& txn) {
      return RunRecord(round[&message - messages.data()], txn, blocked);
    };
    absl::StatusOr<std::vector<Result>> results =
        engine_.ProcessBatch(messages, run_one);
    if (!results.ok()) return results.status();
    if (Cancelled()) {
      return absl::CancelledError(
          "the partition was lost: its remaining records were not run");
    }
    NextRound next;
    for (size_t k = 0; k < round.size(); ++k) {
      if (absl::Status s = TakeOutcome(round[k], (*results)[k], next);
          !s.ok()) {
        return s;
      }
    }
    if (next.wait) BackOff();
    return std::move(next.records);
  }

  // The engine's messages for the records `round` names, in its order;
  // none of them is deferred until it runs.
  std::vector<Message> RoundMessages(const std::vector<size_t>& round) {
    std::vector<Message> messages;
    messages.reserve(round.size());
    for (size_t i : round) {
      const Record& record = records_[i];
      Message message;
      message.id = entries_[i].id;
      message.payload = record.value;
      message.source = record.topic;
      message.partition = record.partition;
      message.offset = controls_.stored_offset.value_or(record.offset);
      message.ttl = options_.ttl;
      if (record.timestamp_ms >= 0) {
        message.event_time = absl::FromUnixMillis(record.timestamp_ms);
      }
      messages.push_back(message);
      entries_[i].deferred = false;
    }
    return messages;
  }

  // The engine's handler for record `i`: its dead-letter marker once it is
  // dead-lettered, a deferral behind an earlier failure of its partition
  // (`blocked`, which a failure here extends), the user's handler otherwise.
  absl::Status RunRecord(size_t i, Txn& txn,
                         absl::flat_hash_set<PartitionRef>& blocked) {
    Entry& entry = entries_[i];
    Record& record = records_[i];
    if (Cancelled()) {
      entry.deferred = true;  // not an attempt: the partition is gone
      return absl::AbortedError("the partition was lost");
    }
    if (entry.dead_lettered) {
      txn.SetResult(kDeadLetteredResult);
      if (!entry.dead_letter_error.ok()) {
        EmitDeadLetter(record, entry, txn);
      }
      return absl::OkStatus();
    }
    if (blocked.contains(PartitionOf(record))) {
      entry.deferred = true;
      return absl::AbortedError("deferred behind a failed record");
    }
    record.id = entry.id;
    absl::Status status = handler_(record, txn);
    if (!status.ok()) blocked.insert(PartitionOf(record));
    if (IsPermanentError(status)) {
      // Dead-lettered at once, as a non-retriable code: the dead-letter
      // marker's commit moves the offset past it (so the engine does not
      // keep the failure: a corrected redelivery runs).
      entry.permanent = true;
      return absl::Status(status.code(), status.message());
    }
    return status;
  }

  // Takes record `i`'s `result` into the report and `next`: a record after
  // its partition's failure runs again; a failure is retried or given up on;
  // a conflict is dead-lettered; anything else is counted once. Returns the
  // dead-letter path's error.
  absl::Status TakeOutcome(size_t i, const Result& result, NextRound& next) {
    if (next.failed_partitions.contains(PartitionOf(records_[i]))) {
      next.records.push_back(i);  // after its partition's failure: runs again
    }
    if (result.outcome == Outcome::kFailed) {
      return TakeFailure(i, result, next);
    }
    max_sequence_ = std::max(max_sequence_, result.sequence);
    if (result.outcome == Outcome::kConflict && !entries_[i].dead_lettered) {
      return TakeConflict(i, next);
    }
    CountOnce(i, result);
    return absl::OkStatus();
  }

  // A failed record `i` fails its partition for the rest of the round; unless
  // it was only deferred, it is retried or, when it cannot or may not be,
  // given up on.
  absl::Status TakeFailure(size_t i, const Result& result, NextRound& next) {
    Entry& entry = entries_[i];
    if (next.failed_partitions.insert(PartitionOf(records_[i])).second) {
      next.records.push_back(i);
    }
    if (entry.deferred) return absl::OkStatus();  // not an attempt of its own
    // A permanent failure: returned now, or remembered by the engine.
    const bool permanent = entry.permanent || result.permanent;
    const bool retriable = !permanent && Retriable(result.error);
    if (retriable && ++entry.attempts < options_.max_attempts) {
      ++out_.report.retries;
      next.wait = true;
      return absl::OkStatus();
    }
    if (!retriable) ++out_.report.non_retriable;
    const std::string_view reason = permanent    ? "permanent"
                                    : !retriable ? "non_retriable"
                                                 : "attempts";
    return GiveUp(i, result.error, reason);
  }

  // A conflicting record `i`: its commit moved the offset past it; the dead
  // letter follows (through the outbox: in the next round's commit).
  absl::Status TakeConflict(size_t i, NextRound& next) {
    const Entry& entry = entries_[i];
    if (absl::Status s =
            GiveUp(i, ConflictError(records_[i], entry), "conflict");
        !s.ok()) {
      return s;
    }
    if (!entry.dead_letter_error.ok() &&
        !next.failed_partitions.contains(PartitionOf(records_[i]))) {
      next.records.push_back(i);
    }
    return absl::OkStatus();
  }

  // Counts record `i` as processed or duplicate, the first time it gets
  // there and only if it was not dead-lettered.
  void CountOnce(size_t i, const Result& result) {
    Entry& entry = entries_[i];
    if (entry.counted || entry.dead_lettered) return;
    entry.counted = true;
    if (result.outcome == Outcome::kProcessed) {
      ++out_.report.processed;
    } else {
      ++out_.report.duplicates;
    }
  }

  // The pause before a round that retries a record
  // (ConsumerOptions::retry_backoff).
  void BackOff() const {
    if (options_.retry_backoff > absl::ZeroDuration()) {
      absl::SleepFor(options_.retry_backoff);
    }
  }

  // The dead letter of `record` into dead_letter_topic, through the outbox:
  // its key, value and headers, and headers naming the error and source.
  void EmitDeadLetter(const Record& record, const Entry& entry, Txn& txn) {
    const std::string error_text = entry.dead_letter_error.ToString();
    const std::string partition = absl::StrCat(record.partition);
    const std::string offset = absl::StrCat(record.offset);
    std::vector<Txn::Header> headers(record.headers.begin(),
                                     record.headers.end());
    headers.emplace_back("idem.error", error_text);
    headers.emplace_back("idem.source.topic", record.topic);
    headers.emplace_back("idem.source.partition", partition);
    headers.emplace_back("idem.source.offset", offset);
    if (!entry.source_id.empty()) {
      headers.emplace_back("idem.source.id", entry.source_id);
    }
    if (!entry.reason.empty())
      headers.emplace_back("idem.reason", entry.reason);
    txn.EmitWithHeaders(options_.dead_letter_topic, record.key, record.value,
                        headers);
  }

  bool Cancelled() const {
    return controls_.cancelled != nullptr &&
           controls_.cancelled->load(std::memory_order_acquire);
  }

  // Whether a handler error may succeed on another attempt
  // (ConsumerOptions::non_retriable_codes).
  bool Retriable(const absl::Status& error) const {
    return std::find(options_.non_retriable_codes.begin(),
                     options_.non_retriable_codes.end(),
                     error.code()) == options_.non_retriable_codes.end();
  }

  // The error a conflicting record is dead-lettered with.
  static absl::Status ConflictError(const Record& record, const Entry& entry) {
    return absl::AlreadyExistsError(absl::StrCat(
        "conflict: message ID \"", entry.id, "\" of ", AbslView(record.topic),
        "/", record.partition, "/", record.offset,
        " was processed before with other content"));
  }

  // Passes record `i` to the dead-letter path; from then on it is committed
  // under its DeadLetterId, which moves the partition's offset past it (and,
  // with dead_letter_topic, emits its dead letter in that same commit).
  absl::Status GiveUp(size_t i, const absl::Status& error,
                      std::string_view reason) {
    const Record& record = records_[i];
    entries_[i].reason = reason;
    const std::string position =
        PositionId(record.topic, record.partition, record.offset);
    if (!dead_letter_ && !options_.dead_letter_topic.empty()) {
      Entry& entry = entries_[i];
      entry.dead_lettered = true;
      entry.dead_letter_error =
          error.ok() ? absl::UnknownError("given up on") : error;
      if (entry.id_error.ok()) entry.source_id = entry.id;
      entry.id = DeadLetterId(record.topic, record.partition, record.offset);
      ++out_.report.dead_lettered;
      return absl::OkStatus();
    }
    if (!dead_letter_) {
      return absl::AbortedError(
          absl::StrCat("record ", position,
                       " was given up on and no dead-letter path is "
                       "configured (set ConsumerOptions::dead_letter or "
                       "dead_letter_topic): ",
                       error.ToString()));
    }
    if (absl::Status s =
            CallUserCode("the dead-letter function",
                         [&] { return dead_letter_(record, error); });
        !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("dead-lettering record ",
                                                 position, ": ", s.message()));
    }
    Entry& entry = entries_[i];
    entry.dead_lettered = true;
    entry.id = DeadLetterId(record.topic, record.partition, record.offset);
    ++out_.report.dead_lettered;
    return absl::OkStatus();
  }

  Engine& engine_;
  const absl::Span<Record> records_;
  const ConsumerOptions& options_;
  const DeadLetterFunction& dead_letter_;
  const Handler handler_;
  const ProcessControls& controls_;
  std::vector<Entry> entries_;
  uint64_t max_sequence_ = 0;
  ProcessedBatch out_;
};

}  // namespace

absl::StatusOr<ProcessedBatch> ProcessRecords(
    Engine& engine, absl::Span<Record> records, const ConsumerOptions& options,
    const DeadLetterFunction& dead_letter, Handler handler,
    const ProcessControls& controls) {
  return BatchRun(engine, records, options, dead_letter, handler, controls)
      .Run();
}

}  // namespace idem::kafka
