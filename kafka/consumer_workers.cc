// ConsumerImpl with ConsumerOptions::workers > 1: records taken while the
// workers run them, groups through ProcessRecords, watermarks, revocations.

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/absl_view.h"
#include "engine/user_code.h"
#include "kafka/consumer_impl.h"
#include "kafka/record_ids.h"

namespace idem::kafka {
namespace {

// How long a call with workers waits for a record while they are busy,
// before it looks at them again.
constexpr absl::Duration kWorkerPollWait = absl::Milliseconds(5);

}  // namespace

absl::Status ConsumerImpl::PollWithWorkers() {
  runner_->Begin(
      [this](const ParallelRunner::Group& group) { return RunGroup(group); });
  absl::btree_set<TopicPartition> paused;
  const absl::Status taken = TakeRecords(paused);
  runner_->WaitIdle();
  for (const TopicPartition& partition : paused) {
    if (assignment_.contains(partition)) PauseOrResume(partition, false);
  }
  const absl::Status finished = FinishWorkerRun();
  if (!taken.ok()) return taken;
  if (!failed_.ok()) return failed_;
  return finished;
}

absl::Status ConsumerImpl::TakeRecords(
    absl::btree_set<TopicPartition>& paused) {
  const int64_t limit = 2 * int64_t{options_.max_batch} * options_.workers;
  // While checks go on between polls, the next step is due: no waiting.
  absl::Duration wait =
      restoring_.empty() ? options_.poll_timeout : absl::ZeroDuration();
  for (int64_t taken = 0; taken < limit;) {
    MessagePtr message = Poll(wait);
    if (!callback_error_.ok()) {
      return std::exchange(callback_error_, absl::OkStatus());
    }
    if (!failed_.ok()) return failed_;
    // No more records before the held partitions' check (PollAndProcess).
    if (UnfencedByRevocation()) return absl::OkStatus();
    ResumeDrained(paused);
    if (message == nullptr) {
      if (runner_->Idle()) return absl::OkStatus();
      wait = kWorkerPollWait;  // the workers are busy: look again soon
      continue;
    }
    wait = absl::ZeroDuration();
    if (message->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (absl::Status s = OnMessageError(*message); !s.ok()) return s;
      continue;
    }
    if (OfRestoringPartition(*message)) continue;  // read again once current
    TopicPartition partition{rd_kafka_topic_name(message->rkt),
                             message->partition};
    QueuedRecord queued;
    queued.record = RecordFromMessage(*message);
    queued.owner =
        std::shared_ptr<const void>(message.release(), [](const void* owned) {
          rd_kafka_message_destroy(
              static_cast<rd_kafka_message_t*>(const_cast<void*>(owned)));
        });
    runner_->Add(std::move(queued));
    if (++taken == 1 && hooks_.after_first_record) {
      hooks_.after_first_record();
    }
    if (options_.ordering == Ordering::kPartition &&
        runner_->Waiting(partition) >= 2 * int64_t{options_.max_batch} &&
        paused.insert(partition).second) {
      PauseOrResume(partition, true);
    }
  }
  return absl::OkStatus();
}

void ConsumerImpl::ResumeDrained(absl::btree_set<TopicPartition>& paused) {
  for (auto it = paused.begin(); it != paused.end();) {
    if (runner_->Waiting(*it) >= options_.max_batch) {
      ++it;
      continue;
    }
    if (assignment_.contains(*it)) PauseOrResume(*it, false);
    it = paused.erase(it);
  }
}

absl::StatusOr<ProcessedBatch> ConsumerImpl::RunGroup(
    const ParallelRunner::Group& group) {
  auto with_changelog = [this](const Record& record, Txn& txn) {
    return changelog_->Handle(record, txn, *handler_);
  };
  ProcessControls controls;
  controls.cancelled = group.cancelled;
  controls.stored_offset = group.stored_offset;
  if (hooks_.store_record_offsets) controls.stored_offset.reset();
  controls.wait_durable = false;  // FinishWorkerRun and Revoke wait
  absl::StatusOr<ProcessedBatch> batch = ProcessRecords(
      *engine_, group.records, options_, dead_letter_,
      changelog_ != nullptr ? Handler(with_changelog) : *handler_, controls);
  if (!batch.ok()) return batch;
  if (absl::Status s = MarkHandled(batch->next_offsets); !s.ok()) return s;
  return batch;
}

absl::Status ConsumerImpl::FinishWorkerRun() {
  ParallelRunner::Outcome outcome = runner_->TakeOutcome();
  stats_.engine_time += outcome.busy;
  if (outcome.max_sequence > 0) {
    // Nothing is committed to Kafka, or reported, before it is durable.
    const absl::Time start = absl::Now();
    absl::Status durable = engine_->WaitDurable(outcome.max_sequence);
    stats_.engine_time += absl::Now() - start;
    if (!durable.ok()) {
      // Read everything taken again: the engine catches what stayed.
      outcome.rewind = outcome.first_taken;
      outcome.next_offsets.clear();
      if (outcome.error.ok()) outcome.error = durable;
    }
  }
  if (outcome.report.records > 0) Count(outcome.report);
  absl::btree_map<TopicPartition, int64_t> commit;
  for (const auto& [partition, next] : outcome.next_offsets) {
    // A partition revoked meanwhile had its offsets committed then.
    if (!assignment_.contains(partition)) continue;
    if (absl::Status s = CatchUpEngineOffset(partition, next); !s.ok()) {
      if (outcome.error.ok()) outcome.error = s;
      continue;
    }
    commit.emplace(partition, next);
  }
  if (options_.commit_to_kafka && !commit.empty()) CommitToKafka(commit);
  absl::btree_map<TopicPartition, int64_t> rewind;
  for (const auto& [partition, offset] : outcome.rewind) {
    if (assignment_.contains(partition)) rewind.emplace(partition, offset);
  }
  SeekTo(rewind);
  return outcome.error;
}

absl::Status ConsumerImpl::CatchUpEngineOffset(const TopicPartition& partition,
                                               int64_t next) {
  if (options_.ordering != Ordering::kKey) return absl::OkStatus();
  absl::StatusOr<std::optional<int64_t>> current =
      engine_->CommittedOffset(partition.first, partition.second);
  if (!current.ok()) return current.status();
  if (current->has_value() && **current >= next - 1) return absl::OkStatus();
  return engine_->SetCommittedOffset(partition.first, partition.second,
                                     next - 1);
}

void ConsumerImpl::SettleWorkers(
    const rd_kafka_topic_partition_list_t* partitions, bool lost) {
  std::vector<TopicPartition> revoked;
  for (int i = 0; i < partitions->cnt; ++i) {
    revoked.emplace_back(partitions->elems[i].topic,
                         partitions->elems[i].partition);
  }
  if (lost || handler_ == nullptr || hooks_.drop_in_flight_on_revoke) {
    runner_->Cancel(revoked);
    return;
  }
  if (changelog_ != nullptr && !hooks_.changelog_revoke_leaves_workers) {
    // The membership check that follows may unfence every partition
    // (Unfence), kept ones too: what the workers hold of those is handled
    // first, under their fences, as without workers (ProcessInFlight).
    runner_->WaitIdle();
  } else {
    runner_->Finish(revoked);
  }
  if (const uint64_t sequence = runner_->MaxSequence(); sequence > 0) {
    if (absl::Status s = engine_->WaitDurable(sequence); !s.ok()) {
      // Not durable: commit nothing of them to Kafka (Revoke commits the
      // engine's offsets, which a reopen may set back).
      callback_error_ = s;
      return;
    }
  }
  for (const TopicPartition& partition : revoked) {
    std::optional<int64_t> next = runner_->NextOffset(partition);
    if (!next.has_value()) continue;
    if (absl::Status s = CatchUpEngineOffset(partition, *next); !s.ok()) {
      NoteError(s);
    }
  }
}

}  // namespace idem::kafka
