// The shared delivery loop (idem/brokers/delivery_loop.h) against an
// in-memory broker: what it acknowledges, retries, dead-letters and relays.

#include "idem/brokers/delivery_loop.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/fake_broker.h"

namespace idem::brokers {
namespace {

using test::FakeBroker;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// Adds the payload (a decimal number) to state key "sum".
absl::Status AddToSum(const Delivery& delivery, Txn& txn) {
  absl::StatusOr<std::optional<std::string>> sum = txn.Get("sum");
  if (!sum.ok()) return sum.status();
  int64_t value = 0, add = 0;
  if (*sum) value = std::stoll(**sum);
  if (!absl::SimpleAtoi(delivery.payload, &add)) {
    return absl::InvalidArgumentError("not a number");
  }
  txn.Put("sum", absl::StrCat(value + add));
  return absl::OkStatus();
}

std::string Sum(Engine& engine) {
  absl::StatusOr<std::optional<std::string>> sum = engine.GetState("sum");
  EXPECT_TRUE(sum.ok()) << sum.status();
  return sum.ok() && *sum ? **sum : "";
}

LoopOptions FastOptions() {
  LoopOptions options;
  options.retry_backoff = absl::ZeroDuration();
  options.dead_letter_destination = "dead";
  return options;
}

class DeliveryLoopTest : public ::testing::Test {
 protected:
  DeliveryLoopTest() { EXPECT_TRUE(harness_.Open().ok()); }
  Engine& engine() { return harness_.engine(); }
  test::EngineHarness harness_;
  FakeBroker broker_;
};

TEST_F(DeliveryLoopTest, RejectsBadOptionsNamingTheField) {
  LoopOptions options;
  options.max_batch = 0;
  absl::Status s = DeliveryLoop::Validate(options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("max_batch"));
  options = LoopOptions();
  options.max_attempts = 0;
  EXPECT_THAT(DeliveryLoop::Validate(options).message(),
              HasSubstr("max_attempts"));
  options = LoopOptions();
  options.retry_backoff = absl::Seconds(-1);
  EXPECT_THAT(DeliveryLoop::Validate(options).message(),
              HasSubstr("retry_backoff"));
  options = LoopOptions();
  options.dead_letter_destination = std::string(kMaxSourceBytes + 1, 'd');
  EXPECT_EQ(DeliveryLoop::Validate(options).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(DeliveryLoop::Validate(LoopOptions()).ok());
}

TEST_F(DeliveryLoopTest, AppliesEachIdOnceAcrossRedeliveriesAndAcksAll) {
  DeliveryLoop loop(&engine(), &broker_, FastOptions(),
                    LoopHooks{.skip_acks = true});
  broker_.Add("a", "1");
  broker_.Add("b", "10");
  broker_.Add("a", "1");  // a producer duplicate
  absl::StatusOr<BatchReport> first = loop.PollBatch(AddToSum);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->processed, 2);
  EXPECT_EQ(first->duplicates, 1);
  EXPECT_EQ(first->acked, 0);  // the hook: as a consumer killed before acks
  broker_.Redeliver();

  DeliveryLoop healthy(&engine(), &broker_, FastOptions());
  absl::StatusOr<BatchReport> second = healthy.PollBatch(AddToSum);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->processed, 0);
  EXPECT_EQ(second->duplicates, 3);
  EXPECT_EQ(second->acked, 3);
  EXPECT_THAT(broker_.acked, UnorderedElementsAre("0", "1", "2"));
  EXPECT_EQ(Sum(engine()), "11");
  EXPECT_EQ(healthy.stats().duplicates, 3);
  // The engine stored the highest offset handled.
  absl::StatusOr<std::optional<int64_t>> offset =
      engine().CommittedOffset("in", 0);
  ASSERT_TRUE(offset.ok());
  EXPECT_EQ(*offset, 2);
}

TEST_F(DeliveryLoopTest, RetriesTransientFailuresThenAcks) {
  DeliveryLoop loop(&engine(), &broker_, FastOptions());
  broker_.Add("a", "5");
  int calls = 0;
  absl::StatusOr<BatchReport> report =
      loop.PollBatch([&](const Delivery& d, Txn& txn) {
        if (++calls < 3) return absl::UnavailableError("flaky");
        return AddToSum(d, txn);
      });
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->retries, 2);
  EXPECT_EQ(report->processed, 1);
  EXPECT_EQ(report->dead_lettered, 0);
  EXPECT_THAT(broker_.acked, ElementsAre("0"));
  EXPECT_EQ(Sum(engine()), "5");
}

