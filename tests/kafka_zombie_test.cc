// Zombies in changelog mode (ConsumerOptions::changelog_topic), against
// librdkafka's mock cluster: member A stalls inside a handler for longer
// than max.poll.interval.ms, the group gives A's partitions to member B,
// which restores them and processes what follows; then A wakes up and
// finishes its batch. A member C that restores every partition afterwards,
// from an empty store, must hold exactly what B committed.
//
// Two fences keep A's stale batch out of C's restore, and each is shown to
// suffice on its own and to be needed (with both off, C is wrong):
// - the writer's: before publishing, A learns from librdkafka and from the
//   group coordinator (a synchronous offset commit under A's generation)
//   that it is out of the group, and drops its changelog entries;
// - the reader's: a restore lets no commit of an epoch that is over (A's,
//   once B's mark followed it) complete.
//
// The scenario runs with A, B and C as members of this process, and again
// with A and B as processes of their own (tests/kafka_consumer_child.cc
// with --stall_at: A's stall and wake-up go through files next to its
// store), C restoring in this process.

#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
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
using ::idem::kafka::ConsumerHooks;
using ::idem::kafka::ConsumerOptions;
using ::idem::kafka::Record;
using ::idem::kafka::RestoreReport;
using ::idem::test::kPartitions;
using ::idem::test::kTopic;
using ::idem::test::MakeStream;
using ::idem::test::Stream;
using ::testing::IsEmpty;
using ::testing::Not;

// What a zombie run left behind.
struct ZombieRun {
  // C's (and B's) departures from what was produced: "<id>: <count>"
  // effect errors and "p<partition> total <got> != <want>" lines.
  std::vector<std::string> c_errors;
  std::vector<std::string> b_errors;
  // A's ConsumerStats::membership_lost after waking up.
  int64_t a_membership_lost = 0;
  // Whether the changelog's marks go back somewhere: A's stale batch was
  // published after B's commits.
  bool zombie_published = false;
  // With transactional output: the outputs a read_committed reader of the
  // downstream topic saw not exactly once ("<id>: <count>"), and a line if
  // there were not one per input message.
  std::vector<std::string> outputs_not_once;
};

constexpr char kZombieDownstream[] = "ledger-entries";

class KafkaZombieTest : public test::ChangelogTestBase {
 protected:
  // A's options: a short max.poll.interval.ms, and small batches, so that
  // A's stale batch covers only part of what B processes.
  ConsumerOptions ZombieOptions(std::vector<RestoreReport>* reports) {
    ConsumerOptions options = MemberOptions(reports);
    options.max_batch = 6;
    options.kafka_config.emplace_back("max.poll.interval.ms", "4000");
    return options;
  }

