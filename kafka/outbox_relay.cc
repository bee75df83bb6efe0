// OutboxRelay: Engine::ReadOutbox, Producer::ProduceCounted, then
// Engine::AckOutbox of the delivered prefix; or, with transactional_id, one
// Kafka transaction per round.

#include "idem/kafka/outbox_relay.h"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <optional>
#include <thread>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/absl_view.h"
#include "idem/kafka/producer.h"
#include "kafka/outbox_relay_hooks.h"
#include "kafka/rdkafka_util.h"
#include "kafka/relay_progress.h"
#include "kafka/sharded_outbox_relay.h"
#include "kafka/transactional_producer.h"

namespace idem::kafka {
namespace {

// Producer properties the relay sets itself and refuses from kafka_config.
constexpr const char* kOwnedProperties[] = {
    "enable.idempotence", "acks", "transactional.id", "transaction.timeout.ms"};

// How long a transactional producer waits for the brokers to register it,
// commit or abort.
constexpr absl::Duration kTransactionTimeout = absl::Seconds(30);

// A round retried after a retriable transactional error first waits this
// long times its retry's number, so a rebalance or a coordinator's move
// can finish.
constexpr absl::Duration kRoundRetryBackoff = absl::Milliseconds(50);

absl::Status ValidateRelayOptions(const OutboxRelayOptions& options) {
  auto invalid = [](std::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("OutboxRelayOptions: ", AbslView(what)));
  };
  if (options.brokers.empty()) return invalid("brokers must not be empty");
  if (options.max_batch < 1) return invalid("max_batch must be >= 1");
  if (options.id_header.empty()) return invalid("id_header must not be empty");
  if (options.max_attempts < 0) return invalid("max_attempts must be >= 0");
  if (options.max_attempts > 0 && options.dead_letter_topic.empty()) {
    return invalid(
        "max_attempts needs dead_letter_topic: an entry given up on goes "
        "there, never nowhere");
  }
  if (!options.transactional_id.empty() && options.progress_topic.empty()) {
    return invalid("transactional_id needs a progress_topic");
  }
  if (!options.transactional_id.empty() &&
      (options.transaction_timeout < absl::Seconds(1) ||
       options.transaction_timeout > absl::Hours(24))) {
    return invalid(
        absl::StrCat("transaction_timeout must be in [1s, 24h], got ",
                     absl::FormatDuration(options.transaction_timeout)));
  }
  if (options.idle_wait < absl::ZeroDuration() ||
      options.idle_wait == absl::InfiniteDuration()) {
    return invalid("idle_wait must be >= 0 and finite");
  }
  for (const auto& [name, value] : options.kafka_config) {
    for (const char* owned : kOwnedProperties) {
      if (name == owned) {
        return invalid(
            absl::StrCat("kafka_config must not set ", name,
                         ": the relay produces idempotently with acks=all "
                         "(and sets transactional.id and "
                         "transaction.timeout.ms from transactional_id and "
                         "transaction_timeout)"));
      }
    }
  }
  return absl::OkStatus();
}

OutgoingRecord ToRecord(const OutboxEntry& entry, const std::string& header) {
  OutgoingRecord record;
  record.topic = entry.destination;
  record.partition = entry.partition;
  record.key = entry.key;
  record.value = entry.value;
  record.tombstone = entry.tombstone;
  record.headers.reserve(entry.headers.size() + 1);
  record.headers.emplace_back(header, entry.message_id);
  for (const auto& [name, value] : entry.headers) {
    // The relay's message ID is the one a consumer must dedupe by.
    if (name != header) record.headers.emplace_back(name, value);
  }
  return record;
}

// Whether the brokers refuse a record for good (OutboxRelayOptions::
// max_attempts).
bool RefusedForGood(const absl::Status& status) {
  return absl::IsInvalidArgument(status) || absl::IsOutOfRange(status) ||
         absl::IsPermissionDenied(status);
}

// The dead letter of an entry given up on after `attempts` attempts that
// failed with `error`.
OutgoingRecord DeadLetterRecord(const OutboxEntry& entry,
                                const OutboxRelayOptions& options,
                                const absl::Status& error, int attempts) {
  OutgoingRecord record = ToRecord(entry, options.id_header);
  record.topic = options.dead_letter_topic;
  record.partition = -1;
  record.headers.emplace_back("idem.error", error.ToString());
  record.headers.emplace_back("idem.destination", entry.destination);
  if (entry.partition >= 0) {
    record.headers.emplace_back("idem.destination.partition",
                                absl::StrCat(entry.partition));
  }
  record.headers.emplace_back("idem.attempts", absl::StrCat(attempts));
  if (absl::IsOutOfRange(error)) {
    // Too large for the brokers: its value would be refused again.
    record.headers.emplace_back("idem.value.bytes",
                                absl::StrCat(entry.value.size()));
    record.value.clear();
    record.tombstone = false;
  }
  return record;
}

// What a round does with an entry: acknowledge it unpublished (skip), or
// publish it in the round's first produce call (publish_first) or second.
enum Phase : uint8_t { kSkip, kFirst, kSecond };

// A round's entries sorted for publishing.
struct RoundPlan {
  std::vector<Phase> phase;                // per entry
  std::vector<OutgoingRecord> records[2];  // per produce call
  std::vector<bool> dead_letter;           // per entry
};

// The next round's entries (those above a position), read on a thread of
// its own while the current round publishes (and, with transactions,
// commits), whose round trips to the brokers take longer: the read then
// costs the round nothing. Take returns them (nullopt if not started, or the
// read failed: the next round reads again and meets the error); the destructor
// waits for the read.
class ReadAhead {
 public:
  ReadAhead(Engine* engine, uint64_t after, int max_entries, bool start) {
    if (!start) return;
    reader_ = std::thread([this, engine, after, max_entries] {
      entries_ =
          engine->ReadOutboxAfter(after, static_cast<size_t>(max_entries));
    });
  }
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;
  ~ReadAhead() {
    if (reader_.joinable()) reader_.join();
  }

