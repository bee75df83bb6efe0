// A member in changelog mode with transactional output (ConsumerOptions::
// changelog_topic and transactional_output: its changelog and dedupe-topic
// records go out in its relay's Kafka transactions), as a process of its
// own (tests/kafka_consumer_child.cc --changelog --transactional
// --emit, whose handler applies each record and forwards it downstream),
// SIGKILLed 9 times at random rounds of its relay: inside a transaction
// (its records, progress record and offsets produced, the commit not sent),
// between the commit and the engine's acknowledgement, and after the
// acknowledgement. Each cycle produces more input (with producer
// duplicates) and restarts the member on the same store; a member in this
// process then consumes the rest, and a member with an empty store restores
// every partition from the changelog and consumes to the end.
//
// Both stores hold every input message applied once and each partition's
// exact total, a plain read_committed reader of the downstream topic counts
// every output once, and every commit's mark (its "o/" record: epoch and
// offset) is in the changelog once: a restarted member does not publish again
// what a committed transaction published. Two things keep it from doing so: the
// relay's progress record, and the changelog's fence (a restarted member
// checks each partition against its changelog and leaves out the entries
// found there). Their broken twin, whose relay ignores its progress
// (ConsumerHooks::relay_ignores_progress) and which publishes without the
// fence (ConsumerHooks::changelog_unfenced), publishes the commits of a
// transaction killed before its acknowledgement twice, and the same count
// catches it. Outputs stay once because each transaction carries whole
// commits (OutboxRelayHooks::round_ends_after: a round ends after a
// commit's mark) and a restarted member drops the outbox it starts with
// (its unpublished commits are restored away and processed again). The
// twin without both (ConsumerHooks::rounds_split_commits and
// keep_outbox_on_start), killed only between commit and acknowledgement,
// publishes outputs twice, which the reader's count catches.
//
// What the mock lacks (tests/kafka_transactional_member_kill_test.cc says
// more): EndTxn writes no control records and aborts nothing, so the records
// of a transaction killed before its commit stay readable, its progress
// record included, and the restarted member acknowledges them as published.
// Against brokers that transaction is aborted, read_committed restores skip
// it, and the member publishes its records again in a transaction of its
// own.

#include <sys/types.h>

#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/absl_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "kafka/consumer_hooks.h"
#include "tests/testing/changelog_test_base.h"
#include "tests/testing/kafka_test_util.h"

namespace idem {
namespace {

using ::idem::kafka::ConsumerHooks;
using ::idem::kafka::ConsumerOptions;
using ::idem::kafka::RestoreReport;
using ::idem::test::kChangelog;
using ::idem::test::kPartitions;
using ::idem::test::kTopic;
using ::idem::test::Stream;
using ::testing::IsEmpty;
using ::testing::Not;

// New input messages per cycle: with the child's batches of 25, at least
// two relay rounds that publish, so a kill point in the first or second
// round is always reached.
constexpr int kChangelogKillPerCycle = 40;

// What a run left behind.
struct ChangelogMemberRun {
  std::map<std::string, int> kills;  // per step
  // Departures from the input ("<id>: <count>" and "p<partition> total ..."
  // lines) of the killed member's store, finished in this process, and of
  // the store restored from the changelog.
  std::vector<std::string> member_errors;
  std::vector<std::string> restored_errors;
  // Commit marks found more than once in the changelog, as
  // "p<partition> <epoch> <offset>: <count>".
  std::vector<std::string> marks_not_once;
  // Outputs a read_committed reader of the downstream topic saw, and those
  // not seen exactly once (or not expected).
  size_t outputs = 0;
  std::vector<std::string> outputs_not_once;
};

constexpr char kChangelogKillDownstream[] = "ledger-entries";

// How a run's member is broken, if it is.
struct Broken {
  // Ignores its progress, publishes unfenced, keeps the outbox it starts
  // with.
  bool unfenced = false;
  bool split_commits = false;  // rounds_split_commits, keep_outbox_on_start
};

class KafkaTransactionalChangelogKillTest : public test::ChangelogTestBase {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(test::ChangelogTestBase::SetUp());
    ConsumerOptions defaults;
    ASSERT_TRUE(
        bed_.cluster->CreateTopic(defaults.relay_progress_topic, 1).ok());
    ASSERT_TRUE(
        bed_.cluster->CreateTopic(kChangelogKillDownstream, kPartitions).ok());
  }

