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

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
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
using ::testing::Not;

// Records in the stream: enough that the first member still has records
// of every partition to fetch when the second one joins.
constexpr int kRecords = 1200;
// What the first member handles alone before the second one joins.
constexpr int64_t kHandledAlone = 30;
// How long the second member polls alone after joining: the mock cluster's
// rebalance of a group with members waits session.timeout.ms - 1 s.
constexpr absl::Duration kRebalanceWait =
    absl::Milliseconds(test::kTestSessionTimeoutMs + 1000);
// How long the first member's polls wait for a record.
constexpr absl::Duration kKeptRecordsWait = absl::Seconds(5);
// With workers held (Gate): how long, from the revocation, a kept
// partition's records wait for the revoked ones to be released.
constexpr absl::Duration kKeptHold = absl::Seconds(1);
// Workers of the members when the revocation comes while they hold
// records: more than partitions, so one call's limit (2 * max_batch *
// workers) is above what the held partitions queue before they are paused
// (2 * max_batch each), and the call polls on until the revocation.
constexpr int kMoreWorkersThanPartitions = kPartitions + 1;

class KafkaCooperativeChangelogTest : public test::ChangelogTestBase {
 protected:
  // Holds the first member's handler while it is `holding`: every record
  // until a revocation begins, then the records of a partition it keeps
  // until the revoked ones are released (or kKeptHold passed). So the
  // revocation comes while the workers still hold kept partitions' records.
  struct Gate {
    absl::Mutex mu;
    bool holding ABSL_GUARDED_BY(mu) = false;
    bool revoking ABSL_GUARDED_BY(mu) = false;
    bool released ABSL_GUARDED_BY(mu) = false;
    std::set<int32_t> revoked ABSL_GUARDED_BY(mu);
    absl::Time revoked_at ABSL_GUARDED_BY(mu) = absl::InfinitePast();

    void Pass(int32_t partition, absl::Time deadline) {
      absl::MutexLock lock(&mu);
      if (!holding) return;
      mu.AwaitWithDeadline(absl::Condition(&revoking), deadline);
      if (revoked.contains(partition)) return;
      mu.AwaitWithDeadline(absl::Condition(&released), revoked_at + kKeptHold);
    }
  };

  // A member of the group: its store, consumer and held partitions.
  struct Member {
    std::unique_ptr<Engine> store;
    std::unique_ptr<Consumer> consumer;
    std::set<int32_t> held;
    int lost = 0;          // partitions it lost (ConsumerOptions::on_lost)
    Gate* gate = nullptr;  // told when partitions are revoked
  };

  // Options of a cooperative changelog-mode member; `held` follows its
  // assignment. No commit to Kafka after each batch: the revocation's
  // membership check is its first OffsetCommit.
  ConsumerOptions CooperativeOptions(Member* member) {
    std::set<int32_t>* held = &member->held;
    Gate* gate = member->gate;
    ConsumerOptions options = MemberOptions(&reports_);
    options.max_batch = 10;
    options.commit_to_kafka = false;
    options.kafka_config.emplace_back("partition.assignment.strategy",
                                      "cooperative-sticky");
    options.on_assign = [held](const kafka::PartitionStart& start) {
      held->insert(start.partition);
    };
    options.on_revoke = [held, gate](const std::string&, int32_t partition) {
      held->erase(partition);
      if (gate == nullptr) return;
      absl::MutexLock lock(&gate->mu);
      gate->released = true;
    };
    options.on_lost = [member](const std::string&, int32_t partition) {
      member->held.erase(partition);
      ++member->lost;
    };
    options.dead_letter = [this](const Record& record, const absl::Status&) {
      absl::MutexLock lock(&dead_lettered_mu_);  // called by workers
      dead_lettered_.insert(std::string(record.id));
      return absl::OkStatus();
    };
    return options;
  }

  // `poll_timeout`: ConsumerOptions::poll_timeout of the member.
  void Join(const std::string& name, const kafka::ConsumerHooks& hooks,
            absl::Duration poll_timeout, Member& member) {
    member.store = OpenStore(name);
    ASSERT_NE(member.store, nullptr);
    ConsumerOptions options = CooperativeOptions(&member);
    options.poll_timeout = poll_timeout;
    auto consumer =
        kafka::CreateConsumerWithHooks(member.store.get(), options, hooks);
    ASSERT_TRUE(consumer.ok()) << consumer.status();
    member.consumer = *std::move(consumer);
  }

