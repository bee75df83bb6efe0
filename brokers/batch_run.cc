#include "brokers/batch_run.h"

#include <optional>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "brokers/dead_letters.h"
#include "engine/absl_view.h"
#include "idem/forwarding_txn.h"
#include "retry/retry_rounds.h"

#define XXH_INLINE_ALL
#include "xxhash.h"

namespace idem::brokers {
namespace {

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

// The deliveries of one batch as RunRounds' items: their IDs, their
// messages, the user's handler (its emits checked by the broker), and dead
// letters through the outbox.
class DeliveryItems : public retry::RetryItems {
 public:
  DeliveryItems(Engine& engine, const Broker& broker,
                absl::Span<const Delivery> deliveries,
                const LoopOptions& options, Handler handler)
      : engine_(engine),
        broker_(broker),
        deliveries_(deliveries),
        options_(options),
        handler_(handler) {}

  size_t size() const override { return deliveries_.size(); }

  absl::StatusOr<std::string> Id(size_t i) override {
    const Delivery& delivery = deliveries_[i];
    if (!UsableId(delivery.id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unusable message ID (", delivery.id.size(),
                       " bytes; 1 to ", kMaxIdBytes, " allowed)"));
    }
    return delivery.id;
  }

  // A delivery on its final delivery and not processed yet is given up on.
  absl::StatusOr<std::optional<retry::EarlyGiveUp>> Screen(size_t i) override {
    if (!deliveries_[i].final_delivery) return std::nullopt;
    absl::StatusOr<bool> seen = engine_.Seen(deliveries_[i].id);
    if (!seen.ok()) return seen.status();
    if (*seen) return std::nullopt;  // a duplicate, acknowledged as one
    return retry::EarlyGiveUp{
        absl::FailedPreconditionError(
            "the broker's last delivery of a message not yet "
            "processed (its delivery limit): dead-lettered instead "
            "of handled, as a crash while handling it would lose it"),
        "max_deliveries"};
  }

  Message MessageOf(size_t i) const override {
    const Delivery& delivery = deliveries_[i];
    return Message{.payload = delivery.payload,
                   .source = delivery.source,
                   .partition = delivery.partition,
                   .offset = delivery.offset,
                   .ttl = options_.ttl,
                   .event_time = delivery.event_time};
  }

  absl::Status Handle(size_t i, const retry::ItemState&, Txn& txn) override {
    DestinationCheckingTxn checked(txn, broker_);
    absl::Status status = handler_(deliveries_[i], checked);
    if (status.ok()) status = checked.refusal();
    return status;
  }

  absl::StatusOr<retry::DeadLetterRoute> RouteDeadLetter(
      size_t i, const absl::Status& error, std::string_view reason) override {
    if (options_.dead_letter_destination.empty()) {
      const Delivery& delivery = deliveries_[i];
      return absl::AbortedError(absl::StrCat(
          "delivery ", delivery.source, "/", delivery.receipt,
          " was given up on (", AbslView(reason),
          ") and LoopOptions::dead_letter_destination is not set: ",
          error.ToString()));
    }
    return retry::DeadLetterRoute::kOutbox;
  }

  std::string DeadLetterId(size_t i) const override {
    return brokers::DeadLetterId(deliveries_[i]);
  }

  void EmitDeadLetter(size_t i, const retry::ItemState& state,
                      Txn& txn) override {
    const Delivery& delivery = deliveries_[i];
    bool cut = false;
    const std::string error_text = BoundedText(
        state.dead_letter_error.ToString(), kMaxDeadLetterErrorBytes, &cut);
    std::vector<Txn::Header> headers(delivery.headers.begin(),
                                     delivery.headers.end());
    headers.emplace_back("idem.error", error_text);
    if (cut) headers.emplace_back("idem.truncated", "error");
    headers.emplace_back("idem.reason", state.reason);
    headers.emplace_back("idem.source", delivery.source);
    headers.emplace_back("idem.source.receipt", delivery.receipt);
    if (UsableId(delivery.id)) {
      headers.emplace_back("idem.source.id", delivery.id);
    }
    txn.EmitWithHeaders(options_.dead_letter_destination, delivery.id,
                        delivery.payload, headers);
  }

  absl::Status ConflictError(size_t,
                             const retry::ItemState& state) const override {
    return absl::AlreadyExistsError(
        absl::StrCat("conflict: message ID \"", state.id,
                     "\" was processed before with other content"));
  }

 private:
  Engine& engine_;
  const Broker& broker_;
  const absl::Span<const Delivery> deliveries_;
  const LoopOptions& options_;
  const Handler handler_;
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
  DeliveryItems items(engine, broker, deliveries, options, handler);
  retry::RetryPolicy policy = retry::PolicyFrom(options);
  policy.conflicts_count_as_non_retriable = true;
  policy.wait_durable = !hooks.skip_wait_durable;
  retry::RoundsResult rounds;
  absl::Status status = retry::RunRounds(engine, items, policy, rounds);
  // Counted also when the batch failed: the loop's stats keep them.
  retry::AddCounts(rounds.counts, report);
  return status;
}

}  // namespace idem::brokers