  // Kills the member `kill_count` times, at `steps` in turn, each in its
  // first or second relay round that publishes; then finishes the input in
  // this process, restores it into an empty store and reads the changelog.
  ChangelogMemberRun RunKilledMember(int kill_count,
                                     const std::vector<std::string>& steps,
                                     const Broken& broken) {
    ChangelogMemberRun run;
    std::mt19937 random(20271205);
    const std::string store = dir_.Sub("member");
    for (int cycle = 0; cycle < kill_count; ++cycle) {
      ProduceCycle(cycle);
      const std::string& step = steps[cycle % steps.size()];
      const std::string point = absl::StrCat(step, ":", 1 + random() % 2);
      if (!KillMemberAt(store, point, broken)) break;
      ++run.kills[step];
    }
    ProduceCycle(kill_count);
    {
      std::unique_ptr<Engine> member = OpenStore("member");
      if (member == nullptr) return run;
      ConsumerHooks hooks;
      hooks.relay_ignores_progress = broken.unfenced;
      hooks.changelog_unfenced = broken.unfenced;
      hooks.rounds_split_commits = broken.split_commits;
      hooks.keep_outbox_on_start = broken.split_commits || broken.unfenced;
      run.member_errors = ConsumeToTheEnd(*member, hooks);
    }
    std::unique_ptr<Engine> restored = OpenStore("restored");
    if (restored == nullptr) return run;
    run.restored_errors = ConsumeToTheEnd(*restored, ConsumerHooks());
    run.marks_not_once = MarksNotOnce();
    CountOutputs(run);
    return run;
  }

  // Reads the downstream topic with read_committed: one output per input
  // message, each once.
  void CountOutputs(ChangelogMemberRun& run) {
    std::map<std::string, int> counts = test::MessageIdCounts(
        bed_.cluster->bootstrap_servers(), kChangelogKillDownstream);
    run.outputs = counts.size();
    run.outputs_not_once = test::NotOnce(counts);
    if (counts.size() != all_.ids.size()) {
      run.outputs_not_once.push_back(absl::StrCat(
          counts.size(), " outputs for ", all_.ids.size(), " inputs"));
    }
  }

  // Produces cycle `cycle`'s input: kChangelogKillPerCycle new messages, each
  // 10th with a producer duplicate.
  void ProduceCycle(int cycle) {
    Stream fresh =
        test::MakeStream(absl::StrCat("c", cycle), kChangelogKillPerCycle);
    Produce(fresh);
    Append(all_, fresh);
  }

  // Runs the member as a child process on `store` until it SIGKILLs itself
  // at `point` ("<step>:<n>"); false (the test failed) if it did not.
  bool KillMemberAt(const std::string& store, const std::string& point,
                    const Broken& broken) {
    std::vector<std::string> flags = {
        "--transactional", absl::StrCat("--die_at=", point),
        absl::StrCat("--emit=", kChangelogKillDownstream)};
    if (broken.unfenced) {
      flags.push_back("--ignore_progress");
      flags.push_back("--unfenced");
    }
    if (broken.split_commits) flags.push_back("--split_commits");
    pid_t pid = 0;
    SpawnChild(store, flags, &pid);
    if (pid == 0) return false;
    absl::Status died = test::WaitForKillPoint(pid);
    EXPECT_TRUE(died.ok()) << point << ": " << died;
    return died.ok();
  }