TEST_F(DeliveryLoopTest, DeadLettersAfterMaxAttemptsThroughTheOutbox) {
  LoopOptions options = FastOptions();
  options.relay_outbox = false;
  DeliveryLoop loop(&engine(), &broker_, options);
  broker_.Add("a", "5");
  broker_.Add("b", "7");
  int calls = 0;
  absl::StatusOr<BatchReport> report =
      loop.PollBatch([&](const Delivery& d, Txn& txn) {
        if (d.id == "a") {
          ++calls;
          return absl::UnavailableError("always down");
        }
        return AddToSum(d, txn);
      });
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(report->dead_lettered, 1);
  EXPECT_EQ(report->processed, 1);
  EXPECT_THAT(broker_.acked, UnorderedElementsAre("0", "1"));
  // The dead letter is in the outbox, committed with its marker.
  absl::StatusOr<std::vector<OutboxEntry>> outbox = engine().ReadOutbox(10);
  ASSERT_TRUE(outbox.ok());
  ASSERT_EQ(outbox->size(), 1u);
  const OutboxEntry& letter = (*outbox)[0];
  EXPECT_EQ(letter.destination, "dead");
  EXPECT_EQ(letter.value, "5");
  EXPECT_THAT(
      letter.headers,
      testing::IsSupersetOf(
          {std::pair<std::string, std::string>("idem.reason", "attempts"),
           std::pair<std::string, std::string>("idem.source.id", "a"),
           std::pair<std::string, std::string>("idem.source", "in")}));
  EXPECT_TRUE(*engine().Seen("idem.dead-letter/a"));
  EXPECT_FALSE(*engine().Seen("a"));  // a corrected redelivery runs
}

TEST_F(DeliveryLoopTest, NonRetriableAndPermanentErrorsAreDeadLetteredAtOnce) {
  DeliveryLoop loop(&engine(), &broker_, FastOptions());
  broker_.Add("bad", "not-a-number");
  broker_.Add("perm", "3");
  int perm_calls = 0;
  absl::StatusOr<BatchReport> report =
      loop.PollBatch([&](const Delivery& d, Txn& txn) {
        if (d.id == "perm") {
          ++perm_calls;
          return PermanentError(absl::UnavailableError("gone for good"));
        }
        return AddToSum(d, txn);
      });
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(perm_calls, 1);
  EXPECT_EQ(report->dead_lettered, 2);
  EXPECT_EQ(report->non_retriable, 2);
  EXPECT_EQ(report->retries, 0);
  ASSERT_EQ(broker_.published.size(), 2u);  // relayed after the batch
  std::vector<std::string> reasons;
  for (const OutboxEntry& e : broker_.published) {
    for (const auto& [name, value] : e.headers) {
      if (name == "idem.reason") reasons.push_back(value);
    }
  }
  EXPECT_THAT(reasons, UnorderedElementsAre("non_retriable", "permanent"));
  // The permanent failure was not remembered under its ID: a corrected
  // redelivery runs.
  broker_.Add("perm", "3");
  ASSERT_TRUE(loop.PollBatch(AddToSum).ok());
  EXPECT_EQ(Sum(engine()), "3");
}

TEST_F(DeliveryLoopTest, UnusableIdIsDeadLetteredUnderItsReceipt) {
  DeliveryLoop loop(&engine(), &broker_, FastOptions());
  broker_.Add("", "1");
  broker_.Add(std::string(kMaxIdBytes + 1, 'x'), "1");
  absl::StatusOr<BatchReport> report = loop.PollBatch(AddToSum);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->dead_lettered, 2);
  EXPECT_EQ(report->acked, 2);
  EXPECT_TRUE(*engine().Seen("idem.dead-letter/in/0"));
  EXPECT_TRUE(*engine().Seen("idem.dead-letter/in/1"));
  EXPECT_EQ(Sum(engine()), "");
}