  // Marks the run's progress on stderr, so that a run that times out says
  // where.
  static void Phase(const char* phase) {
    std::fprintf(
        stderr, "zombie run: %s at %s\n", phase,
        absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::UTCTimeZone())
            .c_str());
  }

  ZombieRun RunZombie(const ConsumerHooks& a_hooks,
                      const ConsumerHooks& c_hooks) {
    ZombieRun run;
    Stream all = MakeStream("first", 30);
    Produce(all);
    std::vector<RestoreReport> reports;
    std::unique_ptr<Engine> a = OpenStore("a");
    std::unique_ptr<Engine> b = OpenStore("b");
    std::unique_ptr<Engine> c = OpenStore("c");
    if (a == nullptr || b == nullptr || c == nullptr) return run;
    auto member_a = kafka::CreateConsumerWithHooks(
        a.get(), ZombieOptions(&reports), a_hooks);
    EXPECT_TRUE(member_a.ok()) << member_a.status();
    if (!member_a.ok()) return run;
    absl::Status first =
        test::PollUntil(**member_a, test::ApplyInPartition,
                        [&] { return Handled(*a) >= Handled(all); });
    EXPECT_TRUE(first.ok()) << first;

    Stream second = MakeStream("second", 30);
    Produce(second);
    Append(all, second);
    // A stalls at its first record of `second` until B has taken over and
    // processed everything, then finishes its batch.
    absl::Notification stalled;
    absl::Notification wake;
    bool stall_done = false;
    auto stalling = [&](const Record& record, Txn& txn) {
      if (!stalled.HasBeenNotified() && record.id.starts_with("second-")) {
        stalled.Notify();
        wake.WaitForNotificationWithTimeout(absl::Seconds(75));
        stall_done = true;
      }
      return test::ApplyInPartition(record, txn);
    };
    std::thread zombie([&] {
      const absl::Time deadline = absl::Now() + absl::Seconds(100);
      while (!stall_done && absl::Now() < deadline) {
        absl::StatusOr<kafka::BatchReport> polled =
            (*member_a)->PollBatch(stalling);
        if (!polled.ok() && stall_done) break;
      }
    });
    EXPECT_TRUE(stalled.WaitForNotificationWithTimeout(absl::Seconds(20)));
    Phase("A stalled; B takes over");

    std::vector<RestoreReport> b_reports;
    auto member_b = Consumer::Create(b.get(), MemberOptions(&b_reports));
    EXPECT_TRUE(member_b.ok()) << member_b.status();
    if (member_b.ok()) {
      absl::Status taken = test::PollUntil(
          **member_b, test::ApplyInPartition,
          [&] { return Handled(*b) >= Handled(all); }, absl::Seconds(60));
      EXPECT_TRUE(taken.ok()) << taken;
    }
    Phase("B done; A wakes");
    wake.Notify();
    zombie.join();
    Phase("A finished its batch");
    run.a_membership_lost = (*member_a)->stats().membership_lost;
    (*member_a)->Close().IgnoreError();
    if (member_b.ok()) {
      EXPECT_TRUE((*member_b)->Close().ok());
    }
    run.b_errors = Errors(*b, all);
    run.zombie_published = !MarksGoingBack().empty();

    RestoreInC(*c, all, c_hooks, run);
    return run;
  }

  // Member C restores every partition into the empty store `c` and
  // consumes to the end of `all`; sets run.c_errors.
  void RestoreInC(Engine& c, const Stream& all, const ConsumerHooks& c_hooks,
                  ZombieRun& run) {
    Phase("C restores");
    std::vector<RestoreReport> c_reports;
    auto member_c =
        kafka::CreateConsumerWithHooks(&c, MemberOptions(&c_reports), c_hooks);
    EXPECT_TRUE(member_c.ok()) << member_c.status();
    if (member_c.ok()) {
      absl::Status restored = test::PollUntil(
          **member_c, test::ApplyInPartition,
          [&] { return Handled(c) >= Handled(all); }, absl::Seconds(45));
      // A broken variant may leave C short of the end: its errors say so.
      if (!restored.ok()) run.c_errors.push_back(restored.ToString());
      (*member_c)->Close().IgnoreError();
    }
    std::vector<std::string> c_errors = Errors(c, all);
    run.c_errors.insert(run.c_errors.end(), c_errors.begin(), c_errors.end());
  }

  // The zombie run with A and B as processes of their own
  // (tests/kafka_consumer_child.cc, --stall_at): A stalls at its first
  // record of `second` until B, which took its partitions over, has
  // processed and published everything; then A finishes its batch and
  // exits, saying whether it learned it is out of the group. B is then
  // SIGKILLed, and C restores in this process.
  // `transactional`: A and B run with transactional output and forward each
  // record downstream (--transactional --emit), and the run counts the
  // outputs a read_committed reader sees.
  ZombieRun RunZombieProcesses(bool a_skips_membership_check,
                               const ConsumerHooks& c_hooks,
                               bool transactional = false) {
    ZombieRun run;
    std::vector<std::string> output_flags;
    if (transactional) {
      EXPECT_TRUE(
          bed_.cluster->CreateTopic(ConsumerOptions().relay_progress_topic, 1)
              .ok());
      EXPECT_TRUE(
          bed_.cluster->CreateTopic(kZombieDownstream, kPartitions).ok());
      output_flags = {"--transactional",
                      absl::StrCat("--emit=", kZombieDownstream)};
    }
    Stream all = MakeStream("first", 30);
    Produce(all);
    const std::string a = dir_.Sub("a");
    const std::string b = dir_.Sub("b");
    std::vector<std::string> a_flags = {"--stall_at=second-"};
    a_flags.insert(a_flags.end(), output_flags.begin(), output_flags.end());
    if (a_skips_membership_check) a_flags.push_back("--skip_membership_check");
    pid_t a_pid = 0;
    SpawnChild(a, a_flags, &a_pid);
    if (a_pid == 0) return run;
    EXPECT_TRUE(test::WaitUntil(
        [&] { return HandledInStore(a) >= Handled(all); }, absl::Seconds(60)));
    Stream second = MakeStream("second", 30);
    Produce(second);
    Append(all, second);
    EXPECT_TRUE(
        test::WaitUntil([&] { return std::filesystem::exists(a + ".stalled"); },
                        absl::Seconds(20)));
    Phase("A stalled; B takes over");
    pid_t b_pid = 0;
    SpawnChild(b, output_flags, &b_pid);
    EXPECT_TRUE(test::WaitUntil(
        [&] { return HandledInStore(b) >= Handled(all) && OutboxEmpty(b); },
        absl::Seconds(60)));
    Phase("B done; A wakes");
    std::ofstream(a + ".wake").close();
    absl::StatusOr<int> a_exit = test::WaitForExit(a_pid, absl::Seconds(100));
    EXPECT_TRUE(a_exit.ok()) << a_exit.status();
    Phase("A finished its batch");
    run.a_membership_lost =
        a_exit.ok() && WIFEXITED(*a_exit) && WEXITSTATUS(*a_exit) == 0;
    if (b_pid != 0) {
      kill(b_pid, SIGKILL);
      waitpid(b_pid, nullptr, 0);
    }
    std::unique_ptr<Engine> b_store = OpenStore("b");
    if (b_store != nullptr) run.b_errors = Errors(*b_store, all);
    run.zombie_published = !MarksGoingBack().empty();
    std::unique_ptr<Engine> c = OpenStore("c");
    if (c != nullptr) RestoreInC(*c, all, c_hooks, run);
    if (transactional) {
      std::map<std::string, int> counts = test::MessageIdCounts(
          bed_.cluster->bootstrap_servers(), kZombieDownstream);
      run.outputs_not_once = test::NotOnce(counts);
      if (counts.size() != all.ids.size()) {
        run.outputs_not_once.push_back(absl::StrCat(
            counts.size(), " outputs for ", all.ids.size(), " inputs"));
      }
    }
    return run;
  }

  // Whether the outbox of the store at `store` is empty, read through a
  // read-only engine, so while a child process writes it.
  static bool OutboxEmpty(const std::string& store) {
    ::idem::Options read_only;
    read_only.read_only = true;
    read_only.dedupe_scope = DedupeScope::kPartition;
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(store, read_only);
    if (!engine.ok()) return false;
    absl::StatusOr<std::vector<OutboxEntry>> entries = (*engine)->ReadOutbox(1);
    return entries.ok() && entries->empty();
  }
};

