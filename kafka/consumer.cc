// ConsumerImpl's poll loop (kafka/consumer_impl.h): Consumer::Create,
// PollBatch with one worker, offsets committed to Kafka, rewinds, pause and
// resume, librdkafka's callbacks.

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/absl_view.h"
#include "engine/user_code.h"
#include "kafka/consumer_impl.h"
#include "kafka/consumer_options_check.h"
#include "kafka/record_ids.h"

namespace idem::kafka {
namespace {

// Run's pause after a failed PollBatch with a transient cause, doubled
// after each further failure up to the bound, and reset by a success.
constexpr absl::Duration kRunFirstBackoff = absl::Milliseconds(100);
// (At most 1 s: a consumer resumes within about that of its brokers'
// return after an outage, docs/operations.md.)
constexpr absl::Duration kRunMaxBackoff = absl::Seconds(1);

}  // namespace

absl::Status ConsumerImpl::Init(std::unique_ptr<OutboxRelay> relay,
                                std::unique_ptr<ChangelogKeeper> changelog) {
  relay_ = std::move(relay);
  changelog_ = std::move(changelog);
  if (changelog_ != nullptr && relay_ != nullptr &&
      options_.transactional_output && !hooks_.keep_outbox_on_start) {
    // What the store's outbox holds was left by an earlier run. The relay
    // found its progress (OutboxRelay::Create): entries up to it were
    // published in committed transactions; the rest were not, and, since
    // a transaction carries whole commits with their changelog records,
    // neither were their commits' changelog records. Each partition's check
    // finds the store ahead of its changelog and restores it, and those
    // records are processed again (by whoever owns them now) and emit
    // again: the old copies go unpublished.
    DropOutbox();
  }
  dead_letter_ = options_.dead_letter;
  if (options_.timer_handler) {
    TimerPump::Handler fire = options_.timer_handler;
    if (changelog_ != nullptr) {
      // In changelog mode a fire's changes reach the changelog too.
      fire = [keeper = changelog_.get(), handler = options_.timer_handler](
                 const TimerFire& timer, Txn& txn) {
        return keeper->HandleFire(timer, txn, handler);
      };
    }
    timer_pump_ = std::make_unique<TimerPump>(
        engine_, std::move(fire), static_cast<size_t>(options_.max_batch));
  }
  if (options_.workers > 1) {
    runner_ = std::make_unique<ParallelRunner>(
        options_.workers, options_.ordering, options_.max_batch,
        hooks_.lane_per_record);
  }
  ConfPtr conf(rd_kafka_conf_new());
  ConfigList config = {{"auto.offset.reset", "earliest"},
                       {"reconnect.backoff.max.ms", kReconnectBackoffMaxMs}};
  config.insert(config.end(), options_.kafka_config.begin(),
                options_.kafka_config.end());
  config.insert(config.end(), {{"bootstrap.servers", options_.brokers},
                               {"group.id", options_.group_id},
                               {"enable.auto.commit", "false"},
                               {"enable.auto.offset.store", "false"}});
  if (options_.on_statistics) {
    config.push_back(
        {"statistics.interval.ms",
         absl::StrCat(ToKafkaMillis(options_.statistics_interval))});
    rd_kafka_conf_set_stats_cb(conf.get(), &ConsumerImpl::OnStatistics);
  }
  if (options_.logger != nullptr) {
    rd_kafka_conf_set_log_cb(conf.get(), &ConsumerImpl::OnLog);
  }
  if (absl::Status s = SetConfig(conf.get(), config); !s.ok()) return s;
  rd_kafka_conf_set_opaque(conf.get(), this);
  rd_kafka_conf_set_rebalance_cb(conf.get(), &ConsumerImpl::OnRebalance);
  rd_kafka_conf_set_offset_commit_cb(conf.get(), &ConsumerImpl::OnCommit);
  rd_kafka_conf_set_error_cb(conf.get(), &ConsumerImpl::OnError);
  absl::StatusOr<HandlePtr> rk = NewHandle(RD_KAFKA_CONSUMER, std::move(conf));
  if (!rk.ok()) return rk.status();
  rk_ = *std::move(rk);
  rd_kafka_poll_set_consumer(rk_.get());
  PartitionListPtr topics(
      rd_kafka_topic_partition_list_new(options_.topics.size()));
  for (const std::string& topic : options_.topics) {
    rd_kafka_topic_partition_list_add(topics.get(), topic.c_str(),
                                      RD_KAFKA_PARTITION_UA);
  }
  return FromKafkaError(rd_kafka_subscribe(rk_.get(), topics.get()),
                        "subscribing");
}

absl::StatusOr<BatchReport> ConsumerImpl::PollBatch(Handler handler) {
  if (rk_ == nullptr) {
    return absl::FailedPreconditionError("the consumer is closed");
  }
  if (!failed_.ok()) return failed_;
  if (!unknown_since_.empty()) {
    if (absl::Status s = CheckUnknownTopics(); !s.ok()) return s;
  }
  if (recheck_) {
    if (absl::Status s = RecheckPartitions(); !s.ok()) return s;
  }
  if (!restoring_.empty()) {
    if (absl::Status s = StepRestores(); !s.ok()) return s;
  }
  BatchReport report;
  if (OutboxFull()) {
    // Backpressure: only publish, until the outbox is below the bound.
    if (absl::Status s = RelayOutbox(report); !s.ok()) return s;
    if (OutboxFull()) {
      PauseInput();
      if (absl::Status s = PollPaused(); !s.ok()) return s;
      return report;
    }
  }
  ResumeInput();
  handler_ = &handler;
  report_ = &report;
  absl::Cleanup reset = [this] {
    handler_ = nullptr;
    report_ = nullptr;
  };

  if (absl::Status s =
          runner_ != nullptr ? PollWithWorkers() : PollAndProcess();
      !s.ok()) {
    return s;
  }
  // The held partitions are checked again at the next call first.
  if (UnfencedByRevocation()) return report;
  if (timer_pump_ != nullptr) FireDueTimers();
  if (RoundDue()) {
    if (absl::Status s = RelayOutbox(report); !s.ok()) return s;
  }
  if (changelog_ != nullptr) FollowStandbys();
  return report;
}

absl::Status ConsumerImpl::PollAndProcess() {
  // While checks go on between polls, a call does not wait for records:
  // the next step is due.
  absl::Duration wait =
      restoring_.empty() ? options_.poll_timeout : absl::ZeroDuration();
  while (static_cast<int>(in_flight_.size()) < options_.max_batch) {
    MessagePtr message = Poll(wait);
    wait = absl::ZeroDuration();
    if (!callback_error_.ok()) return FailFromCallback();
    if (UnfencedByRevocation()) {
      // Nothing more is processed before the held partitions' check, which
      // reads from the changelog's commits what this drops.
      in_flight_.clear();
      return absl::OkStatus();
    }
    if (message == nullptr) break;
    if (message->err == RD_KAFKA_RESP_ERR_NO_ERROR &&
        OfRestoringPartition(*message)) {
      continue;  // fetched before its pause took effect
    }
    if (message->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      in_flight_.push_back(std::move(message));
      if (in_flight_.size() == 1 && hooks_.after_first_record) {
        hooks_.after_first_record();
      }
    } else if (absl::Status s = OnMessageError(*message); !s.ok()) {
      Rewind();
      return s;
    }
  }
  if (!failed_.ok()) {
    in_flight_.clear();
    return failed_;
  }
  if (absl::Status s = ProcessInFlight(); !s.ok()) {
    Rewind();
    return s;
  }
  return absl::OkStatus();
}

absl::Status ConsumerImpl::PollPaused() {
  MessagePtr message = Poll(options_.poll_timeout);
  if (message == nullptr) return absl::OkStatus();
  if (message->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return OnMessageError(*message);
  }
  // A record of a partition assigned meanwhile is read again later, not
  // dropped.
  if (!OfRestoringPartition(*message)) {
    SeekTo({{{rd_kafka_topic_name(message->rkt), message->partition},
             message->offset}});
  }
  return absl::OkStatus();
}

MessagePtr ConsumerImpl::Poll(absl::Duration wait) {
  const absl::Duration engine_before = stats_.engine_time;
  const absl::Time start = absl::Now();
  MessagePtr message(rd_kafka_consumer_poll(rk_.get(), ToKafkaMillis(wait)));
  // Engine time spent in rebalance callbacks is not Kafka's.
  stats_.kafka_time +=
      (absl::Now() - start) - (stats_.engine_time - engine_before);
  return message;
}

absl::Status ConsumerImpl::Run(Handler handler) {
  absl::Duration backoff = kRunFirstBackoff;
  while (!stop_.load(std::memory_order_acquire)) {
    absl::StatusOr<BatchReport> report = PollBatch(handler);
    if (report.ok()) {
      backoff = kRunFirstBackoff;
      continue;
    }
    if (!failed_.ok() || !RetriableInRun(report.status())) {
      return report.status();
    }
    ++stats_.run_retries;
    NoteError(report.status());
    SleepUnlessStopped(backoff);
    backoff = std::min(2 * backoff, kRunMaxBackoff);
  }
  return absl::OkStatus();
}

bool ConsumerImpl::RetriableInRun(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:        // brokers, or the store
    case absl::StatusCode::kDeadlineExceeded:   // a request timed out
    case absl::StatusCode::kResourceExhausted:  // a full disk
    case absl::StatusCode::kUnknown:            // a failed sync: retry
      return true;
    default:
      return false;
  }
}

