// Members stalled past max.poll.interval.ms again and again, in changelog
// mode with transactional output (ConsumerOptions::changelog_topic and
// transactional_output), against librdkafka's mock cluster. Members A and
// B, each polling in a thread of its own, share the group and forward every
// record downstream. In each cycle new input arrives and one of them (A and
// B in turn) stalls inside its handler, at its first record of the cycle,
// until the group has given its partitions to the other, which restores
// them from the changelog, processes the whole cycle and publishes it. Then
// the stalled member wakes, finishes its batch (its engine commits it,
// outputs included), and rejoins the group, which splits the partitions
// again. Once every cycle is done, a member with an empty store restores
// every partition from the changelog and consumes to the end, and a plain
// read_committed reader counts the downstream topic: every output once,
// and the restored totals exact.
//
// Two fences keep a stalled member's late batch from reaching read_committed
// readers, and each is shown to suffice alone:
// - the member's own: before publishing, its membership check learns from
//   librdkafka that the assignment was lost, and it drops its outbox, so it
//   begins no transaction at all;
// - the brokers': its transaction carries the group's offsets under its
//   generation, which the group coordinator refuses once the group moved on
//   (KIP-447: TxnOffsetCommit answers ILLEGAL_GENERATION), and the refused
//   transaction aborts before any of its records is produced.
// librdkafka 2.0.2's mock cluster checks no generation on TxnOffsetCommit,
// so where the brokers' fence is shown alone (the membership check off,
// ConsumerHooks::changelog_skip_membership_check), the test injects that
// answer (MockCluster::FailNextRequests) right before waking the stalled
// member: the other member has then published the whole cycle and runs no
// transaction, so the request the answer meets is the stalled member's late
// one. With both fences the membership check comes first and no late
// transaction is begun, so nothing is injected (an unused answer would meet
// the next transaction of the member that did nothing wrong).
//
// The broken twin sends its offsets outside the transaction
// (ConsumerHooks::relay_offsets_outside_transaction) and skips the
// membership check: the brokers then have nothing to refuse, the late
// transaction commits the stalled batch's outputs, which the other member
// published too, and the reader counts them twice.
//
// What the mock cannot show: a member stalled inside an open transaction
// (its records produced, the commit not sent). Brokers abort that
// transaction at its transaction.timeout.ms (ConsumerOptions::
// transaction_timeout, below max.poll.interval.ms) and refuse its late
// EndTxn (INVALID_PRODUCER_EPOCH); read_committed readers never see its
// records. The mock aborts nothing and keeps those records readable.

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "kafka/consumer_hooks.h"
#include "kafka/partition_reader.h"
#include "tests/testing/changelog_test_base.h"
#include "tests/testing/kafka_test_util.h"

namespace idem {
namespace {

using ::idem::kafka::Consumer;
using ::idem::kafka::ConsumerHooks;
using ::idem::kafka::ConsumerOptions;
using ::idem::kafka::Record;
using ::idem::kafka::RestoreReport;
using ::idem::test::kPartitions;
using ::idem::test::kTopic;
using ::idem::test::Stream;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr char kStallDownstream[] = "ledger-entries";
// New input messages per cycle, over every partition.
constexpr int kStallPerCycle = 30;
using ::idem::test::kIllegalGeneration;
using ::idem::test::kTxnOffsetCommit;

// The time of day, for the test's log.
std::string Now() {
  return absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::UTCTimeZone());
}

// Which member stalls at which record, and how far its stall went. Safe for
// concurrent access from multiple threads without external synchronization.
class StallControl {
 public:
  // Member `member` stalls at its next record whose ID starts with
  // `prefix`.
  void Arm(int member, const std::string& prefix) {
    absl::MutexLock lock(&mu_);
    member_ = member;
    prefix_ = prefix;
    phase_ = kArmed;
  }

  // Called by member `member`'s handler before each record: blocks from
  // the armed record until Wake.
  void AtRecord(int member, std::string_view id) {
    absl::MutexLock lock(&mu_);
    if (phase_ != kArmed || member != member_ || !id.starts_with(prefix_)) {
      return;
    }
    phase_ = kStalled;
    mu_.AwaitWithTimeout(absl::Condition(this, &StallControl::NotStalled),
                         absl::Seconds(90));
  }

