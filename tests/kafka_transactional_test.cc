// Transactional output (OutboxRelayOptions::transactional_id and
// ConsumerOptions::transactional_output) against librdkafka's mock cluster:
// rounds are transactions that record the relay's progress, a relay
// restarted after a commit skips what it published, a relay process killed
// at the commit, the transaction and the acknowledgement publishes every
// entry once, and a fenced producer or member recovers.
//
// What librdkafka 2.0.2's mock cluster lacks (so what these tests cannot
// show): it accepts transactions but keeps no transaction state. EndTxn
// writes no markers and aborts nothing, Fetch reports no aborted
// transactions, so a read_committed reader sees the records of aborted and
// open transactions too; InitProducerId fences no older instance of a
// transactional.id; TxnOffsetCommit checks no group generation and stores
// nothing. Fencing is therefore injected here (MockCluster::
// FailNextRequests) the way a broker reports it, and the reader's view
// equals a read_uncommitted one.

#include <signal.h>
#include <sys/wait.h>

#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/kafka/outbox_relay.h"
#include "kafka/consumer_hooks.h"
#include "kafka/outbox_relay_hooks.h"
#include "kafka/relay_progress.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/kafka_test_util.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::idem::kafka::Consumer;
using ::idem::kafka::ConsumerOptions;
using ::idem::kafka::OutboxRelay;
using ::idem::kafka::OutboxRelayHooks;
using ::idem::kafka::OutboxRelayOptions;
using ::idem::kafka::Record;
using ::idem::kafka::RelayReport;
using ::idem::test::KafkaTestBed;
using ::idem::test::StartKafka;
using ::testing::Each;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

constexpr int kRelayPartitions = 3;
constexpr char kRelayDownstream[] = "ledger-entries";
constexpr char kRelayProgress[] = "idem.relay.progress";
using ::idem::test::kEndTxn;
using ::idem::test::kIllegalGeneration;
using ::idem::test::kProducerFenced;
using ::idem::test::kTxnOffsetCommit;

class KafkaTransactionalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StartKafka("orders", kRelayPartitions, bed_);
    ASSERT_NE(bed_.cluster, nullptr);
    ASSERT_TRUE(
        bed_.cluster->CreateTopic(kRelayDownstream, kRelayPartitions).ok());
    ASSERT_TRUE(bed_.cluster->CreateTopic(kRelayProgress, 1).ok());
  }

  // Commits messages "m<first>".."m<count-1>", each emitting one record to
  // kRelayDownstream.
  static void CommitEmits(Engine& engine, int count, int first = 0) {
    for (int i = first; i < count; ++i) {
      const std::string id = absl::StrCat("m", i);
      Message m;
      m.id = id;
      absl::StatusOr<Result> r =
          engine.Process(m, [&](const Message&, Txn& txn) {
            txn.Emit(kRelayDownstream, absl::StrCat("k", i), absl::StrCat(i));
            return absl::OkStatus();
          });
      ASSERT_TRUE(r.ok() && r->outcome == Outcome::kProcessed) << i;
    }
  }

  OutboxRelayOptions RelayOptions(const std::string& id = "relay-1") const {
    OutboxRelayOptions options;
    options.brokers = bed_.cluster->bootstrap_servers();
    options.kafka_config = {{"log_level", "3"}};
    options.transactional_id = id;
    options.max_batch = 10;
    return options;
  }

  // One transactional round of `engine`'s outbox, stopped between the
  // transaction's commit and its acknowledgement, as a crash there leaves
  // it.
  void StopAfterCommit(Engine& engine) {
    OutboxRelayHooks stop;
    stop.between_publish_and_ack = [] {
      return absl::CancelledError("stopped after the commit");
    };
    auto relay =
        kafka::CreateOutboxRelayWithHooks(&engine, RelayOptions(), stop);
    ASSERT_TRUE(relay.ok()) << relay.status();
    EXPECT_EQ((*relay)->RelayOnce().status().code(),
              absl::StatusCode::kCancelled);
  }

  // How often each message-id header appears in `topic`, read with
  // read_committed.
  std::map<std::string, int> IdCounts(const std::string& topic) {
    return test::MessageIdCounts(bed_.cluster->bootstrap_servers(), topic);
  }

  util::TempDir dir_;
  KafkaTestBed bed_;
};