  // A member on `engine` in changelog mode with transactional output
  // consumes until it has committed every record produced and its outbox
  // is empty, then closes; returns the store's departures from the input.
  std::vector<std::string> ConsumeToTheEnd(Engine& engine,
                                           const ConsumerHooks& hooks) {
    std::vector<RestoreReport> reports;
    ConsumerOptions options = MemberOptions(&reports);
    options.transactional_output = true;
    auto member = kafka::CreateConsumerWithHooks(&engine, options, hooks);
    EXPECT_TRUE(member.ok()) << member.status();
    if (!member.ok()) return {"no member"};
    absl::Status s = test::PollUntil(
        **member,
        [](const kafka::Record& record, Txn& txn) {
          return test::ApplyInPartitionAndForward(record, txn,
                                                  kChangelogKillDownstream);
        },
        [&] {
          return Handled(engine) >= Handled(all_) &&
                 engine.ReadOutbox(1)->empty();
        },
        absl::Seconds(60));
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_TRUE((*member)->Close().ok());
    return Errors(engine, all_);
  }

  // The commit marks (epoch and offset of each "o/" record) that the
  // changelog holds more than once.
  std::vector<std::string> MarksNotOnce() {
    std::map<std::pair<int32_t, std::string>, int> marks;
    ForEachMark([&](int32_t p, const kafka::Record& mark) {
      ++marks[{p, absl::StrCat(AbslView(mark.key), " ", AbslView(mark.value))}];
    });
    std::vector<std::string> not_once;
    for (const auto& [mark, count] : marks) {
      if (count > 1) {
        not_once.push_back(
            absl::StrCat("p", mark.first, " ", mark.second, ": ", count));
      }
    }
    return not_once;
  }

  Stream all_;  // every cycle's input
};

// Prints what the run saw, for the test's log.
void Describe(const ChangelogMemberRun& run) {
  std::fprintf(
      stderr,
      "changelog member kills per step: %s; member errors %zu, restored "
      "errors %zu, commit marks not once %zu, outputs %zu (%zu not once)\n",
      absl::StrJoin(run.kills, ", ", absl::PairFormatter("=")).c_str(),
      run.member_errors.size(), run.restored_errors.size(),
      run.marks_not_once.size(), run.outputs, run.outputs_not_once.size());
}

TEST_F(
    KafkaTransactionalChangelogKillTest,
    TransactionalChangelogMemberKilledAtCommitTransactionAndAckRestoresExactly) {
  const ChangelogMemberRun run =
      RunKilledMember(9, {"commit", "ack", "acked"}, Broken());
  Describe(run);
  EXPECT_EQ(run.kills, (std::map<std::string, int>{
                           {"ack", 3}, {"acked", 3}, {"commit", 3}}));
  EXPECT_THAT(run.member_errors, IsEmpty());
  EXPECT_THAT(run.restored_errors, IsEmpty());
  EXPECT_THAT(run.marks_not_once, IsEmpty());
  EXPECT_THAT(run.outputs_not_once, IsEmpty());
}

// The broken twin whose relay rounds split commits and which keeps the
// outbox it starts with, killed 8 times right after a transaction
// committed: a restarted member restores the commits its changelog lacks
// and processes them again, and their outputs reach the reader twice.
TEST_F(KafkaTransactionalChangelogKillTest,
       BrokenVariantTransactionalChangelogMemberSplittingCommitsIsCaught) {
  Broken broken;
  broken.split_commits = true;
  const ChangelogMemberRun run = RunKilledMember(8, {"ack", "acked"}, broken);
  Describe(run);
  EXPECT_THAT(run.outputs_not_once, Not(IsEmpty()));
}

// The broken twin: its relay ignores its progress and it publishes without
// the changelog's fence, so each kill between a commit and its
// acknowledgement publishes that transaction's changelog records again.
// The count of commit marks catches the duplicates.
TEST_F(
    KafkaTransactionalChangelogKillTest,
    BrokenVariantTransactionalChangelogMemberWithoutProgressOrFenceIsCaught) {
  Broken broken;
  broken.unfenced = true;
  const ChangelogMemberRun run = RunKilledMember(3, {"ack"}, broken);
  Describe(run);
  EXPECT_EQ(run.kills, (std::map<std::string, int>{{"ack", 3}}));
  EXPECT_THAT(run.marks_not_once, Not(IsEmpty()));
}

}  // namespace
}  // namespace idem