  std::optional<std::vector<OutboxEntry>> Take() {
    if (!reader_.joinable()) return std::nullopt;
    reader_.join();
    if (!entries_.ok()) return std::nullopt;
    return *std::move(entries_);
  }

 private:
  std::thread reader_;
  absl::StatusOr<std::vector<OutboxEntry>> entries_;
};

class OutboxRelayImpl final : public OutboxRelay {
 public:
  OutboxRelayImpl(Engine* engine, const OutboxRelayOptions& options,
                  const OutboxRelayHooks& hooks,
                  std::unique_ptr<Producer> producer, ConfigList config)
      : engine_(engine),
        options_(options),
        hooks_(hooks),
        producer_(std::move(producer)),
        config_(std::move(config)) {}

  absl::StatusOr<RelayReport> RelayOnce() override {
    return CountedRound(/*next_round_follows=*/false);
  }

  absl::StatusOr<RelayReport> Drain() override {
    RelayReport total;
    while (true) {
      absl::StatusOr<RelayReport> round =
          CountedRound(/*next_round_follows=*/true);
      if (!round.ok()) return round.status();
      total.published += round->published;
      total.acknowledged += round->acknowledged;
      total.skipped += round->skipped;
      total.dead_lettered += round->dead_lettered;
      total.already_published += round->already_published;
      if (round->last_position > 0) total.last_position = round->last_position;
      if (round->acknowledged < options_.max_batch && !round_cut_) {
        read_ahead_.reset();  // none is taken by a round that was not full
        return total;
      }
    }
  }

  absl::Status Run() override {
    while (!stop_.load()) {
      absl::StatusOr<RelayReport> drained = Drain();
      if (!drained.ok()) return drained.status();
      if (drained->published == 0 && !stop_.load()) {
        absl::SleepFor(options_.idle_wait);
      }
    }
    return absl::OkStatus();
  }

  void Stop() override { stop_.store(true); }