// The broker's final delivery of a message: dead-lettered with reason
// max_deliveries without running the handler, unless its ID was processed
// already (then it is the duplicate it always was).
TEST_F(DeliveryLoopTest, FinalDeliveryOfAnUnprocessedMessageIsDeadLettered) {
  DeliveryLoop loop(&engine(), &broker_, FastOptions());
  broker_.Add("a", "1");
  ASSERT_TRUE(loop.PollBatch(AddToSum).ok());
  broker_.AddFinal("a", "1");
  broker_.AddFinal("b", "2");
  absl::StatusOr<BatchReport> report = loop.PollBatch(AddToSum);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->duplicates, 1);
  EXPECT_EQ(report->dead_lettered, 1);
  EXPECT_EQ(report->acked, 2);
  EXPECT_EQ(Sum(engine()), "1");
  const std::vector<OutboxEntry> dead = broker_.PublishedTo("dead");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_THAT(dead[0].headers,
              testing::Contains(std::pair<std::string, std::string>(
                  "idem.reason", "max_deliveries")));
  EXPECT_THAT(dead[0].headers,
              testing::Contains(
                  std::pair<std::string, std::string>("idem.source.id", "b")));
}

// Fetch latency counts the receives that brought deliveries only (an empty
// one waits out receive_timeout); reconnects are the broker's.
TEST_F(DeliveryLoopTest, FetchesCountReceivesThatBroughtDeliveries) {
  DeliveryLoop loop(&engine(), &broker_, FastOptions());
  ASSERT_TRUE(loop.PollBatch(AddToSum).ok());  // nothing there
  broker_.Add("a", "1");
  ASSERT_TRUE(loop.PollBatch(AddToSum).ok());
  broker_.reconnects = 3;
  ASSERT_TRUE(loop.PollBatch(AddToSum).ok());
  const LoopStats stats = loop.stats();
  EXPECT_EQ(stats.fetches, 1);
  EXPECT_LE(stats.fetch_time, stats.broker_time);
  EXPECT_EQ(stats.reconnects, 3);
}

// Each batch goes back to the broker (Broker::Recycle) once the loop is
// done with it: acknowledged, or nacked when the run failed.
TEST_F(DeliveryLoopTest, HandsEachBatchBackAfterAnsweringIt) {
  LoopOptions options = FastOptions();
  options.max_batch = 2;
  options.dead_letter_destination.clear();
  DeliveryLoop loop(&engine(), &broker_, options);
  broker_.Add("a", "1");
  broker_.Add("b", "2");
  broker_.Add("c", "3");
  ASSERT_TRUE(loop.PollBatch(AddToSum).ok());
  ASSERT_TRUE(loop.PollBatch(AddToSum).ok());
  EXPECT_THAT(broker_.recycled,
              ElementsAre(ElementsAre("0", "1"), ElementsAre("2")));
  broker_.Add("bad", "x");  // given up on, no dead-letter destination
  EXPECT_FALSE(loop.PollBatch(AddToSum).ok());
  EXPECT_THAT(broker_.recycled.back(), ElementsAre("3"));
  EXPECT_THAT(broker_.nacked, ElementsAre("3"));
}

TEST_F(DeliveryLoopTest, WithoutDeadLetterDestinationGivingUpAbortsAndNacks) {
  LoopOptions options = FastOptions();
  options.dead_letter_destination.clear();
  DeliveryLoop loop(&engine(), &broker_, options);
  broker_.Add("ok", "2");
  broker_.Add("bad", "x");
  absl::StatusOr<BatchReport> report = loop.PollBatch(AddToSum);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(report.status().message(), HasSubstr("in/1"));
  EXPECT_THAT(broker_.acked, IsEmpty());
  EXPECT_THAT(broker_.nacked, UnorderedElementsAre("0", "1"));
  EXPECT_EQ(loop.stats().nacked, 2);
}

