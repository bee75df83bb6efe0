// Consumer: librdkafka's high-level consumer around ProcessRecords
// (kafka/batch_processor.h). Polling, rebalance, error and commit callbacks
// run on the caller's thread: they are served by rd_kafka_consumer_poll
// (rd_kafka_poll_set_consumer). With one worker (the default) records are
// processed there too, so a revocation can only arrive while a batch is
// being collected; with more, a ParallelRunner (kafka/parallel_runner.h)
// processes them on its threads while the caller's thread polls, and a
// revocation waits for (or cancels) the revoked partitions' records. The log
// callback (OnLog) runs on librdkafka's own threads and touches only the
// logger, which is constant.

#include "idem/kafka/consumer.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/absl_view.h"
#include "idem/kafka/outbox_relay.h"
#include "kafka/batch_processor.h"
#include "kafka/changelog_keeper.h"
#include "kafka/consumer_hooks.h"
#include "kafka/consumer_options.h"
#include "kafka/parallel_runner.h"
#include "kafka/rdkafka_util.h"
#include "kafka/record_ids.h"
#include "kafka/user_code.h"

namespace idem::kafka {
namespace {

// How long a call with workers waits for a record while they are busy,
// before it looks at them again.
constexpr absl::Duration kWorkerPollWait = absl::Milliseconds(5);

class ConsumerImpl final : public Consumer {
 public:
  ConsumerImpl(Engine* engine, const ConsumerOptions& options,
               const ConsumerHooks& hooks)
      : engine_(engine), options_(options), hooks_(hooks) {}

  ~ConsumerImpl() override {
    // Leaving the group releases the partitions at once; its error has
    // nowhere to go from a destructor.
    Close().IgnoreError();
  }