  // With transactional_id: creates the transactional producer (which
  // fences older instances of the transactional.id and has the brokers
  // abort what they left open), then reads the progress its last committed
  // transaction recorded. Called by CreateOutboxRelayWithHooks, and by a
  // round after the producer was dropped.
  absl::Status StartTransactionalProducer() {
    absl::StatusOr<std::unique_ptr<TransactionalProducer>> txn =
        TransactionalProducer::Create(
            options_.brokers, config_, options_.transactional_id,
            options_.logger, options_.transaction_timeout, kTransactionTimeout);
    if (!txn.ok()) return txn.status();
    absl::StatusOr<RelayProgress> progress = ReadRelayProgress(
        options_.brokers, options_.kafka_config, options_.progress_topic,
        options_.transactional_id, kTransactionTimeout);
    if (!progress.ok()) return progress.status();
    if (restarted_) ++stats_.producer_restarts;
    restarted_ = true;
    txn_ = *std::move(txn);
    published_up_to_ = hooks_.ignore_progress ? 0 : progress->position;
    progress_partition_ = progress->partition;
    return absl::OkStatus();
  }

  RelayStats stats() const override { return stats_; }

 private:
  // One round, counted in stats_. `next_round_follows`: the caller (Drain)
  // starts another round at once if this one is full, so the round may
  // read that round's entries ahead (ReadAhead).
  absl::StatusOr<RelayReport> CountedRound(bool next_round_follows) {
    ++stats_.rounds;
    RelayReport report;
    absl::Status status = RetriedRound(report, next_round_follows);
    if (hooks_.after_round) {
      std::vector<const OutboxEntry*> published;
      published.reserve(round_published_.size());
      for (size_t i : round_published_) published.push_back(&round_entries_[i]);
      hooks_.after_round(published, status.ok(),
                         !options_.transactional_id.empty());
    }
    stats_.published += report.published;
    stats_.acknowledged += report.acknowledged;
    stats_.skipped += report.skipped;
    stats_.dead_lettered += report.dead_lettered;
    stats_.already_published += report.already_published;
    if (!status.ok()) {
      // The next round reads from the outbox again.
      if (!hooks_.keep_read_ahead_of_failed_commit) read_ahead_.reset();
      ++stats_.errors;
      stats_.last_error = status.ToString();
      return status;
    }
    return report;
  }

  // A round, run again (OutboxRelayOptions::kRoundRetries) while its
  // transaction failed before its commit with a retriable error and was
  // aborted: nothing of it reached the brokers' readers.
  absl::Status RetriedRound(RelayReport& report, bool next_round_follows) {
    for (int retry = 0;; ++retry) {
      report = RelayReport();
      round_entries_.clear();
      round_published_.clear();
      retry_round_ = false;
      absl::Status status = Round(report, next_round_follows);
      if (status.ok() || !retry_round_ ||
          retry == OutboxRelayOptions::kRoundRetries) {
        return status;
      }
      ++stats_.retried_rounds;
      read_ahead_.reset();  // the round reads its entries again
      absl::SleepFor(kRoundRetryBackoff * (retry + 1));
    }
  }

  absl::Status Round(RelayReport& report, bool next_round_follows) {
    absl::StatusOr<std::vector<OutboxEntry>> read =
        read_ahead_.has_value()
            ? *std::exchange(read_ahead_, std::nullopt)
            : engine_->ReadOutbox(static_cast<size_t>(options_.max_batch));
    if (!read.ok()) return read.status();
    round_entries_ = *std::move(read);
    round_cut_ = false;
    if (absl::Status s = EndAtACommit(round_entries_); !s.ok()) return s;
    const std::vector<OutboxEntry>& entries = round_entries_;
    if (entries.empty()) return absl::OkStatus();
    // A full round is followed by another in a Drain: its entries are read
    // while this one publishes.
    ReadAhead next(
        engine_, entries.back().position, options_.max_batch,
        next_round_follows &&
            (round_cut_ ||
             entries.size() == static_cast<size_t>(options_.max_batch)));
    if (!options_.transactional_id.empty()) {
      return TransactionalRound(entries, next, report);
    }
    return AtLeastOnceRound(entries, next, report);
  }

