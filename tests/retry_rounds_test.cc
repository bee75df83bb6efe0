// The retry and dead-letter machine (retry/retry_rounds.h) on hand-made
// items of topic "t": retries, giving up, non-retriable and permanent errors,
// conflicts, partition order, dead-letter routes and the errors that fail a
// batch. The adapters' own parts are tested with them
// (tests/kafka_batch_processor_test.cc, tests/brokers/delivery_loop_test.cc).

#include "retry/retry_rounds.h"

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "util/temp_dir.h"

namespace idem::retry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using util::TempDir;

// An item of topic "t": (partition, offset, id, value).
struct Spec {
  int32_t partition;
  int64_t offset;
  std::string id;
  std::string value;
};

using SpecHandler = std::function<absl::Status(const Spec&, Txn&)>;
using SpecDeadLetter =
    std::function<absl::Status(const Spec&, const absl::Status&)>;

// Items over Specs: an empty ID is unusable; a given-up item goes to
// `dead_letter` if set, otherwise to `destination` through the outbox if
// that is set, otherwise fails the batch with kAborted.
class SpecItems : public RetryItems {
 public:
  SpecItems(const std::vector<Spec>& specs, SpecHandler handler,
            SpecDeadLetter dead_letter, std::string destination)
      : specs_(specs),
        handler_(std::move(handler)),
        dead_letter_(std::move(dead_letter)),
        destination_(std::move(destination)) {}

  size_t size() const override { return specs_.size(); }

  absl::StatusOr<std::string> Id(size_t i) override {
    if (specs_[i].id.empty()) return absl::InvalidArgumentError("no ID");
    return specs_[i].id;
  }

  Message MessageOf(size_t i) const override {
    Message message;
    message.payload = specs_[i].value;
    message.source = "t";
    message.partition = specs_[i].partition;
    message.offset = specs_[i].offset;
    return message;
  }

  absl::Status Handle(size_t i, const ItemState&, Txn& txn) override {
    return handler_(specs_[i], txn);
  }

  absl::StatusOr<DeadLetterRoute> RouteDeadLetter(size_t i,
                                                  const absl::Status& error,
                                                  std::string_view) override {
    if (dead_letter_) {
      if (absl::Status s = dead_letter_(specs_[i], error); !s.ok()) return s;
      return DeadLetterRoute::kHandedOn;
    }
    if (destination_.empty()) return absl::AbortedError(error.ToString());
    return DeadLetterRoute::kOutbox;
  }

  std::string DeadLetterId(size_t i) const override {
    return absl::StrCat("dead/", specs_[i].partition, "/", specs_[i].offset);
  }

  void EmitDeadLetter(size_t i, const ItemState& state, Txn& txn) override {
    txn.EmitWithHeaders(destination_, specs_[i].id, specs_[i].value,
                        {{"idem.reason", std::string(state.reason)},
                         {"idem.error", state.dead_letter_error.ToString()}});
  }

  absl::Status ConflictError(size_t, const ItemState& state) const override {
    return absl::AlreadyExistsError(
        absl::StrCat("conflict: message ID \"", state.id, "\""));
  }

 private:
  const std::vector<Spec>& specs_;
  const SpecHandler handler_;
  const SpecDeadLetter dead_letter_;
  const std::string destination_;
};

// Dead letters through the outbox to an empty destination, which the engine
// refuses: every dead-letter marker's commit fails.
class OutboxToNowhere : public SpecItems {
 public:
  using SpecItems::SpecItems;
  absl::StatusOr<DeadLetterRoute> RouteDeadLetter(size_t, const absl::Status&,
                                                  std::string_view) override {
    return DeadLetterRoute::kOutbox;
  }
};

class RetryRoundsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(OpenEngine(Options())); }

  void OpenEngine(const Options& options) {
    engine_.reset();
    auto engine =
        Engine::Open(dir_.Sub(absl::StrCat("store", ++opens_)), options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }

  // Runs specs_ with `handler`; `result` keeps what was counted.
  absl::Status Run(SpecHandler handler) {
    SpecItems items(specs_, std::move(handler), dead_letter_, destination_);
    result_ = RoundsResult();
    return RunRounds(*engine_, items, policy_, result_);
  }

  // A handler that fails item `id` once and notes in `order` what ran:
  // "<id>-failed", then each item's ID.
  static SpecHandler FailingOnceAt(std::string id,
                                   std::vector<std::string>& order) {
    return [id = std::move(id), &order, failed = false](const Spec& item,
                                                        Txn&) mutable {
      if (item.id == id && !failed) {
        failed = true;
        order.push_back(id + "-failed");
        return absl::UnavailableError("flaky");
      }
      order.push_back(item.id);
      return absl::OkStatus();
    };
  }

  std::optional<int64_t> Offset(int32_t partition) {
    auto offset = engine_->CommittedOffset("t", partition);
    EXPECT_TRUE(offset.ok());
    return offset.ok() ? *offset : std::nullopt;
  }

  TempDir dir_;
  int opens_ = 0;
  std::unique_ptr<Engine> engine_;
  std::vector<absl::StatusCode> non_retriable_ = {
      absl::StatusCode::kInvalidArgument};
  RetryPolicy policy_{.max_attempts = 3,
                      .non_retriable_codes = non_retriable_,
                      .keep_partition_order = true};
  SpecDeadLetter dead_letter_;
  std::string destination_;
  std::vector<Spec> specs_;
  RoundsResult result_;
};