void ConsumerImpl::SleepUnlessStopped(absl::Duration duration) {
  const absl::Time end = absl::Now() + duration;
  while (!stop_.load(std::memory_order_acquire) && absl::Now() < end) {
    absl::SleepFor(std::min(absl::Milliseconds(50), end - absl::Now()));
  }
}

absl::Status ConsumerImpl::Close() {
  if (rk_ == nullptr) return absl::OkStatus();
  closing_ = true;
  if (rd_kafka_assignment_lost(rk_.get())) expelled_ = true;
  if (expelled_) {
    CloseExpelled();
    return absl::OkStatus();
  }
  // Revokes the assignment (committing its offsets) and leaves the group.
  absl::Status status =
      FromKafkaError(rd_kafka_consumer_close(rk_.get()), "closing");
  in_flight_.clear();  // messages go before the handle that owns them
  assignment_.clear();
  restoring_.clear();
  rk_.reset();
  return status;
}

void ConsumerImpl::CloseExpelled() {
  // The group no longer counts this member: there is nothing to commit and
  // no group to leave. librdkafka's close could wait for good: the
  // revocation callback it runs unassigns, and that call can reach a group
  // subsystem that has terminated meanwhile (librdkafka 2.0.2). So the
  // partitions are released here as a lost assignment is, and the handle
  // is destroyed without librdkafka's close.
  PartitionListPtr held(
      rd_kafka_topic_partition_list_new(static_cast<int>(assignment_.size())));
  for (const TopicPartition& tp : assignment_) {
    rd_kafka_topic_partition_list_add(held.get(), tp.first.c_str(), tp.second);
  }
  ++stats_.revocations;
  if (runner_ != nullptr) {
    SettleWorkers(held.get(), /*lost=*/true);
  } else {
    DropInFlight(held.get());
  }
  Release(held.get(), /*lost=*/true);
  in_flight_.clear();  // messages go before the handle that owns them
  rd_kafka_destroy_flags(rk_.release(), RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
}

ConsumerStats ConsumerImpl::stats() const {
  ConsumerStats stats = stats_;
  stats.partitions_restoring = static_cast<int64_t>(restoring_.size());
  for (const TopicPartition& tp : assignment_) {
    PartitionLag lag;
    lag.topic = tp.first;
    lag.partition = tp.second;
    int64_t low = -1, high = -1;
    // Cached from the last fetch response: no round trip.
    if (rk_ != nullptr &&
        rd_kafka_get_watermark_offsets(rk_.get(), tp.first.c_str(), tp.second,
                                       &low,
                                       &high) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        high >= 0) {
      lag.high_watermark = high;
    }
    absl::StatusOr<std::optional<int64_t>> offset =
        EngineOffset(tp.first, tp.second);
    if (offset.ok() && offset->has_value()) lag.next_offset = **offset + 1;
    if (lag.high_watermark >= 0) {
      lag.lag = lag.next_offset >= 0
                    ? std::max<int64_t>(0, lag.high_watermark - lag.next_offset)
                    : lag.high_watermark;
    }
    stats.lag.push_back(std::move(lag));
  }
  return stats;
}

void ConsumerImpl::PauseOrResume(const TopicPartition& partition, bool pause) {
  if (absl::Status s = SetPaused(partition.first, partition.second, pause);
      !s.ok()) {
    NoteError(s);
  }
}

absl::Status ConsumerImpl::SetPaused(const std::string& topic,
                                     int32_t partition, bool pause) {
  PartitionListPtr list(rd_kafka_topic_partition_list_new(1));
  rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), partition);
  const rd_kafka_resp_err_t err =
      pause ? rd_kafka_pause_partitions(rk_.get(), list.get())
            : rd_kafka_resume_partitions(rk_.get(), list.get());
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return FromKafkaError(err, pause ? "pausing" : "resuming");
  }
  return FromKafkaError(list->elems[0].err, pause ? "pausing" : "resuming");
}

