#include "kafka/sharded_outbox_relay.h"

#include <atomic>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace idem::kafka {
namespace {

void AddReport(const RelayReport& part, RelayReport& total) {
  total.published += part.published;
  total.acknowledged += part.acknowledged;
  total.skipped += part.skipped;
  total.dead_lettered += part.dead_lettered;
  total.already_published += part.already_published;
  if (part.last_position > 0) total.last_position = part.last_position;
}

void AddStats(const RelayStats& part, RelayStats& total) {
  total.rounds += part.rounds;
  total.published += part.published;
  total.acknowledged += part.acknowledged;
  total.skipped += part.skipped;
  total.dead_lettered += part.dead_lettered;
  total.already_published += part.already_published;
  total.producer_restarts += part.producer_restarts;
  total.transactions += part.transactions;
  total.aborted_transactions += part.aborted_transactions;
  total.retried_rounds += part.retried_rounds;
  total.errors += part.errors;
  if (!part.last_error.empty()) total.last_error = part.last_error;
}

class ShardedOutboxRelay final : public OutboxRelay {
 public:
  ShardedOutboxRelay(std::vector<std::unique_ptr<OutboxRelay>> shards,
                     absl::Duration idle_wait)
      : shards_(std::move(shards)), idle_wait_(idle_wait) {}

  absl::StatusOr<RelayReport> RelayOnce() override {
    return EveryShard([](OutboxRelay& relay) { return relay.RelayOnce(); });
  }

  absl::StatusOr<RelayReport> Drain() override {
    return EveryShard([](OutboxRelay& relay) { return relay.Drain(); });
  }

  absl::Status Run() override {
    while (!stop_.load()) {
      absl::StatusOr<RelayReport> drained = Drain();
      if (!drained.ok()) return drained.status();
      if (drained->published == 0 && !stop_.load()) {
        absl::SleepFor(idle_wait_);
      }
    }
    return absl::OkStatus();
  }

  void Stop() override { stop_.store(true); }

  RelayStats stats() const override {
    RelayStats total;
    for (const std::unique_ptr<OutboxRelay>& relay : shards_) {
      AddStats(relay->stats(), total);
    }
    return total;
  }

 private:
  // `round` on every shard's relay, so that one shard's failure does not
  // hold back the others; the first error, or the reports summed.
  template <typename Round>
  absl::StatusOr<RelayReport> EveryShard(Round round) {
    RelayReport total;
    absl::Status first_error;
    for (size_t i = 0; i < shards_.size(); ++i) {
      absl::StatusOr<RelayReport> part = round(*shards_[i]);
      if (part.ok()) {
        AddReport(*part, total);
      } else if (first_error.ok()) {
        first_error = absl::Status(
            part.status().code(), absl::StrCat("shard ", i, "'s outbox relay: ",
                                               part.status().message()));
      }
    }
    if (!first_error.ok()) return first_error;
    return total;
  }

  const std::vector<std::unique_ptr<OutboxRelay>> shards_;
  const absl::Duration idle_wait_;
  std::atomic<bool> stop_{false};
};

}  // namespace

std::string ShardTransactionalId(const std::string& transactional_id,
                                 int shard) {
  return absl::StrCat(transactional_id, "-shard-",
                      absl::Dec(shard, absl::kZeroPad3));
}

absl::StatusOr<std::unique_ptr<OutboxRelay>> CreateShardedOutboxRelay(
    Engine* engine, const OutboxRelayOptions& options,
    const ShardRelayHooks& hooks) {
  std::vector<std::unique_ptr<OutboxRelay>> relays;
  for (int i = 0; i < engine->shard_count(); ++i) {
    const OutboxRelayHooks shard_hooks = hooks(i);
    OutboxRelayOptions shard_options = options;
    if (!options.transactional_id.empty() &&
        !shard_hooks.one_transactional_id_for_every_shard) {
      shard_options.transactional_id =
          ShardTransactionalId(options.transactional_id, i);
    }
    absl::StatusOr<std::unique_ptr<OutboxRelay>> relay =
        CreateOutboxRelayWithHooks(engine->shard(i), shard_options,
                                   shard_hooks);
    if (!relay.ok()) {
      return absl::Status(
          relay.status().code(),
          absl::StrCat("shard ", i, " of ", engine->shard_count(), ": ",
                       relay.status().message()));
    }
    relays.push_back(*std::move(relay));
  }
  return std::unique_ptr<OutboxRelay>(
      new ShardedOutboxRelay(std::move(relays), options.idle_wait));
}

}  // namespace idem::kafka
