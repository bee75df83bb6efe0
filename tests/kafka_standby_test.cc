// Standby copies (ConsumerOptions::standby_partitions) against librdkafka's
// mock cluster: a member keeps the partitions another member holds warm by
// following their changelog, its copy is the owner's, and when it takes a
// partition over (after an orderly leave, or a SIGKILL) it reads only the
// changelog's tail, and every total stays exact.
//
// A standby copy never applies records of an open transaction and never
// skips them once they commit: it reads each round up to the last stable
// offset, without waiting, and on from there at the next round. The owner
// runs with transactional output; its relay is held inside a transaction
// (its records produced, the commit not sent: ConsumerHooks::relay_step
// "commit") while the standby runs its rounds, then commits. librdkafka
// 2.0.2's mock cluster keeps no last stable offset (it answers the high
// watermark, and serves the open transaction's records), so the brokers'
// answer is emulated through PartitionReaderHooks::stable_offset
// (ConsumerHooks::changelog_reader): while the owner's relay is held, the
// last stable offset of each of the owner's changelog partitions, in both
// topics, is the end of the log before that transaction. The broken twin
// (ConsumerHooks::standby_takes_log_end) reads to the same place but takes
// the end of the log as read: it applies nothing while the transaction is
// open either, but never the transaction's records once it committed, and
// its copy stays behind the owner's.

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/partition_state.h"
#include "kafka/changelog_format.h"
#include "kafka/consumer_hooks.h"
#include "kafka/partition_reader.h"
#include "tests/testing/changelog_test_base.h"
#include "tests/testing/kafka_test_util.h"

namespace idem {
namespace {

using ::idem::kafka::Consumer;
using ::idem::kafka::ConsumerOptions;
using ::idem::kafka::RestoreReport;
using ::idem::test::AddMessage;
using ::idem::test::kChangelog;
using ::idem::test::kPartitions;
using ::idem::test::kTopic;
using ::idem::test::MakeStream;
using ::idem::test::Stream;
using ::testing::IsEmpty;

class KafkaStandbyTest : public test::ChangelogTestBase {
 protected:
  ConsumerOptions StandbyOptions(std::vector<RestoreReport>* reports) {
    ConsumerOptions options = MemberOptions(reports);
    options.standby_partitions = {0, 1, 2};
    options.standby_interval = absl::Milliseconds(20);
    return options;
  }

  // Both members hold partitions, and `b`'s copies of the partitions `ca`
  // holds are at `a`'s offsets.
  static bool CopiesAtOwnersOffsets(Consumer& ca, Engine& a, Consumer& cb,
                                    Engine& b) {
    if (ca.Assignment().empty() || cb.Assignment().empty()) return false;
    for (const auto& [topic, p] : ca.Assignment()) {
      absl::StatusOr<std::optional<int64_t>> owner =
          a.CommittedOffset(kTopic, p);
      absl::StatusOr<std::optional<int64_t>> copy =
          b.CommittedOffset(kTopic, p);
      if (!owner.ok() || !copy.ok() || *owner != *copy) return false;
    }
    return true;
  }

  // The records of changelog partition `partition`, both topics.
  int64_t ChangelogRecords(int32_t partition) {
    auto reader = kafka::PartitionReader::Create(
        bed_.cluster->bootstrap_servers(), {{"log_level", "3"}});
    EXPECT_TRUE(reader.ok()) << reader.status();
    if (!reader.ok()) return -1;
    int64_t records = 0;
    for (const std::string& topic :
         {std::string(kChangelog), kafka::DedupeTopicOf(kChangelog)}) {
      absl::Status s = (*reader)->Read(topic, partition, 0, absl::Seconds(10),
                                       [&](const kafka::LogRecord&) {
                                         ++records;
                                         return absl::OkStatus();
                                       });
      EXPECT_TRUE(s.ok()) << s;
    }
    return records;
  }

  // The partition's copy in `engine`, as ExportPartition gives it, without
  // the owner's epoch and checkpoint (a standby copy has neither).
  static PartitionSnapshot Copy(Engine& engine, int32_t partition) {
    absl::StatusOr<PartitionSnapshot> snapshot =
        engine.ExportPartition(kTopic, partition);
    EXPECT_TRUE(snapshot.ok()) << snapshot.status();
    if (!snapshot.ok()) return {};
    // The epoch and the checkpoint are the member's own, not the state's:
    // an owner that found its copy current has a checkpoint, its copy not.
    std::erase_if(snapshot->entries, [](const auto& entry) {
      return entry.first == kafka::kEpochStateKey ||
             entry.first == kafka::kCheckpointStateKey;
    });
    return *std::move(snapshot);
  }