  // With OutboxRelayHooks::round_ends_after and transactional_id: ends a
  // full round's `entries` after the last entry that ends a commit
  // (round_cut_: more follow), or, if none does, reads on until one does or
  // the outbox ends, where a commit always ends (a read sees whole
  // commits).
  absl::Status EndAtACommit(std::vector<OutboxEntry>& entries) {
    if (!hooks_.round_ends_after || options_.transactional_id.empty()) {
      return absl::OkStatus();
    }
    const size_t batch = static_cast<size_t>(options_.max_batch);
    size_t unread_from = 0;  // entries before it hold no commit's end
    size_t last_read = entries.size();
    while (last_read == batch) {
      for (size_t i = entries.size(); i > unread_from; --i) {
        if (!hooks_.round_ends_after(entries[i - 1])) continue;
        round_cut_ = true;
        entries.resize(i);
        return absl::OkStatus();
      }
      unread_from = entries.size();
      absl::StatusOr<std::vector<OutboxEntry>> more =
          engine_->ReadOutboxAfter(entries.back().position, batch);
      if (!more.ok()) return more.status();
      last_read = more->size();
      std::move(more->begin(), more->end(), std::back_inserter(entries));
    }
    return absl::OkStatus();
  }

  // Notes entries [first, end) of the round's plan that were published
  // (not skipped, not dead letters) for OutboxRelayHooks::after_round.
  void NotePublished(const RoundPlan& plan, size_t first, size_t end) {
    if (!hooks_.after_round) return;
    for (size_t i = first; i < end; ++i) {
      if (plan.phase[i] != kSkip && !plan.dead_letter[i]) {
        round_published_.push_back(i);
      }
    }
  }

  // One round of the at-least-once relay: the entries' produce calls, then
  // AckOutbox of the delivered prefix. When every entry was delivered and
  // acknowledged, `next` becomes the next round's entries.
  absl::Status AtLeastOnceRound(const std::vector<OutboxEntry>& entries,
                                ReadAhead& next, RelayReport& report) {
    if (producer_ == nullptr) {
      absl::StatusOr<std::unique_ptr<Producer>> created =
          Producer::Create(options_.brokers, config_, options_.logger);
      if (!created.ok()) return created.status();
      producer_ = *std::move(created);
      ++stats_.producer_restarts;
    }
    RoundPlan plan = Plan(entries, 0);
    const std::vector<Phase>& phase = plan.phase;
    if (hooks_.ack_before_publish) {
      if (absl::Status s = Ack(entries, entries.size(), phase, report);
          !s.ok()) {
        return s;
      }
      if (absl::Status s = BetweenPublishAndAck(); !s.ok()) return s;
    }
    // Records delivered per phase; the second is produced only once the
    // first is delivered in full.
    size_t delivered[2] = {0, 0};
    absl::Status published =
        producer_->ProduceCounted(plan.records[0], &delivered[0]);
    if (published.ok()) {
      published = producer_->ProduceCounted(plan.records[1], &delivered[1]);
    }
    report.published = static_cast<int64_t>(delivered[0] + delivered[1]);
    // The acknowledgeable prefix: entries skipped or delivered.
    size_t prefix = 0;
    for (size_t seen[2] = {0, 0}; prefix < entries.size(); ++prefix) {
      if (phase[prefix] == kSkip) continue;
      const int p = phase[prefix] - kFirst;
      if (seen[p]++ >= delivered[p]) break;
    }
    if (!hooks_.ack_before_publish) {
      if (absl::Status s = BetweenPublishAndAck(); !s.ok()) return s;
      if (absl::Status s = Ack(entries, prefix, phase, report); !s.ok()) {
        return s;
      }
    }
    ForgetRefusals(entries, prefix, plan, report);
    NotePublished(plan, 0, prefix);
    if (published.ok() && prefix == entries.size()) read_ahead_ = next.Take();
    if (!published.ok()) {
      // A producer that failed for good (its idempotence broke) is
      // replaced at the next round; what it did not deliver goes again.
      if (absl::IsAborted(published)) producer_.reset();
      return PublishError(entries, plan, delivered, published);
    }
    return absl::OkStatus();
  }

