// Changelog mode with cooperative assignment
// (partition.assignment.strategy=cooperative-sticky) against librdkafka's
// mock cluster: a second member joins, the first gives up only some of its
// partitions (an incremental revocation), and the membership check that
// revocation makes fails. The partitions the first member keeps go on
// being processed, and every record is applied exactly once.
//
// The mock cluster answers the revocation's membership check (a
// synchronous OffsetCommit) as a stable group does; a real broker answers
// REBALANCE_IN_PROGRESS when yet another rebalance began meanwhile. The
// test injects that answer (MockCluster::FailNextRequests) from the
// revocation's start (ConsumerHooks::before_revoke).

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
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "kafka/consumer_hooks.h"
#include "tests/testing/changelog_test_base.h"
#include "tests/testing/kafka_test_util.h"

namespace idem {
namespace {

using ::idem::kafka::Consumer;
using ::idem::kafka::ConsumerOptions;
using ::idem::kafka::Record;
using ::idem::kafka::RestoreReport;
using ::idem::test::kPartitions;
using ::idem::test::kTopic;
using ::idem::test::MakeStream;
using ::idem::test::Stream;
using ::testing::IsEmpty;

// Records in the stream: enough that the first member still has records
// of every partition to fetch when the second one joins.
constexpr int kRecords = 1200;
// What the first member handles alone before the second one joins.
constexpr int64_t kHandledAlone = 30;

class KafkaCooperativeChangelogTest : public test::ChangelogTestBase {
 protected:
  // A member of the group: its store, consumer and held partitions.
  struct Member {
    std::unique_ptr<Engine> store;
    std::unique_ptr<Consumer> consumer;
    std::set<int32_t> held;
  };

  // Options of a cooperative changelog-mode member; `held` follows its
  // assignment. No commit to Kafka after each batch: the revocation's
  // membership check is its first OffsetCommit.
  ConsumerOptions CooperativeOptions(std::set<int32_t>* held) {
    ConsumerOptions options = MemberOptions(&reports_);
    options.max_batch = 10;
    options.commit_to_kafka = false;
    options.kafka_config.emplace_back("partition.assignment.strategy",
                                      "cooperative-sticky");
    options.on_assign = [held](const kafka::PartitionStart& start) {
      held->insert(start.partition);
    };
    options.on_revoke = [held](const std::string&, int32_t partition) {
      held->erase(partition);
    };
    options.on_lost = options.on_revoke;
    options.dead_letter = [this](const Record& record, const absl::Status&) {
      dead_lettered_.insert(std::string(record.id));
      return absl::OkStatus();
    };
    return options;
  }

  void Join(const std::string& name, const kafka::ConsumerHooks& hooks,
            Member& member) {
    member.store = OpenStore(name);
    ASSERT_NE(member.store, nullptr);
    auto consumer = kafka::CreateConsumerWithHooks(
        member.store.get(), CooperativeOptions(&member.held), hooks);
    ASSERT_TRUE(consumer.ok()) << consumer.status();
    member.consumer = *std::move(consumer);
  }

  // One PollBatch of `member`; false (and the test failed) on an error that
  // would end Consumer::Run.
  bool PollOnce(Member& member, const std::string& name) {
    absl::StatusOr<kafka::BatchReport> report =
        member.consumer->PollBatch(test::ApplyInPartition);
    if (report.ok()) return true;
    switch (report.status().code()) {
      case absl::StatusCode::kUnavailable:
      case absl::StatusCode::kDeadlineExceeded:
      case absl::StatusCode::kResourceExhausted:
      case absl::StatusCode::kUnknown:
        return true;  // Run retries these
      default:
        ADD_FAILURE() << name << " stopped: " << report.status();
        return false;
    }
  }

  // Records of `partitions` that `member`'s store has committed.
  static int64_t HandledOf(const Member& member,
                           const std::set<int32_t>& partitions) {
    int64_t handled = 0;
    for (int32_t p : partitions) {
      absl::StatusOr<std::optional<int64_t>> offset =
          member.store->CommittedOffset(kTopic, p);
      if (offset.ok() && offset->has_value()) handled += **offset + 1;
    }
    return handled;
  }

  // A handles kHandledAlone records alone, then B joins; the membership
  // check of A's first revocation fails (`fail_check`). Both poll until
  // every partition's owner handled all of it. Then C, with an empty store,
  // restores every partition and takes the rest; its copy must hold every
  // record applied once.
  void RunPartialRevocation(const kafka::ConsumerHooks& a_hooks) {
    Stream all = MakeStream("m", kRecords);
    Produce(all);
    Member a, b;
    bool revoked = false;
    std::set<int32_t> held_before;
    std::map<int32_t, int64_t> handled_before;
    kafka::ConsumerHooks hooks = a_hooks;
    hooks.before_revoke = [&] {
      if (revoked) return;
      revoked = true;
      held_before = a.held;
      for (int32_t p : a.held) handled_before[p] = HandledOf(a, {p});
      ASSERT_TRUE(bed_.cluster
                      ->FailNextRequests(test::kOffsetCommit,
                                         {test::kRebalanceInProgress})
                      .ok());
    };
    ASSERT_NO_FATAL_FAILURE(Join("a", hooks, a));
    bool running = true;
    const absl::Time deadline = absl::Now() + absl::Seconds(90);
    while (running && HandledOf(a, a.held) < kHandledAlone &&
           absl::Now() < deadline) {
      running = PollOnce(a, "A");
    }
    ASSERT_NO_FATAL_FAILURE(Join("b", {}, b));
    auto all_handled = [&] {
      std::set<int32_t> owned = a.held;
      owned.insert(b.held.begin(), b.held.end());
      return static_cast<int>(owned.size()) == kPartitions &&
             HandledOf(a, a.held) + HandledOf(b, b.held) >= Handled(all);
    };
    while (running && !all_handled() && absl::Now() < deadline) {
      running = PollOnce(a, "A") && PollOnce(b, "B");
    }
    EXPECT_TRUE(all_handled()) << "A holds " << a.held.size() << ", B "
                               << b.held.size();
    // The revocation was partial, its check failed, and A went on with
    // what it kept.
    EXPECT_TRUE(revoked);
    EXPECT_EQ(held_before.size(), static_cast<size_t>(kPartitions));
    EXPECT_GE(a.consumer->stats().membership_lost, 1);
    EXPECT_FALSE(a.held.empty());
    EXPECT_FALSE(b.held.empty());
    for (int32_t p : a.held) {
      EXPECT_GT(HandledOf(a, {p}), handled_before[p]) << "partition " << p;
    }
    EXPECT_THAT(dead_lettered_, IsEmpty());
    ASSERT_TRUE(a.consumer->Close().ok());
    ASSERT_TRUE(b.consumer->Close().ok());
    std::unique_ptr<Engine> c = OpenStore("c");
    ASSERT_NE(c, nullptr);
    ConsumeUntil(*c, Handled(all), &reports_);
    ExpectExact(*c, all);
    EXPECT_THAT(MarksGoingBack(), IsEmpty());
  }

  std::vector<RestoreReport> reports_;
};

TEST_F(KafkaCooperativeChangelogTest,
       FailedCheckInAPartialRevocationKeepsTheKeptPartitionsGoing) {
  RunPartialRevocation({});
}

}  // namespace
}  // namespace idem
