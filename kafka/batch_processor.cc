#include "kafka/batch_processor.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "engine/absl_view.h"
#include "engine/user_code.h"
#include "kafka/record_ids.h"
#include "retry/retry_rounds.h"

namespace idem::kafka {
namespace {

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

// The records of one batch as RunRounds' items: their IDs (DeriveId), their
// messages, the user's handler, and the dead-letter function or topic.
class RecordItems : public retry::RetryItems {
 public:
  RecordItems(absl::Span<Record> records, const ConsumerOptions& options,
              const DeadLetterFunction& dead_letter, Handler handler,
              const ProcessControls& controls)
      : records_(records),
        options_(options),
        dead_letter_(dead_letter),
        handler_(handler),
        controls_(controls) {}

  size_t size() const override { return records_.size(); }

  absl::StatusOr<std::string> Id(size_t i) override {
    return DeriveId(records_[i], options_);
  }

  Message MessageOf(size_t i) const override {
    const Record& record = records_[i];
    return Message{.payload = record.value,
                   .source = record.topic,
                   .partition = record.partition,
                   .offset = controls_.stored_offset.value_or(record.offset),
                   .ttl = options_.ttl,
                   .event_time = record.timestamp_ms >= 0
                                     ? absl::FromUnixMillis(record.timestamp_ms)
                                     : absl::InfinitePast()};
  }

  absl::Status Handle(size_t i, const retry::ItemState& state,
                      Txn& txn) override {
    Record& record = records_[i];
    record.id = state.id;
    return handler_(record, txn);
  }

  // With a dead-letter function, calls it; otherwise, with
  // dead_letter_topic, through the outbox; without either, kAborted.
  absl::StatusOr<retry::DeadLetterRoute> RouteDeadLetter(
      size_t i, const absl::Status& error, std::string_view) override {
    const Record& record = records_[i];
    const std::string position =
        PositionId(record.topic, record.partition, record.offset);
    if (!dead_letter_ && !options_.dead_letter_topic.empty()) {
      return retry::DeadLetterRoute::kOutbox;
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
    return retry::DeadLetterRoute::kHandedOn;
  }

  std::string DeadLetterId(size_t i) const override {
    const Record& record = records_[i];
    return kafka::DeadLetterId(record.topic, record.partition, record.offset);
  }

  // The dead letter of record `i` into dead_letter_topic: its key, value and
  // headers, and headers naming the error and source.
  void EmitDeadLetter(size_t i, const retry::ItemState& state,
                      Txn& txn) override {
    const Record& record = records_[i];
    const std::string error_text = state.dead_letter_error.ToString();
    const std::string partition = absl::StrCat(record.partition);
    const std::string offset = absl::StrCat(record.offset);
    std::vector<Txn::Header> headers(record.headers.begin(),
                                     record.headers.end());
    headers.emplace_back("idem.error", error_text);
    headers.emplace_back("idem.source.topic", record.topic);
    headers.emplace_back("idem.source.partition", partition);
    headers.emplace_back("idem.source.offset", offset);
    if (!state.source_id.empty()) {
      headers.emplace_back("idem.source.id", state.source_id);
    }
    if (!state.reason.empty())
      headers.emplace_back("idem.reason", state.reason);
    txn.EmitWithHeaders(options_.dead_letter_topic, record.key, record.value,
                        headers);
  }

  absl::Status ConflictError(size_t i,
                             const retry::ItemState& state) const override {
    const Record& record = records_[i];
    return absl::AlreadyExistsError(absl::StrCat(
        "conflict: message ID \"", state.id, "\" of ", AbslView(record.topic),
        "/", record.partition, "/", record.offset,
        " was processed before with other content"));
  }

 private:
  const absl::Span<Record> records_;
  const ConsumerOptions& options_;
  const DeadLetterFunction& dead_letter_;
  const Handler handler_;
  const ProcessControls& controls_;
};

}  // namespace

absl::StatusOr<ProcessedBatch> ProcessRecords(
    Engine& engine, absl::Span<Record> records, const ConsumerOptions& options,
    const DeadLetterFunction& dead_letter, Handler handler,
    const ProcessControls& controls) {
  RecordItems items(records, options, dead_letter, handler, controls);
  retry::RetryPolicy policy = retry::PolicyFrom(options);
  policy.keep_partition_order = true;
  policy.wait_durable = controls.wait_durable;
  policy.cancelled = controls.cancelled;
  retry::RoundsResult rounds;
  if (absl::Status s = retry::RunRounds(engine, items, policy, rounds);
      !s.ok()) {
    return s;
  }
  ProcessedBatch out;
  out.report.records = static_cast<int64_t>(records.size());
  retry::AddCounts(rounds.counts, out.report);
  out.max_sequence = rounds.max_sequence;
  out.next_offsets = NextOffsets(records);
  return out;
}

}  // namespace idem::kafka
