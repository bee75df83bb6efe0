// ConsumerImpl's rebalances: assignments (and, in changelog mode, the check
// and restore of each partition), revocations, lost partitions, and the
// standby copies.

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

void ConsumerImpl::FollowStandbys() {
  absl::btree_set<int32_t> held;
  for (const TopicPartition& tp : assignment_) held.insert(tp.second);
  const absl::Time start = absl::Now();
  const ChangelogKeeper::StandbyRound round =
      changelog_->FollowStandbys(options_.topics[0], held);
  stats_.kafka_time += absl::Now() - start;
  stats_.standby_updates += round.copies;
  stats_.standby_records_read += round.records_read;
  stats_.standby_errors += round.errors;
  if (round.errors > 0) NoteError(round.last_error);
}

void ConsumerImpl::OnRebalance(rd_kafka_t*, rd_kafka_resp_err_t err,
                               rd_kafka_topic_partition_list_t* partitions,
                               void* opaque) {
  ConsumerImpl* self = Self(opaque);
  if (self->report_ != nullptr) self->report_->rebalanced = true;
  switch (err) {
    case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
      self->Assign(partitions);
      break;
    case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
      self->Revoke(partitions);
      break;
    default:
      self->NoteError(FromKafkaError(err, "rebalancing"));
      self->Unassign(nullptr);
      break;
  }
}

void ConsumerImpl::Assign(rd_kafka_topic_partition_list_t* partitions) {
  out_of_group_ = false;
  expelled_ = false;
  ++stats_.assignments;
  const PartitionListPtr group = GroupCommittedOffsets(partitions);
  for (int i = 0; i < partitions->cnt; ++i) {
    rd_kafka_topic_partition_t& tp = partitions->elems[i];
    PartitionStart start;
    start.topic = tp.topic;
    start.partition = tp.partition;
    if (group != nullptr && group->elems[i].offset >= 0) {
      start.group_next_offset = group->elems[i].offset;
    }
    const absl::Time begin = absl::Now();
    absl::StatusOr<std::optional<int64_t>> engine_offset =
        EngineOffset(tp.topic, tp.partition);
    stats_.engine_time += absl::Now() - begin;
    assignment_.emplace(tp.topic, tp.partition);
    unknown_since_.erase(start.topic);  // the topic exists
    if (engine_offset.ok() && changelog_ != nullptr) {
      // The check's first step; a check that needs more goes on between
      // polls, the partition paused meanwhile (StepRestores).
      // A step that failed for a cause that can pass is tried again there.
      absl::StatusOr<std::optional<RestoreReport>> checked =
          StepCheck(tp.topic, tp.partition);
      const bool retry = !checked.ok() && RetriableInRun(checked.status());
      if (retry) NoteError(checked.status());
      if (retry || (checked.ok() && !checked->has_value())) {
        restoring_[{tp.topic, tp.partition}] = Restoring{std::move(start)};
        tp.offset = RD_KAFKA_OFFSET_BEGINNING;  // sought once restored
        continue;
      }
      if (checked.ok()) {
        engine_offset = (**checked).offset;
      } else {
        engine_offset = checked.status();
      }
    }
    if (!engine_offset.ok()) {
      // The consumer cannot tell where its state is: it stops for good.
      Fail(engine_offset.status());
      callback_error_ = failed_;
    } else {
      start.engine_offset = *engine_offset;
    }
    tp.offset = StartOffset(start);
    NotifyAssign(start);
  }
  absl::Status status =
      Cooperative() ? FromKafkaErrorObject(
                          rd_kafka_incremental_assign(rk_.get(), partitions),
                          "assigning partitions")
                    : FromKafkaError(rd_kafka_assign(rk_.get(), partitions),
                                     "assigning partitions");
  if (!status.ok() && callback_error_.ok()) callback_error_ = status;
  if (!status.ok()) return;
  // A partition paused before it was revoked starts unpaused, unless its
  // check goes on.
  rd_kafka_resume_partitions(rk_.get(), partitions);
  for (const auto& [tp, restoring] : restoring_) {
    PauseOrResume(tp, /*pause=*/true);
  }
}

PartitionListPtr ConsumerImpl::GroupCommittedOffsets(
    const rd_kafka_topic_partition_list_t* partitions) {
  if (!options_.check_group_offsets) return nullptr;
  PartitionListPtr group(rd_kafka_topic_partition_list_copy(partitions));
  const rd_kafka_resp_err_t err =
      rd_kafka_committed(rk_.get(), group.get(), /*timeout_ms=*/10000);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    NoteError(FromKafkaError(err, "reading the group's offsets"));
    return nullptr;
  }
  return group;
}

