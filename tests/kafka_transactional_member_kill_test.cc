// A consuming member with transactional output (ConsumerOptions::
// transactional_output), as a process of its own
// (tests/kafka_consumer_child.cc, whose handler applies each record and
// emits it downstream), SIGKILLed 21 times at random rounds of its relay,
// in plain mode (which Consumer::Create refuses with transactional output,
// as a partition that moves to another store is processed there again;
// every member here runs on one store, where plain mode is exact, and
// ConsumerHooks::plain_transactional_output lets it):
// inside a transaction (its outputs, progress record and offsets produced,
// the commit not sent), between the commit and the engine's
// acknowledgement, and after the acknowledgement. Each cycle produces more
// input (and a producer's retries of earlier records) and restarts the
// member on the same store, in the same group; a member in this process
// then consumes the rest. Every input message is applied once, each
// partition's total is exact, and a read_committed reader counts every
// output once. Each restart waits about 7 s for the mock's group to give
// the killed member's partitions to its successor (its rebalance delays
// and the killed member's session.timeout.ms, test::kTestSessionTimeoutMs),
// so the kills take about two minutes.
//
// What the readers can show here. librdkafka 2.0.2's mock cluster keeps no
// transaction state (tests/kafka_transactional_test.cc says what it lacks):
// EndTxn writes no control records and aborts nothing, so the records of a
// transaction killed before its commit stay readable, progress record
// included. A read_committed reader therefore sees what a read_uncommitted
// one sees, and the test checks that they agree: each output once, for both.
// The restarted member reads the killed transaction's progress and
// acknowledges its outputs without publishing them again. Against brokers
// that transaction is aborted when the restarted member's producer
// registers: its progress is unseen, the member publishes its outputs
// again, and a read_uncommitted reader sees those outputs twice (the
// aborted copy and the committed one) while a read_committed reader sees
// them once. So the exactly-once count shown here comes from the relay's
// progress: a member killed between its commit and its acknowledgement
// does not publish its committed outputs again. Its broken twin, whose
// relay ignores its progress (ConsumerHooks::relay_ignores_progress), does,
// and the same count catches it.

#include <sys/types.h>

#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "kafka/consumer_hooks.h"
#include "tests/testing/kafka_test_util.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::idem::kafka::ConsumerHooks;
using ::idem::kafka::ConsumerOptions;
using ::idem::kafka::OutgoingRecord;
using ::idem::test::KafkaTestBed;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr int kMemberKillPartitions = 3;
constexpr char kInput[] = "orders";
constexpr char kMemberKillDownstream[] = "ledger-entries";
constexpr char kMemberKillProgress[] = "idem.relay.progress";
constexpr char kGroup[] = "members";
// New input records per cycle: with the child's batches of 25, at least two
// relay rounds that publish, so a kill point in the first or second round
// is always reached.
constexpr int kMemberKillPerCycle = 40;
// Every this many records of a cycle are produced again in the next (a
// producer's retries, on their partition).
constexpr int kRetryEvery = 8;

// What a run left behind.
struct MemberRun {
  std::map<std::string, int> kills;  // per step
  // The outputs' message-id counts, read with read_committed and with
  // read_uncommitted, and the IDs the outputs should have (one per input
  // message).
  std::map<std::string, int> committed;
  std::map<std::string, int> uncommitted;
  std::set<std::string> outputs;
  // Input messages not applied exactly once, and partition totals that
  // differ from the input's.
  std::vector<std::string> effect_errors;
};

class KafkaTransactionalMemberKillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(
        test::StartKafka(kInput, kMemberKillPartitions, bed_));
    ASSERT_TRUE(
        bed_.cluster->CreateTopic(kMemberKillDownstream, kMemberKillPartitions)
            .ok());
    ASSERT_TRUE(bed_.cluster->CreateTopic(kMemberKillProgress, 1).ok());
  }

  // Kills the member `kill_count` times, at `steps` in turn, each in its
  // first or second relay round that publishes; then finishes the input in
  // this process and reads the outputs.
  MemberRun RunKilledMember(int kill_count,
                            const std::vector<std::string>& steps,
                            bool ignore_progress) {
    MemberRun run;
    std::mt19937 random(20270127);
    for (int cycle = 0; cycle < kill_count; ++cycle) {
      ProduceCycle(cycle);
      const std::string& step = steps[cycle % steps.size()];
      const std::string point = absl::StrCat(step, ":", 1 + random() % 2);
      if (!KillMemberAt(point, ignore_progress)) break;
      ++run.kills[step];
    }
    ProduceCycle(kill_count);
    run.effect_errors = FinishInProcess(ignore_progress);
    const std::string brokers = bed_.cluster->bootstrap_servers();
    run.committed = test::MessageIdCounts(brokers, kMemberKillDownstream);
    run.uncommitted = test::MessageIdCounts(brokers, kMemberKillDownstream,
                                            "read_uncommitted");
    for (const std::string& id : ids_)
      run.outputs.insert(test::FirstEmitId(id));
    return run;
  }

  // Produces cycle `cycle`'s input: kMemberKillPerCycle new records and the
  // previous cycle's every kRetryEvery-th record again.
  void ProduceCycle(int cycle) {
    test::ProducedStream fresh =
        test::MakeStream(kInput, kMemberKillPartitions, kMemberKillPerCycle,
                         /*duplicate_every=*/0, 1 + cycle);
    std::vector<OutgoingRecord> records;
    for (size_t i = 0; i < retried_.size(); i += kRetryEvery) {
      records.push_back(retried_[i]);
    }
    for (const OutgoingRecord& record : fresh.records) {
      records.push_back(record);
      ids_.insert(record.key);
      totals_[record.partition] += std::stoll(record.value);
    }
    ASSERT_TRUE(bed_.producer->Produce(records).ok());
    produced_ += static_cast<int64_t>(records.size());
    retried_ = std::move(fresh.records);
  }

  // Runs the member as a child process until it SIGKILLs itself at `point`
  // ("<step>:<n>"); false (the test failed) if it did not.
  bool KillMemberAt(const std::string& point, bool ignore_progress) {
    std::vector<std::string> args = {bed_.cluster->bootstrap_servers(),
                                     kInput,
                                     kGroup,
                                     store_,
                                     kMemberKillDownstream,
                                     "--transactional",
                                     absl::StrCat("--die_at=", point)};
    if (ignore_progress) args.push_back("--ignore_progress");
    absl::StatusOr<pid_t> child = test::SpawnKafkaChild(IDEM_KAFKA_CHILD, args);
    EXPECT_TRUE(child.ok()) << child.status();
    if (!child.ok()) return false;
    absl::Status died = test::WaitForKillPoint(*child);
    EXPECT_TRUE(died.ok()) << point << ": " << died;
    return died.ok();
  }

  // Consumes the rest of the input with a member in this process, until it
  // has committed every record and its outbox is empty; returns the
  // store's effect errors.
  std::vector<std::string> FinishInProcess(bool ignore_progress) {
    auto engine = Engine::Open(store_, Options());
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return {"no engine"};
    ConsumerOptions options = test::TestConsumerOptions(bed_, kGroup);
    options.transactional_output = true;
    ConsumerHooks hooks;
    hooks.relay_ignores_progress = ignore_progress;
    hooks.plain_transactional_output = true;  // one store throughout
    auto member = kafka::CreateConsumerWithHooks(engine->get(), options, hooks);
    EXPECT_TRUE(member.ok()) << member.status();
    if (!member.ok()) return {"no member"};
    absl::Status s = test::PollUntil(
        **member,
        [](const kafka::Record& r, Txn& txn) {
          return test::ApplyAndForward(r, txn, kMemberKillDownstream);
        },
        [&] {
          return test::CommittedRecords(**engine, kInput,
                                        kMemberKillPartitions) >= produced_ &&
                 (*engine)->ReadOutbox(1)->empty();
        });
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_TRUE((*member)->Close().ok());
    return EffectErrors(**engine);
  }

  // Input messages `engine` did not apply exactly once, and its partition
  // totals that differ from the input's.
  std::vector<std::string> EffectErrors(Engine& engine) const {
    std::vector<std::string> errors =
        test::EffectErrors(ids_, test::AppliedCounts(engine));
    std::vector<std::string> totals =
        test::TotalErrors(engine, kInput, totals_);
    errors.insert(errors.end(), totals.begin(), totals.end());
    return errors;
  }

  util::TempDir dir_;
  const std::string store_ = dir_.Sub("store");
  KafkaTestBed bed_;
  std::set<std::string> ids_;            // the input's message IDs
  std::map<int32_t, int64_t> totals_;    // per partition, the input's amounts
  std::vector<OutgoingRecord> retried_;  // the last cycle's new records
  int64_t produced_ = 0;                 // records, retries included
};

// Prints what the run saw, for the test's log.
void Describe(const MemberRun& run) {
  std::fprintf(
      stderr,
      "member kills per step: %s; outputs expected %zu, read_committed %zu "
      "IDs (%zu not once), read_uncommitted %zu IDs (%zu not once)\n",
      absl::StrJoin(run.kills, ", ", absl::PairFormatter("=")).c_str(),
      run.outputs.size(), run.committed.size(),
      test::NotOnce(run.committed).size(), run.uncommitted.size(),
      test::NotOnce(run.uncommitted).size());
}

// The IDs of `counts` other than `expected`'s.
std::vector<std::string> Unexpected(const std::map<std::string, int>& counts,
                                    const std::set<std::string>& expected) {
  std::vector<std::string> unexpected;
  for (const auto& [id, count] : counts) {
    if (!expected.contains(id)) unexpected.push_back(id);
  }
  return unexpected;
}

TEST_F(KafkaTransactionalMemberKillTest,
       TransactionalMemberKilledAtCommitTransactionAndAckEmitsOnce) {
  const MemberRun run = RunKilledMember(21, {"commit", "ack", "acked"},
                                        /*ignore_progress=*/false);
  Describe(run);
  EXPECT_EQ(run.kills, (std::map<std::string, int>{
                           {"ack", 7}, {"acked", 7}, {"commit", 7}}));
  EXPECT_THAT(run.effect_errors, IsEmpty());
  EXPECT_EQ(run.committed.size(), run.outputs.size());
  EXPECT_THAT(Unexpected(run.committed, run.outputs), IsEmpty());
  EXPECT_THAT(test::NotOnce(run.committed), IsEmpty());
  // The mock filters nothing for read_committed: both readers see the same.
  EXPECT_EQ(run.uncommitted, run.committed);
}

// The broken twin: its relay ignores its progress, so each kill between a
// commit and its acknowledgement publishes that transaction's outputs
// again. The input's effects stay exact (the engine dedupes them); the
// read_committed count catches the duplicates.
TEST_F(KafkaTransactionalMemberKillTest,
       BrokenVariantTransactionalMemberIgnoringItsProgressIsCaught) {
  const MemberRun run = RunKilledMember(4, {"ack"}, /*ignore_progress=*/true);
  Describe(run);
  EXPECT_EQ(run.kills, (std::map<std::string, int>{{"ack", 4}}));
  EXPECT_THAT(run.effect_errors, IsEmpty());
  EXPECT_THAT(test::NotOnce(run.committed), Not(IsEmpty()));
}

}  // namespace
}  // namespace idem