  // Called by member `member`'s thread after each PollBatch: once the
  // stalled batch has returned, blocks until Resume.
  void AfterPoll(int member) {
    absl::MutexLock lock(&mu_);
    if (phase_ != kWoken || member != member_) return;
    phase_ = kReturned;
    mu_.AwaitWithTimeout(absl::Condition(this, &StallControl::NotReturned),
                         absl::Seconds(90));
  }

  bool WaitStalled(absl::Duration timeout) {
    return WaitFor(kStalled, timeout);
  }
  void Wake() { Set(kWoken); }
  bool WaitReturned(absl::Duration timeout) {
    return WaitFor(kReturned, timeout);
  }
  void Resume() { Set(kIdle); }

 private:
  enum Phase { kIdle, kArmed, kStalled, kWoken, kReturned };

  bool NotStalled() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return phase_ != kStalled;
  }
  bool NotReturned() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return phase_ != kReturned;
  }
  void Set(Phase phase) {
    absl::MutexLock lock(&mu_);
    phase_ = phase;
  }
  bool WaitFor(Phase phase, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, phase]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return phase_ == phase;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }

  absl::Mutex mu_;
  int member_ ABSL_GUARDED_BY(mu_) = -1;
  std::string prefix_ ABSL_GUARDED_BY(mu_);
  Phase phase_ ABSL_GUARDED_BY(mu_) = kIdle;
};

// A member polling in a thread of its own, forwarding each record
// downstream; what it holds and its stats, as of its last PollBatch.
class PollingMember {
 public:
  struct View {
    std::set<int32_t> partitions;
    int64_t partitions_restoring = 0;
    int64_t membership_lost = 0;
    int64_t outbox_dropped = 0;
  };

  PollingMember(int index, std::unique_ptr<Consumer> consumer,
                StallControl* stall)
      : index_(index), consumer_(std::move(consumer)), stall_(stall) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~PollingMember() { Close(); }

  View view() {
    absl::MutexLock lock(&mu_);
    return view_;
  }

  // Stops polling and closes the consumer (an orderly leave).
  void Close() {
    if (!thread_.joinable()) return;
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
    consumer_->Close().IgnoreError();  // a member out of the group leaves
  }

 private:
  void Loop() {
    auto handler = [this](const Record& record, Txn& txn) {
      stall_->AtRecord(index_, record.id);
      return test::ApplyInPartitionAndForward(record, txn, kStallDownstream);
    };
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (stop_) return;
      }
      // A fenced round reports kUnavailable; the next poll goes on, as
      // Consumer::Run does. Printed for the test's log.
      absl::StatusOr<kafka::BatchReport> polled = consumer_->PollBatch(handler);
      if (!polled.ok()) {
        std::fprintf(stderr, "%s member %d: %s\n", Now().c_str(), index_,
                     polled.status().ToString().c_str());
      }
      View view;
      for (const auto& [topic, p] : consumer_->Assignment()) {
        view.partitions.insert(p);
      }
      const kafka::ConsumerStats stats = consumer_->stats();
      view.partitions_restoring = stats.partitions_restoring;
      view.membership_lost = stats.membership_lost;
      view.outbox_dropped = stats.outbox_dropped;
      {
        absl::MutexLock lock(&mu_);
        view_ = std::move(view);
      }
      stall_->AfterPoll(index_);
    }
  }

  const int index_;
  const std::unique_ptr<Consumer> consumer_;
  StallControl* const stall_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  View view_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// How a run's members are configured.
struct StallSetup {
  int stalls = 8;
  // How long a member may go without polling before the group drops it,
  // and ConsumerOptions::transaction_timeout (below it), which also bounds
  // each delivery: a relay that creates its producer again after a refused
  // transaction needs more than a second on a busy machine, and on the mock
  // the records a timed-out transaction delivered stay readable (the mock
  // aborts nothing), unlike against brokers.
  // At least test::kTestSessionTimeoutMs.
  absl::Duration max_poll_interval =
      absl::Milliseconds(test::kTestSessionTimeoutMs);
  absl::Duration transaction_timeout = absl::Seconds(2);
  // The brokers' answer to a stalled member's late TxnOffsetCommit is
  // injected before each wake-up (see the file comment).
  bool brokers_refuse = false;
  ConsumerHooks hooks;
};