TEST_F(DeliveryLoopTest, BrokerErrorsAreReturnedAndCounted) {
  DeliveryLoop loop(&engine(), &broker_, FastOptions());
  broker_.receive_error = absl::UnavailableError("connection lost");
  EXPECT_EQ(loop.PollBatch(AddToSum).status().code(),
            absl::StatusCode::kUnavailable);
  broker_.receive_error = absl::OkStatus();
  broker_.ack_error = absl::UnavailableError("ack lost");
  broker_.Add("a", "4");
  EXPECT_EQ(loop.PollBatch(AddToSum).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(Sum(engine()), "4");  // committed; its redelivery is a duplicate
  LoopStats stats = loop.stats();
  EXPECT_EQ(stats.broker_errors, 2);
  EXPECT_THAT(stats.last_broker_error, HasSubstr("ack lost"));
  broker_.ack_error = absl::OkStatus();
  broker_.Redeliver();
  absl::StatusOr<BatchReport> again = loop.PollBatch(AddToSum);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->duplicates, 1);
  EXPECT_EQ(Sum(engine()), "4");
}

absl::Status EmitTwo(const Delivery& delivery, Txn& txn) {
  txn.Emit("out", delivery.id, "first");
  txn.Emit("out", delivery.id, "second");
  return absl::OkStatus();
}

TEST_F(DeliveryLoopTest, RelayPublishesInOrderAndRepublishesAfterAFailure) {
  DeliveryLoop loop(&engine(), &broker_, FastOptions());
  broker_.Add("a", "");
  broker_.Add("b", "");
  broker_.publish_budget = 3;
  absl::StatusOr<BatchReport> report = loop.PollBatch(EmitTwo);
  // The batch itself was handled and acknowledged, and the report says so.
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->outbox_error.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(report->processed, 2);
  EXPECT_EQ(report->acked, 2);
  EXPECT_EQ(report->outbox_published, 3);
  EXPECT_EQ(broker_.acked.size(), 2u);
  ASSERT_EQ(broker_.published.size(), 3u);
  broker_.publish_budget = -1;
  absl::StatusOr<int64_t> rest = loop.RelayOutbox();
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(*rest, 1);
  ASSERT_EQ(broker_.published.size(), 4u);
  std::vector<uint64_t> positions;
  for (const OutboxEntry& e : broker_.published)
    positions.push_back(e.position);
  EXPECT_TRUE(std::is_sorted(positions.begin(), positions.end()));
  EXPECT_NE(broker_.published[0].message_id, broker_.published[1].message_id);
  EXPECT_THAT(*engine().ReadOutbox(10), IsEmpty());
}

// The reproduction: the first input emits an entry the broker
// refuses for good, three more emit good outputs, the last fails for good.
// Every output is published or dead-lettered, the refused one under its own
// message ID with where it was meant to go. The broken variant holds the
// refused entry, as before: nothing behind it is published, all stay
// stuck.
class RefusedEntryTest : public DeliveryLoopTest,
                         public ::testing::WithParamInterface<bool> {};

