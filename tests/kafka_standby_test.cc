// Standby copies (ConsumerOptions::standby_partitions) against librdkafka's
// mock cluster: a member keeps the partitions another member holds warm by
// following their changelog, its copy is the owner's, and when it takes a
// partition over (after an orderly leave, or a SIGKILL) it reads only the
// changelog's tail, and every total stays exact.

#include <signal.h>
#include <sys/wait.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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
      if ((*ca)->Assignment().empty() || (*cb)->Assignment().empty()) {
        return false;
      }
      for (const auto& [topic, p] : (*ca)->Assignment()) {
        absl::StatusOr<std::optional<int64_t>> owner =
            a->CommittedOffset(kTopic, p);
        absl::StatusOr<std::optional<int64_t>> copy =
            b->CommittedOffset(kTopic, p);
        if (!owner.ok() || !copy.ok() || *owner != *copy) return false;
      }
      return Handled(*b) == Handled(all);
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