// What a run left behind.
struct StallRun {
  int stalls = 0;
  int stalls_of[2] = {0, 0};  // per member
  // ConsumerStats, per member.
  int64_t membership_lost[2] = {0, 0};
  int64_t outbox_dropped[2] = {0, 0};
  // The restored store's departures from the input.
  std::vector<std::string> restored_errors;
  std::vector<std::string> marks_going_back;
  // Outputs a read_committed reader saw not exactly once (or a line if
  // there were not one per input message), and those it saw more than once.
  size_t outputs = 0;
  std::vector<std::string> outputs_not_once;
  std::vector<std::string> outputs_twice;
};

class KafkaStallTest : public test::ChangelogTestBase {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(test::ChangelogTestBase::SetUp());
    ASSERT_TRUE(
        bed_.cluster->CreateTopic(ConsumerOptions().relay_progress_topic, 1)
            .ok());
    ASSERT_TRUE(bed_.cluster->CreateTopic(kStallDownstream, kPartitions).ok());
  }

  // Transactional output, small batches (a stalled batch is part of a
  // cycle), and a short max.poll.interval.ms (the transaction timeout must
  // stay below it; the session, test::kTestSessionTimeoutMs, may not exceed
  // it).
  ConsumerOptions StallOptions(const StallSetup& setup,
                               std::vector<RestoreReport>* reports) {
    ConsumerOptions options = MemberOptions(reports);
    options.transactional_output = true;
    options.max_batch = 10;
    options.transaction_timeout = setup.transaction_timeout;
    const std::string max_poll_ms =
        absl::StrCat(absl::ToInt64Milliseconds(setup.max_poll_interval));
    options.kafka_config.emplace_back("max.poll.interval.ms", max_poll_ms);
    return options;
  }

  StallRun RunStalls(const StallSetup& setup) {
    StallRun run;
    std::unique_ptr<Engine> stores[2] = {OpenStore("a"), OpenStore("b")};
    if (stores[0] == nullptr || stores[1] == nullptr) return run;
    StallControl stall;
    std::vector<RestoreReport> reports[2];
    std::unique_ptr<PollingMember> members[2];
    for (int i = 0; i < 2; ++i) {
      auto consumer = kafka::CreateConsumerWithHooks(
          stores[i].get(), StallOptions(setup, &reports[i]), setup.hooks);
      EXPECT_TRUE(consumer.ok()) << consumer.status();
      if (!consumer.ok()) return run;
      members[i] =
          std::make_unique<PollingMember>(i, *std::move(consumer), &stall);
    }
    for (int cycle = 0; cycle < setup.stalls; ++cycle) {
      if (!test::WaitUntil([&] { return Settled(members, stores); },
                           absl::Seconds(30))) {
        ADD_FAILURE() << "cycle " << cycle << ": the members never settled";
        break;
      }
      const int staller = cycle % 2;
      const int other = 1 - staller;
      const std::string prefix = absl::StrCat("c", cycle);
      stall.Arm(staller, absl::StrCat(prefix, "-"));
      Stream fresh = test::MakeStream(prefix, kStallPerCycle);
      Produce(fresh);
      Append(all_, fresh);
      if (!stall.WaitStalled(absl::Seconds(20))) {
        ADD_FAILURE() << "cycle " << cycle << ": no stall";
        break;
      }
      std::fprintf(stderr, "%s cycle %d: member %d stalled\n", Now().c_str(),
                   cycle, staller);
      // The group gives the stalled member's partitions to the other,
      // which processes and publishes the whole cycle.
      const bool taken_over = test::WaitUntil(
          [&] {
            const PollingMember::View view = members[other]->view();
            return view.partitions.size() == static_cast<size_t>(kPartitions) &&
                   view.partitions_restoring == 0 &&
                   HoldsTheEnd(*stores[other], view.partitions);
          },
          absl::Seconds(45));
      EXPECT_TRUE(taken_over) << "cycle " << cycle;
      std::fprintf(stderr, "%s cycle %d: member %d took over\n", Now().c_str(),
                   cycle, other);
      if (setup.brokers_refuse) {
        EXPECT_TRUE(
            bed_.cluster
                ->FailNextRequests(kTxnOffsetCommit, {kIllegalGeneration})
                .ok());
      }
      stall.Wake();
      const bool returned = stall.WaitReturned(absl::Seconds(30));
      stall.Resume();
      if (!taken_over || !returned) {
        ADD_FAILURE() << "cycle " << cycle << ": the stall did not end";
        break;
      }
      ++run.stalls;
      ++run.stalls_of[staller];
    }
    stall.Resume();  // a stall the loop left
    EXPECT_TRUE(test::WaitUntil([&] { return Settled(members, stores); },
                                absl::Seconds(30)))
        << "the members never settled after the last cycle";
    for (int i = 0; i < 2; ++i) {
      run.membership_lost[i] = members[i]->view().membership_lost;
      run.outbox_dropped[i] = members[i]->view().outbox_dropped;
      std::fprintf(stderr, "%s member %d closes\n", Now().c_str(), i);
      members[i]->Close();
    }
    std::fprintf(stderr, "%s a member with an empty store restores\n",
                 Now().c_str());
    RestoreAndCount(setup, run);
    return run;
  }

  // Both members hold partitions, between them every one once, none is
  // being restored, and each holder has handled every record produced to
  // its partitions and published its outbox.
  bool Settled(std::unique_ptr<PollingMember> (&members)[2],
               std::unique_ptr<Engine> (&stores)[2]) {
    std::set<int32_t> all_partitions;
    size_t held = 0;
    for (int i = 0; i < 2; ++i) {
      const PollingMember::View view = members[i]->view();
      if (view.partitions.empty() || view.partitions_restoring != 0 ||
          !HoldsTheEnd(*stores[i], view.partitions)) {
        return false;
      }
      held += view.partitions.size();
      all_partitions.insert(view.partitions.begin(), view.partitions.end());
    }
    return held == static_cast<size_t>(kPartitions) &&
           all_partitions.size() == static_cast<size_t>(kPartitions);
  }

  // `store` has handled every record produced to `partitions` and its
  // outbox is empty.
  bool HoldsTheEnd(Engine& store, const std::set<int32_t>& partitions) {
    for (int32_t p : partitions) {
      int64_t produced = 0;
      for (const kafka::OutgoingRecord& record : all_.records) {
        if (record.partition == p) ++produced;
      }
      absl::StatusOr<std::optional<int64_t>> offset =
          store.CommittedOffset(kTopic, p);
      if (!offset.ok() || offset->value_or(-1) + 1 != produced) return false;
    }
    absl::StatusOr<std::vector<OutboxEntry>> outbox = store.ReadOutbox(1);
    return outbox.ok() && outbox->empty();
  }

  // A member with an empty store restores every partition and consumes to
  // the end; then the changelog's marks and the downstream topic are read.
  void RestoreAndCount(const StallSetup& setup, StallRun& run) {
    std::unique_ptr<Engine> restored = OpenStore("restored");
    if (restored == nullptr) return;
    std::vector<RestoreReport> reports;
    auto member =
        Consumer::Create(restored.get(), StallOptions(setup, &reports));
    EXPECT_TRUE(member.ok()) << member.status();
    if (!member.ok()) return;
    absl::Status s = test::PollUntil(
        **member,
        [](const Record& record, Txn& txn) {
          return test::ApplyInPartitionAndForward(record, txn,
                                                  kStallDownstream);
        },
        [&] {
          return Handled(*restored) >= Handled(all_) &&
                 restored->ReadOutbox(1)->empty();
        },
        absl::Seconds(45));
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_TRUE((*member)->Close().ok());
    run.restored_errors = Errors(*restored, all_);
    run.marks_going_back = MarksGoingBack();
    std::map<std::string, int> counts = test::MessageIdCounts(
        bed_.cluster->bootstrap_servers(), kStallDownstream);
    run.outputs = counts.size();
    run.outputs_not_once = test::NotOnce(counts);
    for (const auto& [id, count] : counts) {
      if (count > 1) run.outputs_twice.push_back(id);
    }
    if (counts.size() != all_.ids.size()) {
      run.outputs_not_once.push_back(absl::StrCat(
          counts.size(), " outputs for ", all_.ids.size(), " inputs"));
    }
    // Which inputs have no output (each output's key is its input's ID).
    auto reader = kafka::PartitionReader::Create(
        bed_.cluster->bootstrap_servers(), {{"log_level", "3"}});
    EXPECT_TRUE(reader.ok()) << reader.status();
    if (!reader.ok()) return;
    std::set<std::string> keys;
    for (int32_t p = 0; p < kPartitions; ++p) {
      absl::Status read =
          (*reader)->Read(kStallDownstream, p, 0, absl::Seconds(10),
                          [&](const kafka::LogRecord& output) {
                            keys.insert(std::string(output.record.key));
                            return absl::OkStatus();
                          });
      EXPECT_TRUE(read.ok()) << read;
    }
    for (const std::string& id : all_.ids) {
      if (!keys.contains(id)) {
        run.outputs_not_once.push_back(absl::StrCat("no output of ", id));
      }
    }
  }

  Stream all_;  // every cycle's input
};

