#include "kafka/changelog_keeper.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "idem/clock.h"
#include "idem/partition_state.h"
#include "kafka/changelog_format.h"
#include "kafka/changelog_image.h"
#include "kafka/topic_admin.h"

namespace idem::kafka {
namespace {

// How long a changelog read or topic request may go without progress.
constexpr absl::Duration kKafkaTimeout = absl::Seconds(60);

// Entries of a checked epoch that may all be published (a restore's).
constexpr int64_t kNothingPublished = std::numeric_limits<int64_t>::min();

std::string EpochKey(const std::string& topic, int32_t partition) {
  return PartitionStatePrefix(topic, partition) + std::string(kEpochStateKey);
}

std::string CheckpointKey(const std::string& topic, int32_t partition) {
  return PartitionStatePrefix(topic, partition) +
         std::string(kCheckpointStateKey);
}

// The mark a partition's copy has: the member's epoch and the engine's
// committed offset (-1 for none).
ChangelogMark EngineMark(int64_t epoch, std::optional<int64_t> offset) {
  return ChangelogMark{epoch, offset.value_or(-1)};
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChangelogKeeper>> ChangelogKeeper::Create(
    Engine* engine, const ConsumerOptions& options,
    const ConsumerHooks& hooks) {
  auto invalid = [](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("ConsumerOptions::changelog_topic: ", AbslView(why)));
  };
  if (options.topics.size() != 1) {
    return invalid("needs exactly one input topic (one changelog each)");
  }
  if (!options.relay_outbox) {
    return invalid("needs relay_outbox: the consumer publishes its changelog");
  }
  // The dedupe topic's name must fit a destination too.
  if (DedupeTopicOf(options.changelog_topic).size() > kMaxSourceBytes) {
    return invalid(absl::StrCat("longer than ", kMaxSourceBytes - 7, " bytes"));
  }
  if (options.changelog_topic == options.topics[0]) {
    return invalid("must differ from the input topic");
  }

  const Options engine_options = engine->options();
  if (engine_options.read_only ||
      engine_options.dedupe_scope != DedupeScope::kPartition) {
    return absl::FailedPreconditionError(
        "ConsumerOptions::changelog_topic: needs a writable engine with "
        "Options::dedupe_scope = DedupeScope::kPartition, so that each "
        "partition's dedupe records move with it");
  }
  ConfigList config = options.kafka_config;
  absl::StatusOr<std::unique_ptr<PartitionReader>> reader =
      PartitionReader::Create(options.brokers, config, hooks.changelog_reader);
  if (!reader.ok()) return reader.status();
  std::unique_ptr<Producer> direct;
  if (hooks.changelog_outside_commit) {
    absl::StatusOr<std::unique_ptr<Producer>> producer =
        Producer::Create(options.brokers, options.kafka_config);
    if (!producer.ok()) return producer.status();
    direct = *std::move(producer);
  }
  std::shared_ptr<TopicConfigs> topic_configs = hooks.topic_configs;
  if (topic_configs == nullptr) {
    topic_configs =
        AdminTopicConfigs(options.brokers, options.kafka_config, kKafkaTimeout);
  }
  return std::unique_ptr<ChangelogKeeper>(
      new ChangelogKeeper(engine, options, hooks, *std::move(reader),
                          std::move(direct), std::move(topic_configs)));
}

ChangelogKeeper::ChangelogKeeper(Engine* engine, const ConsumerOptions& options,
                                 const ConsumerHooks& hooks,
                                 std::unique_ptr<PartitionReader> reader,
                                 std::unique_ptr<Producer> direct,
                                 std::shared_ptr<TopicConfigs> topic_configs)
    : engine_(engine),
      options_(options),
      hooks_(hooks),
      reader_(std::move(reader)),
      direct_(std::move(direct)),
      target_{options.changelog_topic, DedupeTopicOf(options.changelog_topic)},
      ttl_(options.ttl > absl::ZeroDuration()
               ? options.ttl
               : engine->options().dedupe_window),
      clock_(engine->options().clock != nullptr ? engine->options().clock
                                                : SystemClock()),
      topics_(options, target_, ttl_, reader_.get(), std::move(topic_configs)),
      standby_(engine, reader_.get(), &target_, clock_, &hooks_),
      checkpoints_(target_.changelog_topic) {
  topics_.set_input_partitions_for_test(
      hooks.changelog_topics_input_partitions);
}

absl::StatusOr<std::optional<int64_t>> ChangelogKeeper::ReadEpoch(
    const std::string& topic, int32_t partition) {
  absl::StatusOr<std::optional<std::string>> stored =
      engine_->GetState(topic, partition, EpochKey(topic, partition));
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return std::nullopt;
  int64_t epoch = 0;
  if (!absl::SimpleAtoi(**stored, &epoch) || epoch < 0) {
    return absl::DataLossError(absl::StrCat("the changelog epoch of ", topic,
                                            "/", partition, " is damaged"));
  }
  return epoch;
}

absl::StatusOr<RestoreReport> ChangelogKeeper::Check(const std::string& topic,
                                                     int32_t partition) {
  absl::StatusOr<std::optional<RestoreReport>> report =
      CheckStep(topic, partition, /*limit=*/0);
  if (!report.ok()) return report.status();
  return **std::move(report);  // without a limit, the check is done
}

absl::StatusOr<std::optional<RestoreReport>> ChangelogKeeper::CheckStep(
    const std::string& topic, int32_t partition, int64_t limit) {
  std::unique_ptr<PendingCheck>& check = pending_[partition];
  if (check == nullptr) {
    check = std::make_unique<PendingCheck>();
    check->start = absl::Now();
  }
  int64_t budget = limit > 0 ? limit : std::numeric_limits<int64_t>::max();
  absl::StatusOr<bool> done = false;
  while (done.ok() && !*done && budget > 0) {
    done = AdvanceCheck(topic, partition, *check, budget);
  }
  if (!done.ok()) {
    pending_.erase(partition);  // the next call begins again
    return done.status();
  }
  if (!*done) return std::nullopt;
  RestoreReport report = std::move(check->report);
  pending_.erase(partition);
  return report;
}

absl::StatusOr<bool> ChangelogKeeper::AdvanceCheck(const std::string& topic,
                                                   int32_t partition,
                                                   PendingCheck& check,
                                                   int64_t& budget) {
  switch (check.phase) {
    case PendingCheck::Phase::kBegin:
      return BeginCheck(topic, partition, check);
    case PendingCheck::Phase::kEnds:
      return ReadEnds(topic, partition, check, budget);
    case PendingCheck::Phase::kRestore:
      break;
  }
  int64_t read = 0;
  absl::StatusOr<bool> read_all = standby_.ReadStep(
      topic, partition, *check.copy, budget, kKafkaTimeout, &read);
  budget -= read;
  if (!read_all.ok() || !*read_all) return read_all;
  absl::StatusOr<RestoreReport> report = Restore(topic, partition, check);
  if (!report.ok()) return report.status();
  check.report = *std::move(report);
  return true;
}

absl::StatusOr<bool> ChangelogKeeper::BeginCheck(const std::string& topic,
                                                 int32_t partition,
                                                 PendingCheck& check) {
  if (absl::Status s = topics_.Prepare(topic); !s.ok()) return s;
  if (absl::Status s = topics_.Covers(topic, partition); !s.ok()) return s;
  absl::StatusOr<std::optional<int64_t>> offset =
      engine_->CommittedOffset(topic, partition);
  if (!offset.ok()) return offset.status();
  absl::StatusOr<std::optional<int64_t>> epoch = ReadEpoch(topic, partition);
  if (!epoch.ok()) return epoch.status();
  check.before = {*offset, *epoch};
  check.copy = standby_.Take(partition);
  if (check.copy != nullptr && check.copy->applied) {
    // A warm standby copy: only the changelog's tail is to be read.
    check.from_standby = true;
    check.copy_before = CopyCounts::Of(*check.copy);
    check.phase = PendingCheck::Phase::kRestore;
    return false;
  }
  check.copy = std::make_unique<StandbyCopy>();
  check.report.topic = topic;
  check.report.partition = partition;
  check.report.offset = *offset;
  if (!epoch->has_value()) {
    check.phase = PendingCheck::Phase::kRestore;
    return false;
  }
  absl::StatusOr<bool> current =
      CurrentFromCheckpoint(topic, partition, **epoch, *offset, check.report);
  if (!current.ok()) return current.status();
  if (*current) {
    check.report.duration = absl::Now() - check.start;
    return true;
  }
  // This member wrote the partition before: is its copy the changelog's
  // last commit? The changelog's marks and keys tell, without its values.
  check.ends.set_epochs_end(!hooks_.changelog_restore_ignores_epochs);
  check.phase = PendingCheck::Phase::kEnds;
  return false;
}

absl::StatusOr<bool> ChangelogKeeper::ReadEnds(const std::string& topic,
                                               int32_t partition,
                                               PendingCheck& check,
                                               int64_t& budget) {
  absl::StatusOr<ReadProgress> read = reader_->ReadSome(
      target_.changelog_topic, partition, check.ends_next, /*whole=*/false,
      budget, kKafkaTimeout, [&](const LogRecord& r) {
        --budget;
        return check.ends.AddChangelogRecord(r);
      });
  if (!read.ok()) return read.status();
  check.ends_next = read->next;
  if (!read->at_end) return false;
  const ChangelogChanges changes = check.ends.TakeChanges(clock_->Now());
  check.report.records_read += changes.records_read;
  check.report.bytes_read += changes.bytes_read;
  const std::optional<ChangelogMark> last = check.ends.Last();
  const std::optional<int64_t> epoch = check.before.epoch;
  const std::optional<int64_t> offset = check.before.offset;
  if (last != EngineMark(*epoch, offset) || check.ends.HasOrphans()) {
    check.phase = PendingCheck::Phase::kRestore;  // from the start
    return false;
  }
  // The engine's copy is the changelog's last commit, and its own.
  {
    absl::MutexLock lock(&fences_mu_);
    fences_[partition] = Fence{last->epoch, last->offset, last->offset};
  }
  checkpoints_.Verified(partition, read->high);
  if (absl::Status s = WriteCheckpoint(topic, partition, {*last, read->high});
      !s.ok()) {
    return s;
  }
  check.report.epoch = last->epoch;
  check.report.duration = absl::Now() - check.start;
  return true;
}

absl::StatusOr<bool> ChangelogKeeper::CurrentFromCheckpoint(
    const std::string& topic, int32_t partition, int64_t epoch,
    std::optional<int64_t> offset, RestoreReport& report) {
  absl::StatusOr<std::optional<ChangelogCheckpoint>> checkpoint =
      ReadCheckpoint(topic, partition);
  if (!checkpoint.ok()) return checkpoint.status();
  if (!checkpoint->has_value() || (*checkpoint)->mark.epoch != epoch) {
    return false;
  }
  const ChangelogCheckpoint& from = **checkpoint;
  absl::StatusOr<Watermarks> marks =
      reader_->GetWatermarks(target_.changelog_topic, partition, kKafkaTimeout);
  if (!marks.ok()) return marks.status();
  // Records after the checkpoint already deleted (retention), or a log
  // that no longer reaches it (the topic made anew): not this copy's log.
  if (marks->low > from.changelog_end || marks->high < from.changelog_end) {
    return false;
  }
  ChangelogImageBuilder tail(/*keep_state=*/false);
  tail.set_epochs_end(!hooks_.changelog_restore_ignores_epochs);
  int64_t end = from.changelog_end;
  if (!hooks_.changelog_checkpoint_skips_tail) {
    if (absl::Status s = reader_->Read(
            target_.changelog_topic, partition, from.changelog_end,
            kKafkaTimeout,
            [&](const LogRecord& r) { return tail.AddChangelogRecord(r); },
            &end);
        !s.ok()) {
      return s;
    }
  }
  const ChangelogChanges read = tail.TakeChanges(clock_->Now());
  report.records_read += read.records_read;
  report.bytes_read += read.bytes_read;
  const ChangelogMark last = tail.Last().value_or(from.mark);
  if (last != EngineMark(epoch, offset) || tail.HasOrphans()) {
    return false;
  }
  {
    absl::MutexLock lock(&fences_mu_);
    fences_[partition] = Fence{epoch, last.offset, last.offset};
  }
  checkpoints_.Verified(partition, end);
  if (end != from.changelog_end) {
    if (absl::Status s = WriteCheckpoint(topic, partition, {last, end});
        !s.ok()) {
      return s;
    }
  }
  report.epoch = epoch;
  return true;
}

absl::StatusOr<std::optional<ChangelogCheckpoint>>
ChangelogKeeper::ReadCheckpoint(const std::string& topic, int32_t partition) {
  absl::StatusOr<std::optional<std::string>> stored =
      engine_->GetState(topic, partition, CheckpointKey(topic, partition));
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return std::nullopt;
  return DecodeCheckpoint(**stored);
}

absl::Status ChangelogKeeper::WriteCheckpoint(
    const std::string& topic, int32_t partition,
    const ChangelogCheckpoint& checkpoint) {
  PartitionChanges changes;
  changes.source = topic;
  changes.partition = partition;
  changes.writes.emplace_back(std::string(kCheckpointStateKey),
                              EncodeCheckpoint(checkpoint));
  return engine_->ApplyPartitionChanges(changes, Engine::ImportOptions());
}

absl::Status ChangelogKeeper::Checkpoint(const std::string& topic,
                                         int32_t partition) {
  int64_t epoch = 0;
  {
    absl::MutexLock lock(&fences_mu_);
    auto fence = fences_.find(partition);
    if (fence == fences_.end()) return absl::OkStatus();
    epoch = fence->second.epoch;
  }
  absl::StatusOr<std::optional<int64_t>> offset =
      engine_->CommittedOffset(topic, partition);
  if (!offset.ok()) return offset.status();
  absl::StatusOr<Watermarks> marks =
      reader_->GetWatermarks(target_.changelog_topic, partition, kKafkaTimeout);
  if (!marks.ok()) return marks.status();
  std::optional<ChangelogCheckpoint> checkpoint = checkpoints_.Checkpoint(
      partition, EngineMark(epoch, *offset), marks->high);
  if (!checkpoint.has_value()) return absl::OkStatus();
  if (absl::Status s = WriteCheckpoint(topic, partition, *checkpoint);
      !s.ok()) {
    return s;
  }
  checkpoints_.Verified(partition, checkpoint->changelog_end);
  return absl::OkStatus();
}

void ChangelogKeeper::ReleaseAll() {
  absl::MutexLock lock(&fences_mu_);
  for (const auto& [partition, fence] : fences_) {
    checkpoints_.Forget(partition);
  }
  fences_.clear();
}

absl::StatusOr<RestoreReport> ChangelogKeeper::Restore(const std::string& topic,
                                                       int32_t partition,
                                                       PendingCheck& check) {
  StandbyCopy& copy = *check.copy;
  RestoreReport report = std::move(check.report);
  report.from_standby = check.from_standby;
  const std::optional<int64_t>& offset = check.before.offset;
  const std::optional<int64_t>& epoch = check.before.epoch;
  if (absl::Status s = standby_.Read(topic, partition, copy, kKafkaTimeout);
      !s.ok()) {
    return s;
  }
  const std::optional<ChangelogMark> last = copy.builder.Last();
  if (!copy.applied && !last.has_value() && offset.has_value() &&
      !epoch.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "changelog mode: the store holds ", topic, "/", partition,
        " up to offset ", *offset, " but its changelog ",
        target_.changelog_topic,
        " is empty, and the store was not written in changelog mode; "
        "restoring would drop that state (see docs/scale-out.md)"));
  }

