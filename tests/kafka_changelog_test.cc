// Changelog mode (ConsumerOptions::changelog_topic) against librdkafka's mock
// cluster: a partition's state, dedupe records and offset follow it to
// another member, which restores them before processing it; a member that
// was killed, or that comes back with a stale copy, is corrected from the
// changelog; and every total stays exact.

#include <signal.h>
#include <sys/wait.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/logger.h"
#include "idem/partition_state.h"
#include "kafka/changelog_format.h"
#include "kafka/consumer_hooks.h"
#include "tests/testing/changelog_test_base.h"
#include "tests/testing/kafka_test_util.h"

namespace idem {
namespace {

using ::idem::kafka::Consumer;
using ::idem::kafka::ConsumerOptions;
using ::idem::kafka::Record;
using ::idem::kafka::RestoreReport;
using ::idem::test::AddMessage;
using ::idem::test::kChangelog;
using ::idem::test::kPartitions;
using ::idem::test::kTopic;
using ::idem::test::MakeStream;
using ::idem::test::Stream;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

class KafkaChangelogTest : public test::ChangelogTestBase {
 protected:
  // Member A processes a stream alone and leaves; B (each with workers_
  // workers and shards_ shards) restores every partition from the changelog
  // and processes a second stream, with a producer duplicate of A's first
  // record. Both stores are checked exact, and the changelog's marks never
  // go back. Returns B's store.
  std::unique_ptr<Engine> RestoreByWorkers() {
    Stream all = MakeStream("first", 90);
    Produce(all);
    std::unique_ptr<Engine> a = OpenStore("a");
    EXPECT_NE(a, nullptr);
    if (a == nullptr) return nullptr;
    std::vector<RestoreReport> a_reports;
    ConsumeUntil(*a, Handled(all), &a_reports);
    ExpectExact(*a, all);

    Stream second = MakeStream("second", 45);
    AddMessage(second, "first-0", 0, 1, true);  // only A processed the first
    Produce(second);
    Append(all, second);
    std::unique_ptr<Engine> b = OpenStore("b");
    EXPECT_NE(b, nullptr);
    if (b == nullptr) return nullptr;
    std::vector<RestoreReport> b_reports;
    ConsumeUntil(*b, Handled(all), &b_reports);
    EXPECT_EQ(b_reports.size(), static_cast<size_t>(kPartitions));
    for (const RestoreReport& r : b_reports) {
      EXPECT_TRUE(r.restored);
      EXPECT_GT(r.dedupe_records, 0);
    }
    ExpectExact(*b, all);
    EXPECT_THAT(MarksGoingBack(), IsEmpty());
    return b;
  }

  // Member A processes a first stream but publishes none of it (as if
  // killed after each commit); B restores (nothing), processes it and a
  // second stream, and leaves. A returns with its stale store and pending
  // entries, with `returning` hooks, and leaves; C, with an empty store,
  // restores and processes everything. Returns C's applied counts; fails
  // the test if C's totals are not `all`'s only when `expect_exact`.
  std::map<std::string, int> StaleReturn(const kafka::ConsumerHooks& returning,
                                         Stream& all, bool expect_exact) {
    all = MakeStream("first", 30);
    Produce(all);
    std::vector<RestoreReport> reports;
    std::unique_ptr<Engine> a = OpenStore("a");
    EXPECT_NE(a, nullptr);
    if (a == nullptr) return {};
    ConsumeUntil(*a, Handled(all), &reports, {.skip_relay = true});
    Stream second = MakeStream("second", 30);
    Produce(second);
    Append(all, second);
    std::unique_ptr<Engine> b = OpenStore("b");
    ConsumeUntil(*b, Handled(all), &reports);
    ConsumeUntil(*a, Handled(all), &reports, returning);
    std::unique_ptr<Engine> c = OpenStore("c");
    ConsumeUntil(*c, Handled(all), &reports);
    if (expect_exact) {
      ExpectExact(*c, all);
      EXPECT_THAT(MarksGoingBack(), IsEmpty());
    }
    return test::PartitionAppliedCounts(*c, kTopic, kPartitions);
  }