  // Members A and B, polled in turn from this thread, share the group; B
  // keeps standby copies (with `b_hooks`). Once both hold partitions and
  // B's copies have caught up, each of A's partitions is compared with B's
  // copy; then A leaves, a producer duplicate of a message A processed
  // arrives, and B takes everything over. Returns how often B's state
  // applied that message; fails the test if B's copies differ from A's
  // (state, offset, and unless `b_hooks` leave them out, dedupe records),
  // if its restores read more than the tail, or if its totals are not
  // exact (unless the hooks break it).
  int TakeOverAfterALeaves(const kafka::ConsumerHooks& b_hooks) {
    Stream all = MakeStream("first", 120);
    Produce(all);
    std::unique_ptr<Engine> a = OpenStore("a");
    std::unique_ptr<Engine> b = OpenStore("b");
    if (a == nullptr || b == nullptr) return -1;
    std::vector<RestoreReport> a_reports, b_reports;
    auto ca =
        kafka::CreateConsumerWithHooks(a.get(), MemberOptions(&a_reports), {});
    auto cb = kafka::CreateConsumerWithHooks(
        b.get(), StandbyOptions(&b_reports), b_hooks);
    EXPECT_TRUE(ca.ok() && cb.ok());
    if (!ca.ok() || !cb.ok()) return -1;
    // Both members' partitions handled, and B's copies of A's caught up.
    auto caught_up = [&] {
      return CopiesAtOwnersOffsets(**ca, *a, **cb, *b) &&
             Handled(*b) == Handled(all);
    };
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (!caught_up() && absl::Now() < deadline) {
      EXPECT_TRUE((*ca)->PollBatch(test::ApplyInPartition).ok());
      EXPECT_TRUE((*cb)->PollBatch(test::ApplyInPartition).ok());
    }
    EXPECT_TRUE(caught_up()) << "the standby copies never caught up";
    std::set<int32_t> a_partitions;
    for (const auto& [topic, p] : (*ca)->Assignment()) a_partitions.insert(p);
    for (int32_t p : a_partitions) {
      const PartitionSnapshot owner = Copy(*a, p);
      const PartitionSnapshot copy = Copy(*b, p);
      EXPECT_EQ(copy.offset, owner.offset) << "partition " << p;
      EXPECT_EQ(copy.entries, owner.entries) << "partition " << p;
    }
    if (!b_hooks.standby_without_dedupe) {
      // Every message A processed is a duplicate in B's copy too.
      for (const kafka::OutgoingRecord& record : all.records) {
        if (!a_partitions.contains(record.partition)) continue;
        EXPECT_TRUE(*b->Seen(record.key, kTopic, record.partition))
            << record.key;
      }
    }
    EXPECT_GT((*cb)->stats().standby_updates, 0);
    EXPECT_GT((*cb)->stats().standby_records_read, 0);
    EXPECT_EQ((*cb)->stats().standby_errors, 0);
    EXPECT_TRUE((*ca)->Close().ok());

    // A producer duplicate of the first message A processed.
    const int32_t moved = *a_partitions.begin();
    const std::string original = absl::StrCat("first-", moved);
    Stream second = MakeStream("second", 30);
    AddMessage(second, original, moved, 1, /*duplicate=*/true);
    Produce(second);
    test::ChangelogTestBase::Append(all, second);
    absl::Status s = test::PollUntil(**cb, test::ApplyInPartition, [&] {
      return Handled(*b) >= Handled(all) &&
             (*cb)->Assignment().size() == static_cast<size_t>(kPartitions);
    });
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_TRUE((*cb)->Close().ok());
    if (!b_hooks.standby_without_dedupe) ExpectTotals(*b, all);
    for (int32_t p : a_partitions) {
      bool from_standby = false;
      for (const RestoreReport& r : b_reports) {
        if (r.partition != p || !r.from_standby) continue;
        from_standby = true;
        EXPECT_TRUE(r.restored);
        EXPECT_LT(r.records_read, ChangelogRecords(p) / 2)
            << "partition " << p << ": more than the tail was read";
      }
      EXPECT_TRUE(from_standby) << "partition " << p;
    }
    EXPECT_THAT(MarksGoingBack(), IsEmpty());
    std::map<std::string, int> applied =
        test::PartitionAppliedCounts(*b, kTopic, kPartitions);
    return applied.contains(original) ? applied[original] : 0;
  }