  absl::Status Init(std::unique_ptr<OutboxRelay> relay,
                    std::unique_ptr<ChangelogKeeper> changelog) {
    relay_ = std::move(relay);
    changelog_ = std::move(changelog);
    dead_letter_ = options_.dead_letter;
    if (options_.workers > 1) {
      runner_ = std::make_unique<ParallelRunner>(
          options_.workers, options_.ordering, options_.max_batch,
          hooks_.lane_per_record);
    }
    ConfPtr conf(rd_kafka_conf_new());
    ConfigList config = {{"auto.offset.reset", "earliest"}};
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
    absl::StatusOr<HandlePtr> rk =
        NewHandle(RD_KAFKA_CONSUMER, std::move(conf));
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

  absl::StatusOr<BatchReport> PollBatch(Handler handler) override {
    if (rk_ == nullptr) {
      return absl::FailedPreconditionError("the consumer is closed");
    }
    if (!failed_.ok()) return failed_;
    BatchReport report;
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
    if (absl::Status s = RelayOutbox(report); !s.ok()) return s;
    if (changelog_ != nullptr) FollowStandbys();
    return report;
  }

  // One call on the polling thread alone: waits for the first record, takes
  // what is already fetched, up to max_batch, and processes it.
  absl::Status PollAndProcess() {
    absl::Duration wait = options_.poll_timeout;
    while (static_cast<int>(in_flight_.size()) < options_.max_batch) {
      MessagePtr message = Poll(wait);
      wait = absl::ZeroDuration();
      if (!callback_error_.ok()) return FailFromCallback();
      if (message == nullptr) break;
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

  // One call with workers (ConsumerOptions::workers): takes records while
  // the workers run them, waits until every one is handled, then commits
  // the partitions' watermarks (or reads them again from the first record
  // not handled).
  absl::Status PollWithWorkers() {
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

  // Hands records to the workers until 2 * max_batch * workers were taken
  // (as many as `workers` partitions hold before they are paused), or none
  // arrives while they are idle. Under Ordering::kPartition, a
  // partition with 2 * max_batch records waiting (a full group queued
  // behind the one its lane runs) is paused (librdkafka then drops what it
  // fetched of it, and fetches it again from the last record taken) until
  // half of them are handled, so that one busy partition does not hold back
  // the others queued behind it. Under kKey a partition's records spread over
  // many lanes, so none is paused: fetching again after a pause costs more than
  // it saves there.
  absl::Status TakeRecords(absl::btree_set<TopicPartition>& paused) {
    const int64_t limit = 2 * int64_t{options_.max_batch} * options_.workers;
    absl::Duration wait = options_.poll_timeout;
    for (int64_t taken = 0; taken < limit;) {
      MessagePtr message = Poll(wait);
      if (!callback_error_.ok()) {
        return std::exchange(callback_error_, absl::OkStatus());
      }
      if (!failed_.ok()) return failed_;
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

  // Resumes the partitions TakeRecords paused that have fewer than
  // max_batch records waiting.
  void ResumeDrained(absl::btree_set<TopicPartition>& paused) {
    for (auto it = paused.begin(); it != paused.end();) {
      if (runner_->Waiting(*it) >= options_.max_batch) {
        ++it;
        continue;
      }
      if (assignment_.contains(*it)) PauseOrResume(*it, false);
      it = paused.erase(it);
    }
  }

  // On a worker: one group of a lane's records (kafka/parallel_runner.h).
  absl::StatusOr<ProcessedBatch> RunGroup(const ParallelRunner::Group& group) {
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

  // After the workers are idle: counts what they did, brings the engine's
  // offsets to the watermarks (Ordering::kKey) and commits them to Kafka,
  // and reads partitions with records not handled again from the first.
  absl::Status FinishWorkerRun() {
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

  // Ordering::kKey: a partition's records commit with the watermark their
  // group began at (ProcessControls::stored_offset), so once all of them are
  // handled the engine's offset is set to the last. REQUIRES: none of the
  // partition's records is being handled.
  absl::Status CatchUpEngineOffset(const TopicPartition& partition,
                                   int64_t next) {
    if (options_.ordering != Ordering::kKey) return absl::OkStatus();
    absl::StatusOr<std::optional<int64_t>> current =
        engine_->CommittedOffset(partition.first, partition.second);
    if (!current.ok()) return current.status();
    if (current->has_value() && **current >= next - 1) return absl::OkStatus();
    return engine_->SetCommittedOffset(partition.first, partition.second,
                                       next - 1);
  }

  // Polls librdkafka once, waiting up to `wait`; serves its callbacks.
  MessagePtr Poll(absl::Duration wait) {
    const absl::Duration engine_before = stats_.engine_time;
    const absl::Time start = absl::Now();
    MessagePtr message(rd_kafka_consumer_poll(rk_.get(), ToKafkaMillis(wait)));
    // Engine time spent in rebalance callbacks is not Kafka's.
    stats_.kafka_time +=
        (absl::Now() - start) - (stats_.engine_time - engine_before);
    return message;
  }

  // Brings the standby copies up to date when their interval is due. A
  // copy's error is counted, and does not stop processing.
  void FollowStandbys() {
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

  absl::Status Run(Handler handler) override {
    while (!stop_.load(std::memory_order_acquire)) {
      absl::StatusOr<BatchReport> report = PollBatch(handler);
      if (!report.ok()) return report.status();
    }
    return absl::OkStatus();
  }

  void Stop() override { stop_.store(true, std::memory_order_release); }

  absl::Status Close() override {
    if (rk_ == nullptr) return absl::OkStatus();
    // Revokes the assignment (committing its offsets) and leaves the group.
    absl::Status status =
        FromKafkaError(rd_kafka_consumer_close(rk_.get()), "closing");
    in_flight_.clear();  // messages go before the handle that owns them
    assignment_.clear();
    rk_.reset();
    return status;
  }

  std::vector<std::pair<std::string, int32_t>> Assignment() const override {
    return {assignment_.begin(), assignment_.end()};
  }

  const ConsumerOptions& options() const { return options_; }

  ConsumerStats stats() const override {
    ConsumerStats stats = stats_;
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
          engine_->CommittedOffset(tp.first, tp.second);
      if (offset.ok() && offset->has_value()) lag.next_offset = **offset + 1;
      if (lag.high_watermark >= 0) {
        lag.lag =
            lag.next_offset >= 0
                ? std::max<int64_t>(0, lag.high_watermark - lag.next_offset)
                : lag.high_watermark;
      }
      stats.lag.push_back(std::move(lag));
    }
    return stats;
  }

  absl::Status Pause(const std::string& topic, int32_t partition) override {
    return PauseOrResume(topic, partition, /*pause=*/true);
  }

  absl::Status Resume(const std::string& topic, int32_t partition) override {
    return PauseOrResume(topic, partition, /*pause=*/false);
  }

 private:
  // The consumer's own pause of a partition with enough records waiting
  // (TakeRecords); an error is counted.
  void PauseOrResume(const TopicPartition& partition, bool pause) {
    PartitionListPtr list(rd_kafka_topic_partition_list_new(1));
    rd_kafka_topic_partition_list_add(list.get(), partition.first.c_str(),
                                      partition.second);
    const rd_kafka_resp_err_t err =
        pause ? rd_kafka_pause_partitions(rk_.get(), list.get())
              : rd_kafka_resume_partitions(rk_.get(), list.get());
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      NoteError(FromKafkaError(err, pause ? "pausing" : "resuming"));
    }
  }

  absl::Status PauseOrResume(const std::string& topic, int32_t partition,
                             bool pause) {
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

  static ConsumerImpl* Self(void* opaque) {
    return static_cast<ConsumerImpl*>(opaque);
  }

  static void OnRebalance(rd_kafka_t*, rd_kafka_resp_err_t err,
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

  static void OnCommit(rd_kafka_t*, rd_kafka_resp_err_t err,
                       rd_kafka_topic_partition_list_t*, void* opaque) {
    Self(opaque)->NoteCommit(err);
  }

  static void OnError(rd_kafka_t* rk, int err, const char* reason,
                      void* opaque) {
    ConsumerImpl* self = Self(opaque);
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
      char fatal[512];
      rd_kafka_fatal_error(rk, fatal, sizeof(fatal));
      self->failed_ = absl::AbortedError(
          absl::StrCat("fatal Kafka consumer error: ", fatal));
      return;
    }
    self->NoteError(absl::UnavailableError(reason));
  }

  // From librdkafka's threads: only the constant logger is touched.
  static void OnLog(const rd_kafka_t* rk, int level, const char* facility,
                    const char* text) {
    ConsumerImpl* self = Self(rd_kafka_opaque(rk));
    CallUserCode("ConsumerOptions::logger", [&] {
      self->options_.logger->Log(
          SeverityOfSyslogLevel(level),
          absl::StrCat("librdkafka ", facility, ": ", text));
      return absl::OkStatus();
    }).IgnoreError();  // a logger that throws loses the line
  }

  // Served by rd_kafka_consumer_poll, on the polling thread.
  static int OnStatistics(rd_kafka_t*, char* json, size_t length,
                          void* opaque) {
    ConsumerImpl* self = Self(opaque);
    absl::Status s = CallUserCode("ConsumerOptions::on_statistics", [&] {
      self->options_.on_statistics(std::string_view(json, length));
      return absl::OkStatus();
    });
    if (!s.ok()) self->NoteError(s);
    return 0;  // librdkafka frees `json`
  }

  void NoteError(const absl::Status& status) {
    ++stats_.kafka_errors;
    stats_.last_kafka_error = status.ToString();
  }

  absl::Status OnMessageError(const rd_kafka_message_t& message) {
    switch (message.err) {
      case RD_KAFKA_RESP_ERR__PARTITION_EOF:
        return absl::OkStatus();
      case RD_KAFKA_RESP_ERR__FATAL:
        failed_ = absl::AbortedError(absl::StrCat(
            "fatal Kafka consumer error: ", rd_kafka_message_errstr(&message)));
        return failed_;
      default:
        // Transient (librdkafka retries) or per-topic, e.g. an unknown topic.
        NoteError(absl::UnavailableError(rd_kafka_message_errstr(&message)));
        return absl::OkStatus();
    }
  }

  // Starts each assigned partition at the engine's offset + 1.
  void Assign(rd_kafka_topic_partition_list_t* partitions) {
    ++stats_.assignments;
    PartitionListPtr group;
    if (options_.check_group_offsets) {
      group.reset(rd_kafka_topic_partition_list_copy(partitions));
      const rd_kafka_resp_err_t err =
          rd_kafka_committed(rk_.get(), group.get(), /*timeout_ms=*/10000);
      if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        NoteError(FromKafkaError(err, "reading the group's offsets"));
        group.reset();
      }
    }
    for (int i = 0; i < partitions->cnt; ++i) {
      rd_kafka_topic_partition_t& tp = partitions->elems[i];
      PartitionStart start;
      start.topic = tp.topic;
      start.partition = tp.partition;
      const absl::Time begin = absl::Now();
      absl::StatusOr<std::optional<int64_t>> engine_offset =
          engine_->CommittedOffset(tp.topic, tp.partition);
      stats_.engine_time += absl::Now() - begin;
      if (engine_offset.ok() && changelog_ != nullptr) {
        engine_offset = CheckChangelog(tp.topic, tp.partition);
      }
      if (!engine_offset.ok()) {
        // The consumer cannot tell where its state is: it stops for good.
        failed_ = engine_offset.status();
        callback_error_ = failed_;
      } else {
        start.engine_offset = *engine_offset;
      }
      if (group != nullptr && group->elems[i].offset >= 0) {
        start.group_next_offset = group->elems[i].offset;
      }
      if (start.engine_offset.has_value() && !hooks_.ignore_engine_offsets) {
        start.start_offset = *start.engine_offset + 1;
        tp.offset = start.start_offset;
      } else if (changelog_ != nullptr) {
        // The changelog holds nothing of it: everything is to be processed.
        start.start_offset = 0;
        tp.offset = RD_KAFKA_OFFSET_BEGINNING;
      } else {
        tp.offset = RD_KAFKA_OFFSET_INVALID;  // group offset, then reset
      }
      assignment_.emplace(tp.topic, tp.partition);
      if (options_.on_assign) {
        absl::Status s = CallUserCode("on_assign", [&] {
          options_.on_assign(start);
          return absl::OkStatus();
        });
        if (!s.ok()) NoteError(s);
      }
    }
    absl::Status status =
        Cooperative() ? FromKafkaErrorObject(
                            rd_kafka_incremental_assign(rk_.get(), partitions),
                            "assigning partitions")
                      : FromKafkaError(rd_kafka_assign(rk_.get(), partitions),
                                       "assigning partitions");
    if (!status.ok() && callback_error_.ok()) callback_error_ = status;
    // A partition paused before it was revoked starts unpaused.
    if (status.ok()) rd_kafka_resume_partitions(rk_.get(), partitions);
  }

  // Finishes the in-flight batch, commits the revoked partitions' offsets to
  // Kafka synchronously, then releases them.
  void Revoke(rd_kafka_topic_partition_list_t* partitions) {
    ++stats_.revocations;
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
    if (!lost && changelog_ != nullptr && callback_error_.ok()) {
      // The next owner restores from the changelog: publish it first.
      BatchReport published;
      if (absl::Status s = RelayOutbox(published); !s.ok()) {
        callback_error_ = s;
      }
    }
    if (!lost && !hooks_.skip_revoke_commit) {
      CommitEngineOffsets(partitions);
    }
    const auto& listener = lost ? options_.on_lost : options_.on_revoke;
    for (int i = 0; i < partitions->cnt; ++i) {
      const rd_kafka_topic_partition_t& tp = partitions->elems[i];
      assignment_.erase({tp.topic, tp.partition});
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
    Unassign(partitions);
  }

  // Revoke with workers: waits until the revoked partitions' records taken
  // so far are handled (at most 2 * max_batch * workers in one call) and
  // brings their engine offsets to the
  // watermark; for lost ones (or when closing), drops those not started and
  // waits only for the groups running. Nothing of them commits afterwards.
  void SettleWorkers(const rd_kafka_topic_partition_list_t* partitions,
                     bool lost) {
    std::vector<TopicPartition> revoked;
    for (int i = 0; i < partitions->cnt; ++i) {
      revoked.emplace_back(partitions->elems[i].topic,
                           partitions->elems[i].partition);
    }
    if (lost || handler_ == nullptr || hooks_.drop_in_flight_on_revoke) {
      runner_->Cancel(revoked);
      return;
    }
    runner_->Finish(revoked);
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

  void Unassign(rd_kafka_topic_partition_list_t* partitions) {
    absl::Status status;
    if (Cooperative() && partitions != nullptr) {
      status = FromKafkaErrorObject(
          rd_kafka_incremental_unassign(rk_.get(), partitions),
          "releasing partitions");
    } else {
      status = FromKafkaError(rd_kafka_assign(rk_.get(), nullptr),
                              "releasing partitions");
      assignment_.clear();
    }
    if (!status.ok()) NoteError(status);
  }

  bool Cooperative() const {
    return std::strcmp(rd_kafka_rebalance_protocol(rk_.get()), "COOPERATIVE") ==
           0;
  }

  // Commits, for each of `partitions`, the engine's offset + 1 to Kafka and
  // waits for the answer. Errors are counted: Kafka's offsets are advisory.
  void CommitEngineOffsets(const rd_kafka_topic_partition_list_t* partitions) {
    PartitionListPtr offsets(rd_kafka_topic_partition_list_new(0));
    for (int i = 0; i < partitions->cnt; ++i) {
      const rd_kafka_topic_partition_t& tp = partitions->elems[i];
      absl::StatusOr<std::optional<int64_t>> offset =
          engine_->CommittedOffset(tp.topic, tp.partition);
      if (!offset.ok() || !offset->has_value()) continue;
      rd_kafka_topic_partition_list_add(offsets.get(), tp.topic, tp.partition)
          ->offset = **offset + 1;
    }
    if (offsets->cnt == 0) return;
    NoteCommit(rd_kafka_commit(rk_.get(), offsets.get(), /*async=*/0));
  }

  void NoteCommit(rd_kafka_resp_err_t err) {
    // _NO_OFFSET: there was nothing to commit, which is not an error.
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR ||
        err == RD_KAFKA_RESP_ERR__NO_OFFSET) {
      return;
    }
    ++stats_.kafka_commit_errors;
    stats_.last_kafka_error =
        FromKafkaError(err, "committing offsets to Kafka").ToString();
  }

  // Processes the in-flight records and commits their offsets to Kafka.
  absl::Status ProcessInFlight() {
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

  // Changelog mode: marks each partition of a batch handled up to its last
  // offset (ChangelogKeeper::MarkHandled). Safe on the workers.
  absl::Status MarkHandled(
      const absl::btree_map<TopicPartition, int64_t>& next_offsets) {
    if (changelog_ == nullptr) return absl::OkStatus();
    for (const auto& [tp, next] : next_offsets) {
      if (absl::Status s =
              changelog_->MarkHandled(tp.first, tp.second, next - 1);
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  // Adds a processed batch to the call's report and the totals.
  void Count(const BatchReport& done) {
    if (report_ != nullptr) AddRecordCounts(done, *report_);
    stats_.records += done.records;
    stats_.processed += done.processed;
    stats_.duplicates += done.duplicates;
    stats_.dead_lettered += done.dead_lettered;
    stats_.retries += done.retries;
    stats_.non_retriable += done.non_retriable;
    ++stats_.batches;
  }

  // Commits `next` (next offset per partition) to Kafka asynchronously; the
  // answer comes to OnCommit.
  void CommitToKafka(const absl::btree_map<TopicPartition, int64_t>& next) {
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

  // Drops in-flight records of `partitions` (all of them for nullptr).
  void DropInFlight(const rd_kafka_topic_partition_list_t* partitions) {
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

  // After a failed batch: the next poll re-reads each still-assigned
  // partition of the in-flight records from its first in-flight offset.
  void Rewind() {
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

  // Makes the next poll read each partition of `first` from its offset.
  void SeekTo(const absl::btree_map<TopicPartition, int64_t>& first) {
    if (first.empty()) return;
    PartitionListPtr seek(rd_kafka_topic_partition_list_new(first.size()));
    for (const auto& [tp, offset] : first) {
      rd_kafka_topic_partition_list_add(seek.get(), tp.first.c_str(), tp.second)
          ->offset = offset;
    }
    if (absl::Status s = FromKafkaErrorObject(
            rd_kafka_seek_partitions(rk_.get(), seek.get(), 10000),
            "rewinding after a failed batch");
        !s.ok()) {
      // Without the rewind the records could be skipped: stop for good.
      failed_ = s;
    }
  }

  absl::Status FailFromCallback() {
    absl::Status status = std::exchange(callback_error_, absl::OkStatus());
    Rewind();
    return status;
  }

  // Changelog mode, on assignment: checks (and restores) the partition and
  // returns the engine's offset afterwards.
  absl::StatusOr<std::optional<int64_t>> CheckChangelog(
      const std::string& topic, int32_t partition) {
    const absl::Time begin = absl::Now();
    absl::StatusOr<RestoreReport> report = changelog_->Check(topic, partition);
    stats_.restore_time += absl::Now() - begin;
    stats_.engine_time += absl::Now() - begin;
    if (!report.ok()) return report.status();
    ++stats_.restore_checks;
    stats_.restore_records_read += report->records_read;
    if (report->restored) {
      ++stats_.restores;
      stats_.restored_records += report->state_entries + report->dedupe_records;
      if (options_.logger != nullptr) {
        const std::string line = absl::StrCat(
            "idem: restored ", topic, "/", partition,
            report->from_standby ? " from its standby copy and changelog "
                                 : " from changelog ",
            options_.changelog_topic, " at offset ",
            report->offset.has_value() ? absl::StrCat(*report->offset)
                                       : std::string("(none)"),
            ": ", report->state_entries, " state entries, ",
            report->dedupe_records, " dedupe records, ", report->orphans,
            " orphans, ", report->records_read, " records read in ",
            absl::FormatDuration(report->duration));
        CallUserCode("ConsumerOptions::logger", [&] {
          options_.logger->Log(LogSeverity::kInfo, line);
          return absl::OkStatus();
        }).IgnoreError();  // a logger that throws loses the line
      }
    }
    if (options_.on_restore) {
      absl::Status s = CallUserCode("on_restore", [&] {
        options_.on_restore(*report);
        return absl::OkStatus();
      });
      if (!s.ok()) NoteError(s);
    }
    return report->offset;
  }

  // Publishes what the engine's outbox holds (ConsumerOptions::relay_outbox):
  // the handlers' emits and the dead letters, committed with their records.
  // The batch is committed either way; an error is returned so the caller
  // sees it, and the next call publishes the rest again.
  absl::Status RelayOutbox(BatchReport& report) {
    if (relay_ == nullptr || hooks_.skip_relay) return absl::OkStatus();
    const absl::Time start = absl::Now();
    absl::StatusOr<RelayReport> relayed = relay_->Drain();
    stats_.kafka_time += absl::Now() - start;
    if (!relayed.ok()) {
      ++stats_.kafka_errors;
      stats_.last_kafka_error = relayed.status().ToString();
      if (changelog_ != nullptr) {
        // Some of the changelog may have reached Kafka and some not: only a
        // check against the changelog (a new consumer's assignment) can
        // tell which, so this consumer stops.
        changelog_->ReleaseAll();
        failed_ = absl::Status(
            relayed.status().code(),
            absl::StrCat("changelog mode: publishing failed, the consumer "
                         "stopped (create a new one to resume): ",
                         relayed.status().message()));
        return failed_;
      }
      return relayed.status();
    }
    report.outbox_published += relayed->published;
    stats_.outbox_published += relayed->published;
    return absl::OkStatus();
  }

  // ---- Constant after construction ----
  Engine* const engine_;
  const ConsumerOptions options_;
  const ConsumerHooks hooks_;
  std::unique_ptr<OutboxRelay> relay_;  // null without relay_outbox
  // Null without a changelog_topic. Used from the polling thread only (the
  // relay's skip calls it there too).
  std::unique_ptr<ChangelogKeeper> changelog_;
  DeadLetterFunction dead_letter_;

  // ---- Used from the polling thread only ----
  HandlePtr rk_;
  // Null with one worker. Idle and empty between PollBatch calls, and
  // destroyed before rk_ (its threads joined).
  std::unique_ptr<ParallelRunner> runner_;
  std::vector<MessagePtr> in_flight_;  // polled, not yet processed
  // During PollBatch; read by the workers too, while they run.
  const Handler* handler_ = nullptr;
  BatchReport* report_ = nullptr;  // during PollBatch
  absl::Status callback_error_;    // raised inside a callback
  absl::Status failed_;            // permanent: the consumer is unusable
  std::set<TopicPartition> assignment_;
  ConsumerStats stats_;

  // ---- Any thread ----
  std::atomic<bool> stop_{false};
};

}  // namespace

absl::StatusOr<std::unique_ptr<Consumer>> CreateConsumerWithHooks(
    Engine* engine, const ConsumerOptions& options,
    const ConsumerHooks& hooks) {
  if (engine == nullptr) {
    return absl::InvalidArgumentError("Consumer::Create: engine is null");
  }
  if (absl::Status s = ValidateConsumerOptions(options); !s.ok()) return s;
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
    OutboxRelayOptions relay_options;
    relay_options.brokers = options.brokers;
    // Security and other shared settings apply to the relay too.
    relay_options.kafka_config = options.kafka_config;
    relay_options.kafka_config.insert(relay_options.kafka_config.end(),
                                      options.relay_kafka_config.begin(),
                                      options.relay_kafka_config.end());
    relay_options.max_batch = options.max_batch;
    relay_options.logger = options.logger;
    if (changelog != nullptr) {
      ChangelogKeeper* keeper = changelog.get();
      relay_options.skip = [keeper](const OutboxEntry& entry) {
        return keeper->Skip(entry);
      };
      relay_options.publish_first = {keeper->dedupe_topic()};
    }
    absl::StatusOr<std::unique_ptr<OutboxRelay>> created =
        OutboxRelay::Create(engine, relay_options);
    if (!created.ok()) {
      return absl::Status(created.status().code(),
                          absl::StrCat("ConsumerOptions: the outbox relay: ",
                                       created.status().message()));
    }
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