  // A processes a stream in which the commit of "m-4" fails after its
  // handler returned OK (an emit to an empty destination: kInvalidArgument,
  // dead-lettered at once), with the changelog produced in or outside the
  // commit; B restores. Returns how often B's state applied "m-4".
  int AppliedByNextOwner(bool outside_commit) {
    Stream all = MakeStream("m", 12);
    Produce(all);
    auto handler = [](const Record& record, Txn& txn) {
      if (absl::Status s = test::ApplyInPartition(record, txn); !s.ok()) {
        return s;
      }
      if (record.id == "m-4") txn.Emit("", "k", "v");  // fails the commit
      return absl::OkStatus();
    };
    std::vector<RestoreReport> reports;
    std::unique_ptr<Engine> a = OpenStore("a");
    std::unique_ptr<Engine> b = OpenStore("b");
    if (a == nullptr || b == nullptr) return -1;
    ConsumeUntil(*a, Handled(all), &reports,
                 {.changelog_outside_commit = outside_commit}, handler);
    EXPECT_TRUE(dead_lettered_.contains("m-4"));
    EXPECT_EQ(
        test::PartitionAppliedCounts(*a, kTopic, kPartitions).count("m-4"), 0u);
    ConsumeUntil(*b, Handled(all), &reports);
    std::map<std::string, int> applied =
        test::PartitionAppliedCounts(*b, kTopic, kPartitions);
    return applied.contains("m-4") ? applied["m-4"] : 0;
  }

  // Member A, on a clock that is set back 30 minutes between two streams
  // (the engine's time does not go back), processes both with `hooks`;
  // member B restores every partition from the changelog. Returns the
  // stream's dedupe records whose expiry in B differs from A's, as "<key>:
  // <A's> != <B's>", or that B lacks.
  std::vector<std::string> RestoredExpiryErrors(
      const kafka::ConsumerHooks& hooks) {
    ManualClock clock(test::kStart);
    Stream all = MakeStream("first", 30);
    Produce(all);
    std::unique_ptr<Engine> a = OpenStore("a", &clock);
    std::unique_ptr<Engine> b = OpenStore("b", &clock);
    if (a == nullptr || b == nullptr) return {"no store"};
    std::vector<RestoreReport> reports;
    {
      auto consumer = kafka::CreateConsumerWithHooks(
          a.get(), MemberOptions(&reports), hooks);
      if (!consumer.ok()) return {consumer.status().ToString()};
      absl::Status s = test::PollUntil(**consumer, test::ApplyInPartition, [&] {
        return Handled(*a) >= Handled(all);
      });
      if (!s.ok()) return {s.ToString()};
      clock.Set(test::kStart - absl::Minutes(30));
      Stream second = MakeStream("second", 30);
      Produce(second);
      Append(all, second);
      s = test::PollUntil(**consumer, test::ApplyInPartition,
                          [&] { return Handled(*a) >= Handled(all); });
      if (!s.ok()) return {s.ToString()};
      if (absl::Status closed = (*consumer)->Close(); !closed.ok()) {
        return {closed.ToString()};
      }
    }
    ConsumeUntil(*b, Handled(all), &reports);
    std::map<std::string, absl::Time> a_expiry = DedupeExpiries(*a);
    std::map<std::string, absl::Time> b_expiry = DedupeExpiries(*b);
    std::vector<std::string> errors;
    for (const std::string& id : all.ids) {
      const std::string key = test::HexOfIdHash(id);
      const absl::Time expires = a_expiry[key];
      auto restored = b_expiry.find(key);
      if (restored == b_expiry.end()) {
        errors.push_back(absl::StrCat(key, ": not restored"));
      } else if (restored->second != expires) {
        errors.push_back(
            absl::StrCat(key, ": ", absl::FormatTime(expires),
                         " != ", absl::FormatTime(restored->second)));
      }
    }
    return errors;
  }