  // The copy becomes the engine's, under a new epoch. An epoch is drawn at
  // random: two members that restore from the same changelog (the first
  // one's mark never published) must not share one.
  const int64_t new_epoch =
      NewEpoch(epoch, last.has_value() ? std::optional<int64_t>(last->epoch)
                                       : std::nullopt);
  const absl::btree_set<std::string> orphans = copy.builder.Orphans();
  const absl::btree_set<std::string> timer_orphans =
      copy.builder.TimerOrphans();
  if (absl::Status s = standby_.Apply(topic, partition, copy, new_epoch);
      !s.ok()) {
    return s;
  }
  // Keys a half-published commit left go back to the copy's values.
  SetBack set_back;
  const std::string prefix = PartitionStatePrefix(topic, partition);
  for (const std::string& key : orphans) {
    absl::StatusOr<std::optional<std::string>> value =
        engine_->GetState(topic, partition, prefix + key);
    if (!value.ok()) return value.status();
    set_back.state.emplace(key, *std::move(value));
  }
  if (absl::Status s =
          SetTimersBack(topic, partition, timer_orphans, set_back.timers);
      !s.ok()) {
    return s;
  }
  // Everything up to the end the copy read is in the engine now; the
  // relay's records (the new epoch's mark first) are counted from there.
  checkpoints_.Verified(partition, copy.changelog_end);
  // What the copy did before the check took it over is not the restore's.
  report.records_read += copy.records_read - check.copy_before.records_read;
  report.bytes_read += copy.bytes_read - check.copy_before.bytes_read;
  report.state_entries = copy.writes_applied - check.copy_before.writes_applied;
  report.dedupe_records =
      copy.records_applied - check.copy_before.records_applied;
  std::optional<int64_t> changelog_offset;
  if (last.has_value() && last->offset >= 0) changelog_offset = last->offset;
  return FinishRestore(topic, partition, new_epoch, changelog_offset, set_back,
                       std::move(report), check.start);
}

