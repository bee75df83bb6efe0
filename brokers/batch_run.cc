#include "brokers/batch_run.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "brokers/dead_letters.h"
#include "engine/absl_view.h"
#include "idem/forwarding_txn.h"

#define XXH_INLINE_ALL
#include "xxhash.h"

namespace idem::brokers {
namespace {

// Stored as the result of a dead-lettered delivery's marker.
constexpr std::string_view kDeadLetteredResult = "idem.dead-lettered";
constexpr std::string_view kDeadLetterPrefix = "idem.dead-letter/";

bool UsableId(std::string_view id) {
  return !id.empty() && id.size() <= kMaxIdBytes;
}

// The handler's Txn, refusing emits to destinations the broker cannot
// publish to: the first refusal is kept, and fails the message.
class DestinationCheckingTxn : public ForwardingTxn {
 public:
  DestinationCheckingTxn(Txn& target, const Broker& broker)
      : ForwardingTxn(target), broker_(broker) {}

  void EmitWithOptions(std::string_view destination, std::string_view key,
                       std::string_view value,
                       const EmitOptions& options) override {
    absl::Status check = broker_.CheckDestination(destination);
    if (!check.ok()) {
      if (refusal_.ok()) refusal_ = check;
      return;
    }
    ForwardingTxn::EmitWithOptions(destination, key, value, options);
  }

  const absl::Status& refusal() const { return refusal_; }

 private:
  const Broker& broker_;
  absl::Status refusal_;
};

// Per delivery of the batch.
struct Entry {
  std::string id;  // what it is committed under: its ID or DeadLetterId
  int attempts = 0;
  bool permanent = false;  // its handler returned an idem::PermanentError
  bool dead_lettered = false;
  absl::Status dead_letter_error;
  std::string_view reason;  // the dead letter's idem.reason
};

class BatchRun {
 public:
  BatchRun(Engine& engine, const Broker& broker,
           absl::Span<const Delivery> deliveries, const LoopOptions& options,
           const LoopHooks& hooks, Handler handler, BatchReport& report)
      : engine_(engine),
        broker_(broker),
        deliveries_(deliveries),
        options_(options),
        hooks_(hooks),
        handler_(handler),
        report_(report),
        entries_(deliveries.size()) {}

  absl::Status Run() {
    if (absl::Status s = DeriveIds(); !s.ok()) return s;
    std::vector<size_t> round(deliveries_.size());
    std::iota(round.begin(), round.end(), 0);
    while (!round.empty()) {
      absl::StatusOr<std::vector<size_t>> next = RunRound(round);
      if (!next.ok()) return next.status();
      round = *std::move(next);
    }
    if (max_sequence_ == 0 || hooks_.skip_wait_durable) {
      return absl::OkStatus();
    }
    return engine_.WaitDurable(max_sequence_);
  }