  // The expiry of every dedupe record of `engine`, by its key.
  static std::map<std::string, absl::Time> DedupeExpiries(Engine& engine) {
    std::map<std::string, absl::Time> expiries;
    absl::Status s = engine.Dump([&](const DumpEntry& entry) {
      if (entry.kind == DumpEntry::Kind::kDedupe) {
        expiries[entry.key] = entry.expires_at;
      }
      return absl::OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s;
    return expiries;
  }

  // Runs the child consumer (tests/kafka_consumer_child.cc) in changelog
  // mode on the store `store` until it SIGKILLs itself at restore step
  // `step`; fails the test unless it did.
  void RunChildDyingAt(const std::string& store, const std::string& step) {
    pid_t pid = 0;
    ASSERT_NO_FATAL_FAILURE(
        SpawnChild(store, {absl::StrCat("--die_at=", step)}, &pid));
    absl::Status died = test::WaitForKillPoint(pid);
    ASSERT_TRUE(died.ok()) << "restore step " << step << ": " << died;
  }
};

// Member A processes the first half and leaves; member B, with an empty
// store, restores every partition from the changelog and processes the
// rest. B's totals are exact, and a producer duplicate of a message only A
// processed is caught by B.
TEST_F(KafkaChangelogTest, ChangelogRestoreMovesStateDedupeAndOffset) {
  Stream all = MakeStream("first", 60);
  Produce(all);
  std::unique_ptr<Engine> a = OpenStore("a");
  ASSERT_NE(a, nullptr);
  std::vector<RestoreReport> a_reports;
  ASSERT_NO_FATAL_FAILURE(ConsumeUntil(*a, Handled(all), &a_reports));
  ASSERT_EQ(a_reports.size(), static_cast<size_t>(kPartitions));
  for (const RestoreReport& r : a_reports) {
    EXPECT_EQ(r.offset, std::nullopt);  // an empty changelog: from the start
    EXPECT_EQ(r.state_entries, 0);
  }

  Stream second = MakeStream("second", 30);
  // A producer duplicate of "first-0", which only A processed.
  AddMessage(second, "first-0", 0, 1, true);
  Produce(second);
  Append(all, second);
  std::unique_ptr<Engine> b = OpenStore("b");
  ASSERT_NE(b, nullptr);
  std::vector<RestoreReport> b_reports;
  ASSERT_NO_FATAL_FAILURE(ConsumeUntil(*b, Handled(all), &b_reports));
  ASSERT_EQ(b_reports.size(), static_cast<size_t>(kPartitions));
  int64_t restored_entries = 0;
  for (const RestoreReport& r : b_reports) {
    EXPECT_TRUE(r.restored);
    EXPECT_TRUE(r.offset.has_value());
    EXPECT_GT(r.dedupe_records, 0);
    EXPECT_EQ(r.orphans, 0);
    restored_entries += r.state_entries;
  }
  // Per partition: "total" and one "applied/<id>" per ID A processed.
  EXPECT_EQ(restored_entries, kPartitions + 60);
  EXPECT_TRUE(logger_.Has(LogSeverity::kInfo,
                          "idem: restored orders/1 from changelog "
                          "orders-state at offset 21: 21 state entries"));
  ExpectExact(*b, all);
  EXPECT_TRUE(*b->Seen("first-0", kTopic, 0));
}

// As above with 3 workers per member (Ordering::kPartition): A's partitions
// run in parallel, their changelog marks stay in order, and B restores
// exactly what A committed.
TEST_F(KafkaChangelogTest, ChangelogWithParallelWorkersRestoresExactly) {
  workers_ = 3;
  ASSERT_NO_FATAL_FAILURE(RestoreByWorkers());
}

// As above on stores of 2 shards: each partition's changelog restores into
// its shard of B's store (its state there only), and B's totals are exact.
TEST_F(KafkaChangelogTest, ChangelogRestoresEachPartitionIntoItsShard) {
  workers_ = 3;
  shards_ = 2;
  std::unique_ptr<Engine> b;
  ASSERT_NO_FATAL_FAILURE(b = RestoreByWorkers());
  ASSERT_NE(b, nullptr);
  for (int32_t p = 0; p < kPartitions; ++p) {
    const std::string total = PartitionStatePrefix(kTopic, p) + "total";
    for (int i = 0; i < b->shard_count(); ++i) {
      absl::StatusOr<std::optional<std::string>> got =
          b->shard(i)->GetState(total);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->has_value(), i == b->ShardOf(p))
          << "partition " << p << " in shard " << i;
    }
  }
}

// A, killed mid-stream (SIGKILL, in a process of its own), leaves commits it
// never published; B restores what the changelog holds and processes from
// there. Then A comes back with its stale store, gets every partition back
// (B leaves) and is corrected before it processes anything.
TEST_F(KafkaChangelogTest, ChangelogRestoreAfterAKilledMemberAndAStaleReturn) {
  Stream all = MakeStream("m", 300);
  Produce(all);
  const std::string store_a = dir_.Sub("a");
  {
    std::unique_ptr<Engine> create = OpenStore("a");
    ASSERT_NE(create, nullptr);
  }
  auto handled_a = [&] { return HandledInStore(store_a); };
  pid_t pid = 0;
  ASSERT_NO_FATAL_FAILURE(SpawnChild(store_a, {}, &pid));
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (handled_a() < 100 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  kill(pid, SIGKILL);
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(wstatus)) << "the child ended on its own";
  const int64_t a_handled = handled_a();
  ASSERT_GE(a_handled, 100);
  ASSERT_LT(a_handled, Handled(all)) << "killed too late to be mid-stream";

  // B takes over once A's session has timed out.
  std::unique_ptr<Engine> b = OpenStore("b");
  ASSERT_NE(b, nullptr);
  std::vector<RestoreReport> b_reports;
  ASSERT_NO_FATAL_FAILURE(ConsumeUntil(*b, Handled(all), &b_reports));
  ExpectExact(*b, all);
  for (const RestoreReport& r : b_reports) EXPECT_TRUE(r.restored);

  // More input; A returns with its stale copy and gets everything back.
  Stream more = MakeStream("late", 30);
  Produce(more);
  Append(all, more);
  std::unique_ptr<Engine> a = OpenStore("a");
  ASSERT_NE(a, nullptr);
  ASSERT_LT(Handled(*a), Handled(*b));
  std::vector<RestoreReport> a_reports;
  ASSERT_NO_FATAL_FAILURE(ConsumeUntil(*a, Handled(all), &a_reports));
  ASSERT_EQ(a_reports.size(), static_cast<size_t>(kPartitions));
  for (const RestoreReport& r : a_reports) EXPECT_TRUE(r.restored);
  ExpectExact(*a, all);
  EXPECT_THAT(MarksGoingBack(), IsEmpty());
}

// A member returning with committed entries it never published does not
// publish them after the new owner's: a third member's restore is exact.
TEST_F(KafkaChangelogTest, ChangelogFencesAReturningMembersStaleEntries) {
  Stream all;
  StaleReturn({}, all, /*expect_exact=*/true);
}

// The broken variant without the fence: the returning member publishes its
// stale entries after the new owner's, before it even knows whether it owns
// a partition; the changelog goes back to an older commit, which the check
// above catches. (Its state is not wrong here only because the returning
// member then redoes the lost commits with the same deterministic handler.)
TEST_F(KafkaChangelogTest, ChangelogBrokenVariantWithoutFenceIsCaught) {
  Stream all;
  StaleReturn({.changelog_unfenced = true}, all, /*expect_exact=*/false);
  EXPECT_THAT(MarksGoingBack(), Not(IsEmpty()));
}

// A record whose commit fails after its handler returned OK (here an emit
// to an empty destination) is dead-lettered, and nothing of it reaches the
// changelog: the next owner's state leaves it out.
TEST_F(KafkaChangelogTest, ChangelogLeavesOutARecordWhoseCommitFailed) {
  EXPECT_EQ(AppliedByNextOwner(/*outside_commit=*/false), 0);
}

// The broken variant that produces changelog records outside the commit
// puts the failed record's effect into the next owner's state.
TEST_F(KafkaChangelogTest, ChangelogBrokenVariantOutsideTheCommitIsCaught) {
  EXPECT_EQ(AppliedByNextOwner(/*outside_commit=*/true), 1);
}

// A member killed in the middle of restoring (after a first chunk of the
// changelog was applied, after the changelog's copy was committed, then
// after its mark was committed but not published) restores again when it
// comes back, and its totals are exact.
TEST_F(KafkaChangelogTest, ChangelogRestoreKilledMidRestoreIsRedone) {
  Stream all = MakeStream("m", 60);
  Produce(all);
  std::vector<RestoreReport> reports;
  std::unique_ptr<Engine> a = OpenStore("a");
  ASSERT_NE(a, nullptr);
  ASSERT_NO_FATAL_FAILURE(ConsumeUntil(*a, Handled(all), &reports));
  const std::string store_c = dir_.Sub("c");
  { ASSERT_NE(OpenStore("c"), nullptr); }
  ASSERT_NO_FATAL_FAILURE(RunChildDyingAt(store_c, "chunk"));
  ASSERT_NO_FATAL_FAILURE(RunChildDyingAt(store_c, "imported"));
  ASSERT_NO_FATAL_FAILURE(RunChildDyingAt(store_c, "marked"));

  Stream more = MakeStream("n", 30);
  Produce(more);
  Append(all, more);
  std::unique_ptr<Engine> c = OpenStore("c");
  ASSERT_NE(c, nullptr);
  reports.clear();
  ASSERT_NO_FATAL_FAILURE(ConsumeUntil(*c, Handled(all), &reports));
  ASSERT_EQ(reports.size(), static_cast<size_t>(kPartitions));
  for (const RestoreReport& r : reports) EXPECT_TRUE(r.restored);
  ExpectExact(*c, all);
  EXPECT_THAT(MarksGoingBack(), IsEmpty());
}

// A restore applies the changelog chunk by chunk (here every 3 records, so
// that state keys and dedupe records span many chunks), and the result is
// the same as in one piece.
TEST_F(KafkaChangelogTest, ChangelogRestoreInChunksIsExact) {
  Stream all = MakeStream("first", 60);
  Produce(all);
  std::vector<RestoreReport> reports;
  std::unique_ptr<Engine> a = OpenStore("a");
  ASSERT_NE(a, nullptr);
  ASSERT_NO_FATAL_FAILURE(ConsumeUntil(*a, Handled(all), &reports));
  Stream second = MakeStream("second", 30);
  AddMessage(second, "first-0", 0, 1, true);  // only A processed it
  Produce(second);
  Append(all, second);
  std::unique_ptr<Engine> b = OpenStore("b");
  ASSERT_NE(b, nullptr);
  reports.clear();
  ASSERT_NO_FATAL_FAILURE(
      ConsumeUntil(*b, Handled(all), &reports, {.restore_chunk_records = 3}));
  ASSERT_EQ(reports.size(), static_cast<size_t>(kPartitions));
  for (const RestoreReport& r : reports) {
    EXPECT_TRUE(r.restored);
    EXPECT_GT(r.dedupe_records, 0);
  }
  ExpectExact(*b, all);
  EXPECT_TRUE(*b->Seen("first-0", kTopic, 0));
  EXPECT_THAT(MarksGoingBack(), IsEmpty());
}

// As windows pass (a simulated clock), what the changelog must keep stays
// bounded: log compaction keeps one record per state key and one offset
// record per epoch, and a restore takes only the dedupe records of the last
// window (the dedupe topic's time retention drops the rest in Kafka; the
// mock cluster keeps everything, so the test folds the topics as the
// cleaner would).
TEST_F(KafkaChangelogTest, ChangelogStaysBoundedAsWindowsPass) {
  ManualClock clock(test::kStart);
  ::idem::Options options;
  options.dedupe_scope = DedupeScope::kPartition;
  options.dedupe_window = absl::Hours(1);
  options.clock = &clock;
  auto engine = Engine::Open(dir_.Sub("a"), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  // Only the partition's "total": a bounded state.
  auto add = [](const Record& record, Txn& txn) {
    PartitionTxn partition(txn, record.topic, record.partition);
    absl::StatusOr<std::optional<std::string>> total = partition.Get("total");
    if (!total.ok()) return total.status();
    partition.Put("total",
                  absl::StrCat((total->has_value() ? std::stoi(**total) : 0) +
                               std::stoi(std::string(record.value))));
    return absl::OkStatus();
  };
  Stream all;
  std::vector<RestoreReport> reports;
  for (int window = 0; window < 4; ++window) {
    if (window > 0) clock.Advance(absl::Hours(1) + absl::Seconds(1));
    Stream more = MakeStream(absl::StrCat("w", window), 30);
    Produce(more);
    Append(all, more);
    ASSERT_NO_FATAL_FAILURE(
        ConsumeUntil(**engine, Handled(all), &reports, {}, add));
  }
  // The compacted changelog: the last record of each key.
  auto reader = kafka::PartitionReader::Create(
      bed_.cluster->bootstrap_servers(), {{"log_level", "3"}});
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (int32_t p = 0; p < kPartitions; ++p) {
    std::set<std::string> keys;
    int64_t records = 0;
    ASSERT_TRUE((*reader)
                    ->Read(kChangelog, p, 0, absl::Seconds(10),
                           [&](const kafka::LogRecord& r) {
                             keys.emplace(r.record.key);
                             ++records;
                             return absl::OkStatus();
                           })
                    .ok());
    // "s/total" and one "o/<epoch>" (one member, one epoch), however many
    // records were processed.
    EXPECT_EQ(keys.size(), 2u) << "partition " << p;
    EXPECT_GT(records, 40);
  }
  // A new member restores the last window's dedupe records only: its
  // restore drops those whose window has passed by its clock.
  ManualClock later(clock.Now());
  options.clock = &later;
  auto b = Engine::Open(dir_.Sub("b"), options);
  ASSERT_TRUE(b.ok()) << b.status();
  Stream last = MakeStream("w4", 30);
  Produce(last);
  Append(all, last);
  reports.clear();
  ASSERT_NO_FATAL_FAILURE(ConsumeUntil(**b, Handled(all), &reports, {}, add));
  int64_t dedupe_records = 0;
  for (const RestoreReport& r : reports) dedupe_records += r.dedupe_records;
  EXPECT_EQ(dedupe_records, 30);  // the last window's IDs, no earlier one
  ExpectTotals(**b, all);
}

// A member that gets back partitions nobody else touched keeps its copy.
TEST_F(KafkaChangelogTest, ChangelogCurrentCopyIsKept) {
  Stream all = MakeStream("m", 30);
  Produce(all);
  std::unique_ptr<Engine> a = OpenStore("a");
  ASSERT_NE(a, nullptr);
  std::vector<RestoreReport> reports;
  ASSERT_NO_FATAL_FAILURE(ConsumeUntil(*a, Handled(all), &reports));
  reports.clear();
  Stream more = MakeStream("n", 30);
  Produce(more);
  Append(all, more);
  ASSERT_NO_FATAL_FAILURE(ConsumeUntil(*a, Handled(all), &reports));
  ASSERT_EQ(reports.size(), static_cast<size_t>(kPartitions));
  for (const RestoreReport& r : reports) {
    EXPECT_FALSE(r.restored)
        << r.partition << " offset " << r.offset.value_or(-9) << " orphans "
        << r.orphans << " epoch " << r.epoch << " read " << r.records_read;
    // The checkpoint written at the close (nothing published since) spares
    // the check any read (tests/kafka_checkpoint_test.cc).
    EXPECT_EQ(r.records_read, 0);
  }
  ExpectExact(*a, all);
}

// A write outside PartitionTxn is refused: the record fails with
// kFailedPrecondition and is dead-lettered at once, nothing of it commits.
TEST_F(KafkaChangelogTest, ChangelogRefusesWritesOutsidePartitionTxn) {
  Stream all = MakeStream("m", 3);
  Produce(all);
  std::unique_ptr<Engine> a = OpenStore("a");
  ASSERT_NE(a, nullptr);
  std::vector<RestoreReport> reports;
  ConsumerOptions options = MemberOptions(&reports);
  std::vector<absl::Status> dead;
  options.dead_letter = [&](const Record&, const absl::Status& error) {
    dead.push_back(error);
    return absl::OkStatus();
  };
  auto consumer = Consumer::Create(a.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  absl::Status s = test::PollUntil(
      **consumer,
      [](const Record&, Txn& txn) {
        txn.Put("global", "1");
        return absl::OkStatus();
      },
      [&] { return dead.size() >= 3; });
  ASSERT_TRUE(s.ok()) << s;
  for (const absl::Status& error : dead) {
    EXPECT_EQ(error.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(error.message(), HasSubstr("PartitionTxn"));
  }
  EXPECT_EQ(*a->GetState("global"), std::nullopt);
  EXPECT_EQ((*consumer)->stats().processed, 0);
}

// The changelog carries the expiry the engine gave each record, so a
// restored record expires when the original does, also after the clock went
// back (tests/kafka_changelog_test.cc's RestoredExpiryErrors).
TEST_F(KafkaChangelogTest,
       ChangelogRestoreKeepsEachRecordsExpiryAfterTheClockWentBack) {
  EXPECT_THAT(RestoredExpiryErrors({}), IsEmpty());
}

// The broken variant that computes the changelog's expiry from the clock
// gives the records committed after the clock went back 30 minutes less.
TEST_F(KafkaChangelogTest,
       ChangelogRestoreBrokenVariantExpiryFromTheClockIsCaught) {
  EXPECT_THAT(RestoredExpiryErrors({.changelog_expiry_from_clock = true}),
              Not(IsEmpty()));
}

// A changelog record written by a newer build (a format version above
// kChangelogFormatVersion) stops the restore with kFailedPrecondition naming
// the version: the member neither misreads it nor processes the partition.
TEST_F(KafkaChangelogTest,
       ChangelogFormatVersionFromANewerBuildFailsTheRestore) {
  const std::string future = absl::StrCat(kafka::kChangelogFormatVersion + 1);
  kafka::OutgoingRecord newer;
  newer.topic = kChangelog;
  newer.partition = 1;
  newer.key = kafka::OffsetRecordKey(5);
  newer.value = "3";
  newer.headers = {{kafka::kChangelogMarkHeader, kafka::EncodeMark({5, 3})},
                   {kafka::kChangelogVersionHeader, future}};
  ASSERT_TRUE(bed_.producer->Produce({newer}).ok());
  Stream all = MakeStream("m", 6);
  Produce(all);
  std::unique_ptr<Engine> a = OpenStore("a");
  ASSERT_NE(a, nullptr);
  std::vector<RestoreReport> reports;
  auto consumer = Consumer::Create(a.get(), MemberOptions(&reports));
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  absl::Status s = test::PollUntil(
      **consumer, test::ApplyInPartition, [] { return false; },
      absl::Seconds(30));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("format version ", future)));
  EXPECT_THAT(s.message(), HasSubstr("orders-state/1@0"));
  EXPECT_EQ(*a->CommittedOffset(kTopic, 1), std::nullopt);
  (*consumer)->Close().IgnoreError();
}

TEST_F(KafkaChangelogTest, ChangelogOptionsAreChecked) {
  std::unique_ptr<Engine> partitioned = OpenStore("p");
  ASSERT_NE(partitioned, nullptr);
  std::vector<RestoreReport> reports;
  ConsumerOptions two_topics = MemberOptions(&reports);
  two_topics.topics = {kTopic, "other"};
  EXPECT_EQ(Consumer::Create(partitioned.get(), two_topics).status().code(),
            absl::StatusCode::kInvalidArgument);
  ConsumerOptions no_relay = MemberOptions(&reports);
  no_relay.relay_outbox = false;
  EXPECT_EQ(Consumer::Create(partitioned.get(), no_relay).status().code(),
            absl::StatusCode::kInvalidArgument);
  ConsumerOptions same = MemberOptions(&reports);
  same.changelog_topic = kTopic;
  EXPECT_EQ(Consumer::Create(partitioned.get(), same).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_OPEN(store_scoped, dir_.Sub("s"), ::idem::Options());
  absl::Status scoped =
      Consumer::Create(store_scoped.get(), MemberOptions(&reports)).status();
  EXPECT_EQ(scoped.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(scoped.message(), HasSubstr("kPartition"));
}

}  // namespace
}  // namespace idem