absl::Status ChangelogKeeper::SetTimersBack(
    const std::string& topic, int32_t partition,
    const absl::btree_set<std::string>& keys,
    absl::btree_map<std::string, std::optional<ChangelogTimer>>& timers) {
  if (keys.empty()) return absl::OkStatus();
  // Rare (a half-published commit set or fired a timer): the engine's
  // timers are read whole.
  absl::StatusOr<PartitionSnapshot> copy =
      engine_->ExportPartition(topic, partition);
  if (!copy.ok()) return copy.status();
  for (const std::string& key : keys) timers.emplace(key, std::nullopt);
  for (TimerFire& timer : copy->timers) {
    auto it = timers.find(timer.timer_key);
    if (it == timers.end()) continue;
    it->second =
        ChangelogTimer{timer.domain, timer.fire_at, std::move(timer.payload)};
  }
  return absl::OkStatus();
}

absl::StatusOr<RestoreReport> ChangelogKeeper::FinishRestore(
    const std::string& topic, int32_t partition, int64_t epoch,
    std::optional<int64_t> offset, const SetBack& set_back,
    RestoreReport report, absl::Time start) {
  if (hooks_.restore_step) hooks_.restore_step("imported");
  // The new epoch's mark sets the keys back, then "o/<epoch>" makes this
  // the last complete commit.
  if (absl::Status s =
          CommitMark(topic, partition, epoch, offset.value_or(-1), set_back);
      !s.ok()) {
    return s;
  }
  if (hooks_.restore_step) hooks_.restore_step("marked");
  {
    absl::MutexLock lock(&fences_mu_);
    fences_[partition] = Fence{epoch, kNothingPublished, offset.value_or(-1)};
  }
  report.topic = topic;
  report.partition = partition;
  report.restored = true;
  report.offset = offset;
  report.orphans =
      static_cast<int64_t>(set_back.state.size() + set_back.timers.size());
  report.epoch = epoch;
  report.duration = absl::Now() - start;
  return report;
}

