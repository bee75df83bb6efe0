// ConsumerImpl's publishing of the engine's outbox after each batch
// (ConsumerOptions::relay_outbox): the relay it creates (transactional with
// ConsumerOptions::transactional_output), the membership check and fences of
// changelog mode, and backpressure.

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/absl_view.h"
#include "engine/user_code.h"
#include "kafka/consumer_impl.h"
#include "kafka/outbox_relay_hooks.h"
#include "kafka/record_ids.h"
#include "kafka/sharded_outbox_relay.h"

namespace idem::kafka {

namespace {

// The state key (outside every partition's prefix) where a store keeps the
// member ID of its consumer's transactional.id.
constexpr std::string_view kMemberStateKey{"\0idem.kafka.member", 18};

// The member ID the store at `engine` keeps, drawn and committed on first
// use.
absl::StatusOr<std::string> StoreMemberId(Engine* engine) {
  absl::BitGen bits;
  const std::string drawn =
      absl::StrCat(absl::Hex(absl::Uniform<uint64_t>(bits), absl::kZeroPad16));
  Message message;
  message.id = absl::StrCat("idem.kafka.member/", drawn);
  message.source = "idem.kafka.member";
  message.partition = 0;
  std::string member;
  absl::StatusOr<Result> kept =
      engine->Process(message, [&](const Message&, Txn& txn) {
        absl::StatusOr<std::optional<std::string>> stored =
            txn.Get(kMemberStateKey);
        if (!stored.ok()) return stored.status();
        if (stored->has_value()) {
          member = **stored;
        } else {
          member = drawn;
          txn.Put(kMemberStateKey, member);
        }
        return absl::OkStatus();
      });
  if (!kept.ok()) return kept.status();
  if (kept->outcome == Outcome::kFailed) return kept->error;
  return member;
}

// Passes ConsumerHooks::relay_step on at the relay's seams: "commit" before
// a round's transaction commits, "ack" between the commit and the
// acknowledgement, "acked" after a round that published (and after what
// `relay` already calls then).
void AddRelaySteps(const std::function<void(const char*)>& step,
                   OutboxRelayHooks& relay) {
  if (!step) return;
  relay.before_transaction_commit = [step] {
    step("commit");
    return absl::OkStatus();
  };
  relay.between_publish_and_ack = [step] {
    step("ack");
    return absl::OkStatus();
  };
  relay.after_round = [step, then = std::move(relay.after_round)](
                          absl::Span<const OutboxEntry* const> published,
                          bool complete, bool transaction) {
    if (then) then(published, complete, transaction);
    if (complete && !published.empty()) step("acked");
  };
}

}  // namespace

absl::StatusOr<std::unique_ptr<OutboxRelay>> ConsumerImpl::CreateRelay(
    ChangelogKeeper* changelog) {
  OutboxRelayOptions relay_options;
  relay_options.brokers = options_.brokers;
  // Security and other shared settings apply to the relay too.
  relay_options.kafka_config = options_.kafka_config;
  relay_options.kafka_config.insert(relay_options.kafka_config.end(),
                                    options_.relay_kafka_config.begin(),
                                    options_.relay_kafka_config.end());
  relay_options.max_batch = options_.max_batch;
  relay_options.max_attempts = options_.outbox_max_attempts;
  relay_options.dead_letter_topic = options_.dead_letter_topic;
  relay_options.logger = options_.logger;
  if (changelog != nullptr) {
    relay_options.skip = [changelog](const OutboxEntry& entry) {
      return changelog->Skip(entry);
    };
    relay_options.publish_first = {changelog->dedupe_topic()};
  }
  OutboxRelayHooks relay_hooks;
  if (changelog != nullptr) {
    relay_hooks.after_round =
        [changelog](absl::Span<const OutboxEntry* const> published,
                    bool complete, bool transaction) {
          changelog->NotePublished(published, complete, transaction);
        };
  }
  if (options_.transactional_output) {
    absl::StatusOr<std::string> member = StoreMemberId(engine_);
    if (!member.ok()) return member.status();
    relay_options.transactional_id =
        absl::StrCat("idem.", options_.group_id, ".", *member);
    relay_options.progress_topic = options_.relay_progress_topic;
    relay_options.transaction_timeout = options_.transaction_timeout;
    if (!hooks_.relay_offsets_outside_transaction) {
      relay_hooks.transaction_offsets = [this] {
        return TransactionOffsets(-1);
      };
    }
    relay_hooks.ignore_progress = hooks_.relay_ignores_progress;
    relay_hooks.retriable_errors_fence = hooks_.relay_retriable_errors_fence;
    if (changelog != nullptr && !hooks_.rounds_split_commits) {
      relay_hooks.round_ends_after = [changelog](const OutboxEntry& entry) {
        return changelog->EndsCommit(entry);
      };
    }
    AddRelaySteps(hooks_.relay_step, relay_hooks);
  }
  absl::StatusOr<std::unique_ptr<OutboxRelay>> created =
      engine_->shard_count() > 1
          ? CreateShardedOutboxRelay(engine_, relay_options,
                                     ShardHooks(relay_hooks))
          : CreateOutboxRelayWithHooks(engine_, relay_options, relay_hooks);
  if (!created.ok()) {
    return absl::Status(created.status().code(),
                        absl::StrCat("ConsumerOptions: the outbox relay: ",
                                     created.status().message()));
  }
  return created;
}

absl::StatusOr<GroupOffsets> ConsumerImpl::TransactionOffsets(int shard) {
  GroupOffsets offsets;
  offsets.offsets.reset(rd_kafka_topic_partition_list_new(0));
  if (rk_ == nullptr) return offsets;
  offsets.group.reset(rd_kafka_consumer_group_metadata(rk_.get()));
  if (offsets.group == nullptr) return offsets;  // not in a group (yet)
  for (const TopicPartition& tp : assignment_) {
    if (shard >= 0 && engine_->ShardOf(tp.second) != shard) continue;
    absl::StatusOr<std::optional<int64_t>> offset =
        EngineOffset(tp.first, tp.second);
    if (!offset.ok()) return offset.status();
    if (!offset->has_value()) continue;
    rd_kafka_topic_partition_list_add(offsets.offsets.get(), tp.first.c_str(),
                                      tp.second)
        ->offset = **offset + 1;
  }
  return offsets;
}

void ConsumerImpl::Unfence() {
  changelog_->ReleaseAll();
  recheck_ = true;
  if (!options_.transactional_output) return;
  // Every unpublished entry is of a commit whose changelog entries are
  // unpublished too (one transaction carries both), which the partitions'
  // next owner processes again: its outputs are that owner's to publish.
  DropOutbox();
}

void ConsumerImpl::DropOutbox() {
  for (int i = 0; i < engine_->shard_count(); ++i) {
    Engine* shard = engine_->shard(i);
    while (true) {
      absl::StatusOr<std::vector<OutboxEntry>> entries =
          shard->ReadOutbox(static_cast<size_t>(options_.max_batch));
      if (!entries.ok() || entries->empty()) break;
      if (!shard->AckOutbox(entries->back().position).ok()) break;
      stats_.outbox_dropped += static_cast<int64_t>(entries->size());
    }
  }
}

absl::StatusOr<std::optional<int64_t>> ConsumerImpl::EngineOffset(
    const std::string& topic, int32_t partition) const {
  Engine* store = hooks_.offsets_of_shard_zero ? engine_->shard(0) : engine_;
  return store->CommittedOffset(topic, partition);
}

ShardRelayHooks ConsumerImpl::ShardHooks(const OutboxRelayHooks& hooks) {
  return [this, hooks](int shard) {
    OutboxRelayHooks of_shard = hooks;
    if (of_shard.transaction_offsets) {
      of_shard.transaction_offsets = [this, shard] {
        return TransactionOffsets(shard);
      };
    }
    return of_shard;
  };
}

bool ConsumerImpl::RoundDue() const {
  if (!options_.transactional_output || hooks_.rounds_every_batch) return true;
  return absl::Now() - round_began_ >= options_.transaction_interval ||
         stats_.records - records_at_round_ >= options_.max_batch;
}

absl::Status ConsumerImpl::RelayOutbox(BatchReport& report) {
  if (relay_ == nullptr || hooks_.skip_relay) return absl::OkStatus();
  round_began_ = absl::Now();
  records_at_round_ = stats_.records;
  if (changelog_ != nullptr && !MembershipHolds() &&
      !hooks_.changelog_skip_membership_check) {
    // Another member may own the partitions now and have published after
    // this one's last commit: none of this member's changelog entries may
    // follow (the relay acknowledges them unpublished). Each partition is
    // checked against its changelog again before it is processed.
    ++stats_.membership_lost;
    Unfence();
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<RelayReport> relayed = relay_->Drain();
  stats_.kafka_time += absl::Now() - start;
  if (!relayed.ok()) {
    NoteError(relayed.status());
    // A delivery that timed out (brokers down or unreachable) is as
    // transient as any other unavailability, and so is a fenced
    // transaction (kAborted): the member rejoins the group at its next
    // poll, and the relay creates its producer again.
    const absl::StatusCode code = absl::IsDeadlineExceeded(relayed.status()) ||
                                          absl::IsAborted(relayed.status())
                                      ? absl::StatusCode::kUnavailable
                                      : relayed.status().code();
    if (changelog_ != nullptr) {
      // Some of the changelog may have reached Kafka and some not: only a
      // check against the changelog can tell which. Every held partition
      // is checked again (RecheckPartitions) before anything else is
      // processed, as on a new assignment; until then none is fenced, so
      // the relay publishes none of their changelog entries. A fenced
      // transaction (kAborted from a transactional relay) means another
      // member may own them now.
      // With transactional_output the outputs of those commits go too
      // (Unfence): whoever processes them again publishes them.
      if (options_.transactional_output && absl::IsAborted(relayed.status())) {
        ++stats_.membership_lost;
      }
      Unfence();
      return absl::Status(
          code, absl::StrCat("changelog mode: publishing failed; every "
                             "partition is checked against its changelog "
                             "again before processing goes on: ",
                             relayed.status().message()));
    }
    return absl::Status(code, relayed.status().message());
  }
  report.outbox_published += relayed->published;
  stats_.outbox_published += relayed->published;
  stats_.outbox_dead_lettered += relayed->dead_lettered;
  return absl::OkStatus();
}

bool ConsumerImpl::MembershipHolds() {
  if (rd_kafka_assignment_lost(rk_.get())) {
    out_of_group_ = true;
    expelled_ = true;
    return false;
  }
  // Closing: librdkafka's view only (see Revoke).
  if (closing_) return !out_of_group_;
  PartitionListPtr offsets(rd_kafka_topic_partition_list_new(0));
  for (const TopicPartition& tp : assignment_) {
    absl::StatusOr<std::optional<int64_t>> offset =
        EngineOffset(tp.first, tp.second);
    if (!offset.ok() || !offset->has_value()) continue;
    rd_kafka_topic_partition_list_add(offsets.get(), tp.first.c_str(),
                                      tp.second)
        ->offset = **offset + 1;
  }
  if (offsets->cnt == 0) return true;  // nothing committed: nothing to fence
  const absl::Time start = absl::Now();
  const rd_kafka_resp_err_t err =
      rd_kafka_commit(rk_.get(), offsets.get(), /*async=*/0);
  stats_.kafka_time += absl::Now() - start;
  switch (err) {
    case RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION:
    case RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID:
    case RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID:
      expelled_ = true;
      out_of_group_ = true;
      return false;
    case RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS:
      out_of_group_ = true;
      return false;
    default:
      NoteCommit(err);
      out_of_group_ = false;
      expelled_ = false;
      return true;
  }
}

bool ConsumerImpl::OutboxFull() {
  if (options_.max_outbox_pending == 0 || relay_ == nullptr) return false;
  absl::StatusOr<Stats> stats = engine_->GetStats();
  if (!stats.ok()) return false;  // the next commit reports the store's error
  return stats->outbox_pending >
         static_cast<uint64_t>(options_.max_outbox_pending);
}

void ConsumerImpl::PauseInput() {
  bool paused = false;
  for (const TopicPartition& tp : assignment_) {
    if (restoring_.contains(tp)) continue;  // paused until restored
    if (!backpressured_.insert(tp).second) continue;
    PauseOrResume(tp, /*pause=*/true);
    paused = true;
  }
  if (paused) ++stats_.backpressure_pauses;
}

void ConsumerImpl::ResumeInput() {
  for (const TopicPartition& tp : backpressured_) {
    if (assignment_.contains(tp)) PauseOrResume(tp, /*pause=*/false);
  }
  backpressured_.clear();
}

}  // namespace idem::kafka