TEST_F(KafkaTransactionalTest,
       TransactionalRelayPublishesEachEntryOnceAndRecordsItsProgress) {
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  CommitEmits(*engine, 25);
  auto relay = OutboxRelay::Create(engine.get(), RelayOptions());
  ASSERT_TRUE(relay.ok()) << relay.status();
  absl::StatusOr<RelayReport> drained = (*relay)->Drain();
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_EQ(drained->published, 25);
  EXPECT_EQ(drained->acknowledged, 25);
  EXPECT_EQ(drained->already_published, 0);
  EXPECT_EQ((*relay)->stats().transactions, 3);  // rounds of 10
  std::map<std::string, int> counts = IdCounts(kRelayDownstream);
  EXPECT_THAT(counts, SizeIs(25));
  EXPECT_THAT(test::NotOnce(counts), IsEmpty());
  // The progress topic holds each round's last position.
  absl::StatusOr<kafka::RelayProgress> progress = kafka::ReadRelayProgress(
      bed_.cluster->bootstrap_servers(), {{"log_level", "3"}}, kRelayProgress,
      "relay-1", absl::Seconds(10));
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_EQ(progress->position, 25u);
  // Another relay's progress is its own.
  progress = kafka::ReadRelayProgress(bed_.cluster->bootstrap_servers(),
                                      {{"log_level", "3"}}, kRelayProgress,
                                      "relay-2", absl::Seconds(10));
  ASSERT_TRUE(progress.ok());
  EXPECT_EQ(progress->position, 0u);
}

// A relay stopped between a transaction's commit and its acknowledgement
// (as a crash there leaves it): the next one reads the progress and
// acknowledges those entries without publishing them again.
TEST_F(KafkaTransactionalTest,
       TransactionalRelayRestartedAfterItsCommitSkipsWhatItPublished) {
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  CommitEmits(*engine, 8);
  ASSERT_NO_FATAL_FAILURE(StopAfterCommit(*engine));
  CommitEmits(*engine, 12, /*first=*/8);
  auto relay = OutboxRelay::Create(engine.get(), RelayOptions());
  ASSERT_TRUE(relay.ok()) << relay.status();
  absl::StatusOr<RelayReport> drained = (*relay)->Drain();
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_EQ(drained->already_published, 8);
  EXPECT_EQ(drained->published, 4);
  EXPECT_EQ(drained->skipped, 0);
  std::map<std::string, int> counts = IdCounts(kRelayDownstream);
  EXPECT_THAT(counts, SizeIs(12));
  EXPECT_THAT(test::NotOnce(counts), IsEmpty());
}

// The broken variant that does not read its progress publishes the
// committed transaction's entries again, which the check above catches.
TEST_F(KafkaTransactionalTest,
       BrokenVariantTransactionalRelayIgnoringItsProgressPublishesTwice) {
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  CommitEmits(*engine, 8);
  ASSERT_NO_FATAL_FAILURE(StopAfterCommit(*engine));
  OutboxRelayHooks broken;
  broken.ignore_progress = true;
  auto relay =
      kafka::CreateOutboxRelayWithHooks(engine.get(), RelayOptions(), broken);
  ASSERT_TRUE(relay.ok()) << relay.status();
  ASSERT_TRUE((*relay)->Drain().ok());
  EXPECT_THAT(test::NotOnce(IdCounts(kRelayDownstream)), SizeIs(8));
}