int64_t ChangelogKeeper::NewEpoch(std::optional<int64_t> mine,
                                  std::optional<int64_t> changelogs) {
  int64_t epoch = 0;
  do {
    epoch = absl::Uniform<int64_t>(bitgen_, 0, int64_t{1} << 59);
  } while (mine == epoch || changelogs == epoch);
  return epoch;
}

ChangelogKeeper::StandbyRound ChangelogKeeper::FollowStandbys(
    const std::string& topic, const absl::btree_set<int32_t>& held) {
  StandbyRound round;
  if (options_.standby_partitions.empty()) return round;
  const absl::Time now = absl::Now();
  if (now - last_standby_round_ < options_.standby_interval) return round;
  last_standby_round_ = now;
  if (absl::Status s = topics_.Prepare(topic); !s.ok()) {
    ++round.errors;
    round.last_error = s;
    return round;
  }
  for (int32_t partition : options_.standby_partitions) {
    if (held.contains(partition)) continue;
    absl::StatusOr<int64_t> read =
        standby_.CatchUp(topic, partition, kKafkaTimeout);
    if (!read.ok()) {
      ++round.errors;
      round.last_error = read.status();
      continue;
    }
    ++round.copies;
    round.records_read += *read;
  }
  return round;
}

absl::Status ChangelogKeeper::CommitMark(const std::string& topic,
                                         int32_t partition, int64_t epoch,
                                         int64_t offset,
                                         const SetBack& set_back) {
  const std::string mark = EncodeMark({epoch, offset});
  // Unique per (epoch, offset), so that committing the same mark twice
  // emits it once.
  const std::string id = absl::StrCat("idem.changelog.mark/", topic, "/",
                                      partition, "/", epoch, "/", offset);
  Message message;
  message.id = id;
  message.source = topic;
  message.partition = partition;
  absl::StatusOr<Result> marked =
      engine_->Process(message, [&](const Message&, Txn& txn) {
        const Txn::Header headers[] = {
            {kChangelogMarkHeader, mark},
            {kChangelogVersionHeader, kChangelogFormatVersionText}};
        for (const auto& [key, value] : set_back.state) {
          txn.EmitWithOptions(target_.changelog_topic, StateRecordKey(key),
                              value.value_or(""),
                              {.partition = partition,
                               .tombstone = !value.has_value(),
                               .headers = headers});
        }
        for (const auto& [key, timer] : set_back.timers) {
          txn.EmitWithOptions(
              target_.changelog_topic, TimerRecordKey(key),
              timer.has_value() ? EncodeTimerValue(*timer) : std::string(),
              {.partition = partition,
               .tombstone = !timer.has_value(),
               .headers = headers});
        }
        txn.EmitWithOptions(target_.changelog_topic, OffsetRecordKey(epoch),
                            absl::StrCat(offset),
                            {.partition = partition, .headers = headers});
        return absl::OkStatus();
      });
  if (!marked.ok()) return marked.status();
  if (marked->outcome == Outcome::kFailed) return marked->error;
  return absl::OkStatus();
}