// Both fences: A learns it is out before publishing and publishes none of
// its stale batch; B and C are exact.
TEST_F(KafkaZombieTest, ZombieStalledPastMaxPollIsFencedAndRestoresAreExact) {
  ZombieRun run = RunZombie({}, {});
  EXPECT_THAT(run.b_errors, IsEmpty());
  EXPECT_THAT(run.c_errors, IsEmpty());
  EXPECT_GE(run.a_membership_lost, 1);
  EXPECT_FALSE(run.zombie_published);
}

// The writer's fence alone (C's restore lets every epoch complete): A
// publishes nothing stale, so C is exact.
TEST_F(KafkaZombieTest, ZombieWriterFenceAloneKeepsTheChangelogClean) {
  ZombieRun run = RunZombie({}, {.changelog_restore_ignores_epochs = true});
  EXPECT_THAT(run.c_errors, IsEmpty());
  EXPECT_GE(run.a_membership_lost, 1);
  EXPECT_FALSE(run.zombie_published);
}

// The reader's fence alone (A publishes even though the group said it is
// out): A's stale batch reaches the changelog after B's commits, and C's
// restore leaves it out.
TEST_F(KafkaZombieTest, ZombieRestoreFenceAloneLeavesTheStaleBatchOut) {
  ZombieRun run = RunZombie({.changelog_skip_membership_check = true}, {});
  EXPECT_TRUE(run.zombie_published);
  EXPECT_THAT(run.b_errors, IsEmpty());
  EXPECT_THAT(run.c_errors, IsEmpty());
}