int64_t ConsumerImpl::StartOffset(PartitionStart& start) const {
  if (start.engine_offset.has_value() && !hooks_.ignore_engine_offsets) {
    start.start_offset = *start.engine_offset + 1;
    return start.start_offset;
  }
  if (changelog_ != nullptr) {
    // The changelog holds nothing of it: everything is to be processed.
    start.start_offset = 0;
    return RD_KAFKA_OFFSET_BEGINNING;
  }
  return RD_KAFKA_OFFSET_INVALID;  // group offset, then reset
}

void ConsumerImpl::NotifyAssign(const PartitionStart& start) {
  if (!options_.on_assign) return;
  absl::Status s = CallUserCode("on_assign", [&] {
    options_.on_assign(start);
    return absl::OkStatus();
  });
  if (!s.ok()) NoteError(s);
}

absl::Status ConsumerImpl::StepRestores() {
  for (auto it = restoring_.begin(); it != restoring_.end();) {
    const TopicPartition tp = it->first;
    ++stats_.restore_steps;
    absl::StatusOr<std::optional<RestoreReport>> checked =
        StepCheck(tp.first, tp.second);
    if (!checked.ok()) {
      // A cause that can pass begins the check again at the next call.
      if (!RetriableInRun(checked.status())) Fail(checked.status());
      return absl::Status(
          checked.status().code(),
          absl::StrCat("changelog mode: restoring ", tp.first, "/", tp.second,
                       ": ", checked.status().message()));
    }
    if (!checked->has_value()) {
      ++it;
      continue;
    }
    Restoring restoring = std::move(it->second);
    it = restoring_.erase(it);
    restoring.start.engine_offset = (**checked).offset;
    SeekTo({{tp, StartOffset(restoring.start)}});
    if (!restoring.paused_by_application) PauseOrResume(tp, /*pause=*/false);
    NotifyAssign(restoring.start);
  }
  return absl::OkStatus();
}

void ConsumerImpl::Revoke(rd_kafka_topic_partition_list_t* partitions) {
  ++stats_.revocations;
  if (hooks_.before_revoke) {
    std::vector<int32_t> revoked;
    for (int i = 0; i < partitions->cnt; ++i) {
      revoked.push_back(partitions->elems[i].partition);
    }
    hooks_.before_revoke(revoked);
  }
  const bool lost = rd_kafka_assignment_lost(rk_.get());
  if (runner_ != nullptr) {
    SettleWorkers(partitions, lost);
  } else if (lost) {
    // Another consumer may own them already: leave their records alone.
    DropInFlight(partitions);
  } else if (handler_ == nullptr || hooks_.drop_in_flight_on_revoke) {
    DropInFlight(partitions);  // closing: nothing is in flight
  } else if (!in_flight_.empty()) {
    if (absl::Status s = ProcessInFlight(); !s.ok()) {
      callback_error_ = s;
      DropInFlight(partitions);
    }
  }
  // A member that found itself out of the group (MembershipHolds) before
  // librdkafka served the revocation must not commit: the coordinator no
  // longer counts it, and librdkafka can hold a synchronous commit from a
  // member without a group for good.
  const bool in_group = !lost && !out_of_group_;
  // In changelog mode the next owner starts from the changelog, not from
  // Kafka's offsets: a closing member does not wait for a commit (which
  // librdkafka can hold for good from a member that has left the group).
  const bool commit = in_group && !(closing_ && changelog_ != nullptr);
  if (in_group && (changelog_ != nullptr || options_.transactional_output) &&
      callback_error_.ok()) {
    // The next owner restores from the changelog: publish it first (and,
    // with transactional_output, whatever waits for transaction_interval).
    BatchReport published;
    if (absl::Status s = RelayOutbox(published); !s.ok()) {
      callback_error_ = s;
    } else if (changelog_ != nullptr) {
      CheckpointChangelogs(partitions);
    }
  }
  if (commit && !hooks_.skip_revoke_commit) {
    CommitEngineOffsets(partitions);
  }
  Release(partitions, lost);
  Unassign(partitions);
}

void ConsumerImpl::Release(const rd_kafka_topic_partition_list_t* partitions,
                           bool lost) {
  const auto& listener = lost ? options_.on_lost : options_.on_revoke;
  for (int i = 0; i < partitions->cnt; ++i) {
    const rd_kafka_topic_partition_t& tp = partitions->elems[i];
    assignment_.erase({tp.topic, tp.partition});
    restoring_.erase({tp.topic, tp.partition});
    if (changelog_ != nullptr) changelog_->Release(tp.partition);
    if (listener) {
      const std::string topic = tp.topic;
      absl::Status s = CallUserCode(lost ? "on_lost" : "on_revoke", [&] {
        listener(topic, tp.partition);
        return absl::OkStatus();
      });
      if (!s.ok()) NoteError(s);
    }
  }
}