absl::Status ChangelogKeeper::MarkHandled(const std::string& topic,
                                          int32_t partition, int64_t offset) {
  int64_t epoch = 0;
  {
    absl::MutexLock lock(&fences_mu_);
    auto fence = fences_.find(partition);
    if (fence == fences_.end() || fence->second.marked >= offset) {
      return absl::OkStatus();
    }
    epoch = fence->second.epoch;
  }
  // Outside the lock: a commit. The partition's records are handled on one
  // thread at a time, so nothing else marks it meanwhile.
  if (absl::Status s = CommitMark(topic, partition, epoch, offset, {});
      !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&fences_mu_);
  auto fence = fences_.find(partition);
  if (fence != fences_.end() && fence->second.epoch == epoch) {
    fence->second.marked = std::max(fence->second.marked, offset);
  }
  return absl::OkStatus();
}

// The broken variant: the records go straight to Kafka, committed or not.
absl::Status ChangelogKeeper::ProduceOutsideCommit(ChangelogTxn& changelog) {
  class Collector final : public Txn {
   public:
    absl::StatusOr<std::optional<std::string>> Get(std::string_view) override {
      return std::nullopt;
    }
    using Txn::Put;
    void Put(std::string_view, std::string_view) override {}
    void Delete(std::string_view) override {}
    void SetResult(std::string_view) override {}
    void EmitWithOptions(std::string_view destination, std::string_view key,
                         std::string_view value,
                         const EmitOptions& options) override {
      OutgoingRecord& record = records.emplace_back();
      record.topic = destination;
      record.partition = options.partition;
      record.key = key;
      record.value = value;
      record.tombstone = options.tombstone;
      for (const auto& [name, header] : options.headers) {
        record.headers.emplace_back(name, header);
      }
    }
    std::vector<OutgoingRecord> records;
  } collector;
  if (absl::Status s = changelog.FinishInto(collector); !s.ok()) return s;
  return direct_->Produce(collector.records);
}

