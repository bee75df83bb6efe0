// EngineImpl::HandleMessages and its steps: the duplicate check and handler
// of each message of a batch, in order, building the batch's commit. A
// message is a repeat of an ID committed earlier in the same batch, a
// redelivery of an ID with a live stored record, or a first delivery whose
// handler runs.

#include <algorithm>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "engine/batch_txn.h"
#include "engine/engine_impl.h"
#include "engine/handler_scope.h"
#include "engine/status_util.h"
#include "engine/timer_record.h"

namespace idem {
namespace {

// The timer partition key of the message asked about last: a batch's
// messages mostly come in runs from one partition, whose key is then built
// once per run.
class RunPartitionKey {
 public:
  const std::string& For(const Message& message) {
    if (of_ == nullptr || of_->partition != message.partition ||
        of_->source != message.source) {
      key_ = TimerPartitionKey(message.source, message.partition);
    }
    of_ = &message;
    return key_;
  }

 private:
  const Message* of_ = nullptr;  // in the batch, which outlives this
  std::string key_;
};

}  // namespace

absl::StatusOr<std::vector<Result>> EngineImpl::HandleMessages(
    HandlePass& pass) {
  // Record key -> index of its first occurrence in this batch that committed
  // a record (processed, or failed permanently). A single message cannot
  // repeat an ID of its batch.
  absl::flat_hash_map<RecordKey, size_t> committed_here;
  const bool may_repeat = pass.messages.size() > 1;
  std::vector<Result> results(pass.messages.size());
  RunPartitionKey partition_key;
  for (size_t i = 0; i < pass.messages.size(); ++i) {
    const Message& message = pass.messages[i];
    if (auto first = may_repeat ? committed_here.find(pass.record_keys[i])
                                : committed_here.end();
        first != committed_here.end()) {
      results[i] =
          RepeatInBatch(pass, i, first->second, results[first->second]);
      // Offsets: every outcome here advances, as a duplicate.
      pass.commit.AddOutcome(message, Outcome::kDuplicate);
      continue;
    }
    absl::StatusOr<Result> result = pass.stored[i].has_value()
                                        ? Redelivered(pass, i, *pass.stored[i])
                                        : RunHandler(pass, i);
    if (!result.ok()) return result.status();
    results[i] = *std::move(result);
    if (pass.stored[i].has_value()) {
      pass.commit.AddOutcome(message, Outcome::kDuplicate);
    } else if (results[i].outcome == Outcome::kFailed &&
               !results[i].permanent) {
      // A transient failure committed no record: a retry runs it again.
      pass.commit.AddOutcome(message, Outcome::kFailed);
      continue;  // nor does it advance the stream time
    } else {
      if (may_repeat) committed_here.emplace(pass.record_keys[i], i);
      pass.commit.AddOutcome(message, Outcome::kProcessed);
    }
    if (std::optional<int64_t> micros =
            StreamAdvance(message, pass.now_micros)) {
      pass.timers.AdvanceStreamTime(partition_key.For(message), *micros);
    }
  }
  return results;
}

Result EngineImpl::RepeatInBatch(const HandlePass& pass, size_t i, size_t first,
                                 const Result& first_result) const {
  Result result;
  result.outcome = RedeliveryOutcome(
      pass, i,
      pass.fingerprints.empty()
          ? std::nullopt
          : std::optional<uint64_t>(pass.fingerprints[first]));
  if (result.outcome == Outcome::kDuplicate &&
      first_result.outcome == Outcome::kFailed) {
    result.outcome = Outcome::kFailed;
    result.error = first_result.error;
    result.permanent = true;
  }
  result.result = first_result.result;
  result.first_processed_at = absl::FromUnixMicros(pass.now_micros);
  if (result.outcome == Outcome::kDuplicate) {
    pass.ages.ages_micros.push_back(0);
  }
  return result;
}

absl::StatusOr<Result> EngineImpl::Redelivered(HandlePass& pass, size_t i,
                                               const LiveRecord& live) {
  const int64_t first_micros = FirstProcessedMicros(live.record);
  const bool failed = live.record.failure != absl::StatusCode::kOk;
  Result result;
  result.outcome = RedeliveryOutcome(pass, i, live.record.fingerprint);
  // A failed record's bytes are its error message, not a result.
  if (!failed) result.result = live.result;
  if (first_micros != kUnknownFirstProcessed) {
    result.first_processed_at = absl::FromUnixMicros(first_micros);
  }
  if (result.outcome != Outcome::kDuplicate) return result;
  if (failed) {
    result.outcome = Outcome::kFailed;
    result.error =
        PermanentError(absl::Status(live.record.failure, live.result));
    result.permanent = true;
    return result;
  }
  if (first_micros != kUnknownFirstProcessed) {
    // A concurrent first delivery may have read a later time.
    pass.ages.ages_micros.push_back(
        std::max<int64_t>(0, pass.now_micros - first_micros));
    if (IsLateDuplicate(first_micros, live.record.expiry_micros,
                        pass.now_micros)) {
      ++pass.ages.late;
    }
  }
  if (absl::Status s = RefreshRecord(pass, i, live, first_micros); !s.ok()) {
    return s;
  }
  return result;
}

absl::Status EngineImpl::RefreshRecord(HandlePass& pass, size_t i,
                                       const LiveRecord& live,
                                       int64_t first_micros) {
  // A refresh only ever extends a record's life: a duplicate with a shorter
  // ttl than the record has left leaves it as it is.
  const RecordPlacement& placement = pass.placements[i];
  if (!options_.refresh_on_duplicate ||
      placement.expiry_micros <= live.record.expiry_micros) {
    return absl::OkStatus();
  }
  absl::StatusOr<rocksdb::ColumnFamilyHandle*> family =
      FamilyFor(pass.store, placement);
  if (!family.ok()) return family.status();
  DedupeRecord moved = live.View();
  moved.expiry_micros = placement.expiry_micros;
  moved.processed_before_expiry_s =
      ProcessedBeforeExpiry(first_micros, moved.expiry_micros);
  if (*family != live.family) {
    pass.commit.AddRecordDelete(live.family, pass.record_keys[i]);
  }
  pass.commit.AddRecord(*family, pass.record_keys[i],
                        EncodeDedupeRecord(moved));
  return absl::OkStatus();
}

absl::StatusOr<Result> EngineImpl::RunHandler(HandlePass& pass, size_t i) {
  const Message& message = pass.messages[i];
  const RecordPlacement& placement = pass.placements[i];
  BatchTxn txn(&pass.commit.state(), pass.store.db, pass.store.state,
               &versions_, &pass.reads);
  txn.set_record_expires_at(absl::FromUnixMicros(placement.expiry_micros));
  TimerScope timers{
      .family = pass.store.timers,
      .versions = &timer_versions_,
      .reads = &pass.timer_reads,
      .batch = &pass.timers,
      .stream_times = &stream_times_,
      .partition_key = {},
      .source = message.source,
      .partition = message.partition,
      .event_micros =
          StreamAdvance(message, pass.now_micros).value_or(kNoStreamTime)};
  txn.set_timers(&timers);
  txn.set_state_time(HandlerStateTime(pass.store, pass.now_micros));
  absl::Status status;
  ++pass.ages.handlers;
  {
    HandlerScope scope(this, txn, pass.record_keys[i].hash());
    status = CallHandler(pass.handler, message, txn);
  }
  if (!txn.read_error().ok()) return txn.read_error();
  const bool permanent = IsPermanentError(status);
  // A failed message's writes are dropped with its BatchTxn.
  if (status.ok()) status = txn.Apply(&pass.commit.state());
  if (status.ok()) pass.timers.Absorb(std::move(txn.timer_writes()));
  Result result;
  if (!status.ok() && !permanent) {
    result.outcome = Outcome::kFailed;
    result.error = std::move(status);
    return result;
  }
  absl::StatusOr<rocksdb::ColumnFamilyHandle*> family =
      FamilyFor(pass.store, placement);
  if (!family.ok()) return family.status();
  DedupeRecord record;
  record.expiry_micros = placement.expiry_micros;
  record.processed_before_expiry_s =
      ProcessedBeforeExpiry(pass.now_micros, record.expiry_micros);
  if (!pass.fingerprints.empty()) record.fingerprint = pass.fingerprints[i];
  if (permanent) {
    // Remembered: the error instead of a result; no writes, no emits.
    record.failure = status.code();
    const absl::string_view error = status.message();
    record.result = std::string_view(error.data(), error.size());
    result.outcome = Outcome::kFailed;
    result.permanent = true;
  } else {
    record.result = txn.result();
    pass.commit.AddEmits(pass.record_keys[i], std::move(txn.emitted()));
    result.outcome = Outcome::kProcessed;
    result.result = txn.result();
  }
  pass.commit.AddRecord(*family, pass.record_keys[i],
                        EncodeDedupeRecord(record));
  if (permanent) result.error = std::move(status);
  result.first_processed_at = absl::FromUnixMicros(pass.now_micros);
  return result;
}

Outcome EngineImpl::RedeliveryOutcome(
    const HandlePass& pass, size_t i,
    std::optional<uint64_t> first_print) const {
  return !pass.fingerprints.empty() && first_print.has_value() &&
                 *first_print != pass.fingerprints[i]
             ? Outcome::kConflict
             : Outcome::kDuplicate;
}

}  // namespace idem