  // Sorts `entries` from index `first` on (those before are acknowledged
  // unpublished: kSkip) into the round's produce calls, with dead letters
  // for entries given up on.
  RoundPlan Plan(const std::vector<OutboxEntry>& entries, size_t first) {
    RoundPlan plan;
    plan.phase.assign(entries.size(), kSecond);
    plan.dead_letter.assign(entries.size(), false);
    for (size_t i = 0; i < entries.size(); ++i) {
      const OutboxEntry& entry = entries[i];
      if (i < first || (options_.skip && options_.skip(entry))) {
        plan.phase[i] = kSkip;
        continue;
      }
      if (absl::c_linear_search(options_.publish_first, entry.destination)) {
        plan.phase[i] = kFirst;
      }
      std::vector<OutgoingRecord>& records =
          plan.records[plan.phase[i] - kFirst];
      auto refused = refused_.find(entry.position);
      if (refused != refused_.end() &&
          refused->second.attempts >= options_.max_attempts) {
        records.push_back(DeadLetterRecord(
            entry, options_, refused->second.error, refused->second.attempts));
        plan.dead_letter[i] = true;
        continue;
      }
      records.push_back(ToRecord(entry, options_.id_header));
    }
    return plan;
  }

  // One round as one Kafka transaction: the group's offsets (a
  // Consumer's), the entries, the progress record, the commit; then AckOutbox
  // of all. Entries up to the progress a committed transaction recorded are
  // acknowledged unpublished. On any error the transaction is aborted and
  // nothing new is acknowledged.
  absl::Status TransactionalRound(const std::vector<OutboxEntry>& entries,
                                  ReadAhead& next, RelayReport& report) {
    if (txn_ == nullptr) {
      if (absl::Status s = StartTransactionalProducer(); !s.ok()) return s;
    }
    size_t already = 0;
    while (already < entries.size() &&
           entries[already].position <= published_up_to_) {
      ++already;
    }
    RoundPlan plan = Plan(entries, already);
    report.already_published = static_cast<int64_t>(already);
    if (plan.records[0].empty() && plan.records[1].empty()) {
      // Nothing to publish (all published before, or skipped).
      if (absl::Status s = Ack(entries, entries.size(), plan.phase, report);
          !s.ok()) {
        return s;
      }
      report.skipped -= report.already_published;
      read_ahead_ = next.Take();
      return absl::OkStatus();
    }
    const uint64_t last = entries.back().position;
    if (absl::Status s = txn_->Begin(); !s.ok()) {
      return TransactionFailed(s, /*before_commit=*/true);
    }
    // The group's offsets go first: a group that refuses them (a member it
    // no longer counts) ends the round before any of its records is
    // produced.
    if (absl::Status s = SendTransactionOffsets(); !s.ok()) return s;
    // The progress record goes last in the second produce call (no round
    // trip of its own).
    plan.records[1].push_back(
        RelayProgressRecord(options_.progress_topic, progress_partition_,
                            options_.transactional_id, last));
    size_t delivered[2] = {0, 0};
    absl::Status published = txn_->Produce(plan.records[0], &delivered[0]);
    if (published.ok()) {
      published = txn_->Produce(plan.records[1], &delivered[1]);
    }
    plan.records[1].pop_back();
    const bool entries_delivered = delivered[0] == plan.records[0].size() &&
                                   delivered[1] >= plan.records[1].size();
    delivered[1] = std::min(delivered[1], plan.records[1].size());
    if (!published.ok()) {
      if (entries_delivered) {  // the progress record failed
        return TransactionFailed(absl::Status(
            published.code(),
            absl::StrCat("recording the relay's progress in ",
                         options_.progress_topic, ": ", published.message())));
      }
      TransactionFailed(published).IgnoreError();  // the entry's error wins
      return PublishError(entries, plan, delivered, published);
    }
    if (hooks_.before_transaction_commit) {
      if (absl::Status s = hooks_.before_transaction_commit(); !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = txn_->Commit(); !s.ok()) {
      if (hooks_.keep_read_ahead_of_failed_commit) read_ahead_ = next.Take();
      return TransactionFailed(s);
    }
    read_ahead_ = next.Take();
    ++stats_.transactions;
    published_up_to_ = last;
    report.published = static_cast<int64_t>(delivered[0] + delivered[1]);
    if (absl::Status s = BetweenPublishAndAck(); !s.ok()) return s;
    if (absl::Status s = Ack(entries, entries.size(), plan.phase, report);
        !s.ok()) {
      return s;
    }
    report.skipped -= report.already_published;
    ForgetRefusals(entries, entries.size(), plan, report);
    NotePublished(plan, already, entries.size());
    return absl::OkStatus();
  }

  // With OutboxRelayHooks::transaction_offsets: commits the group's offsets
  // in the open transaction; on an error, aborts it (TransactionFailed).
  absl::Status SendTransactionOffsets() {
    if (!hooks_.transaction_offsets) return absl::OkStatus();
    absl::StatusOr<GroupOffsets> offsets = hooks_.transaction_offsets();
    if (!offsets.ok()) return TransactionFailed(offsets.status());
    if (offsets->offsets == nullptr || offsets->offsets->cnt == 0) {
      return absl::OkStatus();
    }
    if (absl::Status s = txn_->SendOffsets(*offsets); !s.ok()) {
      return TransactionFailed(s, /*before_commit=*/true);
    }
    return absl::OkStatus();
  }

  // Aborts the round's transaction after `error` (unless the producer
  // failed for good) and drops the producer: the next round creates it
  // again, which settles a transaction whose commit's outcome is unknown (a
  // timeout) and reads the progress it left. Returns `error`. A retriable
  // error `before_commit` whose transaction was aborted keeps the producer
  // and has the round run again (retry_round_): the abort settled it.
  absl::Status TransactionFailed(absl::Status error,
                                 bool before_commit = false) {
    ++stats_.aborted_transactions;
    const bool retriable = before_commit && txn_->last_error_retriable();
    const bool aborted = !txn_->fatal() && txn_->Abort().ok();
    if (retriable && hooks_.retriable_errors_fence) {
      txn_.reset();
      return absl::AbortedError(
          absl::StrCat(error.message(), " (fenced, as the hook has it)"));
    }
    retry_round_ = retriable && aborted;
    if (!retry_round_) txn_.reset();
    return error;
  }

  // The entries acknowledged (the first `count`) need no refusal counts;
  // counts the dead letters among them.
  void ForgetRefusals(const std::vector<OutboxEntry>& entries, size_t count,
                      const RoundPlan& plan, RelayReport& report) {
    for (size_t i = 0; i < count; ++i) {
      if (plan.dead_letter[i]) ++report.dead_lettered;
      refused_.erase(entries[i].position);
    }
  }

  // The status of a round whose produce calls failed with `published`,
  // naming the entry that failed; counts the refusal (max_attempts).
  absl::Status PublishError(const std::vector<OutboxEntry>& entries,
                            const RoundPlan& plan, const size_t delivered[2],
                            const absl::Status& published) {
    const OutboxEntry& failed =
        entries[FailedEntry(plan.phase, plan.records[0].size(), delivered)];
    CountRefusal(failed, published);
    return absl::Status(
        published.code(),
        absl::StrCat("publishing outbox entry ", failed.position, " (message ",
                     failed.message_id, " to ", failed.destination,
                     "): ", published.message()));
  }

  // Acknowledges the first `count` of `entries`; `phase` tells which were
  // skipped.
  absl::Status Ack(const std::vector<OutboxEntry>& entries, size_t count,
                   const std::vector<Phase>& phase, RelayReport& report) {
    if (count == 0) return absl::OkStatus();
    const uint64_t position = entries[count - 1].position;
    if (absl::Status s = engine_->AckOutbox(position); !s.ok()) return s;
    report.acknowledged = static_cast<int64_t>(count);
    report.skipped = std::count(phase.begin(), phase.begin() + count, kSkip);
    report.last_position = position;
    return absl::OkStatus();
  }

  // The index of the entry whose record failed: the first one not delivered
  // of the phase that failed (the first phase's, if it was not all
  // delivered).
  static size_t FailedEntry(const std::vector<Phase>& phase,
                            size_t first_phase_records,
                            const size_t delivered[2]) {
    const Phase failed = delivered[0] < first_phase_records ? kFirst : kSecond;
    size_t seen = 0;
    for (size_t i = 0; i < phase.size(); ++i) {
      if (phase[i] != failed) continue;
      if (seen++ == delivered[failed - kFirst]) return i;
    }
    return phase.size() - 1;  // not reached: a phase failed
  }

  // With max_attempts: one more attempt at `entry` failed with `error`,
  // if that error means the brokers refuse it for good.
  void CountRefusal(const OutboxEntry& entry, const absl::Status& error) {
    if (options_.max_attempts == 0 || !RefusedForGood(error)) return;
    Refusal& refusal = refused_[entry.position];
    ++refusal.attempts;
    refusal.error = error;
  }

  absl::Status BetweenPublishAndAck() {
    if (!hooks_.between_publish_and_ack) return absl::OkStatus();
    return hooks_.between_publish_and_ack();
  }

  Engine* const engine_;
  const OutboxRelayOptions options_;
  const OutboxRelayHooks hooks_;
  // Null with transactional_id, and after the producer failed for good
  // until the next round creates another.
  std::unique_ptr<Producer> producer_;
  const ConfigList config_;  // the producers' properties
  // With transactional_id: the producer (null until the first round, and
  // after a fatal error), and the progress of its last committed
  // transaction.
  std::unique_ptr<TransactionalProducer> txn_;
  bool restarted_ = false;  // a transactional producer was created before
  // The current round's transaction failed with a retriable error and was
  // aborted: RetriedRound runs it again.
  bool retry_round_ = false;
  // The current round ended at a commit before the entries it read ended
  // (EndAtACommit): a Drain goes on.
  bool round_cut_ = false;
  uint64_t published_up_to_ = 0;
  // The progress topic's partition of this relay's transactional.id.
  int32_t progress_partition_ = 0;
  // Within a Drain: the next round's entries, read while the last round's
  // transaction committed (none after a failed round).
  std::optional<std::vector<OutboxEntry>> read_ahead_;
  // The current round's entries, and the indexes of those it published
  // (for OutboxRelayHooks::after_round).
  std::vector<OutboxEntry> round_entries_;
  std::vector<size_t> round_published_;
  RelayStats stats_;
  // Entries the brokers refused for good (max_attempts), by position.
  struct Refusal {
    int attempts = 0;
    absl::Status error;
  };
  absl::flat_hash_map<uint64_t, Refusal> refused_;
  std::atomic<bool> stop_{false};
};

}  // namespace

absl::StatusOr<std::unique_ptr<OutboxRelay>> CreateOutboxRelayWithHooks(
    Engine* engine, const OutboxRelayOptions& options,
    const OutboxRelayHooks& hooks) {
  if (engine == nullptr) {
    return absl::InvalidArgumentError("OutboxRelay::Create: engine is null");
  }
  if (engine->shard_count() > 1) {
    // One relay per shard's outbox (kafka/sharded_outbox_relay.h).
    return CreateShardedOutboxRelay(engine, options,
                                    [&hooks](int) { return hooks; });
  }
  if (absl::Status s = ValidateRelayOptions(options); !s.ok()) return s;
  // Keyed entries without a partition land where Java's producer puts
  // them (murmur2 of the key), so outputs co-partition with topics that
  // Java clients write; kafka_config may choose another partitioner.
  std::vector<std::pair<std::string, std::string>> config = {
      {"enable.idempotence", "true"},
      {"acks", "all"},
      {"partitioner", "murmur2_random"},
      {"reconnect.backoff.max.ms", kReconnectBackoffMaxMs}};
  config.insert(config.end(), options.kafka_config.begin(),
                options.kafka_config.end());
  std::unique_ptr<Producer> producer;
  if (options.transactional_id.empty()) {
    absl::StatusOr<std::unique_ptr<Producer>> created =
        Producer::Create(options.brokers, config, options.logger);
    if (!created.ok()) return created.status();
    producer = *std::move(created);
  }
  auto relay = std::make_unique<OutboxRelayImpl>(
      engine, options, hooks, std::move(producer), std::move(config));
  if (!options.transactional_id.empty()) {
    // The brokers register the transactional.id (fencing older instances)
    // and the relay learns its progress now, so Create reports a missing
    // progress topic or unreachable brokers.
    if (absl::Status s = relay->StartTransactionalProducer(); !s.ok()) return s;
  }
  return std::unique_ptr<OutboxRelay>(std::move(relay));
}

absl::StatusOr<std::unique_ptr<OutboxRelay>> OutboxRelay::Create(
    Engine* engine, const OutboxRelayOptions& options) {
  return CreateOutboxRelayWithHooks(engine, options, OutboxRelayHooks());
}

}  // namespace idem::kafka