  // What a standby copy did around the owner's open transaction.
  struct OpenTransactionRun {
    // The owner's relay was held inside the transaction.
    bool held = false;
    // The standby's rounds while it was open, and how often the emulated
    // brokers answered a last stable offset below the end of the log.
    int64_t rounds_while_open = 0;
    int64_t reads_stopped_short = 0;
    // Partitions whose copy moved while the transaction was open.
    std::vector<std::string> applied_while_open;
    // Once it committed, every copy reached the owner's offset (within
    // kCatchUp), and the copies' state.
    bool caught_up = false;
    std::map<int32_t, PartitionSnapshot> owner, copy;
  };

  // The emulated last stable offsets (see the file comment): while `open`,
  // those of `ends`' partitions are the ends of their logs before the
  // owner's transaction.
  struct OpenTransaction {
    absl::Mutex mu;
    bool open ABSL_GUARDED_BY(mu) = false;
    std::map<std::pair<std::string, int32_t>, int64_t> ends ABSL_GUARDED_BY(mu);
    int64_t stopped_short ABSL_GUARDED_BY(mu) = 0;
  };

  static kafka::PartitionReaderHooks EmulatedStableOffsets(
      std::shared_ptr<OpenTransaction> txn) {
    kafka::PartitionReaderHooks hooks;
    hooks.stable_offset = [txn](const std::string& topic, int32_t partition,
                                int64_t stable, int64_t end) {
      absl::MutexLock lock(&txn->mu);
      if (!txn->open) return stable;
      auto it = txn->ends.find({topic, partition});
      if (it == txn->ends.end() || it->second >= end) return stable;
      ++txn->stopped_short;
      return std::min(stable, it->second);
    };
    return hooks;
  }