// Prints what the run saw, for the test's log.
void DescribeStalls(const StallRun& run) {
  std::fprintf(stderr,
               "stalls %d (A %d, B %d); membership lost A %lld, B %lld; "
               "outbox entries dropped A %lld, B %lld; restored errors %zu; "
               "outputs %zu (%zu not once, %zu twice)\n",
               run.stalls, run.stalls_of[0], run.stalls_of[1],
               static_cast<long long>(run.membership_lost[0]),
               static_cast<long long>(run.membership_lost[1]),
               static_cast<long long>(run.outbox_dropped[0]),
               static_cast<long long>(run.outbox_dropped[1]),
               run.restored_errors.size(), run.outputs,
               run.outputs_not_once.size(), run.outputs_twice.size());
}

// Every stall happened and each stalled member counted itself out (its
// membership_lost); every output reached the reader once and the restore
// is exact.
void ExpectEachStallFenced(const StallSetup& setup, const StallRun& run) {
  DescribeStalls(run);
  EXPECT_EQ(run.stalls, setup.stalls);
  for (int i = 0; i < 2; ++i) {
    EXPECT_GE(run.membership_lost[i], run.stalls_of[i]) << "member " << i;
  }
  EXPECT_THAT(run.restored_errors, IsEmpty());
  EXPECT_THAT(run.outputs_not_once, IsEmpty());
}