 private:
  // Each delivery's ID; one without a usable ID, or on its final delivery
  // and not processed yet, is given up on at once.
  absl::Status DeriveIds() {
    for (size_t i = 0; i < deliveries_.size(); ++i) {
      entries_[i].id = deliveries_[i].id;
      if (!UsableId(deliveries_[i].id)) {
        absl::Status error = absl::InvalidArgumentError(
            absl::StrCat("unusable message ID (", deliveries_[i].id.size(),
                         " bytes; 1 to ", kMaxIdBytes, " allowed)"));
        if (absl::Status s = GiveUp(i, error, "id"); !s.ok()) return s;
      } else if (deliveries_[i].final_delivery) {
        if (absl::Status s = GiveUpFinalDelivery(i); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

  // Delivery i is the broker's last: dead-lettered unless already seen.
  absl::Status GiveUpFinalDelivery(size_t i) {
    absl::StatusOr<bool> seen = engine_.Seen(deliveries_[i].id);
    if (!seen.ok()) return seen.status();
    if (*seen) return absl::OkStatus();  // a duplicate, acknowledged as one
    return GiveUp(i,
                  absl::FailedPreconditionError(
                      "the broker's last delivery of a message not yet "
                      "processed (its delivery limit): dead-lettered instead "
                      "of handled, as a crash while handling it would lose it"),
                  "max_deliveries");
  }

  // One ProcessBatch over `round`; returns the deliveries of the next round:
  // transient failures to retry, and those just given up on (their dead
  // letters commit then).
  absl::StatusOr<std::vector<size_t>> RunRound(
      const std::vector<size_t>& round) {
    std::vector<Message> messages = MessagesOf(round);
    auto run_one = [&](const Message& message, Txn& txn) -> absl::Status {
      const size_t i = round[&message - messages.data()];
      return RunOne(i, txn);
    };
    absl::StatusOr<std::vector<Result>> results =
        engine_.ProcessBatch(messages, run_one);
    if (!results.ok()) return results.status();

    std::vector<size_t> next;
    bool wait = false;
    for (size_t k = 0; k < round.size(); ++k) {
      const size_t i = round[k];
      absl::StatusOr<bool> again = Decide(i, (*results)[k], wait);
      if (!again.ok()) return again.status();
      if (*again) next.push_back(i);
    }
    if (wait && options_.retry_backoff > absl::ZeroDuration()) {
      absl::SleepFor(options_.retry_backoff);
    }
    return next;
  }

  std::vector<Message> MessagesOf(const std::vector<size_t>& round) const {
    std::vector<Message> messages;
    messages.reserve(round.size());
    for (size_t i : round) {
      const Delivery& delivery = deliveries_[i];
      Message message;
      message.id = entries_[i].id;
      message.payload = delivery.payload;
      message.source = delivery.source;
      message.partition = delivery.partition;
      message.offset = delivery.offset;
      message.ttl = options_.ttl;
      message.event_time = delivery.event_time;
      messages.push_back(message);
    }
    return messages;
  }

  // The handler of delivery `i`, or its dead letter once given up on.
  absl::Status RunOne(size_t i, Txn& txn) {
    Entry& entry = entries_[i];
    if (entry.dead_lettered) {
      txn.SetResult(kDeadLetteredResult);
      EmitDeadLetter(deliveries_[i], entry, txn);
      return absl::OkStatus();
    }
    DestinationCheckingTxn checked(txn, broker_);
    absl::Status status = handler_(deliveries_[i], checked);
    if (status.ok()) status = checked.refusal();
    if (IsPermanentError(status)) {
      // Dead-lettered by the loop instead of remembered by the engine, so a
      // corrected redelivery with the same ID runs.
      entry.permanent = true;
      return absl::Status(status.code(), status.message());
    }
    return status;
  }

  // Records delivery `i`'s outcome; returns whether it runs again.
  absl::StatusOr<bool> Decide(size_t i, const Result& result, bool& wait) {
    Entry& entry = entries_[i];
    if (entry.dead_lettered && result.outcome == Outcome::kFailed) {
      return absl::InternalError(
          absl::StrCat("the dead letter of ", entry.id,
                       " failed: ", result.error.ToString()));
    }
    if (result.outcome == Outcome::kFailed) {
      const bool permanent = entry.permanent || result.permanent;
      const bool retriable = !permanent && Retriable(result.error);
      if (retriable && ++entry.attempts < options_.max_attempts) {
        ++report_.retries;
        wait = true;
        return true;
      }
      if (!retriable) ++report_.non_retriable;
      const std::string_view reason = permanent    ? "permanent"
                                      : !retriable ? "non_retriable"
                                                   : "attempts";
      if (absl::Status s = GiveUp(i, result.error, reason); !s.ok()) return s;
      return true;
    }
    max_sequence_ = std::max(max_sequence_, result.sequence);
    if (entry.dead_lettered) return false;  // counted when given up on
    if (result.outcome == Outcome::kConflict) {
      ++report_.non_retriable;
      absl::Status error = absl::AlreadyExistsError(
          absl::StrCat("conflict: message ID \"", entry.id,
                       "\" was processed before with other content"));
      if (absl::Status s = GiveUp(i, error, "conflict"); !s.ok()) return s;
      return true;
    }
    if (result.outcome == Outcome::kProcessed) {
      ++report_.processed;
    } else {
      ++report_.duplicates;
    }
    return false;
  }

  bool Retriable(const absl::Status& error) const {
    return std::find(options_.non_retriable_codes.begin(),
                     options_.non_retriable_codes.end(),
                     error.code()) == options_.non_retriable_codes.end();
  }

  // From now on delivery `i` is committed under its DeadLetterId, with its
  // dead letter emitted in that commit.
  absl::Status GiveUp(size_t i, const absl::Status& error,
                      std::string_view reason) {
    const Delivery& delivery = deliveries_[i];
    if (options_.dead_letter_destination.empty()) {
      return absl::AbortedError(absl::StrCat(
          "delivery ", delivery.source, "/", delivery.receipt,
          " was given up on (", AbslView(reason),
          ") and LoopOptions::dead_letter_destination is not set: ",
          error.ToString()));
    }
    Entry& entry = entries_[i];
    entry.dead_lettered = true;
    entry.dead_letter_error =
        error.ok() ? absl::UnknownError("given up on") : error;
    entry.reason = reason;
    entry.id = DeadLetterId(delivery);
    ++report_.dead_lettered;
    return absl::OkStatus();
  }

  void EmitDeadLetter(const Delivery& delivery, const Entry& entry,
                      Txn& txn) const {
    bool cut = false;
    const std::string error_text = BoundedText(
        entry.dead_letter_error.ToString(), kMaxDeadLetterErrorBytes, &cut);
    std::vector<Txn::Header> headers(delivery.headers.begin(),
                                     delivery.headers.end());
    headers.emplace_back("idem.error", error_text);
    if (cut) headers.emplace_back("idem.truncated", "error");
    headers.emplace_back("idem.reason", entry.reason);
    headers.emplace_back("idem.source", delivery.source);
    headers.emplace_back("idem.source.receipt", delivery.receipt);
    if (UsableId(delivery.id)) {
      headers.emplace_back("idem.source.id", delivery.id);
    }
    txn.EmitWithHeaders(options_.dead_letter_destination, delivery.id,
                        delivery.payload, headers);
  }

  Engine& engine_;
  const Broker& broker_;
  const absl::Span<const Delivery> deliveries_;
  const LoopOptions& options_;
  const LoopHooks& hooks_;
  const Handler handler_;
  BatchReport& report_;
  std::vector<Entry> entries_;
  uint64_t max_sequence_ = 0;
};

}  // namespace

std::string DeadLetterId(const Delivery& delivery) {
  std::string id = UsableId(delivery.id)
                       ? absl::StrCat(AbslView(kDeadLetterPrefix), delivery.id)
                       : absl::StrCat(AbslView(kDeadLetterPrefix),
                                      delivery.source, "/", delivery.receipt);
  if (id.size() <= kMaxIdBytes) return id;
  const XXH128_hash_t hash = XXH3_128bits(id.data(), id.size());
  return absl::StrFormat("%sh/%016x%016x", AbslView(kDeadLetterPrefix),
                         hash.high64, hash.low64);
}

absl::Status RunBatch(Engine& engine, const Broker& broker,
                      absl::Span<const Delivery> deliveries,
                      const LoopOptions& options, const LoopHooks& hooks,
                      Handler handler, BatchReport& report) {
  return BatchRun(engine, broker, deliveries, options, hooks, handler, report)
      .Run();
}

}  // namespace idem::brokers