bool ChangelogKeeper::Skip(const OutboxEntry& entry) const {
  if (entry.destination != target_.changelog_topic &&
      entry.destination != target_.dedupe_topic) {
    return false;
  }
  if (hooks_.changelog_unfenced) return false;
  std::optional<ChangelogMark> mark;
  bool fire = false;
  for (const auto& [name, value] : entry.headers) {
    if (name == kChangelogMarkHeader) mark = DecodeMark(value);
    if (name == kChangelogFireHeader) fire = true;
  }
  absl::MutexLock lock(&fences_mu_);
  auto fence = fences_.find(entry.partition);
  if (fence == fences_.end()) return true;
  if (!mark.has_value() || mark->epoch != fence->second.epoch) return true;
  // A fire at the offset of the changelog's last commit came after that
  // commit (perhaps published already: then its records repeat, a complete
  // commit again, which changes nothing).
  if (fire && !hooks_.changelog_skips_fires) {
    return mark->offset < fence->second.published_up_to;
  }
  return mark->offset <= fence->second.published_up_to;
}

bool ChangelogKeeper::EndsCommit(const OutboxEntry& entry) const {
  if (entry.destination != target_.changelog_topic) return false;
  std::optional<ChangelogKey> key = DecodeChangelogKey(entry.key);
  return key.has_value() && key->kind == ChangelogKey::Kind::kOffset;
}