TEST_P(RefusedEntryTest, EntryRefusedForGoodIsDeadLetteredAndTheRestFlow) {
  const bool broken = GetParam();
  broker_.refuse["refused"] =
      absl::FailedPreconditionError("WRONGTYPE not a stream");
  DeliveryLoop loop(&engine(), &broker_, FastOptions(),
                    LoopHooks{.hold_refused_entries = broken});
  for (const char* id : {"a", "b", "c", "d", "e"}) broker_.Add(id, "1");
  absl::StatusOr<BatchReport> report =
      loop.PollBatch([](const Delivery& d, Txn& txn) -> absl::Status {
        if (d.id == "e") return absl::InvalidArgumentError("poison");
        txn.Emit(d.id == "a" ? "refused" : "out", d.id, d.payload);
        return absl::OkStatus();
      });
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->processed, 4);
  EXPECT_EQ(report->dead_lettered, 1);
  if (broken) {
    EXPECT_EQ(report->outbox_error.code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(broker_.published, IsEmpty());
    EXPECT_EQ(engine().ReadOutbox(10)->size(), 5u);
    return;
  }
  EXPECT_TRUE(report->outbox_error.ok()) << report->outbox_error;
  EXPECT_EQ(report->outbox_published, 4);  // three outputs, one dead letter
  EXPECT_EQ(report->outbox_dead_lettered, 1);
  EXPECT_EQ(broker_.PublishedTo("out").size(), 3u);
  const std::vector<OutboxEntry> dead = broker_.PublishedTo("dead");
  ASSERT_EQ(dead.size(), 2u);
  const OutboxEntry& refused = dead[0];
  EXPECT_EQ(refused.value, "1");
  EXPECT_EQ(refused.key, "a");
  EXPECT_THAT(refused.headers,
              testing::IsSupersetOf({std::pair<std::string, std::string>(
                                         "idem.reason", "refused"),
                                     std::pair<std::string, std::string>(
                                         "idem.destination", "refused")}));
  EXPECT_THAT(*engine().ReadOutbox(10), IsEmpty());
  EXPECT_EQ(loop.stats().outbox_dead_lettered, 1);
}

INSTANTIATE_TEST_SUITE_P(RealAndBroken, RefusedEntryTest,
                         ::testing::Values(false, true), [](const auto& info) {
                           return info.param ? "HoldRefusedEntries" : "Real";
                         });

TEST_F(DeliveryLoopTest,
       EntryRefusedForGoodWithoutADeadLetterDestinationHolds) {
  broker_.refuse["refused"] = absl::InvalidArgumentError("bad name");
  LoopOptions options = FastOptions();
  options.dead_letter_destination.clear();
  DeliveryLoop loop(&engine(), &broker_, options);
  broker_.Add("a", "1");
  absl::StatusOr<BatchReport> report =
      loop.PollBatch([](const Delivery& d, Txn& txn) {
        txn.Emit("refused", d.id, d.payload);
        return absl::OkStatus();
      });
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->outbox_error.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(report->outbox_error.message(),
              HasSubstr("dead_letter_destination"));
  EXPECT_EQ(engine().ReadOutbox(10)->size(), 1u);
}

TEST_F(DeliveryLoopTest, EmitToADestinationTheBrokerRejectsFailsTheMessage) {
  DeliveryLoop loop(&engine(), &broker_, FastOptions());
  broker_.Add("a", "5");
  absl::StatusOr<BatchReport> report =
      loop.PollBatch([](const Delivery& d, Txn& txn) {
        if (absl::Status s = AddToSum(d, txn); !s.ok()) return s;
        txn.Emit("has space", d.id, d.payload);
        return absl::OkStatus();
      });
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->dead_lettered, 1);
  EXPECT_EQ(report->non_retriable, 1);
  EXPECT_EQ(Sum(engine()), "");  // nothing of the message committed
  const std::vector<OutboxEntry> dead = broker_.PublishedTo("dead");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_THAT(dead[0].headers,
              testing::Contains(testing::Pair(
                  "idem.error", HasSubstr("no spaces in a name"))));
}

TEST_F(DeliveryLoopTest, DeadLetterErrorTextIsBoundedAndSaysSo) {
  DeliveryLoop loop(&engine(), &broker_, FastOptions());
  broker_.Add("a", "1");
  const std::string long_text(2 << 20, 'x');
  ASSERT_TRUE(loop.PollBatch([&](const Delivery&, Txn&) {
                    return absl::InvalidArgumentError(long_text);
                  })
                  .ok());
  const std::vector<OutboxEntry> dead = broker_.PublishedTo("dead");
  ASSERT_EQ(dead.size(), 1u);
  std::map<std::string, std::string> headers(dead[0].headers.begin(),
                                             dead[0].headers.end());
  EXPECT_LE(headers["idem.error"].size(), kMaxDeadLetterErrorBytes);
  EXPECT_GT(headers["idem.error"].size(), 0u);
  EXPECT_EQ(headers["idem.truncated"], "error");
}