TEST_F(RetryRoundsTest, RetriesAFailingItemUntilItSucceeds) {
  specs_ = {{0, 0, "a", "x"}, {0, 1, "b", "x"}};
  int calls_b = 0;
  absl::Status s = Run([&](const Spec& item, Txn&) {
    if (item.id == "b" && ++calls_b < 3) return absl::UnavailableError("flaky");
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(calls_b, 3);
  EXPECT_EQ(result_.counts.processed, 2);
  EXPECT_EQ(result_.counts.retries, 2);
  EXPECT_EQ(result_.counts.dead_lettered, 0);
  EXPECT_GT(result_.max_sequence, 0u);
  EXPECT_EQ(Offset(0), 1);
}

TEST_F(RetryRoundsTest, LaterItemsOfAPartitionWaitForAFailedOne) {
  // Partition 0: a fails once, then b must not run before a.
  // Partition 1: c runs in the first round.
  specs_ = {{0, 0, "a", "x"}, {1, 0, "c", "x"}, {0, 1, "b", "x"}};
  std::vector<std::string> order;
  absl::Status s = Run(FailingOnceAt("a", order));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(order, ElementsAre("a-failed", "c", "a", "b"));
  EXPECT_EQ(result_.counts.processed, 3);
  EXPECT_EQ(result_.counts.retries, 1);  // deferred b is not an attempt
}

// Without partition order a failure holds nothing back: the later item of
// its partition runs in the same round.
TEST_F(RetryRoundsTest, WithoutPartitionOrderEachItemStandsAlone) {
  policy_.keep_partition_order = false;
  specs_ = {{0, 0, "a", "x"}, {0, 1, "b", "x"}};
  std::vector<std::string> order;
  absl::Status s = Run(FailingOnceAt("a", order));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(order, ElementsAre("a-failed", "b", "a"));
  EXPECT_EQ(result_.counts.processed, 2);
  EXPECT_EQ(result_.counts.retries, 1);
}

TEST_F(RetryRoundsTest, GivesUpAfterMaxAttemptsAndMovesPastTheItem) {
  specs_ = {{0, 0, "a", "x"}, {0, 1, "poison", "x"}, {0, 2, "b", "x"}};
  std::vector<std::string> dead;
  dead_letter_ = [&](const Spec& item, const absl::Status& error) {
    dead.push_back(absl::StrCat(item.offset, " ", error.message()));
    return absl::OkStatus();
  };
  int poison_calls = 0;
  absl::Status s = Run([&](const Spec& item, Txn& txn) {
    if (item.id == "poison") {
      ++poison_calls;
      return absl::InternalError("bad payload");
    }
    txn.Put(item.id, "done");
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(poison_calls, 3);
  EXPECT_THAT(dead, ElementsAre("1 bad payload"));
  EXPECT_EQ(result_.counts.processed, 2);
  EXPECT_EQ(result_.counts.dead_lettered, 1);
  EXPECT_EQ(Offset(0), 2);
  auto seen = engine_->Seen("poison");
  ASSERT_TRUE(seen.ok());
  EXPECT_FALSE(*seen);  // a corrected redelivery will run
  EXPECT_TRUE(*engine_->Seen("dead/0/1"));
  auto b = engine_->GetState("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, "done");
}

// A handler error with a non-retriable code is dead-lettered at its first
// attempt; other codes are retried. No non-retriable codes retry every code.
TEST_F(RetryRoundsTest, NonRetriableHandlerErrorsAreDeadLetteredAtOnce) {
  specs_ = {{0, 0, "bad", "x"}, {1, 0, "flaky", "x"}, {2, 0, "ok", "x"}};
  std::map<std::string, int> calls;
  std::vector<std::pair<std::string, absl::StatusCode>> dead;
  dead_letter_ = [&](const Spec& item, const absl::Status& error) {
    dead.emplace_back(item.id, error.code());
    return absl::OkStatus();
  };
  auto handler = [&](const Spec& item, Txn&) {
    ++calls[item.id];
    if (item.id == "bad") return absl::InvalidArgumentError("no such account");
    if (item.id == "flaky") return absl::UnavailableError("try later");
    return absl::OkStatus();
  };
  absl::Status s = Run(handler);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(calls["bad"], 1);
  EXPECT_EQ(calls["flaky"], 3);
  EXPECT_EQ(result_.counts.non_retriable, 1);
  EXPECT_EQ(result_.counts.dead_lettered, 2);
  EXPECT_EQ(result_.counts.retries, 2);
  EXPECT_THAT(dead, ElementsAre(Pair("bad", absl::StatusCode::kInvalidArgument),
                                Pair("flaky", absl::StatusCode::kUnavailable)));

  // With no non-retriable codes, kInvalidArgument is retried too (a
  // dead-lettered ID is not marked seen, so "bad" runs again).
  policy_.non_retriable_codes = {};
  calls.clear();
  dead.clear();
  specs_ = {{3, 0, "bad", "x"}};
  s = Run(handler);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(calls["bad"], 3);
  EXPECT_EQ(result_.counts.non_retriable, 0);
  EXPECT_EQ(result_.counts.dead_lettered, 1);
}

// A handler's PermanentError (idem/message.h) is dead-lettered at its first
// attempt, whatever its code, through the non-retriable path.
TEST_F(RetryRoundsTest, PermanentErrorsAreDeadLetteredAtOnce) {
  specs_ = {{0, 0, "bad", "x"}, {0, 1, "ok", "x"}};
  std::vector<std::string> dead;
  dead_letter_ = [&](const Spec& item, const absl::Status& error) {
    dead.push_back(item.id + " " + std::string(error.message()));
    return absl::OkStatus();
  };
  int bad_calls = 0;
  absl::Status s = Run([&](const Spec& item, Txn&) {
    if (item.id != "bad") return absl::OkStatus();
    ++bad_calls;
    // kUnavailable would be retried; permanent wins.
    return PermanentError(absl::UnavailableError("never valid"));
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(bad_calls, 1);
  EXPECT_THAT(dead, ElementsAre("bad never valid"));
  EXPECT_EQ(result_.counts.non_retriable, 1);
  EXPECT_EQ(result_.counts.dead_lettered, 1);
  EXPECT_EQ(result_.counts.retries, 0);
  EXPECT_EQ(Offset(0), 1);
  EXPECT_FALSE(*engine_->Seen("bad"));  // a corrected redelivery runs
}

// Under Options::detect_conflicts, an item whose ID was processed with other
// content is dead-lettered with the adapter's conflict error; the offset
// moves past it and its handler does not run.
TEST_F(RetryRoundsTest, ConflictsAreDeadLettered) {
  Options options;
  options.detect_conflicts = true;
  ASSERT_NO_FATAL_FAILURE(OpenEngine(options));
  specs_ = {{0, 0, "a", "first"}, {0, 1, "a", "second"}, {0, 2, "b", "x"}};
  std::vector<std::pair<std::string, std::string>> dead;
  dead_letter_ = [&](const Spec& item, const absl::Status& error) {
    dead.emplace_back(absl::StrCat(item.offset),
                      std::string(error.message().substr(0, 9)));
    return absl::OkStatus();
  };
  std::vector<std::string> ran;
  absl::Status s = Run([&](const Spec& item, Txn&) {
    ran.push_back(item.value);
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(ran, ElementsAre("first", "x"));
  EXPECT_THAT(dead, ElementsAre(Pair("1", "conflict:")));
  EXPECT_EQ(result_.counts.processed, 2);
  EXPECT_EQ(result_.counts.dead_lettered, 1);
  EXPECT_EQ(result_.counts.non_retriable, 0);
  EXPECT_EQ(Offset(0), 2);

  // Where a conflict counts as non-retriable (the broker loop's choice).
  policy_.conflicts_count_as_non_retriable = true;
  specs_ = {{1, 0, "a", "third"}};
  s = Run([](const Spec&, Txn&) { return absl::OkStatus(); });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(result_.counts.dead_lettered, 1);
  EXPECT_EQ(result_.counts.non_retriable, 1);
}

// Through the outbox, the dead letter is emitted in the commit that records
// the item under its dead-letter ID, with the reason and error.
TEST_F(RetryRoundsTest, OutboxDeadLettersCommitWithTheirMarker) {
  destination_ = "dead";
  policy_.max_attempts = 2;
  specs_ = {{0, 0, "", "no-id"}, {0, 1, "poison", "x"}};
  absl::Status s = Run(
      [](const Spec&, Txn&) { return absl::UnavailableError("always down"); });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(result_.counts.dead_lettered, 2);
  EXPECT_EQ(result_.counts.retries, 1);
  EXPECT_TRUE(*engine_->Seen("dead/0/0"));
  EXPECT_TRUE(*engine_->Seen("dead/0/1"));
  EXPECT_EQ(Offset(0), 1);
  absl::StatusOr<std::vector<OutboxEntry>> outbox = engine_->ReadOutbox(10);
  ASSERT_TRUE(outbox.ok()) << outbox.status();
  ASSERT_EQ(outbox->size(), 2u);
  std::vector<std::string> letters;
  for (const OutboxEntry& entry : *outbox) {
    EXPECT_EQ(entry.destination, "dead");
    std::map<std::string, std::string> headers(entry.headers.begin(),
                                               entry.headers.end());
    letters.push_back(absl::StrCat(entry.value, " ", headers["idem.reason"],
                                   " ", headers["idem.error"]));
  }
  EXPECT_THAT(letters, ElementsAre("no-id id INVALID_ARGUMENT: no ID",
                                   "x attempts UNAVAILABLE: always down"));
}

// Without a dead-letter route giving up fails the batch with the route's
// error; the counts so far are kept.
TEST_F(RetryRoundsTest, WithoutADeadLetterRouteGivingUpFailsTheBatch) {
  policy_.max_attempts = 2;
  specs_ = {{0, 0, "a", "x"}, {0, 1, "poison", "x"}, {0, 2, "b", "x"}};
  absl::Status s = Run([&](const Spec& item, Txn&) {
    return item.id == "poison" ? absl::InternalError("bad payload")
                               : absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(s.message(), HasSubstr("bad payload"));
  EXPECT_EQ(result_.counts.processed, 1);
  EXPECT_EQ(result_.counts.retries, 1);
  EXPECT_EQ(Offset(0), 0);  // not past the item
}

// A dead-letter marker whose commit fails (here its dead letter's
// destination is refused by the engine) fails the batch instead of
// retrying the item again and again.
TEST_F(RetryRoundsTest, AFailedDeadLetterMarkerFailsTheBatch) {
  specs_ = {{0, 0, "", "no-id"}};
  OutboxToNowhere nowhere(
      specs_, [](const Spec&, Txn&) { return absl::OkStatus(); }, nullptr, "");
  absl::Status s = RunRounds(*engine_, nowhere, policy_, result_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("dead letter of dead/0/0"));
  EXPECT_EQ(result_.counts.dead_lettered, 1);
}

// Once RetryPolicy::cancelled is set no more handlers run, and the batch
// ends with kCancelled after committing what ran.
TEST_F(RetryRoundsTest, CancellingStopsTheHandlersAndTheBatch) {
  std::atomic<bool> cancelled{false};
  policy_.cancelled = &cancelled;
  specs_ = {{0, 0, "a", "x"}, {0, 1, "b", "x"}};
  std::vector<std::string> ran;
  absl::Status s = Run([&](const Spec& item, Txn&) {
    ran.push_back(item.id);
    cancelled.store(true);
    return absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(ran, ElementsAre("a"));
  EXPECT_TRUE(*engine_->Seen("a"));
  EXPECT_FALSE(*engine_->Seen("b"));
}

}  // namespace
}  // namespace idem::retry