// The broken variant with neither fence: A's stale batch completes in C's
// restore after B's commits, and C's totals are wrong.
TEST_F(KafkaZombieTest, BrokenVariantZombieWithoutFencesIsCaught) {
  ZombieRun run = RunZombie({.changelog_skip_membership_check = true},
                            {.changelog_restore_ignores_epochs = true});
  EXPECT_TRUE(run.zombie_published);
  EXPECT_THAT(run.b_errors, IsEmpty());
  EXPECT_THAT(run.c_errors, Not(IsEmpty()));
}

// The same with A and B as processes of their own: both fences, A learns
// it is out and publishes none of its stale batch; B and C are exact.
TEST_F(KafkaZombieTest,
       ZombieProcessStalledPastMaxPollIsFencedAndRestoresAreExact) {
  ZombieRun run = RunZombieProcesses(/*a_skips_membership_check=*/false, {});
  EXPECT_THAT(run.b_errors, IsEmpty());
  EXPECT_THAT(run.c_errors, IsEmpty());
  EXPECT_GE(run.a_membership_lost, 1);
  EXPECT_FALSE(run.zombie_published);
}

// The same with transactional output, A and B forwarding each record
// downstream: A's stale batch's outputs are never published, and a plain
// read_committed reader counts every output once. (librdkafka's mock
// cluster checks no group generation, so A's membership check, not the
// brokers' refusal of its transaction, keeps them out here; against brokers
// both do.)
TEST_F(KafkaZombieTest,
       TransactionalZombieProcessPublishesNoneOfItsStaleOutputs) {
  ZombieRun run = RunZombieProcesses(/*a_skips_membership_check=*/false, {},
                                     /*transactional=*/true);
  EXPECT_THAT(run.b_errors, IsEmpty());
  EXPECT_THAT(run.c_errors, IsEmpty());
  EXPECT_GE(run.a_membership_lost, 1);
  EXPECT_THAT(run.outputs_not_once, IsEmpty());
}

// Its broken twin publishes the stale batch (no membership check, and no
// generation check on the mock): the reader counts outputs twice.
TEST_F(KafkaZombieTest,
       BrokenVariantTransactionalZombieProcessPublishingIsCaught) {
  ZombieRun run = RunZombieProcesses(/*a_skips_membership_check=*/true, {},
                                     /*transactional=*/true);
  EXPECT_THAT(run.outputs_not_once, Not(IsEmpty()));
}

// The broken variant with neither fence, with A and B as processes: C's
// totals are wrong, which the same checks catch.
TEST_F(KafkaZombieTest, BrokenVariantZombieProcessWithoutFencesIsCaught) {
  ZombieRun run =
      RunZombieProcesses(/*a_skips_membership_check=*/true,
                         {.changelog_restore_ignores_epochs = true});
  EXPECT_TRUE(run.zombie_published);
  EXPECT_THAT(run.b_errors, IsEmpty());
  EXPECT_THAT(run.c_errors, Not(IsEmpty()));
}

}  // namespace
}  // namespace idem