absl::Status ConsumerImpl::PauseOrResume(const std::string& topic,
                                         int32_t partition, bool pause) {
  const char* call = pause ? "Pause" : "Resume";
  if (rk_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(call, ": the consumer is closed"));
  }
  if (!assignment_.contains({topic, partition})) {
    return absl::NotFoundError(absl::StrCat(call, ": ", topic, "/", partition,
                                            " is not assigned to this "
                                            "consumer"));
  }
  if (auto it = restoring_.find({topic, partition}); it != restoring_.end()) {
    // Paused until its check is done; then as the application asked.
    it->second.paused_by_application = pause;
    return absl::OkStatus();
  }
  return SetPaused(topic, partition, pause);
}

void ConsumerImpl::OnLog(const rd_kafka_t* rk, int level, const char* facility,
                         const char* text) {
  Self(rd_kafka_opaque(rk))
      ->Log(SeverityOfSyslogLevel(level),
            absl::StrCat("librdkafka ", facility, ": ", text));
}

int ConsumerImpl::OnStatistics(rd_kafka_t*, char* json, size_t length,
                               void* opaque) {
  ConsumerImpl* self = Self(opaque);
  absl::Status s = CallUserCode("ConsumerOptions::on_statistics", [&] {
    self->options_.on_statistics(std::string_view(json, length));
    return absl::OkStatus();
  });
  if (!s.ok()) self->NoteError(s);
  return 0;  // librdkafka frees `json`
}