absl::Status ChangelogKeeper::HandleFire(const TimerFire& fire, Txn& txn,
                                         const TimerHandler& handler) {
  int64_t epoch = 0;
  int64_t offset = -1;
  {
    absl::MutexLock lock(&fences_mu_);
    auto fence = fences_.find(fire.partition);
    if (fence == fences_.end()) {
      return absl::AbortedError(absl::StrCat(
          "changelog mode: a timer of ", fire.source, "/", fire.partition,
          ", which was not checked against its changelog"));
    }
    epoch = fence->second.epoch;
    offset = fence->second.marked;
  }
  // The fire's commit is marked with the partition's committed offset,
  // which it leaves as it is.
  absl::StatusOr<std::optional<int64_t>> committed =
      engine_->CommittedOffset(fire.source, fire.partition);
  if (!committed.ok()) return committed.status();
  if (committed->has_value()) offset = **committed;
  Record record;
  record.topic = fire.source;
  record.partition = fire.partition;
  record.offset = offset;
  ChangelogTxn changelog(txn, record, target_, epoch);
  changelog.ForFire(fire);
  if (absl::Status s = handler(fire, changelog); !s.ok()) return s;
  if (hooks_.changelog_drops_timers) changelog.DropTimers();
  return changelog.Finish();
}

absl::Status ChangelogKeeper::Handle(const Record& record, Txn& txn,
                                     Handler handler) {
  int64_t epoch = 0;
  {
    absl::MutexLock lock(&fences_mu_);
    auto fence = fences_.find(record.partition);
    if (fence == fences_.end()) {
      return absl::AbortedError(absl::StrCat(
          "changelog mode: a record of ", AbslView(record.topic), "/",
          record.partition, ", which was not checked against its changelog"));
    }
    epoch = fence->second.epoch;
  }
  std::optional<absl::Time> expiry_override;
  if (hooks_.changelog_expiry_from_clock)
    expiry_override = clock_->Now() + ttl_;
  ChangelogTxn changelog(txn, record, target_, epoch, expiry_override);
  if (absl::Status s = handler(record, changelog); !s.ok()) return s;
  if (hooks_.changelog_drops_timers) changelog.DropTimers();
  if (direct_ != nullptr) return ProduceOutsideCommit(changelog);
  if (absl::Status s = changelog.Finish(); !s.ok()) return s;
  // If this commit fails after all, the partition's next check restores it.
  absl::MutexLock lock(&fences_mu_);
  auto fence = fences_.find(record.partition);
  if (fence != fences_.end() && fence->second.epoch == epoch) {
    fence->second.marked = std::max(fence->second.marked, record.offset);
  }
  return absl::OkStatus();
}

}  // namespace idem::kafka