  // One PollBatch of `member`; false (the error noted in problems_) on an
  // error that would end Consumer::Run.
  bool PollOnce(Member& member, const std::string& name) {
    return GoesOn(member.consumer->PollBatch(test::ApplyInPartition).status(),
                  name);
  }

  // Whether Consumer::Run would go on after a PollBatch of `name` returned
  // `status` (if not, the error is noted in problems_).
  bool GoesOn(const absl::Status& status, const std::string& name) {
    if (status.ok()) return true;
    switch (status.code()) {
      case absl::StatusCode::kUnavailable:
      case absl::StatusCode::kDeadlineExceeded:
      case absl::StatusCode::kResourceExhausted:
      case absl::StatusCode::kUnknown:
        return true;  // Run retries these
      default:
        problems_.push_back(
            absl::StrCat(name, " stopped: ", status.ToString()));
        return false;
    }
  }

  // B joins while A's workers are held (`gate`) in one PollBatch of A, which
  // serves A's revocation with records of the kept partitions still taken
  // and not handled. B polls on a thread of its own meanwhile. False when
  // either stopped.
  bool RebalanceWhileWorkersRun(Member& a, Member& b, Gate& gate,
                                absl::Time deadline) {
    {
      absl::MutexLock lock(&gate.mu);
      gate.holding = true;
    }
    auto held = [&gate, deadline](const Record& record, Txn& txn) {
      gate.Pass(record.partition, deadline);
      return test::ApplyInPartition(record, txn);
    };
    std::atomic<bool> a_done{false};
    bool b_running = true;
    std::thread b_polls([&] {
      while (b_running && !a_done.load() && absl::Now() < deadline) {
        b_running = PollOnce(b, "B");
      }
    });
    const absl::Status a_status = a.consumer->PollBatch(held).status();
    a_done.store(true);
    b_polls.join();
    {
      absl::MutexLock lock(&gate.mu);
      gate.holding = false;
    }
    return GoesOn(a_status, "A") && b_running;
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
  // check of A's first revocation, a partial one, fails. Both poll until
  // every partition's owner handled all of it. Then C, with an empty store,
  // restores every partition and takes the rest. Fails the test unless the
  // revocation was partial and its check failed. Returns what went wrong: a
  // member stopped, records dead-lettered, a kept partition that made no
  // progress, records not applied exactly once in C's copy.
  // `while_workers_run`: the revocation comes while A's workers hold
  // records of the partitions A keeps (RebalanceWhileWorkersRun).
  std::vector<std::string> RunPartialRevocation(
      const kafka::ConsumerHooks& a_hooks, bool while_workers_run = false) {
    Stream all = MakeStream("m", kRecords);
    Produce(all);
    Member a, b;
    Gate gate;
    if (while_workers_run) a.gate = &gate;
    bool revoked = false;
    std::set<int32_t> held_before;
    std::map<int32_t, int64_t> handled_before;
    kafka::ConsumerHooks hooks = a_hooks;
    hooks.before_revoke = [&](const std::vector<int32_t>& partitions) {
      if (revoked) return;
      revoked = true;
      {
        absl::MutexLock lock(&gate.mu);
        gate.revoking = true;
        gate.revoked.insert(partitions.begin(), partitions.end());
        gate.revoked_at = absl::Now();
      }
      held_before = a.held;
      for (int32_t p : a.held) handled_before[p] = HandledOf(a, {p});
      ASSERT_TRUE(bed_.cluster
                      ->FailNextRequests(test::kOffsetCommit,
                                         {test::kRebalanceInProgress})
                      .ok());
    };
    // librdkafka pauses every held partition while a revocation waits for
    // its callback, dropping what was fetched, and resumes the kept ones
    // once the rebalance that follows is done: A's poll waits long enough
    // for that, and for their records, within the call that served the
    // revocation.
    Join("a", hooks, kKeptRecordsWait, a);
    if (HasFatalFailure()) return {"A did not join"};
    bool running = true;
    const absl::Time deadline = absl::Now() + absl::Seconds(90);
    while (running && HandledOf(a, a.held) < kHandledAlone &&
           absl::Now() < deadline) {
      running = PollOnce(a, "A");
    }
    Join("b", {}, absl::Milliseconds(50), b);
    if (HasFatalFailure()) return {"B did not join"};
    // A does not poll while the group rebalances: its membership checks
    // (an OffsetCommit at each publication) would meet the rebalance, and
    // one sent under the generation that just ended loses A its whole
    // assignment (ILLEGAL_GENERATION). Its revocation waits for its next
    // poll.
    std::set<int32_t> kept;
    if (while_workers_run) {
      running = RebalanceWhileWorkersRun(a, b, gate, deadline);
      kept = a.held;
    } else {
      const absl::Time rebalanced = absl::Now() + kRebalanceWait;
      while (running && absl::Now() < rebalanced) running = PollOnce(b, "B");
    }
    while (running && !revoked && absl::Now() < deadline) {
      running = PollOnce(a, "A");
      kept = a.held;
    }
    EXPECT_EQ(a.lost, 0);
    EXPECT_FALSE(kept.empty());
    EXPECT_LT(kept.size(), held_before.size());
    auto all_handled = [&] {
      std::set<int32_t> owned = a.held;
      owned.insert(b.held.begin(), b.held.end());
      return static_cast<int>(owned.size()) == kPartitions &&
             HandledOf(a, a.held) + HandledOf(b, b.held) >= Handled(all);
    };
    while (running && !all_handled() && absl::Now() < deadline) {
      running = PollOnce(a, "A") && PollOnce(b, "B");
    }
    // The revocation was partial and its check failed.
    EXPECT_TRUE(revoked);
    EXPECT_EQ(held_before.size(), static_cast<size_t>(kPartitions));
    EXPECT_GE(a.consumer->stats().membership_lost, 1);
    std::vector<std::string> problems = problems_;
    if (!all_handled()) {
      problems.push_back(absl::StrCat("not all handled: A holds ",
                                      a.held.size(), ", B ", b.held.size()));
    }
    for (int32_t p : a.held) {
      if (HandledOf(a, {p}) <= handled_before[p]) {
        problems.push_back(absl::StrCat("kept partition ", p, " stalled"));
      }
    }
    for (const std::string& id : dead_lettered_) {
      problems.push_back(absl::StrCat("dead-lettered ", id));
    }
    EXPECT_TRUE(a.consumer->Close().ok());
    EXPECT_TRUE(b.consumer->Close().ok());
    std::unique_ptr<Engine> c = OpenStore("c");
    if (c == nullptr) return {"no store"};
    ConsumeUntil(*c, Handled(all), &reports_);
    std::vector<std::string> errors = Errors(*c, all);
    problems.insert(problems.end(), errors.begin(), errors.end());
    EXPECT_THAT(MarksGoingBack(), IsEmpty());
    return problems;
  }

  std::vector<RestoreReport> reports_;
  std::vector<std::string> problems_;  // members that stopped
  absl::Mutex dead_lettered_mu_;
};

TEST_F(KafkaCooperativeChangelogTest,
       FailedCheckInAPartialRevocationKeepsTheKeptPartitionsGoing) {
  EXPECT_THAT(RunPartialRevocation({}), IsEmpty());
}

// The same with workers: what they run of the kept partitions when the
// revocation comes is handled under the partitions' fences.
TEST_F(KafkaCooperativeChangelogTest,
       FailedCheckInAPartialRevocationKeepsTheKeptPartitionsGoingWithWorkers) {
  workers_ = 3;
  EXPECT_THAT(RunPartialRevocation({}), IsEmpty());
}

// The revocation comes while the workers hold records of the partitions A
// keeps: they are handled under their fences before the membership check
// unfences every partition.
TEST_F(KafkaCooperativeChangelogTest,
       FailedCheckInAPartialRevocationComesAfterTheWorkersKeptRecords) {
  workers_ = kMoreWorkersThanPartitions;
  EXPECT_THAT(RunPartialRevocation({}, /*while_workers_run=*/true), IsEmpty());
}

// The broken variant: the revocation waits only for the revoked
// partitions' records; the kept ones the workers run after the failed check
// meet no fence and are dead-lettered.
TEST_F(KafkaCooperativeChangelogTest,
       BrokenVariantRevocationLeavingTheWorkersRunningIsCaught) {
  workers_ = kMoreWorkersThanPartitions;
  EXPECT_THAT(RunPartialRevocation({.changelog_revoke_leaves_workers = true},
                                   /*while_workers_run=*/true),
              Not(IsEmpty()));
}

// The broken variant: the poll that served the revocation goes on taking
// the kept partitions' records, which meet no fence.
TEST_F(KafkaCooperativeChangelogTest,
       BrokenVariantPollingOnAfterAFailedCheckIsCaught) {
  EXPECT_THAT(RunPartialRevocation({.changelog_polls_on_after_unfence = true}),
              Not(IsEmpty()));
}

}  // namespace
}  // namespace idem