  // Member A owns its partitions with transactional output; B, with
  // `b_hooks` and standby copies, follows them. Once B's copies caught up,
  // more input arrives for A's partitions, and A's relay is held inside the
  // transaction that carries it while B runs standby rounds; then A
  // commits, and both are polled until B's copies reach A's offsets.
  OpenTransactionRun StandbyAroundAnOpenTransaction(
      kafka::ConsumerHooks b_hooks) {
    constexpr absl::Duration kHeldFor = absl::Milliseconds(600);
    constexpr absl::Duration kCatchUp = absl::Seconds(10);
    OpenTransactionRun run;
    EXPECT_TRUE(
        bed_.cluster->CreateTopic(ConsumerOptions().relay_progress_topic, 1)
            .ok());
    Stream all = MakeStream("first", 60);
    Produce(all);
    std::unique_ptr<Engine> a = OpenStore("a");
    std::unique_ptr<Engine> b = OpenStore("b");
    if (a == nullptr || b == nullptr) return run;
    auto txn = std::make_shared<OpenTransaction>();
    b_hooks.changelog_reader = EmulatedStableOffsets(txn);
    auto watch = kafka::PartitionReader::Create(
        bed_.cluster->bootstrap_servers(), {{"log_level", "3"}});
    EXPECT_TRUE(watch.ok()) << watch.status();
    if (!watch.ok()) return run;

    std::unique_ptr<Consumer> cb;
    std::set<int32_t> a_partitions;
    bool hold = false;
    // A's relay: held at the first transaction after `hold` is set.
    kafka::ConsumerHooks a_hooks;
    a_hooks.relay_step = [&](const char* step) {
      if (!hold || std::string(step) != "commit") return;
      hold = false;
      run.held = true;
      std::map<int32_t, std::optional<int64_t>> before;
      for (int32_t p : a_partitions) before[p] = *b->CommittedOffset(kTopic, p);
      {
        absl::MutexLock lock(&txn->mu);
        txn->open = true;
      }
      const int64_t rounds_before = cb->stats().standby_updates;
      const absl::Time until = absl::Now() + kHeldFor;
      while (absl::Now() < until) {
        EXPECT_TRUE(cb->PollBatch(test::ApplyInPartition).ok());
      }
      run.rounds_while_open = cb->stats().standby_updates - rounds_before;
      {
        absl::MutexLock lock(&txn->mu);
        txn->open = false;
        run.reads_stopped_short = txn->stopped_short;
      }
      for (int32_t p : a_partitions) {
        if (*b->CommittedOffset(kTopic, p) != before[p]) {
          run.applied_while_open.push_back(absl::StrCat("partition ", p));
        }
      }
    };
    std::vector<RestoreReport> a_reports, b_reports;
    ConsumerOptions a_options = MemberOptions(&a_reports);
    a_options.transactional_output = true;
    ConsumerOptions b_options = StandbyOptions(&b_reports);
    b_options.transactional_output = true;
    auto ca = kafka::CreateConsumerWithHooks(a.get(), a_options, a_hooks);
    auto created_b =
        kafka::CreateConsumerWithHooks(b.get(), b_options, b_hooks);
    EXPECT_TRUE(ca.ok() && created_b.ok());
    if (!ca.ok() || !created_b.ok()) return run;
    cb = *std::move(created_b);

    // B's copies of A's partitions at A's offsets (and A's published).
    auto copies_current = [&] {
      return CopiesAtOwnersOffsets(**ca, *a, *cb, *b) &&
             Handled(*b) == Handled(all) && a->ReadOutbox(1)->empty();
    };
    auto poll_until = [&](const std::function<bool()>& done,
                          absl::Duration timeout) {
      const absl::Time deadline = absl::Now() + timeout;
      while (!done() && absl::Now() < deadline) {
        EXPECT_TRUE((*ca)->PollBatch(test::ApplyInPartition).ok());
        EXPECT_TRUE(cb->PollBatch(test::ApplyInPartition).ok());
      }
      return done();
    };
    EXPECT_TRUE(poll_until(copies_current, absl::Seconds(60)))
        << "the standby copies never caught up";
    for (const auto& [topic, p] : (*ca)->Assignment()) a_partitions.insert(p);
    // The ends of A's changelog partitions before the next transaction.
    {
      absl::MutexLock lock(&txn->mu);
      for (int32_t p : a_partitions) {
        for (const std::string& topic :
             {std::string(kChangelog), kafka::DedupeTopicOf(kChangelog)}) {
          absl::StatusOr<kafka::Watermarks> marks =
              (*watch)->GetWatermarks(topic, p, absl::Seconds(10));
          EXPECT_TRUE(marks.ok()) << marks.status();
          if (marks.ok()) txn->ends[{topic, p}] = marks->high;
        }
      }
    }
    Stream second;
    int i = 0;
    for (int32_t p : a_partitions) {
      for (int n = 0; n < 10; ++n, ++i) {
        AddMessage(second, absl::StrCat("second-", i), p, 1 + i % 7, false);
      }
    }
    hold = true;
    Produce(second);
    test::ChangelogTestBase::Append(all, second);
    run.caught_up = poll_until(
        [&] { return !hold && run.held && copies_current(); }, kCatchUp);
    for (int32_t p : a_partitions) {
      run.owner[p] = Copy(*a, p);
      run.copy[p] = Copy(*b, p);
    }
    EXPECT_TRUE((*ca)->Close().ok());
    EXPECT_TRUE(cb->Close().ok());
    return run;
  }
};

// B's copies of A's partitions are A's own (state, offset, dedupe
// records); when A leaves, B restores them from the copies and the tail,
// and catches a producer duplicate of a message only A processed.
TEST_F(KafkaStandbyTest, StandbyCopyIsTheOwnersAndTakesOverFromTheTail) {
  EXPECT_EQ(TakeOverAfterALeaves({}), 1);
}

// As above on stores of 2 shards: each standby copy goes into its
// partition's shard, and the takeover from it is as exact.
TEST_F(KafkaStandbyTest, StandbyCopyOnShardedStoresTakesOverExactly) {
  shards_ = 2;
  EXPECT_EQ(TakeOverAfterALeaves({}), 1);
}

// The broken variant: copies without the dedupe records. The duplicate is
// applied a second time, which the test above would catch.
TEST_F(KafkaStandbyTest, StandbyBrokenVariantWithoutDedupeIsCaught) {
  EXPECT_EQ(TakeOverAfterALeaves({.standby_without_dedupe = true}), 2);
}

// A, in a process of its own, is SIGKILLed while B, in the same group,
// keeps standby copies of A's partitions; B takes them over from the
// copies and the tail, and every total is exact.
TEST_F(KafkaStandbyTest, StandbyTakesOverFromAKilledMember) {
  Stream all = MakeStream("m", 600);
  Produce(all);
  const std::string store_a = dir_.Sub("a");
  { ASSERT_NE(OpenStore("a"), nullptr); }
  auto handled_a = [&] { return HandledInStore(store_a); };
  pid_t pid = 0;
  ASSERT_NO_FATAL_FAILURE(SpawnChild(store_a, {}, &pid));
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (handled_a() < 30 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  std::unique_ptr<Engine> b = OpenStore("b");
  ASSERT_NE(b, nullptr);
  std::vector<RestoreReport> b_reports;
  auto cb =
      kafka::CreateConsumerWithHooks(b.get(), StandbyOptions(&b_reports), {});
  ASSERT_TRUE(cb.ok()) << cb.status();
  bool killed = false;
  absl::Status s = test::PollUntil(
      **cb, test::ApplyInPartition,
      [&] {
        // Kill A once B holds partitions and has followed A's for a while.
        if (!killed && !(*cb)->Assignment().empty() &&
            (*cb)->stats().standby_updates >= 20) {
          kill(pid, SIGKILL);
          int wstatus = 0;
          EXPECT_EQ(waitpid(pid, &wstatus, 0), pid);
          killed = true;
        }
        return killed && Handled(*b) >= Handled(all) &&
               (*cb)->Assignment().size() == static_cast<size_t>(kPartitions);
      },
      absl::Seconds(90));
  if (!killed) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE((*cb)->Close().ok());
  ExpectExact(*b, all);
  int from_standby = 0;
  for (const RestoreReport& r : b_reports) {
    if (!r.from_standby) continue;
    ++from_standby;
    EXPECT_LT(r.records_read, ChangelogRecords(r.partition) / 2)
        << "partition " << r.partition << ": more than the tail was read";
  }
  EXPECT_GT(from_standby, 0);
  EXPECT_THAT(MarksGoingBack(), IsEmpty());
}

// B runs standby rounds while A's transaction is open: its copies apply
// none of that transaction's records, and once it commits they read them
// and are A's own again.
TEST_F(KafkaStandbyTest,
       StandbyCopyAppliesNoOpenTransactionAndReadsItOnceCommitted) {
  const OpenTransactionRun run = StandbyAroundAnOpenTransaction({});
  ASSERT_TRUE(run.held);
  EXPECT_GT(run.rounds_while_open, 0);
  EXPECT_GT(run.reads_stopped_short, 0);
  EXPECT_THAT(run.applied_while_open, IsEmpty());
  EXPECT_TRUE(run.caught_up);
  for (const auto& [p, owner] : run.owner) {
    EXPECT_EQ(run.copy.at(p).offset, owner.offset) << "partition " << p;
    EXPECT_EQ(run.copy.at(p).entries, owner.entries) << "partition " << p;
  }
}

// The broken twin takes the end of the log as read where its read stopped
// at the last stable offset: it skips the open transaction's records for
// good, and its copies stay behind A's after the commit.
TEST_F(KafkaStandbyTest,
       StandbyBrokenVariantTakingTheLogEndAsReadSkipsTheCommittedTransaction) {
  const OpenTransactionRun run =
      StandbyAroundAnOpenTransaction({.standby_takes_log_end = true});
  ASSERT_TRUE(run.held);
  EXPECT_GT(run.reads_stopped_short, 0);
  EXPECT_THAT(run.applied_while_open, IsEmpty());
  EXPECT_FALSE(run.caught_up);
}

TEST_F(KafkaStandbyTest, StandbyOptionsAreChecked) {
  std::unique_ptr<Engine> engine = OpenStore("s");
  ASSERT_NE(engine, nullptr);
  std::vector<RestoreReport> reports;
  ConsumerOptions no_changelog = StandbyOptions(&reports);
  no_changelog.changelog_topic.clear();
  EXPECT_EQ(Consumer::Create(engine.get(), no_changelog).status().code(),
            absl::StatusCode::kInvalidArgument);
  ConsumerOptions negative = StandbyOptions(&reports);
  negative.standby_partitions = {-1};
  EXPECT_EQ(Consumer::Create(engine.get(), negative).status().code(),
            absl::StatusCode::kInvalidArgument);
  ConsumerOptions zero = StandbyOptions(&reports);
  zero.standby_interval = absl::ZeroDuration();
  EXPECT_EQ(Consumer::Create(engine.get(), zero).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace idem
