// The crash harness's verifier (crash/verifier.h) on a store filled in this
// process: commit_prefix reports a commit that survived a lost one logged
// before it, and two commits that logged one sequence (each commit logs its
// own write's last sequence, so that cannot happen to a correct engine,
// and their order would be unknown).

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "crash/event_log.h"
#include "crash/stream.h"
#include "crash/verifier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/crash/harness.h"
#include "idem/engine.h"
#include "util/temp_dir.h"

namespace idem::crash {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Two messages of the ledger workload, of which only the second is in the
// store, both logged as committed by commits of `first_sequence` and
// `second_sequence`.
VerifyOutput VerifySecondOfTwo(uint64_t first_sequence,
                               uint64_t second_sequence) {
  util::TempDir dir;
  std::unique_ptr<Workload> workload = NewLedgerWorkload();
  Stream stream = BuildStream(workload->Generate(3, 2), /*partitions=*/1,
                              /*producer_duplicate_rate=*/0, /*seed=*/3);
  const StreamMessage& first = stream.messages[0];
  const StreamMessage& second = stream.messages[1];
  {
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(dir.Sub("store"), Options());
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return VerifyOutput();
    absl::StatusOr<Result> r = (*engine)->Process(
        Message{.id = second.id, .payload = second.payload},
        [&](const Message& m, Txn& txn) { return workload->Handle(m, txn); });
    EXPECT_TRUE(r.ok() && r->outcome == Outcome::kProcessed);
  }
  const absl::flat_hash_set<std::string> delivered = {first.id, second.id};
  const absl::flat_hash_set<std::string> none;
  const std::vector<CycleEvents::Commit> commits = {
      {first_sequence, {first.id}}, {second_sequence, {second.id}}};
  VerifyInput input;
  input.stream = &stream;
  input.workload = workload.get();
  input.delivered = &delivered;
  input.acked = &none;
  input.in_flight = &delivered;
  input.commits = &commits;
  return VerifyStore(dir.Sub("store"), input);
}

std::string Violations(const VerifyOutput& out) {
  std::string all;
  for (const InvariantResult& r : out.violations) {
    all += r.name + ": " + r.first_counterexample + "\n";
  }
  return all;
}

TEST(CrashVerifierTest, ReportsACommitThatSurvivedOneLoggedBeforeIt) {
  EXPECT_THAT(Violations(VerifySecondOfTwo(5, 9)),
              HasSubstr("commit_prefix: commit 9 survived but the earlier "
                        "commit 5"));
}

TEST(CrashVerifierTest, PassesACommitThatSurvivedBeforeALostOne) {
  EXPECT_THAT(Violations(VerifySecondOfTwo(9, 5)), IsEmpty());
}

// Regression: a commit logged the store's latest sequence, which a
// concurrent commit could have raised, and a run of the windows workload
// under power loss was reported "commit 5075 survived but the earlier
// commit 5075 ... was lost". Commits now log their own write's sequence;
// one shared by two is reported as such.
TEST(CrashVerifierTest, ReportsTwoCommitsThatLoggedOneSequence) {
  EXPECT_THAT(Violations(VerifySecondOfTwo(9, 9)),
              HasSubstr("logged one sequence 9"));
}

}  // namespace
}  // namespace idem::crash