void ConsumerImpl::NoteCommit(rd_kafka_resp_err_t err) {
  // _NO_OFFSET: there was nothing to commit, which is not an error.
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR ||
      err == RD_KAFKA_RESP_ERR__NO_OFFSET) {
    return;
  }
  ++stats_.kafka_commit_errors;
  stats_.last_kafka_error =
      FromKafkaError(err, "committing offsets to Kafka").ToString();
}

absl::Status ConsumerImpl::ProcessInFlight() {
  if (in_flight_.empty()) return absl::OkStatus();
  std::vector<Record> records;
  records.reserve(in_flight_.size());
  for (const MessagePtr& message : in_flight_) {
    records.push_back(RecordFromMessage(*message));
  }
  const absl::Time start = absl::Now();
  auto with_changelog = [this](const Record& record, Txn& txn) {
    return changelog_->Handle(record, txn, *handler_);
  };
  absl::StatusOr<ProcessedBatch> batch = ProcessRecords(
      *engine_, absl::MakeSpan(records), options_, dead_letter_,
      changelog_ != nullptr ? Handler(with_changelog) : *handler_);
  stats_.engine_time += absl::Now() - start;
  if (!batch.ok()) return batch.status();
  in_flight_.clear();
  if (absl::Status s = MarkHandled(batch->next_offsets); !s.ok()) return s;
  Count(batch->report);
  if (options_.commit_to_kafka) {
    CommitToKafka(batch->next_offsets);
  }
  return absl::OkStatus();
}