// Both fences: each stalled member learns it is out before publishing and
// begins no late transaction; every output reaches the reader once, and
// the restore is exact.
TEST_F(KafkaStallTest, MemberStalledPastMaxPollAgainAndAgainPublishesOnce) {
  StallSetup setup;
  const StallRun run = RunStalls(setup);
  ExpectEachStallFenced(setup, run);
  EXPECT_THAT(run.marks_going_back, IsEmpty());
}

// The brokers' fence alone (no membership check): each stalled member's
// late transaction carries the group's offsets under its stale generation,
// the group coordinator refuses them (injected, see the file comment), and
// the transaction aborts before producing anything; the member drops its
// outbox, and every output reaches the reader once.
TEST_F(KafkaStallTest,
       StalledMembersLateTransactionIsRefusedByTheBrokersAndAborts) {
  StallSetup setup;
  setup.stalls = 4;
  setup.max_poll_interval = absl::Seconds(4);
  setup.transaction_timeout = absl::Seconds(3);
  setup.brokers_refuse = true;
  setup.hooks.changelog_skip_membership_check = true;
  // Without the membership check, only a fenced transaction counts in
  // membership_lost.
  ExpectEachStallFenced(setup, RunStalls(setup));
}

// The broken twin: offsets outside the transaction and no membership
// check. The brokers have nothing to refuse, each late transaction commits
// the stalled batch's outputs, which the other member published too.
TEST_F(KafkaStallTest,
       BrokenVariantStalledMemberWithOffsetsOutsideTheTransactionIsCaught) {
  StallSetup setup;
  setup.stalls = 2;
  setup.hooks.changelog_skip_membership_check = true;
  setup.hooks.relay_offsets_outside_transaction = true;
  const StallRun run = RunStalls(setup);
  DescribeStalls(run);
  EXPECT_EQ(run.stalls, setup.stalls);
  EXPECT_THAT(run.outputs_twice, Not(IsEmpty()));
}

}  // namespace
}  // namespace idem