void ConsumerImpl::CheckpointChangelogs(
    const rd_kafka_topic_partition_list_t* partitions) {
  for (int i = 0; i < partitions->cnt; ++i) {
    const rd_kafka_topic_partition_t& tp = partitions->elems[i];
    // A checkpoint only spares the next restart a read: its failure is
    // logged, and the revocation goes on.
    if (absl::Status s = changelog_->Checkpoint(tp.topic, tp.partition);
        !s.ok()) {
      NoteError(s);
    }
  }
}

void ConsumerImpl::Unassign(rd_kafka_topic_partition_list_t* partitions) {
  absl::Status status;
  if (Cooperative() && partitions != nullptr) {
    status = FromKafkaErrorObject(
        rd_kafka_incremental_unassign(rk_.get(), partitions),
        "releasing partitions");
  } else {
    status = FromKafkaError(rd_kafka_assign(rk_.get(), nullptr),
                            "releasing partitions");
    assignment_.clear();
    for (const auto& [tp, restoring] : restoring_) {
      if (changelog_ != nullptr) changelog_->Release(tp.second);
    }
    restoring_.clear();
  }
  if (!status.ok()) NoteError(status);
}

void ConsumerImpl::CommitEngineOffsets(
    const rd_kafka_topic_partition_list_t* partitions) {
  PartitionListPtr offsets(rd_kafka_topic_partition_list_new(0));
  for (int i = 0; i < partitions->cnt; ++i) {
    const rd_kafka_topic_partition_t& tp = partitions->elems[i];
    // A partition restored halfway holds a copy of no member's.
    if (restoring_.contains({tp.topic, tp.partition})) continue;
    absl::StatusOr<std::optional<int64_t>> offset =
        EngineOffset(tp.topic, tp.partition);
    if (!offset.ok() || !offset->has_value()) continue;
    rd_kafka_topic_partition_list_add(offsets.get(), tp.topic, tp.partition)
        ->offset = **offset + 1;
  }
  if (offsets->cnt == 0) return;
  NoteCommit(rd_kafka_commit(rk_.get(), offsets.get(), /*async=*/0));
}

absl::StatusOr<std::optional<RestoreReport>> ConsumerImpl::StepCheck(
    const std::string& topic, int32_t partition, bool whole) {
  const absl::Time begin = absl::Now();
  whole = whole || hooks_.restore_in_callback;
  absl::StatusOr<std::optional<RestoreReport>> report = changelog_->CheckStep(
      topic, partition, whole ? 0 : options_.restore_step_records);
  stats_.restore_time += absl::Now() - begin;
  stats_.engine_time += absl::Now() - begin;
  if (!report.ok() || !report->has_value()) return report;
  NoteCheck(**report);
  return report;
}

void ConsumerImpl::NoteCheck(const RestoreReport& report) {
  ++stats_.restore_checks;
  stats_.restore_records_read += report.records_read;
  if (report.restored) {
    ++stats_.restores;
    stats_.restored_records += report.state_entries + report.dedupe_records;
    if (options_.logger != nullptr) {
      Log(LogSeverity::kInfo,
          absl::StrCat(
              "idem: restored ", report.topic, "/", report.partition,
              report.from_standby ? " from its standby copy and changelog "
                                  : " from changelog ",
              options_.changelog_topic, " at offset ",
              report.offset.has_value() ? absl::StrCat(*report.offset)
                                        : std::string("(none)"),
              ": ", report.state_entries, " state entries, ",
              report.dedupe_records, " dedupe records, ", report.orphans,
              " orphans, ", report.records_read, " records read in ",
              absl::FormatDuration(report.duration)));
    }
  }
  if (options_.on_restore) {
    absl::Status s = CallUserCode("on_restore", [&] {
      options_.on_restore(report);
      return absl::OkStatus();
    });
    if (!s.ok()) NoteError(s);
  }
}

absl::Status ConsumerImpl::RecheckPartitions() {
  absl::btree_map<TopicPartition, int64_t> from;
  for (const TopicPartition& tp : assignment_) {
    // A check under way reads the changelog as it is now anyway.
    if (restoring_.contains(tp)) continue;
    absl::StatusOr<std::optional<RestoreReport>> checked =
        StepCheck(tp.first, tp.second, /*whole=*/true);
    if (!checked.ok()) {
      const absl::StatusCode code = absl::IsDeadlineExceeded(checked.status())
                                        ? absl::StatusCode::kUnavailable
                                        : checked.status().code();
      return absl::Status(
          code, absl::StrCat("changelog mode: checking ", tp.first, "/",
                             tp.second, " against its changelog again: ",
                             checked.status().message()));
    }
    const std::optional<int64_t>& offset = (**checked).offset;
    from[tp] = offset.has_value() ? *offset + 1 : RD_KAFKA_OFFSET_BEGINNING;
  }
  // What was fetched beyond the changelog's commits is read again.
  SeekTo(from);
  recheck_ = false;
  return absl::OkStatus();
}

}  // namespace idem::kafka