absl::Status ConsumerImpl::MarkHandled(
    const absl::btree_map<TopicPartition, int64_t>& next_offsets) {
  if (changelog_ == nullptr) return absl::OkStatus();
  for (const auto& [tp, next] : next_offsets) {
    if (absl::Status s = changelog_->MarkHandled(tp.first, tp.second, next - 1);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

void ConsumerImpl::Count(const BatchReport& done) {
  if (report_ != nullptr) AddRecordCounts(done, *report_);
  stats_.records += done.records;
  stats_.processed += done.processed;
  stats_.duplicates += done.duplicates;
  stats_.dead_lettered += done.dead_lettered;
  stats_.retries += done.retries;
  stats_.non_retriable += done.non_retriable;
  ++stats_.batches;
}

void ConsumerImpl::CommitToKafka(
    const absl::btree_map<TopicPartition, int64_t>& next) {
  PartitionListPtr offsets(rd_kafka_topic_partition_list_new(next.size()));
  for (const auto& [tp, offset] : next) {
    rd_kafka_topic_partition_list_add(offsets.get(), tp.first.c_str(),
                                      tp.second)
        ->offset = offset;
  }
  const absl::Time start = absl::Now();
  NoteCommit(rd_kafka_commit(rk_.get(), offsets.get(), /*async=*/1));
  stats_.kafka_time += absl::Now() - start;
}

void ConsumerImpl::DropInFlight(
    const rd_kafka_topic_partition_list_t* partitions) {
  std::erase_if(in_flight_, [&](const MessagePtr& m) {
    if (partitions == nullptr) return true;
    for (int i = 0; i < partitions->cnt; ++i) {
      if (partitions->elems[i].partition == m->partition &&
          std::strcmp(partitions->elems[i].topic,
                      rd_kafka_topic_name(m->rkt)) == 0) {
        return true;
      }
    }
    return false;
  });
}

void ConsumerImpl::Rewind() {
  absl::btree_map<TopicPartition, int64_t> first;
  for (const MessagePtr& m : in_flight_) {
    TopicPartition tp{rd_kafka_topic_name(m->rkt), m->partition};
    if (!assignment_.contains(tp)) continue;
    auto [it, inserted] = first.emplace(tp, m->offset);
    if (!inserted) it->second = std::min(it->second, m->offset);
  }
  in_flight_.clear();
  SeekTo(first);
}

void ConsumerImpl::SeekTo(
    const absl::btree_map<TopicPartition, int64_t>& first) {
  if (first.empty()) return;
  PartitionListPtr seek(rd_kafka_topic_partition_list_new(first.size()));
  for (const auto& [tp, offset] : first) {
    rd_kafka_topic_partition_list_add(seek.get(), tp.first.c_str(), tp.second)
        ->offset = offset;
  }
  // The seeks are not waited for. librdkafka takes each seek's version
  // barrier in this call, so from its return the consumer drops whatever
  // was fetched before it, and the fetcher starts again at the offset once
  // its broker thread serves the seek. And librdkafka 2.0.2 waits for the
  // replies timeout_ms microseconds, not milliseconds
  // (confluentinc/librdkafka#4230, fixed in 2.1.0): a wait of 10 s lasted
  // 10 ms, so a broker thread busy for longer (a loaded machine, a
  // reconnect after an outage) made a seek that takes effect anyway look
  // failed, and the consumer stop for good.
  const int wait_ms = hooks_.seek_waits_for_replies ? 10000 : 0;
  if (absl::Status s = FromKafkaErrorObject(
          rd_kafka_seek_partitions(rk_.get(), seek.get(), wait_ms),
          "rewinding after a failed batch");
      !s.ok()) {
    // Without the rewind the records could be skipped: stop for good.
    Fail(s);
  }
}

absl::Status ConsumerImpl::FailFromCallback() {
  absl::Status status = std::exchange(callback_error_, absl::OkStatus());
  Rewind();
  return status;
}

absl::StatusOr<std::unique_ptr<Consumer>> CreateConsumerWithHooks(
    Engine* engine, const ConsumerOptions& options,
    const ConsumerHooks& hooks) {
  if (engine == nullptr) {
    return absl::InvalidArgumentError("Consumer::Create: engine is null");
  }
  if (absl::Status s =
          ValidateConsumerOptions(options, hooks.plain_transactional_output);
      !s.ok()) {
    return s;
  }
  auto consumer = std::make_unique<ConsumerImpl>(engine, options, hooks);
  std::unique_ptr<ChangelogKeeper> changelog;
  if (!options.changelog_topic.empty()) {
    // Borrows the consumer's copy of the options, which outlives it.
    absl::StatusOr<std::unique_ptr<ChangelogKeeper>> created =
        ChangelogKeeper::Create(engine, consumer->options(), hooks);
    if (!created.ok()) return created.status();
    changelog = *std::move(created);
  }
  std::unique_ptr<OutboxRelay> relay;
  if (options.relay_outbox) {
    absl::StatusOr<std::unique_ptr<OutboxRelay>> created =
        consumer->CreateRelay(changelog.get());
    if (!created.ok()) return created.status();
    relay = *std::move(created);
  }
  if (absl::Status s = consumer->Init(std::move(relay), std::move(changelog));
      !s.ok()) {
    return s;
  }
  return consumer;
}

absl::StatusOr<std::unique_ptr<Consumer>> Consumer::Create(
    Engine* engine, const ConsumerOptions& options) {
  return CreateConsumerWithHooks(engine, options, ConsumerHooks());
}

}  // namespace idem::kafka