TEST_F(KafkaTransactionalTest, TransactionalRelayChecksItsOptionsAndTopic) {
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  // (A missing progress topic is refused with kNotFound by a broker; the
  // mock creates every topic a client asks for.)
  OutboxRelayOptions no_topic = RelayOptions();
  no_topic.progress_topic.clear();
  EXPECT_EQ(OutboxRelay::Create(engine.get(), no_topic).status().code(),
            absl::StatusCode::kInvalidArgument);
  OutboxRelayOptions own = RelayOptions();
  own.kafka_config.emplace_back("transactional.id", "x");
  EXPECT_EQ(OutboxRelay::Create(engine.get(), own).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Drain reads each full round's successor while the round's transaction
// commits. When that commit fails, the entries read ahead are dropped: the
// round that follows starts at the failed round's entries. (A broker aborts
// them and the new producer publishes them again; the mock aborts nothing,
// so the new producer finds the failed round's progress and acknowledges
// them as published.) The broken variant that keeps the read-ahead
// publishes the later entries and acknowledges the failed round's entries
// with them, never looking at them again.
TEST_F(KafkaTransactionalTest,
       TransactionalRelayDropsWhatItReadAheadWhenTheCommitFails) {
  for (bool broken : {false, true}) {
    SCOPED_TRACE(broken ? "broken variant" : "relay");
    util::TempDir dir;
    ASSERT_OPEN(engine, dir.Sub("store"), Options());
    CommitEmits(*engine, 25);  // rounds of 10: 1-10, 11-20, 21-25
    OutboxRelayHooks hooks;
    hooks.keep_read_ahead_of_failed_commit = broken;
    int commits = 0;
    hooks.before_transaction_commit = [&] {
      if (++commits == 2) {  // fence the second round's commit
        return bed_.cluster->FailNextRequests(kEndTxn, {kProducerFenced});
      }
      return absl::OkStatus();
    };
    OutboxRelayOptions options =
        RelayOptions(absl::StrCat("read-ahead-", broken));
    auto relay =
        kafka::CreateOutboxRelayWithHooks(engine.get(), options, hooks);
    ASSERT_TRUE(relay.ok()) << relay.status();
    EXPECT_EQ((*relay)->Drain().status().code(), absl::StatusCode::kAborted);
    absl::StatusOr<RelayReport> after = (*relay)->Drain();
    ASSERT_TRUE(after.ok()) << after.status();
    EXPECT_THAT(*engine->ReadOutbox(10), IsEmpty());
    // Entries 11..25 are each published or found published once more.
    const int64_t seen = after->published + after->already_published;
    if (broken) {
      EXPECT_EQ(seen, 5);
    } else {
      EXPECT_EQ(seen, 15);
      EXPECT_EQ(after->acknowledged, 15);
    }
  }
}

// A producer fenced at its commit (a newer instance of the transactional.id
// took over, as a broker reports it) fails the round with kAborted; the
// next round creates the producer again and publishes everything.
TEST_F(KafkaTransactionalTest, TransactionalRelayFencedProducerIsCreatedAgain) {
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  CommitEmits(*engine, 5);
  auto relay = OutboxRelay::Create(engine.get(), RelayOptions());
  ASSERT_TRUE(relay.ok()) << relay.status();
  ASSERT_TRUE(bed_.cluster->FailNextRequests(kEndTxn, {kProducerFenced}).ok());
  absl::StatusOr<RelayReport> fenced = (*relay)->RelayOnce();
  EXPECT_EQ(fenced.status().code(), absl::StatusCode::kAborted)
      << fenced.status();
  EXPECT_THAT(fenced.status().message(), HasSubstr("fenced"));
  EXPECT_EQ((*relay)->stats().aborted_transactions, 1);
  absl::StatusOr<RelayReport> drained = (*relay)->Drain();
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_EQ(drained->acknowledged, 5);
  // A broker aborts the fenced transaction, and the new producer publishes
  // the entries again; the mock aborts nothing, so the new producer reads
  // the fenced transaction's progress and acknowledges them as published.
  EXPECT_EQ(drained->published + drained->already_published, 5);
  EXPECT_THAT(IdCounts(kRelayDownstream), SizeIs(5));
}

// A relay process killed at random points of its rounds (before a
// transaction's commit, between the commit and the acknowledgement, after
// the acknowledgement), 24 times: a read_committed reader counts every
// emitted message once. With the broken variant that ignores its progress,
// four kills between commit and acknowledgement publish entries twice.
class KafkaTransactionalKillTest : public KafkaTransactionalTest {
 protected:
  // Enough for 24 kills, each of which ends one or two rounds of 10.
  static constexpr int kEntries = 500;

  // The IDs not seen exactly once after draining kEntries entries with a
  // relay process killed `kill_count` times, at `steps` in turn, each in its
  // first or second round.
  std::vector<std::string> KilledRelay(bool ignore_progress, int kill_count,
                                       std::vector<const char*> steps) {
    const std::string store = dir_.Sub("store");
    {
      auto engine = Engine::Open(store, Options());
      EXPECT_TRUE(engine.ok()) << engine.status();
      if (!engine.ok()) return {"no engine"};
      CommitEmits(**engine, kEntries);
    }
    std::mt19937 random(20261203);
    int kills = 0;
    for (int cycle = 0; cycle < 60; ++cycle) {
      std::vector<std::string> args = {bed_.cluster->bootstrap_servers(), store,
                                       "killed-relay"};
      if (kills < kill_count) {
        args.push_back(absl::StrCat("--die_at=", steps[cycle % steps.size()],
                                    ":", 1 + random() % 2));
      }
      if (ignore_progress) args.push_back("--ignore_progress");
      absl::StatusOr<pid_t> child =
          test::SpawnKafkaChild(IDEM_KAFKA_RELAY_CHILD, args);
      EXPECT_TRUE(child.ok()) << child.status();
      if (!child.ok()) return {"no child"};
      int wstatus = 0;
      waitpid(*child, &wstatus, 0);
      if (WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL) {
        ++kills;
        continue;
      }
      EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
      if (kills >= kill_count) break;
    }
    EXPECT_GE(kills, kill_count);
    std::map<std::string, int> counts = IdCounts(kRelayDownstream);
    EXPECT_THAT(counts, SizeIs(kEntries));
    return test::NotOnce(counts);
  }
};

TEST_F(KafkaTransactionalKillTest,
       TransactionalRelayKilledAtCommitTransactionAndAckPublishesOnce) {
  EXPECT_THAT(
      KilledRelay(/*ignore_progress=*/false, 24, {"commit", "ack", "acked"}),
      IsEmpty());
}

TEST_F(KafkaTransactionalKillTest,
       BrokenVariantTransactionalRelayKilledWithoutProgressIsCaught) {
  EXPECT_THAT(KilledRelay(/*ignore_progress=*/true, 4, {"ack"}),
              Not(IsEmpty()));
}

// A consumer with transactional_output: its handler's outputs reach the
// downstream topic once each, in transactions that carry the group's
// offsets; without the progress topic, or without a changelog, it is
// refused at Create. (Plain mode runs here through
// ConsumerHooks::plain_transactional_output: one member on one store,
// where it is exact.)
class KafkaTransactionalConsumerTest : public KafkaTransactionalTest {
 protected:
  ConsumerOptions TransactionalOptions(const std::string& group) const {
    ConsumerOptions options = test::TestConsumerOptions(bed_, group);
    options.transactional_output = true;
    return options;
  }
};

TEST_F(KafkaTransactionalConsumerTest,
       TransactionalOutputConsumerPublishesEachOutputOnce) {
  test::ProducedStream stream = test::MakeStream("orders", kRelayPartitions, 60,
                                                 /*duplicate_every=*/7, 1);
  ASSERT_TRUE(bed_.producer->Produce(stream.records).ok());
  ASSERT_OPEN(engine, dir_.Sub("store"), ::idem::Options());
  absl::Status refused =
      Consumer::Create(engine.get(), TransactionalOptions("stage")).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("needs changelog_topic"));
  kafka::ConsumerHooks one_store;
  one_store.plain_transactional_output = true;
  auto consumer = kafka::CreateConsumerWithHooks(
      engine.get(), TransactionalOptions("stage"), one_store);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  absl::Status s = test::PollUntil(
      **consumer,
      [](const Record& r, Txn& txn) {
        return test::ApplyAndForward(r, txn, kRelayDownstream);
      },
      [&] {
        return test::AppliedCounts(*engine).size() >= stream.unique_ids.size();
      });
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE((*consumer)->Close().ok());
  std::map<std::string, int> counts = IdCounts(kRelayDownstream);
  EXPECT_THAT(counts, SizeIs(stream.unique_ids.size()));
  EXPECT_THAT(test::NotOnce(counts), IsEmpty());
  // The member's transactional.id is the store's: a second consumer on the
  // same store finds the first one's progress.
  auto again = kafka::CreateConsumerWithHooks(
      engine.get(), TransactionalOptions("stage"), one_store);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE((*again)->Close().ok());

  ConsumerOptions no_relay = TransactionalOptions("other");
  no_relay.relay_outbox = false;
  EXPECT_EQ(kafka::CreateConsumerWithHooks(engine.get(), no_relay, one_store)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// In changelog mode, a member whose transaction the group refuses (a stale
// generation, as a broker reports it through TxnOffsetCommit) drops its
// unpublished outputs with its changelog entries, checks its partitions
// against the changelog again, and goes on: its totals stay exact.
TEST_F(KafkaTransactionalConsumerTest,
       TransactionalOutputFencedMemberDropsItsPendingOutputs) {
  ASSERT_TRUE(bed_.cluster->CreateTopic("orders-state", kRelayPartitions).ok());
  ASSERT_TRUE(
      bed_.cluster->CreateTopic("orders-state.dedupe", kRelayPartitions).ok());
  test::ProducedStream first = test::MakeStream("orders", kRelayPartitions, 30,
                                                /*duplicate_every=*/0, 2);
  ASSERT_TRUE(bed_.producer->Produce(first.records).ok());
  ::idem::Options engine_options;
  engine_options.dedupe_scope = DedupeScope::kPartition;
  ASSERT_OPEN(engine, dir_.Sub("store"), engine_options);
  ConsumerOptions options = TransactionalOptions("members");
  options.changelog_topic = "orders-state";
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  auto forward = [](const Record& r, Txn& txn) {
    if (absl::Status s = test::ApplyInPartition(r, txn); !s.ok()) return s;
    txn.Emit(kRelayDownstream, r.key, r.value);
    return absl::OkStatus();
  };
  auto applied = [&] {
    return test::PartitionAppliedCounts(*engine, "orders", kRelayPartitions)
        .size();
  };
  ASSERT_TRUE(test::PollUntil(**consumer, forward, [&] {
                return applied() >= 30;
              }).ok());
  const int64_t checks_before = (*consumer)->stats().restore_checks;
  // The group refuses the next transaction's offsets.
  ASSERT_TRUE(
      bed_.cluster->FailNextRequests(kTxnOffsetCommit, {kIllegalGeneration})
          .ok());
  test::ProducedStream second = test::MakeStream("orders", kRelayPartitions, 30,
                                                 /*duplicate_every=*/0, 3);
  ASSERT_TRUE(bed_.producer->Produce(second.records).ok());
  // PollBatch reports the refused transaction as kUnavailable (what Run
  // rides out), once: at the first round after the second stream is
  // handled (transaction_interval).
  std::vector<absl::Status> errors;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while ((applied() < 60 || errors.empty()) && absl::Now() < deadline) {
    absl::StatusOr<kafka::BatchReport> polled = (*consumer)->PollBatch(forward);
    if (!polled.ok()) errors.push_back(polled.status());
  }
  ASSERT_THAT(errors, SizeIs(1));
  EXPECT_EQ(errors[0].code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(errors[0].message(), HasSubstr("fenced"));
  const kafka::ConsumerStats stats = (*consumer)->stats();
  EXPECT_GE(stats.membership_lost, 1);
  EXPECT_GT(stats.outbox_dropped, 0);
  EXPECT_THAT(
      test::EffectErrors(
          [&] {
            std::set<std::string> ids = first.unique_ids;
            ids.insert(second.unique_ids.begin(), second.unique_ids.end());
            return ids;
          }(),
          test::PartitionAppliedCounts(*engine, "orders", kRelayPartitions)),
      IsEmpty());
  // The member checks its partitions against the changelog again, which
  // lacks the refused round, restores them (the refused round's effects
  // go) and processes those records again: their outputs are published
  // then.
  ASSERT_TRUE(test::PollUntil(**consumer, forward, [&] {
                absl::StatusOr<Stats> engine_stats = engine->GetStats();
                return (*consumer)->stats().restore_checks >=
                           checks_before + kRelayPartitions &&
                       (*consumer)->stats().partitions_restoring == 0 &&
                       applied() >= 60 && engine_stats.ok() &&
                       engine_stats->outbox_pending == 0;
              }).ok());
  ASSERT_TRUE((*consumer)->Close().ok());
  // The refused round sent its offsets before producing anything, so even
  // the mock (which aborts nothing) shows each output once.
  std::map<std::string, int> counts = IdCounts(kRelayDownstream);
  EXPECT_THAT(counts, SizeIs(60));
  EXPECT_THAT(test::NotOnce(counts), IsEmpty());
}

}  // namespace
}  // namespace idem