// The broker refuses messages over its size limit: a dead letter whose
// copied headers (or value) push it over is published again without them,
// saying so in idem.truncated, and always under its own message ID.
TEST_F(DeliveryLoopTest, DeadLetterOverTheBrokersLimitIsShrunkNeverItsId) {
  LoopOptions options = FastOptions();
  options.relay_outbox = false;
  DeliveryLoop loop(&engine(), &broker_, options);
  broker_.max_message_bytes = 4096;
  broker_.Add("a", "1", {10, {"note", std::string(1000, 'n')}});
  broker_.Add("b", std::string(8192, 'v'));
  ASSERT_TRUE(loop.PollBatch([](const Delivery&, Txn&) {
                    return absl::InvalidArgumentError("poison");
                  })
                  .ok());
  absl::StatusOr<std::vector<OutboxEntry>> committed = engine().ReadOutbox(10);
  ASSERT_TRUE(committed.ok() && committed->size() == 2u);
  absl::StatusOr<int64_t> relayed = loop.RelayOutbox();
  ASSERT_TRUE(relayed.ok()) << relayed.status();
  EXPECT_EQ(loop.stats().broker_errors, 1 + 2);  // a refused once, b twice
  const std::vector<OutboxEntry> dead = broker_.PublishedTo("dead");
  ASSERT_EQ(dead.size(), 2u);
  std::map<std::string, std::string> a(dead[0].headers.begin(),
                                       dead[0].headers.end());
  EXPECT_EQ(a["idem.truncated"], "headers");
  EXPECT_FALSE(a.contains("note"));
  EXPECT_EQ(a["idem.reason"], "non_retriable");
  EXPECT_EQ(dead[0].value, "1");
  std::map<std::string, std::string> b(dead[1].headers.begin(),
                                       dead[1].headers.end());
  EXPECT_EQ(b["idem.truncated"], "value");
  EXPECT_EQ(b["idem.value.bytes"], "8192");
  EXPECT_TRUE(dead[1].value.empty());
  for (size_t i = 0; i < dead.size(); ++i) {
    EXPECT_EQ(dead[i].message_id, (*committed)[i].message_id);
  }
  EXPECT_THAT(*engine().ReadOutbox(10), IsEmpty());
}

// Acks only durable outcomes: at each Ack, what a power loss would leave of
// the store already holds the delivery's record. The broken variant acks
// without WaitDurable, and the check catches it.
class AckDurabilityTest : public ::testing::TestWithParam<bool> {};

TEST_P(AckDurabilityTest, EveryAckedDeliveryIsInThePowerLossImage) {
  const bool broken = GetParam();
  Options options;
  options.durability = Durability::kBuffered;
  test::EngineHarness harness(options,
                              test::EngineHarness::Storage::kCrashFileSystem);
  ASSERT_TRUE(harness.Open().ok());
  FakeBroker broker;
  for (int i = 0; i < 5; ++i) broker.Add(absl::StrCat("m", i), "1");
  int missing = 0;
  broker.on_ack = [&](const Delivery& d) {
    absl::StatusOr<std::unique_ptr<Engine>> image = harness.OpenDurableImage();
    ASSERT_TRUE(image.ok()) << image.status();
    absl::StatusOr<bool> seen = (*image)->Seen(d.id);
    ASSERT_TRUE(seen.ok());
    if (!*seen) ++missing;
  };
  DeliveryLoop loop(&harness.engine(), &broker, FastOptions(),
                    LoopHooks{.skip_wait_durable = broken});
  ASSERT_TRUE(loop.PollBatch(AddToSum).ok());
  EXPECT_EQ(broker.acked.size(), 5u);
  if (broken) {
    EXPECT_EQ(missing, 5) << "the broken variant should ack undurable outcomes";
  } else {
    EXPECT_EQ(missing, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(RealAndBroken, AckDurabilityTest,
                         ::testing::Values(false, true), [](const auto& info) {
                           return info.param ? "SkipWaitDurable" : "Real";
                         });

}  // namespace
}  // namespace idem::brokers
