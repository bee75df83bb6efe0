#include "retry/retry_rounds.h"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace idem::retry {
namespace {

// The partition an item keeps order in (RetryPolicy::keep_partition_order).
using PartitionRef = std::pair<std::string_view, int32_t>;

PartitionRef PartitionOf(const Message& message) {
  return {message.source, message.partition};
}

// One RunRounds call: each item's state and the result. RunRounds takes
// the public steps in order: TakeIds, GiveUpEarly, then RunRound until no
// item is left.
class Rounds {
 public:
  Rounds(Engine& engine, RetryItems& items, const RetryPolicy& policy,
         RoundsResult& result)
      : engine_(engine),
        items_(items),
        policy_(policy),
        result_(result),
        states_(items.size()) {}

  // Each item's ID, or why it has none.
  void TakeIds() {
    for (size_t i = 0; i < states_.size(); ++i) {
      absl::StatusOr<std::string> id = items_.Id(i);
      if (id.ok()) {
        states_[i].id = *std::move(id);
      } else {
        states_[i].id_error = id.status();
      }
    }
  }

  // Retrying cannot repair an ID: such items are given up on at once, as
  // are those the adapter screens out.
  absl::Status GiveUpEarly() {
    for (size_t i = 0; i < states_.size(); ++i) {
      if (!states_[i].id_error.ok()) {
        if (absl::Status s = GiveUp(i, states_[i].id_error, "id"); !s.ok()) {
          return s;
        }
        continue;
      }
      absl::StatusOr<std::optional<EarlyGiveUp>> early = items_.Screen(i);
      if (!early.ok()) return early.status();
      if (!early->has_value()) continue;
      if (absl::Status s = GiveUp(i, (*early)->error, (*early)->reason);
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  // One ProcessBatch over the items `round` names; returns the items of the
  // next round: retries, the rest of each failed partition, and those just
  // given up on whose dead letter is still to commit.
  absl::StatusOr<std::vector<size_t>> RunRound(
      const std::vector<size_t>& round) {
    const std::vector<Message> messages = RoundMessages(round);
    absl::flat_hash_set<PartitionRef> blocked;  // an item of it failed
    auto run_one = [&](const Message& message, Txn& txn) {
      return RunOne(round[&message - messages.data()], message, txn, blocked);
    };
    absl::StatusOr<std::vector<Result>> results =
        engine_.ProcessBatch(messages, run_one);
    if (!results.ok()) return results.status();
    if (Cancelled()) {
      return absl::CancelledError(
          "the partition was lost: its remaining records were not run");
    }
    NextRound next;
    for (size_t k = 0; k < round.size(); ++k) {
      if (absl::Status s =
              TakeOutcome(round[k], messages[k], (*results)[k], next);
          !s.ok()) {
        return s;
      }
    }
    if (next.wait) BackOff();
    return std::move(next.items);
  }

 private:
  // What one round's outcomes ask of the next round.
  struct NextRound {
    std::vector<size_t> items;  // they run again, in batch order
    absl::flat_hash_set<PartitionRef> failed_partitions;
    bool wait = false;  // an item is retried: back off first
  };

  // The engine's messages for the items `round` names, in its order; none of
  // them is deferred until it runs.
  std::vector<Message> RoundMessages(const std::vector<size_t>& round) {
    std::vector<Message> messages;
    messages.reserve(round.size());
    for (size_t i : round) {
      Message message = items_.MessageOf(i);
      message.id = states_[i].id;
      messages.push_back(message);
      states_[i].deferred = false;
    }
    return messages;
  }

  // The engine's handler for item `i`: its dead-letter marker once it is
  // dead-lettered, a deferral behind an earlier failure of its partition
  // (`blocked`, which a failure here extends), the adapter's handler
  // otherwise.
  absl::Status RunOne(size_t i, const Message& message, Txn& txn,
                      absl::flat_hash_set<PartitionRef>& blocked) {
    ItemState& state = states_[i];
    if (Cancelled()) {
      state.deferred = true;  // not an attempt: the partition is gone
      return absl::AbortedError("the partition was lost");
    }
    if (state.dead_lettered) {
      txn.SetResult(kDeadLetteredResult);
      if (!state.dead_letter_error.ok()) items_.EmitDeadLetter(i, state, txn);
      return absl::OkStatus();
    }
    if (policy_.keep_partition_order &&
        blocked.contains(PartitionOf(message))) {
      state.deferred = true;
      return absl::AbortedError("deferred behind a failed record");
    }
    absl::Status status = items_.Handle(i, state, txn);
    if (!status.ok() && policy_.keep_partition_order) {
      blocked.insert(PartitionOf(message));
    }
    if (IsPermanentError(status)) {
      // Dead-lettered at once, as a non-retriable code: the dead-letter
      // marker's commit moves the offset past it (so the engine does not
      // keep the failure: a corrected redelivery runs).
      state.permanent = true;
      return absl::Status(status.code(), status.message());
    }
    return status;
  }

  // Takes item `i`'s `result` into the counts and `next`: an item after its
  // partition's failure runs again; a failure is retried or given up on; a
  // conflict is dead-lettered; anything else is counted once.
  absl::Status TakeOutcome(size_t i, const Message& message,
                           const Result& result, NextRound& next) {
    const PartitionRef partition = PartitionOf(message);
    bool again = policy_.keep_partition_order &&
                 next.failed_partitions.contains(partition);
    if (result.outcome == Outcome::kFailed) {
      if (states_[i].dead_lettered) {
        return absl::InternalError(
            absl::StrCat("the dead letter of ", states_[i].id,
                         " failed: ", result.error.ToString()));
      }
      // A failed item fails its partition for the rest of the round.
      if (!policy_.keep_partition_order ||
          next.failed_partitions.insert(partition).second) {
        again = true;
      }
      if (absl::Status s = TakeFailure(i, result, next.wait); !s.ok()) {
        return s;
      }
    } else {
      result_.max_sequence = std::max(result_.max_sequence, result.sequence);
      if (result.outcome == Outcome::kConflict && !states_[i].dead_lettered) {
        if (absl::Status s = TakeConflict(i); !s.ok()) return s;
        // Through the outbox its dead letter commits in the next round.
        if (!states_[i].dead_letter_error.ok()) again = true;
      } else {
        CountOnce(i, result);
      }
    }
    if (again) next.items.push_back(i);
    return absl::OkStatus();
  }

  // A failed item `i`, unless it was only deferred, is retried (setting
  // `wait`) or, when it cannot or may not be, given up on.
  absl::Status TakeFailure(size_t i, const Result& result, bool& wait) {
    ItemState& state = states_[i];
    if (state.deferred) return absl::OkStatus();  // not an attempt of its own
    // A permanent failure: returned now, or remembered by the engine.
    const bool permanent = state.permanent || result.permanent;
    const bool retriable = !permanent && Retriable(result.error);
    if (retriable && ++state.attempts < policy_.max_attempts) {
      ++result_.counts.retries;
      wait = true;
      return absl::OkStatus();
    }
    if (!retriable) ++result_.counts.non_retriable;
    const std::string_view reason = permanent    ? "permanent"
                                    : !retriable ? "non_retriable"
                                                 : "attempts";
    return GiveUp(i, result.error, reason);
  }

  // A conflicting item `i`: its commit moved the offset past it; it is
  // dead-lettered.
  absl::Status TakeConflict(size_t i) {
    if (policy_.conflicts_count_as_non_retriable) {
      ++result_.counts.non_retriable;
    }
    return GiveUp(i, items_.ConflictError(i, states_[i]), "conflict");
  }

  // Counts item `i` as processed or duplicate, the first time it gets there
  // and only if it was not dead-lettered.
  void CountOnce(size_t i, const Result& result) {
    ItemState& state = states_[i];
    if (state.counted || state.dead_lettered) return;
    state.counted = true;
    if (result.outcome == Outcome::kProcessed) {
      ++result_.counts.processed;
    } else {
      ++result_.counts.duplicates;
    }
  }

  // Passes item `i` to the dead-letter path; from then on it is committed
  // under its dead-letter ID, which moves its partition's offset past it
  // (and, through the outbox, emits its dead letter in that same commit).
  absl::Status GiveUp(size_t i, const absl::Status& error,
                      std::string_view reason) {
    ItemState& state = states_[i];
    state.reason = reason;
    absl::StatusOr<DeadLetterRoute> route =
        items_.RouteDeadLetter(i, error, reason);
    if (!route.ok()) return route.status();
    if (*route == DeadLetterRoute::kOutbox) {
      state.dead_letter_error =
          error.ok() ? absl::UnknownError("given up on") : error;
      if (state.id_error.ok()) state.source_id = state.id;
    }
    state.dead_lettered = true;
    state.id = items_.DeadLetterId(i);
    ++result_.counts.dead_lettered;
    return absl::OkStatus();
  }

  // Whether a handler error may succeed on another attempt.
  bool Retriable(const absl::Status& error) const {
    return std::find(policy_.non_retriable_codes.begin(),
                     policy_.non_retriable_codes.end(),
                     error.code()) == policy_.non_retriable_codes.end();
  }

  void BackOff() const {
    if (policy_.backoff > absl::ZeroDuration()) absl::SleepFor(policy_.backoff);
  }

  bool Cancelled() const {
    return policy_.cancelled != nullptr &&
           policy_.cancelled->load(std::memory_order_acquire);
  }

  Engine& engine_;
  RetryItems& items_;
  const RetryPolicy& policy_;
  RoundsResult& result_;
  std::vector<ItemState> states_;
};

}  // namespace

absl::StatusOr<std::optional<EarlyGiveUp>> RetryItems::Screen(size_t) {
  return std::nullopt;
}

absl::Status RunRounds(Engine& engine, RetryItems& items,
                       const RetryPolicy& policy, RoundsResult& result) {
  Rounds rounds(engine, items, policy, result);
  rounds.TakeIds();
  if (absl::Status s = rounds.GiveUpEarly(); !s.ok()) return s;
  std::vector<size_t> round(items.size());
  std::iota(round.begin(), round.end(), 0);
  while (!round.empty()) {
    absl::StatusOr<std::vector<size_t>> next = rounds.RunRound(round);
    if (!next.ok()) return next.status();
    round = *std::move(next);
  }
  if (result.max_sequence == 0 || !policy.wait_durable) {
    return absl::OkStatus();
  }
  return engine.WaitDurable(result.max_sequence);
}

}  // namespace idem::retry
